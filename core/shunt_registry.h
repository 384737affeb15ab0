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
#ifndef SHM_REGISTRY_H
#define SHM_REGISTRY_H

#include <sys/socket.h>

#define SHM_REG_MAX_LOCKS 32

struct shm_listener {
	int nlocks;
	int locks[SHM_REG_MAX_LOCKS];
	char names[SHM_REG_MAX_LOCKS][80];
};

/* Register the listening socket fd.  Returns 0 with l filled, -1 if nothing
 * could be registered. */
int shm_registry_add(const char *rundir, int fd, struct shm_listener *l);

/* After fork, in the child: hold the entries through open files of our
 * own.  The inherited ones are shared with the parent, and a lock taken
 * through a shared open file cannot tell the two apart (a child closing
 * its copy would unregister a listener the parent still has). */
void shm_registry_reown(const char *rundir, struct shm_listener *l);

/* Release l's locks; entries no other process holds are removed. */
void shm_registry_remove(const char *rundir, struct shm_listener *l);

/* 1 when a live shunt listener is registered for dst, else 0. */
int shm_registry_lookup(const char *rundir, const struct sockaddr *dst);
/* The same, with *uid (may be NULL) the owner of the live entry: the uid
 * of the listening process (for shuntd, which files offers for it). */
int shm_registry_lookup_uid(const char *rundir, const struct sockaddr *dst, unsigned *uid);

/* Inode of this process's network namespace (0 if unknown). */
unsigned long shm_netns(void);

#endif
