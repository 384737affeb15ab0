#include "shunt_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>

#include "shunt_log.h"
#include "shunt_real.h"

static const char *const reason_names[] = {
#define SHUNT_REASON_NAME(id, name) [SHUNT_R_##id] = name,
	SHUNT_REASONS(SHUNT_REASON_NAME)
#undef SHUNT_REASON_NAME
};

const char *shunt_reason_name(enum shunt_reason r)
{
	return (unsigned)r < SHUNT_R_COUNT ? reason_names[r] : "?";
}

/* Accelerated transports, fastest first, as libfabric lists providers.  A
 * connection no transport takes stays on the kernel path with the reason
 * the last one gave (no-transport when the rule allows none of them). */
extern const struct shunt_transport_ops shm_ops;
extern const struct shunt_transport_ops fab_ops;

static const struct shunt_transport_ops *const transports[] = {
	&shm_ops,
	&fab_ops,
	NULL,
};

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
	if (!shunt_config()->enabled)
		return;
	for (const struct shunt_transport_ops *const *t = transports; *t; t++)
		if ((*t)->on_listen)
			(*t)->on_listen(fd, e);
}

/* The decision shared by both ends: rule, then each allowed transport in
 * order.  try() returns SHUNT_R_NONE when the transport took it. */
static enum shunt_reason decide(enum shunt_role role, const struct sockaddr *sa,
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
	enum shunt_reason why = SHUNT_R_NO_TRANSPORT;
	for (const struct shunt_transport_ops *const *t = transports; *t; t++) {
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
	e->stat = shunt_stats_open(fd, e->role, accel ? (int)e->conn->ops->id : SHUNT_TP_KERNEL,
				   e->reason, peer, plen);
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
		  accel ? e->conn->ops->name : "kernel",
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
	settle(fd, e, SHUNT_ROLE_CLIENT, decide(SHUNT_ROLE_CLIENT, dst, len, try_connect, &a));
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
	enum shunt_reason why = decide(SHUNT_ROLE_SERVER, peer, len, try_accept, &a);
	if (why != SHUNT_R_NONE && why != SHUNT_R_DISABLED) {
		/* A client may have offered and be waiting for an answer:
		 * refuse explicitly so it moves to TCP now, not at a timeout. */
		for (const struct shunt_transport_ops *const *t = transports; *t; t++)
			if ((*t)->decline)
				(*t)->decline(fd, peer, len);
	}
	settle(fd, e, SHUNT_ROLE_SERVER, why);
	shunt_conn_decided(fd, e, peer, len);
}

void shunt_conn_put(struct shunt_conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		c->ops->free(c);
}

/* One fd number less.  The last one says goodbye (ops->close) while the
 * socket is still open; the memory goes with the last reference. */
static void conn_unref(struct shunt_conn *c)
{
	if (__atomic_sub_fetch(&c->fds, 1, __ATOMIC_ACQ_REL) == 0) {
		if (c->ops->recvmsg &&
		    !__atomic_exchange_n(&c->finished, 1, __ATOMIC_ACQ_REL))
			__atomic_sub_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
		c->ops->close(c);
	}
	shunt_conn_put(c);
}

struct other_arg {
	struct shunt_conn *c;
	int skip, found;
};

static void find_other(int fd, struct shunt_fd *e, void *p)
{
	struct other_arg *a = p;
	if (fd != a->skip && a->found < 0 && e->conn == a->c)
		a->found = fd;
}

void shunt_conn_on_close(int fd, struct shunt_fd *e)
{
	enum shunt_fd_kind k = shunt_fd_kind(e);
	struct shunt_conn *c = e->conn;
	if ((k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL) && shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "close fd=%d transport=%s reason=%s", fd,
			  k == SHUNT_FD_ACCEL ? c->ops->name : "kernel",
			  k == SHUNT_FD_ACCEL ? "-" : shunt_reason_name(e->reason));
	if (c && c->fd == fd && __atomic_load_n(&c->fds, __ATOMIC_ACQUIRE) > 1) {
		/* The transport's own number for the socket is going away
		 * while a dup lives on: hand it that one. */
		struct other_arg a = {c, fd, -1};
		shunt_fd_foreach(SHUNT_FD_LISTEN, find_other, &a);
		if (a.found >= 0)
			c->fd = a.found;
	}
	struct shunt_stat_slot *st = e->stat;
	if (c && st && c->stat == st) {
		/* The counters follow the connection: to another of its
		 * numbers when one lives on, else they close with it. */
		struct other_arg a = {c, fd, -1};
		if (__atomic_load_n(&c->fds, __ATOMIC_ACQUIRE) > 1)
			shunt_fd_foreach(SHUNT_FD_LISTEN, find_other, &a);
		struct shunt_fd *o = a.found >= 0 ? shunt_fd_peek(a.found) : NULL;
		if (o && !o->stat) {
			o->stat = st;
			st = NULL;
		} else {
			c->stat = NULL;
		}
	}
	/* Forget the number before the transport lets go, so no other thread
	 * starts a new operation on a connection being torn down. */
	shunt_fd_reset(fd);
	if (c)
		conn_unref(c);
	shunt_stats_close(st);
}

void shunt_conn_dup(int fd, int nfd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	enum shunt_fd_kind k = e ? shunt_fd_kind(e) : SHUNT_FD_UNKNOWN;
	if (k == SHUNT_FD_UNKNOWN)
		return;
	struct shunt_fd *n = shunt_fd_get(nfd);
	if (!n) {
		/* Out of memory for the table: the copy cannot be tracked, so
		 * the connection must not stay accelerated. */
		if (k == SHUNT_FD_ACCEL)
			shunt_conn_demote(fd, e, SHUNT_R_INTERNAL);
		return;
	}
	n->role = e->role;
	n->reason = e->reason;
	n->flags = e->flags;
	n->conn = e->conn;
	if (n->conn) {
		__atomic_add_fetch(&n->conn->refs, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&n->conn->fds, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&n->kind, k, __ATOMIC_RELEASE);
}

struct finish_arg {
	struct shunt_conn *c;
	enum shunt_reason why;
};

static void finish_one(int fd, struct shunt_fd *e, void *p)
{
	struct finish_arg *a = p;
	(void)fd;
	if (e->conn != a->c || shunt_fd_kind(e) != SHUNT_FD_ACCEL)
		return;
	e->reason = (uint8_t)a->why;
	__atomic_store_n(&e->kind, SHUNT_FD_KERNEL, __ATOMIC_RELEASE);
}

void shunt_conn_finish(struct shunt_conn *c, enum shunt_reason why)
{
	/* Even after the last close: a call still in flight in another
	 * thread must stop waiting on the transport. */
	__atomic_store_n(&c->left, 1, __ATOMIC_RELEASE);
	if (__atomic_exchange_n(&c->finished, 1, __ATOMIC_ACQ_REL))
		return;
	c->reason = (uint8_t)why;
	__atomic_sub_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
	/* A spill (shunt_spill.h) said so when it took over. */
	int quiet = c->ops->id == SHUNT_TP_KERNEL;
	if (!quiet)
		shunt_stats_demoted(c->stat, why);
	struct finish_arg a = {c, why};
	shunt_fd_foreach(SHUNT_FD_ACCEL, finish_one, &a);
	if (!quiet)
		SHUNT_INFO("moved fd=%d from=%s transport=kernel reason=%s", c->fd,
			   c->ops->name, shunt_reason_name(why));
}

struct replace_arg {
	struct shunt_conn *old, *nw;
	unsigned n;
};

static void replace_one(int fd, struct shunt_fd *e, void *p)
{
	struct replace_arg *a = p;
	(void)fd;
	if (e->conn != a->old || shunt_fd_kind(e) != SHUNT_FD_ACCEL)
		return;
	__atomic_add_fetch(&a->nw->refs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&a->nw->fds, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->conn, a->nw, __ATOMIC_RELEASE);
	a->n++;
}

void shunt_conn_replace(struct shunt_conn *old, struct shunt_conn *nw)
{
	nw->fd = old->fd;
	nw->stat = old->stat;
	old->stat = NULL;
	__atomic_add_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
	struct replace_arg a = {old, nw, 0};
	shunt_fd_foreach(SHUNT_FD_ACCEL, replace_one, &a);
	/* As if those numbers had closed: the last one says goodbye. */
	while (a.n--)
		conn_unref(old);
}

void shunt_conn_demote(int fd, struct shunt_fd *e, enum shunt_reason why)
{
	(void)fd;
	struct shunt_conn *c = shunt_conn_get(e);
	if (!c)
		return;
	if (!c->ops->demote) {
		/* Nowhere to go (a spill): it stays until drained. */
		shunt_conn_put(c);
		return;
	}
	c->ops->demote(c, why);
	shunt_conn_finish(c, why);
	shunt_conn_put(c);
}

static void fork_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	if (e->conn && e->conn->ops->fork)
		e->conn->ops->fork(e->conn);
}

void shunt_conn_before_fork(void)
{
	shunt_fd_foreach(SHUNT_FD_LISTEN, fork_one, NULL);
}

static void child_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	if (e->conn && e->conn->ops->child)
		e->conn->ops->child(e->conn);
}

