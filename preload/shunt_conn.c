#include "shunt_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

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

/* Accelerated transports, fastest first.  The shm and fabric transports
 * register here as they are built; with none, every connection that a rule
 * lets accelerate stays on the kernel path with reason no-transport. */
static const struct shunt_transport_ops *const transports[] = {
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
	__atomic_store_n(&e->kind, SHUNT_FD_LISTEN, __ATOMIC_RELEASE);
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
		why = try(*t, arg);
		if (why == SHUNT_R_NONE)
			break;
	}
	return why;
}

static void settle(struct shunt_fd *e, enum shunt_role role, enum shunt_reason why)
{
	e->role = (uint8_t)role;
	e->reason = (uint8_t)why;
	if (why == SHUNT_R_NONE) {
		e->conn->refs = 1;
		__atomic_add_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&e->kind, why == SHUNT_R_NONE ? SHUNT_FD_ACCEL : SHUNT_FD_KERNEL,
			 __ATOMIC_RELEASE);
}

void shunt_conn_log_decision(int fd, struct shunt_fd *e, const struct sockaddr *peer,
			     socklen_t plen)
{
	if (!shunt_log_on(SHUNT_LOG_DEBUG))
		return;
	struct sockaddr_storage ls;
	socklen_t ll = sizeof ls;
	char l[64], p[64];
	if (getsockname(fd, (struct sockaddr *)&ls, &ll) < 0)
		ll = 0;
	shunt_format_addr((struct sockaddr *)&ls, ll, l, sizeof l);
	shunt_format_addr(peer, plen, p, sizeof p);
	int accel = shunt_fd_kind(e) == SHUNT_FD_ACCEL;
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
	settle(e, SHUNT_ROLE_CLIENT, decide(SHUNT_ROLE_CLIENT, dst, len, try_connect, &a));
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
	settle(e, SHUNT_ROLE_SERVER, decide(SHUNT_ROLE_SERVER, peer, len, try_accept, &a));
	shunt_conn_log_decision(fd, e, peer, len);
}

static void conn_unref(struct shunt_conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		__atomic_sub_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
		c->ops->close(c);
	}
}

void shunt_conn_on_close(int fd, struct shunt_fd *e)
{
	enum shunt_fd_kind k = shunt_fd_kind(e);
	struct shunt_conn *c = e->conn;
	if ((k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL) && shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "close fd=%d transport=%s reason=%s", fd,
			  k == SHUNT_FD_ACCEL ? c->ops->name : "kernel",
			  k == SHUNT_FD_ACCEL ? "-" : shunt_reason_name(e->reason));
	/* Forget the number before the transport lets go, so no other thread
	 * starts a new operation on a connection being torn down. */
	shunt_fd_reset(fd);
	if (k == SHUNT_FD_ACCEL && c)
		conn_unref(c);
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
	if (k == SHUNT_FD_ACCEL)
		__atomic_add_fetch(&e->conn->refs, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&n->kind, k, __ATOMIC_RELEASE);
}

struct demote_arg {
	struct shunt_conn *c;
	enum shunt_reason why;
};

static void demote_one(int fd, struct shunt_fd *e, void *p)
{
	struct demote_arg *a = p;
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL || e->conn != a->c)
		return;
	e->reason = (uint8_t)a->why;
	__atomic_store_n(&e->kind, SHUNT_FD_KERNEL, __ATOMIC_RELEASE);
	e->conn = NULL;
	conn_unref(a->c);
}

void shunt_conn_demote(int fd, struct shunt_fd *e, enum shunt_reason why)
{
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL)
		return;
	struct shunt_conn *c = e->conn;
	SHUNT_INFO("demoting fd=%d transport=%s reason=%s", fd, c->ops->name,
		   shunt_reason_name(why));
	/* The transport hands every unconsumed byte back to TCP first; then
	 * every fd number sharing the connection (dup) reads the socket. */
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
	c->ops->demote(c, why);
	struct demote_arg a = {c, why};
	shunt_fd_foreach(SHUNT_FD_ACCEL, demote_one, &a);
	conn_unref(c);
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
