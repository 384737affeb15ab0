/* Shared by the readiness interposers (shunt_poll.c, shunt_epoll.c, shunt_fdops.c). */
#ifndef SHUNT_POLL_H
#define SHUNT_POLL_H

#include <poll.h>
#include <signal.h>
#include <stdint.h>

/* poll() over a set holding accelerated fds; deadline 0 = none. */
int shunt_poll_emulated(struct pollfd *p, nfds_t n, uint64_t deadline_ns,
			const sigset_t *mask);
/* The epoll emulation's bookkeeping for a closing fd. */
void shunt_epoll_forget(int fd);

/* Nested epoll (shunt_epoll.c): connections armed for a wait on an epoll fd
 * from outside, disarmed and released after it. */
struct shunt_conn;
struct shunt_armed {
	struct shunt_conn *c;
	short ev;
};
struct shunt_armlist {
	int n, cap;
	int short_ms; /* some could not be armed: wait in short slices */
	struct shunt_armed *v;
	struct shunt_armed buf[16];
};
void shunt_armlist_init(struct shunt_armlist *al);
void shunt_armlist_release(struct shunt_armlist *al);
/* 1 when fd is an epoll fd whose set holds accelerated fds, or sets that do:
 * its readiness is partly in user space. */
int shunt_epoll_emulated(int fd);
/* Make the epoll fd fd readable to the kernel while something in it is
 * ready in user space, and (with al) arm its connections so that readiness
 * arriving later makes it readable; may shorten *timeout_ms.  Returns 1 when
 * something is ready now. */
int shunt_epoll_prime(int fd, struct shunt_armlist *al, int *timeout_ms);

#endif
