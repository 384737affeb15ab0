/* Received bytes with nowhere else to live.
 *
 * A connection normally leaves its transport with nothing left in its rx
 * ring: the peer resends what this end had not read (fabric DEMOTE, shm
 * replay).  When the peer can no longer resend (it closed, or died, after
 * its last bytes reached our ring) and this end must leave anyway — fork
 * (registered memory does not survive it), exec (no memory does) — the
 * unread bytes are spilled: copied into a memfd that every process holding
 * the socket shares.  Whichever process reads first gets them, once, in
 * order; after them the socket itself answers (its EOF).  Across exec the
 * memfd is passed by number in SHUNT_SPILL, with the socket's inode so a
 * stale entry is never attached to another socket. */
#ifndef SHUNT_SPILL_H
#define SHUNT_SPILL_H

#include <stddef.h>
#include <sys/uio.h>

#include "shunt_conn.h"

/* A spill of the n iovecs' bytes for old's socket (why: the reason it
 * leaves), or NULL when no memory could be had.  Nothing else changes
 * until shunt_spill_install(): the caller may hold its transport's lock
 * (the bytes are copied), install must not be called under it. */
struct shunt_conn *shunt_spill_new(struct shunt_conn *old, const struct iovec *v, int n,
				   enum shunt_reason why);
/* Replace old by the spill on every fd number that refers to it; old is
 * closed (its ops->life->close) as if those numbers had been. */
void shunt_spill_install(struct shunt_conn *old, struct shunt_conn *sp);

/* Before an exec or spawn with environment env (NULL: environ): pass the
 * spills of inherited fds on.  Returns the environment to use (env itself
 * when there are none).  shunt_spill_exec_done() undoes it when the
 * call returns (a failed exec; a spawn, whose parent goes on). */
char *const *shunt_spill_exec_env(char *const *env);
void shunt_spill_exec_done(char *const *env, char *const *orig);

/* Constructor: attach the spills an exec passed on (SHUNT_SPILL). */
void shunt_spill_inherit(const char *list);

#endif
