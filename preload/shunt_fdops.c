/* Calls that create, copy or destroy fd numbers: they keep the fd table in
 * step with the kernel's, so an entry never outlives its number. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include "core/shunt_conn.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "shunt_poll.h"

static inline void forget(int fd)
{
	shunt_epoll_forget(fd);
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN)
		shunt_conn_on_close(fd, e);
}

static inline int is_own(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	return e && shunt_fd_kind(e) == SHUNT_FD_INTERNAL;
}

/* A borrowed fd (libfabric's, see shunt_ownfd.h) closed by its maker. */
static int close_borrowed(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!shunt_guard || !(e->flags & SHUNT_FDF_BORROWED))
		return 0;
	shunt_epoll_forget(fd);
	shunt_fd_reset(fd);
	return REAL(close)(fd);
}

SHUNT_EXPORT int close(int fd)
{
	/* One of shunt's own (the application closing "every fd"): kept.
	 * libfabric's are closed when libfabric closes them. */
	if (unlikely(is_own(fd)))
		return close_borrowed(fd);
	/* Before the real close: once it returns, another thread may be given
	 * the same number and must find a clean entry. */
	shunt_epoll_forget(fd);
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!e || shunt_fd_kind(e) == SHUNT_FD_UNKNOWN)
		return REAL(close)(fd);
	shunt_conn_on_close_then(fd, e);
	int rc = REAL(close)(fd), err = errno;
	/* The FIN is out (if this was the socket's last description): a
	 * peer woken now finds it at its first look. */
	shunt_conn_closed();
	errno = err;
	return rc;
}

static void forget_range(unsigned lo, unsigned hi)
{
	if (shunt_any_accel() || shunt_log_on(SHUNT_LOG_DEBUG)) {
		/* Connections need their transport released and their close
		 * logged, one by one. */
		unsigned lim = shunt_fdtab_limit();
		for (unsigned fd = lo; fd <= hi && fd < lim; fd++) {
			struct shunt_fd *e = shunt_fd_peek((int)fd);
			if (e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN &&
			    shunt_fd_kind(e) != SHUNT_FD_INTERNAL)
				shunt_conn_on_close((int)fd, e);
			if (!e)
				fd |= SHUNT_FDTAB_CHUNK - 1; /* skip unmapped chunk */
		}
	}
	shunt_fd_reset_range(lo, hi);
}

SHUNT_EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	if (flags & CLOSE_RANGE_CLOEXEC)
		return REAL(close_range)(lo, hi, flags);
	if (lo > hi)
		return REAL(close_range)(lo, hi, flags);
	forget_range(lo, hi);
	return shunt_fd_close_range(lo, hi, flags);
}

SHUNT_EXPORT void closefrom(int lo)
{
	if (lo < 0) {
		REAL(closefrom)(lo);
		return;
	}
	forget_range((unsigned)lo, ~0u);
	if (shunt_fd_close_range((unsigned)lo, ~0u, 0) < 0)
		REAL(closefrom)(lo); /* no close_range: as libc would */
}

SHUNT_EXPORT int fclose(FILE *fp)
{
	/* fclose closes the fd inside libc, where close() is not seen. */
	int fd = fp ? fileno(fp) : -1;
	if (fd >= 0)
		forget(fd);
	return REAL(fclose)(fp);
}

SHUNT_EXPORT FILE *fdopen(int fd, const char *mode)
{
	/* stdio reads and writes inside libc, past shunt: the connection must
	 * be a plain socket before a FILE wraps it. */
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (e)
		shunt_conn_demote(fd, e, SHUNT_R_STDIO);
	return REAL(fdopen)(fd, mode);
}

SHUNT_EXPORT int dup(int fd)
{
	int nfd = REAL(dup)(fd);
	if (nfd >= 0) {
		int saved = errno;
		shunt_fd_reset(nfd);
		shunt_conn_dup(fd, nfd);
		errno = saved;
	}
	return nfd;
}

static int dup_over(int fd, int nfd, int rc)
{
	if (rc >= 0) {
		int saved = errno;
		/* The kernel closed whatever nfd was, atomically. */
		forget(nfd);
		shunt_conn_dup(fd, nfd);
		errno = saved;
	}
	return rc;
}

SHUNT_EXPORT int dup2(int fd, int nfd)
{
	if (fd == nfd)
		return REAL(dup2)(fd, nfd);
	if (shunt_fd_make_room(nfd) < 0)
		return -1;
	return dup_over(fd, nfd, REAL(dup2)(fd, nfd));
}

SHUNT_EXPORT int dup3(int fd, int nfd, int flags)
{
	if (fd != nfd && shunt_fd_make_room(nfd) < 0)
		return -1;
	return dup_over(fd, nfd, REAL(dup3)(fd, nfd, flags));
}

static void set_nonblock(int fd, int on)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!e || shunt_fd_kind(e) < SHUNT_FD_TCP || shunt_fd_kind(e) == SHUNT_FD_INTERNAL)
		return;
	if (on)
		e->flags |= SHUNT_FDF_NONBLOCK;
	else
		e->flags &= (uint8_t)~SHUNT_FDF_NONBLOCK;
	/* The flag belongs to the open file: every number of the connection
	 * sees it. */
	struct shunt_conn *c = __atomic_load_n(&e->conn, __ATOMIC_ACQUIRE);
	if (c)
		__atomic_store_n(&c->nonblock, (uint8_t)(on != 0), __ATOMIC_RELAXED);
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int rc = real(fd, cmd, arg);
	if (rc < 0)
		return rc;
	int saved = errno;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		shunt_fd_reset(rc);
		shunt_conn_dup(fd, rc);
		break;
	case F_SETFL:
		set_nonblock(fd, ((long)arg & O_NONBLOCK) != 0);
		break;
	}
	errno = saved;
	return rc;
}

SHUNT_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(REAL(fcntl), fd, cmd, arg);
}

SHUNT_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(REAL(fcntl64), fd, cmd, arg);
}

SHUNT_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct shunt_fd *e = shunt_fd_accel(fd);
	struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
	if (unlikely(c != NULL)) {
		int rc = c->ops->data->ioctl(c, req, arg);
		int err = errno;
		shunt_conn_put(c);
		if (rc >= 0 || err != ENOTTY) {
			errno = err;
			return rc;
		}
	}
	int rc = REAL(ioctl)(fd, req, arg);
	if (rc == 0 && req == FIONBIO && arg)
		set_nonblock(fd, *(int *)arg != 0);
	return rc;
}
