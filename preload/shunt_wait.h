/* Shared by the readiness calls (shunt_wait.c, shunt_epoll.c). */
#ifndef SHUNT_WAIT_H
#define SHUNT_WAIT_H

#include <poll.h>
#include <signal.h>
#include <stdint.h>

uint64_t shunt_now_ns(void);
/* Milliseconds to a deadline (0 = none: -1; past: 0), rounded up. */
int shunt_remaining_ms(uint64_t deadline_ns);
/* Spin for the spin_us budget or until ready(arg). */
void shunt_spin_accel(int (*ready)(void *), void *arg);
/* poll() over a set holding accelerated fds; deadline 0 = none. */
int shunt_poll_emulated(struct pollfd *p, nfds_t n, uint64_t deadline_ns,
			const sigset_t *mask);
/* The epoll emulation's bookkeeping for a closing fd. */
void shunt_epoll_forget(int fd);

#endif
