/* The local listener registry: which addr:port a live shunt process listens
 * on, so that a client offers shared memory only to a peer that can take it.
 *
 * An entry is a file in <rundir>/l/ held with flock(LOCK_SH) by every
 * process listening there (prefork children and SO_REUSEPORT groups share
 * one name); the lock dies with the last holder, so a client that can take
 * LOCK_EX knows the entry is stale and removes it.
 *
 * Names: a loopback address is only meaningful inside one network
 * namespace, so "n<netns inode>-<addr>-<port>"; other addresses are unique
 * on the host, so "g-<addr>-<port>" and clients in other namespaces sharing
 * the rundir find them too.  A wildcard listener registers "n<ns>-any-<port>"
 * and a "g-" name for every non-loopback address of its namespace. */
#ifndef SHUNT_REGISTRY_H
#define SHUNT_REGISTRY_H

#include <sys/socket.h>

#define SHUNT_REG_MAX_NAMES 32

struct shunt_registration {
	int nlocks;
	int locks[SHUNT_REG_MAX_NAMES];
	char names[SHUNT_REG_MAX_NAMES][80];
};

/* Register the listening socket fd.  Returns 0 with l filled, -1 if nothing
 * could be registered. */
int shunt_registry_add(const char *rundir, int fd, struct shunt_registration *l);

/* After fork, in the child: hold the entries through open files of our
 * own.  The inherited ones are shared with the parent, and a lock taken
 * through a shared open file cannot tell the two apart (a child closing
 * its copy would unregister a listener the parent still has). */
void shunt_registry_reown(const char *rundir, struct shunt_registration *l);

/* Release l's locks; entries no other process holds are removed. */
void shunt_registry_remove(const char *rundir, struct shunt_registration *l);

/* What the registry says of a destination. */
enum {
	SHUNT_REG_NONE = 0,    /* no live shunt listener */
	SHUNT_REG_LIVE = 1,    /* a live one, that takes offers */
	SHUNT_REG_REFUSES = 2, /* a live one, some process of which changed
				  its credentials and can no longer open
				  offers in the rundir: offer none */
	SHUNT_REG_LOCAL = 3,   /* a live one whose processes that changed
				  their credentials take offers from this
				  host only (through a privileged process
				  that opens them): shm yes, the agent no */
};

/* SHUNT_REG_* for dst. */
int shunt_registry_lookup(const char *rundir, const struct sockaddr *dst);
/* The same, with *uid (may be NULL) the owner of the live entry: the uid
 * of the listening process (for shuntd, which files offers for it). */
int shunt_registry_lookup_uid(const char *rundir, const struct sockaddr *dst, unsigned *uid);

/* Up to max descriptions of l's entries opened for writing into fds: taken
 * while the process still has its privileges, for a mark after it dropped
 * them.  Returns how many. */
int shunt_registry_open_marks(const char *rundir, const struct shunt_registration *l, int *fds,
			      int max);
/* Mark an entry (through such a description): SHUNT_REG_REFUSES or
 * SHUNT_REG_LOCAL from now on, for as long as the entry lives; a refusing
 * mark is never taken back to a local one. */
void shunt_registry_mark(int fd, int what);

/* Inode of this process's network namespace (0 if unknown). */
unsigned long shunt_netns(void);

#endif
