/* Socket lifecycle calls: where each TCP connection's path is decided. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "core/shunt_conn.h"
#include "core/shunt_decide.h"
#include "core/shunt_kernel_only.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"

static int is_tcp(int domain, int type, int proto)
{
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	return (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM &&
	       (proto == 0 || proto == IPPROTO_TCP);
}

/* A dependency's fds (libfabric's, made under the guard) are close-on-exec
 * from the start: libfabric may run on a thread of shunt's own while the
 * application execs or spawns on another (fabric/fab_start.c). */
#define GUARD_CLOEXEC (unlikely(shunt_guard) ? SOCK_CLOEXEC : 0)

SHUNT_EXPORT int socket(int domain, int type, int proto)
{
	int fd = REAL(socket)(domain, type | GUARD_CLOEXEC, proto);
	if (fd < 0)
		return fd;
	/* libfabric's (made under the guard): protected from the
	 * application, see shunt_ownfd.h. */
	if (unlikely(shunt_guard))
		return shunt_fd_borrow(fd);
	int saved = errno;
	shunt_fd_reset(fd);
	if (domain == AF_INET || domain == AF_INET6) {
		if (is_tcp(domain, type, proto)) { /* the guard is not held */
			shunt_conn_new_tcp(fd, type & SOCK_NONBLOCK);
		} else {
			/* UDP and the like are never ours: mark them so later
			 * calls skip classifying. */
			struct shunt_fd *e = shunt_fd_get(fd);
			if (e)
				__atomic_store_n(&e->kind, SHUNT_FD_OTHER, __ATOMIC_RELEASE);
		}
	}
	errno = saved;
	return fd;
}

SHUNT_EXPORT int socketpair(int d, int t, int p, int sv[2])
{
	int rc = REAL(socketpair)(d, t | GUARD_CLOEXEC, p, sv);
	if (rc == 0 && unlikely(shunt_guard)) {
		sv[0] = shunt_fd_borrow(sv[0]); /* libfabric's signal pair */
		sv[1] = shunt_fd_borrow(sv[1]);
	} else if (rc == 0) {
		shunt_fd_reset(sv[0]);
		shunt_fd_reset(sv[1]);
	}
	return rc;
}

SHUNT_EXPORT int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	return REAL(bind)(fd, sa, len);
}

/* The entry of a socket a decision is about to be made on, or NULL when
 * shunt must stay out (guard held, not TCP, already decided). */
static struct shunt_fd *tcp_entry(int fd, enum shunt_fd_kind want)
{
	if (!shunt_active())
		return NULL;
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!e || shunt_fd_kind(e) == SHUNT_FD_UNKNOWN)
		e = shunt_conn_classify(fd);
	return e && shunt_fd_kind(e) == want ? e : NULL;
}

SHUNT_EXPORT int listen(int fd, int backlog)
{
	int rc = REAL(listen)(fd, backlog);
	if (rc == 0) {
		int saved = errno;
		struct shunt_fd *e = tcp_entry(fd, SHUNT_FD_TCP);
		if (e)
			shunt_conn_on_listen(fd, e);
		errno = saved;
	}
	return rc;
}

SHUNT_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct shunt_fd *e;
	if (!sa || len < sizeof(sa_family_t) ||
	    (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    !(e = tcp_entry(fd, SHUNT_FD_TCP)))
		return REAL(connect)(fd, sa, len);
	/* Decided before the TCP connect: a transport may bind the socket
	 * and publish its offer first (docs/ARCHITECTURE.md, "Life of a
	 * connection"). */
	shunt_conn_on_connect(fd, e, sa, len);
	int rc = REAL(connect)(fd, sa, len);
	int saved = errno;
	if (rc == 0 || errno == EINPROGRESS || errno == EINTR || errno == EALREADY) {
		shunt_conn_decided(fd, e, sa, len);
	} else {
		/* Refused, unreachable...: the socket is unconnected again and
		 * may be connected anew, so the decision is undone. */
		int nonblock = e->flags & SHUNT_FDF_NONBLOCK;
		int keep = e->flags & (SHUNT_FDF_TIMEO | SHUNT_FDF_KERNEL_ONLY);
		enum shunt_reason mark = shunt_kernel_only_mark(e);
		if (shunt_fd_kind(e) == SHUNT_FD_ACCEL)
			shunt_conn_on_close(fd, e);
		shunt_conn_new_tcp(fd, nonblock);
		e->flags |= (uint8_t)keep;
		e->reason = (uint8_t)mark;
	}
	errno = saved;
	return rc;
}

