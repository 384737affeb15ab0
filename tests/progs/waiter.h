/* One readiness-wait loop over the interfaces an event-driven program may use:
 * poll ppoll select pselect epoll (level) epoll-et epoll-oneshot epoll-pwait
 * epoll-pwait2.  Handlers must always work until EAGAIN (so edge-triggered
 * mode never misses a wakeup). */
#ifndef TPROG_WAITER_H
#define TPROG_WAITER_H

#include <stdint.h>

enum wait_mode {
	W_POLL, W_PPOLL, W_SELECT, W_PSELECT, W_EPOLL, W_EPOLL_ET,
	W_EPOLL_ONESHOT, W_EPOLL_PWAIT, W_EPOLL_PWAIT2, W_NMODES
};

int wait_mode_parse(const char *name);   /* -1 if unknown */
const char *wait_mode_name(int mode);

struct waiter;
struct waiter *waiter_new(int mode, int maxfds);
/* Registers fd or changes its interest.  tag comes back in the callback. */
void waiter_set(struct waiter *w, int fd, uint32_t tag, int want_in, int want_out);
void waiter_del(struct waiter *w, int fd);
/* Waits up to timeout_ms; calls cb for each ready fd.  Returns the number of
 * ready fds (0 on timeout). */
int waiter_wait(struct waiter *w, int timeout_ms,
		void (*cb)(void *arg, uint32_t tag, int in, int out, int err),
		void *arg);
void waiter_free(struct waiter *w);

#endif
