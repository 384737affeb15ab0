/* A transport: a path a TCP connection can take instead of the kernel's
 * (shm between processes of one host, fabric between hosts), as libfabric
 * has providers.  The decision (shunt_decide.h) asks each one the rule
 * allows, fastest first; one that takes a connection hangs a connection of
 * its own (shunt_conn.h, with its ops) on the fd entry. */
#ifndef SHUNT_TRANSPORT_H
#define SHUNT_TRANSPORT_H

#include <sys/socket.h>

#include "config/shunt_config.h"
#include "shunt_fdtab.h"
#include "shunt_reason.h"

struct shunt_transport_ops {
	const char *name;        /* in logs, counters, shunt_fd_transport() */
	enum shunt_transport id; /* its index in the counters */

	/* listen() succeeded on fd, which is registered (shunt_listen.h):
	 * prepare for offers (NULL: nothing to do). */
	void (*on_listen)(int fd);
	/* Client, before the TCP connect: take the connection (SHUNT_R_NONE,
	 * e->conn set) or say why not.  May bind fd and publish an offer,
	 * or announce one that connected() names. */
	enum shunt_reason (*connect)(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t len);
	/* Client, once the TCP connect has started (the 4-tuple is known):
	 * what connect() left for then, such as naming the offer (NULL:
	 * nothing).  Failing, it demotes c. */
	void (*connected)(int fd, struct shunt_conn *c, const struct sockaddr *dst,
			  socklen_t len);
	/* Server, inside accept(): take the connection the client offered
	 * (SHUNT_R_NONE, e->conn set) or say why not. */
	enum shunt_reason (*accept)(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t len);
	/* This end took the kernel path: refuse whatever the peer offered,
	 * so it moves to TCP now rather than at its offer's deadline. */
	void (*decline)(int fd, const struct sockaddr *peer, socklen_t len);
	/* exit(): say goodbye to what is still open, remove this process's
	 * names (NULL: nothing to do).  Not run at _exit() or a fatal signal. */
	void (*at_exit)(void);
	/* Around fork() (SHUNT_FORK_*), in the forking thread (NULL: nothing
	 * to do). */
	void (*fork)(int phase);
	/* Around a set*id call of a process that listens: SHUNT_SETID_BEFORE,
	 * while it still has its privileges, opens what it will need; after
	 * a call that took the rundir's offers out of reach, SHUNT_SETID_LOST
	 * returns 1 if offers from this host can still be taken some other
	 * way, 0 if not (NULL: nothing to open, nothing taken). */
	int (*setid)(int phase);
};

enum { SHUNT_FORK_PREPARE, SHUNT_FORK_PARENT, SHUNT_FORK_CHILD };
enum { SHUNT_SETID_BEFORE, SHUNT_SETID_LOST };

/* The transports, each defined by its own library. */
extern const struct shunt_transport_ops shunt_transport_shm;
extern const struct shunt_transport_ops shunt_transport_fabric;

/* The transports built into the program, fastest first, NULL-terminated:
 * defined where the library is assembled (preload/shunt_transports.c; a
 * unit test lists its own). */
extern const struct shunt_transport_ops *const shunt_transports[];

#endif