static int accept_common(int lfd, struct sockaddr *sa, socklen_t *len, int flags,
			 int four)
{
	struct shunt_fd *le = (sa && !len) ? NULL : tcp_entry(lfd, SHUNT_FD_LISTEN);
	if (!le) {
		int fd = four || unlikely(shunt_guard)
				 ? REAL(accept4)(lfd, sa, len, flags | GUARD_CLOEXEC)
				 : REAL(accept)(lfd, sa, len);
		if (unlikely(shunt_guard))
			return shunt_fd_borrow(fd); /* a passive endpoint's */
		if (fd >= 0)
			shunt_fd_reset(fd);
		return fd;
	}
	/* Always ask for the peer address: rules match on it, and it saves a
	 * getpeername(). */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int fd = four ? REAL(accept4)(lfd, (struct sockaddr *)&ss, &sl, flags)
		      : REAL(accept)(lfd, (struct sockaddr *)&ss, &sl);
	if (fd < 0)
		return fd;
	int saved = errno;
	if (sa) {
		/* As the kernel does: copy what fits, report the full size. */
		memcpy(sa, &ss, sl < *len ? sl : *len);
		*len = sl;
	}
	shunt_fd_reset(fd);
	shunt_conn_new_tcp(fd, four && (flags & SOCK_NONBLOCK));
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e) {
		/* An accepted socket starts with the listener's timeouts. */
		e->flags |= (uint8_t)(le->flags & SHUNT_FDF_TIMEO);
		shunt_conn_on_accept(lfd, fd, e, (struct sockaddr *)&ss, sl);
	}
	errno = saved;
	return fd;
}

SHUNT_EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	return accept_common(fd, sa, len, 0, 0);
}

SHUNT_EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	return accept_common(fd, sa, len, flags, 1);
}

SHUNT_EXPORT int shutdown(int fd, int how)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	struct shunt_conn *c = e ? shunt_conn_get(e) : NULL;
	if (c) {
		int rc = c->ops->data->shutdown(c, how);
		shunt_conn_put(c);
		if (rc != 0)
			return rc < 0 ? rc : 0; /* 1: the transport sends FIN later */
	}
	/* The TCP connection carries the FIN in every case: the kernel keeps
	 * the connection's state whatever path its bytes took. */
	return REAL(shutdown)(fd, how);
}

/* SO_RCVTIMEO and SO_SNDTIMEO, in both their time layouts (asm-generic
 * numbers: SO_*TIMEO_OLD 20/21, SO_*TIMEO_NEW 66/67). */
static int is_timeo(int level, int opt)
{
	return level == SOL_SOCKET && (opt == 20 || opt == 21 || opt == 66 || opt == 67);
}

SHUNT_EXPORT int setsockopt(int fd, int level, int opt, const void *v, socklen_t len)
{
	/* Options live on the kernel socket, which the application holds;
	 * transports read them from there when they need them.  Only that a
	 * timeout was set is noted: a wait then asks for it. */
	enum shunt_reason why = shunt_kernel_only_sockopt(level, opt, v, len);
	if (unlikely(why != SHUNT_R_NONE) && shunt_active()) {
		if (why != SHUNT_R_KTLS) {
			/* Before the kernel's: bytes a repair or a filter
			 * must see are on the socket first. */
			shunt_kernel_only(fd, why);
		} else {
			/* After it, and only if it took: a kernel without
			 * TLS leaves the connection where it is.  The ULP
			 * ciphers nothing until TLS_TX/TLS_RX are set, so
			 * the replay still goes out as it was written. */
			int rc = REAL(setsockopt)(fd, level, opt, v, len);
			if (rc == 0)
				shunt_kernel_only(fd, why);
			return rc;
		}
	}
	int rc = REAL(setsockopt)(fd, level, opt, v, len);
	if (rc == 0 && is_timeo(level, opt)) {
		struct shunt_fd *e = shunt_fd_peek(fd);
		if (e) {
			__atomic_or_fetch(&e->flags, SHUNT_FDF_TIMEO, __ATOMIC_RELAXED);
			if (shunt_fd_kind(e) == SHUNT_FD_ACCEL && e->conn)
				__atomic_store_n(&e->conn->timeo, 1, __ATOMIC_RELAXED);
		}
	}
	return rc;
}

SHUNT_EXPORT int getsockopt(int fd, int level, int opt, void *v, socklen_t *len)
{
	return REAL(getsockopt)(fd, level, opt, v, len);
}
