/* Decisions (shunt_decide.h): the rule first, then each transport it
 * allows, fastest first, as libfabric tries providers; the fd entry says
 * the outcome (ACCEL, or KERNEL with a reason).  A connection no transport
 * takes stays on the kernel path with the most telling reason one gave
 * (no-transport when the rule allows none of them). */
#include "shunt_decide.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>

#include "shunt_conn.h"
#include "shunt_kernel_only.h"
#include "shunt_listen.h"
#include "shunt_log.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_transport.h"
#include "shunt_uring.h"
#include "shunt_wait.h"

static int allowed(enum shunt_transport rule, enum shunt_transport t)
{
	return rule == SHUNT_TP_AUTO || rule == t;
}

struct shunt_fd *shunt_conn_classify(int fd)
{
	struct shunt_fd *e = shunt_fd_get(fd);
	if (!e)
		return NULL;
	enum shunt_fd_kind k = shunt_fd_kind(e);
	if (k != SHUNT_FD_UNKNOWN)
		return e;
	int domain = 0, type = 0, proto = 0, acc = 0;
	socklen_t l = sizeof(int);
	k = SHUNT_FD_OTHER;
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) == 0 &&
	    (domain == AF_INET || domain == AF_INET6) &&
	    (l = sizeof(int), REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &l)) == 0 &&
	    type == SOCK_STREAM &&
	    (l = sizeof(int), REAL(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l)) == 0 &&
	    proto == IPPROTO_TCP) {
		l = sizeof(int);
		REAL(getsockopt)(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l);
		k = acc ? SHUNT_FD_LISTEN : SHUNT_FD_TCP;
		/* Made elsewhere: its timeouts are not known. */
		e->flags |= SHUNT_FDF_TIMEO;
		int fl = REAL(fcntl)(fd, F_GETFL, 0);
		if (fl >= 0 && (fl & O_NONBLOCK))
			e->flags |= SHUNT_FDF_NONBLOCK;
	}
	if (k == SHUNT_FD_LISTEN) {
		/* An inherited listener (exec, socket activation) registers
		 * when first seen, as listen() would have. */
		e->kind = SHUNT_FD_TCP;
		shunt_conn_on_listen(fd, e);
		return e;
	}
	__atomic_store_n(&e->kind, k, __ATOMIC_RELEASE);
	return e;
}

void shunt_conn_new_tcp(int fd, int nonblock)
{
	struct shunt_fd *e = shunt_fd_get(fd);
	if (!e)
		return;
	e->role = SHUNT_ROLE_ANY;
	e->reason = SHUNT_R_NONE;
	e->flags = nonblock ? SHUNT_FDF_NONBLOCK : 0;
	e->conn = NULL;
	__atomic_store_n(&e->kind, SHUNT_FD_TCP, __ATOMIC_RELEASE);
}

void shunt_conn_on_listen(int fd, struct shunt_fd *e)
{
	if (shunt_fd_kind(e) == SHUNT_FD_LISTEN)
		return; /* listen() again, to change the backlog */
	__atomic_store_n(&e->kind, SHUNT_FD_LISTEN, __ATOMIC_RELEASE);
	shunt_first_decision();
	if (!shunt_config()->enabled || shunt_uring_in_use())
		return;
	shunt_listen_register(fd, e);
	for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++)
		if ((*t)->on_listen)
			(*t)->on_listen(fd);
}

/* The decision shared by both ends: rule, then each allowed transport in
 * order.  try() returns SHUNT_R_NONE when the transport took it. */
static enum shunt_reason decide(int fd, enum shunt_role role, const struct sockaddr *sa,
				socklen_t len,
				enum shunt_reason (*try)(const struct shunt_transport_ops *,
							 void *),
				void *arg)
{
	shunt_first_decision();
	const struct shunt_config *c = shunt_config();
	if (!c->enabled)
		return SHUNT_R_DISABLED;
	enum shunt_transport rule = shunt_config_decide(c, role, shunt_prog(), sa, len);
	if (rule == SHUNT_TP_KERNEL)
		return SHUNT_R_RULE_KERNEL;
	if (shunt_uring_in_use())
		return SHUNT_R_IO_URING;
	/* shunt must never make a call fail that would succeed without it:
	 * near the fd limit, the fds an accelerated connection may take (its
	 * wake sockets) are left to the application. */
	if (shunt_fd_headroom(fd) < SHUNT_FD_MARGIN)
		return SHUNT_R_FD_LIMIT;
	enum shunt_reason why = SHUNT_R_NO_TRANSPORT;
	for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++) {
		if (!allowed(rule, (*t)->id))
			continue;
		enum shunt_reason r = try(*t, arg);
		/* The most telling reason stands: a transport that found the
		 * peer and refused it (peer-cred, bad-offer...) says more than
		 * a later one that found no peer at all. */
		if (r == SHUNT_R_NONE || why == SHUNT_R_NO_TRANSPORT || why == SHUNT_R_NO_PEER_SHIM)
			why = r;
		if (r == SHUNT_R_NONE)
			break;
	}
	return why;
}

