/* A listening socket's registration: the kind behind a LISTEN fd entry.
 *
 * listen() registers the socket in the listener registry
 * (shunt_registry.h), so a client on this host, or shuntd for a client on
 * another, offers an accelerated path only to a peer that can take it.  The
 * registration lives while any fd number of the socket does (dup), in every
 * process that holds it (a forked child re-holds its entries), and the
 * process that registered removes its names at exit(). */
#ifndef SHUNT_LISTEN_H
#define SHUNT_LISTEN_H

#include <sys/types.h>

#include "shunt_fdtab.h"
#include "shunt_registry.h"

struct shunt_listener {
	unsigned fds;  /* fd numbers that refer to it (dup); atomic */
	pid_t pid;     /* the process that holds reg (a forked child re-holds) */
	struct shunt_registration reg;
};

/* Register listening socket fd (entry e, already LISTEN): e->listener, or
 * nothing when there is no usable rundir or nothing could be registered. */
void shunt_listen_register(int fd, struct shunt_fd *e);
/* nfd is a new number for a registered listener (dup). */
void shunt_listen_dup(struct shunt_listener *l);
/* One fd number of l closes; the last one unregisters it. */
void shunt_listen_unref(struct shunt_listener *l);
/* In the child after fork: hold every inherited registration through open
 * files of the child's own. */
void shunt_listen_after_fork_child(void);
/* exit(): remove the names this process registered. */
void shunt_listen_at_exit(void);
/* Remove the names this process registered now, listeners open or not:
 * it can no longer take offers (it uses io_uring, shunt_uring.h). */
void shunt_listen_withdraw(void);

/* Around a set*id call (setuid, setgroups, initgroups...): before it, while
 * the process may still write its registry entries, open them; after it
 * (changed: the call succeeded), if the process can no longer open offers
 * in the rundir, mark them, so its clients take TCP at once (server-cred)
 * rather than wait out an offer nobody can take.  Always called in pairs. */
void shunt_listen_before_setid(void);
void shunt_listen_after_setid(int changed);

#endif
