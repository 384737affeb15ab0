/* Readiness calls.  A connection on the kernel path is ready exactly when its
 * socket is, so for it these are libc's own; the transports' readiness (rings
 * checked in user space, wakeup fds added to the kernel wait) hooks in here
 * behind shunt_any_accel().  epoll_create/epoll_create1 return new fd numbers,
 * so they also reset the table entry. */
#include <errno.h>

#include "shunt_conn.h"
#include "shunt_real.h"

extern void __chk_fail(void) __attribute__((noreturn));

SHUNT_EXPORT int poll(struct pollfd *p, nfds_t n, int t)
{
	return REAL(poll)(p, n, t);
}

SHUNT_EXPORT int __poll_chk(struct pollfd *p, nfds_t n, int t, size_t size)
{
	if (size / sizeof(*p) < n)
		__chk_fail();
	return poll(p, n, t);
}

SHUNT_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t,
		       const sigset_t *s)
{
	return REAL(ppoll)(p, n, t, s);
}

SHUNT_EXPORT int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *t,
			     const sigset_t *s, size_t size)
{
	if (size / sizeof(*p) < n)
		__chk_fail();
	return ppoll(p, n, t, s);
}

SHUNT_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	return REAL(select)(n, r, w, e, t);
}

SHUNT_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e,
			 const struct timespec *t, const sigset_t *s)
{
	return REAL(pselect)(n, r, w, e, t, s);
}

static int new_fd(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		shunt_fd_reset(fd);
		errno = saved;
	}
	return fd;
}

SHUNT_EXPORT int epoll_create(int size)
{
	return new_fd(REAL(epoll_create)(size));
}

SHUNT_EXPORT int epoll_create1(int flags)
{
	return new_fd(REAL(epoll_create1)(flags));
}

SHUNT_EXPORT int epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	return REAL(epoll_ctl)(ep, op, fd, ev);
}

SHUNT_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	return REAL(epoll_wait)(ep, ev, n, t);
}

SHUNT_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int n, int t,
			     const sigset_t *s)
{
	return REAL(epoll_pwait)(ep, ev, n, t, s);
}

SHUNT_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int n,
			      const struct timespec *t, const sigset_t *s)
{
	return REAL(epoll_pwait2)(ep, ev, n, t, s);
}