/* Counters of inherited connections move to the child's own file: the
 * parent keeps its slots (and may close them) while the child goes on. */
static void child_stats(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shunt_stat_slot *old = e->stat;
	if (!old)
		return;
	e->stat = shunt_stats_inherit(old);
	if (e->conn && e->conn->stat == old)
		e->conn->stat = e->stat;
}

void shunt_conn_after_fork_child(void)
{
	shunt_stats_after_fork_child();
	shunt_fd_foreach(SHUNT_FD_KERNEL, child_stats, NULL);
	shunt_fd_foreach(SHUNT_FD_LISTEN, child_one, NULL);
}

static void exec_demote(int fd, struct shunt_fd *e, void *arg)
{
	(void)arg;
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL)
		return;
	int fl = REAL(fcntl)(fd, F_GETFD, 0);
	if (fl >= 0 && !(fl & FD_CLOEXEC))
		shunt_conn_demote(fd, e, SHUNT_R_EXEC);
}

void shunt_conn_before_exec(void)
{
	if (shunt_any_accel())
		shunt_fd_foreach(SHUNT_FD_ACCEL, exec_demote, NULL);
}

int shunt_tcp_peek(struct shunt_conn *c, int *eof)
{
	char b;
	int fd = __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE);
	if (fd < 0)
		return -2;
	ssize_t r = REAL(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r > 0)
		return 1;
	if (r == 0) {
		*eof = 1;
		return 0;
	}
	return errno == EAGAIN || errno == EINTR ? -2 : -1;
}

ssize_t shunt_broken_pipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	errno = EPIPE;
	return -1;
}