static void settle(int fd, struct shunt_fd *e, enum shunt_role role, enum shunt_reason why)
{
	e->role = (uint8_t)role;
	e->reason = (uint8_t)why;
	if (why == SHUNT_R_NONE) {
		e->conn->refs = 1;
		e->conn->fds = 1;
		e->conn->fd = fd;
		e->conn->nonblock = (e->flags & SHUNT_FDF_NONBLOCK) != 0;
		e->conn->timeo = (e->flags & SHUNT_FDF_TIMEO) != 0;
		struct shunt_spin_limits l;
		shunt_wait_limits(&l, 0);
		shunt_spin_init(&e->conn->spin[0], &l);
		shunt_spin_init(&e->conn->spin[1], &l);
		__atomic_add_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
	} else {
		e->conn = NULL;
	}
	__atomic_store_n(&e->kind, why == SHUNT_R_NONE ? SHUNT_FD_ACCEL : SHUNT_FD_KERNEL,
			 __ATOMIC_RELEASE);
}

void shunt_conn_decided(int fd, struct shunt_fd *e, const struct sockaddr *peer,
			socklen_t plen)
{
	int accel = shunt_fd_kind(e) == SHUNT_FD_ACCEL;
	if (accel && e->role == SHUNT_ROLE_CLIENT && e->conn->ops->transport->connected)
		e->conn->ops->transport->connected(fd, e->conn, peer, plen);
	struct shunt_conn *c = accel ? e->conn : NULL;
	e->stat = shunt_stats_open(fd, e->role, c ? (int)c->ops->transport->id : SHUNT_TP_KERNEL,
				   e->reason, peer, plen, c && c->lport ? c->local16 : NULL,
				   c ? c->lport : 0);
	if (accel)
		e->conn->stat = e->stat;
	if (!shunt_log_on(SHUNT_LOG_DEBUG))
		return;
	struct sockaddr_storage ls;
	socklen_t ll = sizeof ls;
	char l[64], p[64];
	if (getsockname(fd, (struct sockaddr *)&ls, &ll) < 0)
		ll = 0;
	shunt_format_addr((struct sockaddr *)&ls, ll, l, sizeof l);
	shunt_format_addr(peer, plen, p, sizeof p);
	shunt_log(SHUNT_LOG_DEBUG,
		  "conn fd=%d role=%s local=%s peer=%s transport=%s reason=%s", fd,
		  shunt_role_name((enum shunt_role)e->role), l, p,
		  accel ? shunt_conn_name(e->conn) : "kernel",
		  accel ? "-" : shunt_reason_name(e->reason));
}

struct connect_args {
	int fd;
	struct shunt_fd *e;
	const struct sockaddr *sa;
	socklen_t len;
};

static enum shunt_reason try_connect(const struct shunt_transport_ops *t, void *arg)
{
	struct connect_args *a = arg;
	return t->connect ? t->connect(a->fd, a->e, a->sa, a->len) : SHUNT_R_NO_TRANSPORT;
}

void shunt_conn_on_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
			   socklen_t len)
{
	struct connect_args a = {fd, e, dst, len};
	enum shunt_reason why = shunt_kernel_only_mark(e);
	if (why == SHUNT_R_NONE)
		why = decide(fd, SHUNT_ROLE_CLIENT, dst, len, try_connect, &a);
	settle(fd, e, SHUNT_ROLE_CLIENT, why);
}

struct accept_args {
	int lfd, fd;
	struct shunt_fd *e;
	const struct sockaddr *sa;
	socklen_t len;
};

static enum shunt_reason try_accept(const struct shunt_transport_ops *t, void *arg)
{
	struct accept_args *a = arg;
	return t->accept ? t->accept(a->lfd, a->fd, a->e, a->sa, a->len)
			 : SHUNT_R_NO_TRANSPORT;
}

void shunt_conn_on_accept(int lfd, int fd, struct shunt_fd *e,
			  const struct sockaddr *peer, socklen_t len)
{
	struct accept_args a = {lfd, fd, e, peer, len};
	/* A kernel-only feature set on the listener is the accepted
	 * socket's too (the kernel copies filters and flags to it). */
	enum shunt_reason why = shunt_kernel_only_mark(shunt_fd_peek(lfd));
	if (why == SHUNT_R_NONE)
		why = decide(fd, SHUNT_ROLE_SERVER, peer, len, try_accept, &a);
	if (why != SHUNT_R_NONE && why != SHUNT_R_DISABLED) {
		/* A client may have offered and be waiting for an answer:
		 * refuse explicitly so it moves to TCP now, not at a timeout. */
		for (const struct shunt_transport_ops *const *t = shunt_transports; *t; t++)
			if ((*t)->decline)
				(*t)->decline(fd, peer, len);
	}
	settle(fd, e, SHUNT_ROLE_SERVER, why);
	shunt_conn_decided(fd, e, peer, len);
}

