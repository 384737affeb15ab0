/* A connection's life after its decision: references, fd numbers (dup,
 * close), demotion and finishing, fork and exec (shunt_conn.h). */
#include "shunt_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "shunt_iov.h"
#include "shunt_listen.h"
#include "shunt_log.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_transport.h"

const char *shunt_conn_name(const struct shunt_conn *c)
{
	return c->ops->transport ? c->ops->transport->name : "spill";
}

void *shunt_conn_alloc(struct shunt_conn_pool *p)
{
	pthread_mutex_lock(&p->mu);
	struct shunt_conn *c = __atomic_load_n(&p->head, __ATOMIC_ACQUIRE);
	while (c && !__atomic_compare_exchange_n(&p->head, &c, c->pool_next, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
		;
	pthread_mutex_unlock(&p->mu);
	if (!c)
		return calloc(1, p->size);
	memset((char *)c + sizeof c->ops, 0, p->size - sizeof c->ops);
	return c;
}

void shunt_conn_recycle(struct shunt_conn_pool *p, struct shunt_conn *c)
{
	struct shunt_conn *head = __atomic_load_n(&p->head, __ATOMIC_RELAXED);
	do
		c->pool_next = head;
	while (!__atomic_compare_exchange_n(&p->head, &head, c, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

void shunt_conn_put(struct shunt_conn *c)
{
	if (shunt_refs_drop(&c->refs) == 0) {
		int held = c->held;
		if (held) {
			c->held = 0;
			shunt_fd_release(held - 1);
		}
		c->ops->life->free(c);
	}
}

/* The last fd number is closing while calls are still in flight in other
 * threads: keep the socket open under a number of shunt's own until the
 * last of them returns, as a call blocked in the kernel holds the file
 * (a sleeper on a futex holds nothing).  The peer sees the FIN then, not
 * now, and data it sends meanwhile still reaches the blocked read. */
static void hold_socket(struct shunt_conn *c)
{
	int fd = __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE);
	if (fd < 0 || c->held)
		return;
	int h = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
	if (h >= 0 && (h = shunt_fd_own(h, NULL)) >= 0)
		c->held = h + 1;
}

/* ops->life->close, then the close line of a connection on a transport (the
 * bytes it moved there, what a demotion replayed left out). */
static void conn_close(struct shunt_conn *c)
{
	int fd = c->fd;
	c->ops->life->close(c);
	if (c->ops->transport && shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "%s close fd=%d bytes_in=%llu bytes_out=%llu",
			  shunt_conn_name(c), fd, (unsigned long long)c->bytes_in,
			  (unsigned long long)c->bytes_out);
}

/* close() of this thread: the connection whose ops->life->closed runs after the
 * real close, held (one at a time; a signal handler's close() in between
 * finds the slot taken and does not defer). */
static __thread int closing_then;
static __thread struct shunt_conn *closing;

/* One fd number less.  The last one says goodbye (ops->life->close) while the
 * socket is still open; the memory goes with the last reference. */
static void conn_unref(struct shunt_conn *c)
{
	if (__atomic_sub_fetch(&c->fds, 1, __ATOMIC_ACQ_REL) == 0) {
		if (!__atomic_exchange_n(&c->finished, 1, __ATOMIC_ACQ_REL))
			__atomic_sub_fetch(&shunt_naccel, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) > 1)
			hold_socket(c);
		c->after_close = 0;
		if (closing_then && !closing && c->ops->life->closed) {
			shunt_conn_hold(c);
			closing = c;
			c->after_close = 1;
		}
		conn_close(c);
		/* Calls still in flight use the held number from now on. */
		if (c->held)
			__atomic_store_n(&c->fd, c->held - 1, __ATOMIC_RELEASE);
	}
	shunt_conn_put(c);
}

void shunt_conn_close_at_exit(struct shunt_conn *c)
{
	int fd = c->fd;
	conn_close(c);
	__atomic_store_n(&c->fd, fd, __ATOMIC_RELEASE);
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
	if (k == SHUNT_FD_LISTEN) {
		struct shunt_listener *l = e->listener;
		shunt_fd_reset(fd);
		if (l)
			shunt_listen_unref(l);
		return;
	}
	struct shunt_conn *c = k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL ? e->conn : NULL;
	if ((k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL) && shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "close fd=%d transport=%s reason=%s", fd,
			  k == SHUNT_FD_ACCEL ? shunt_conn_name(c) : "kernel",
			  k == SHUNT_FD_ACCEL ? "-" : shunt_reason_name(e->reason));
	if (c && c->fd == fd && __atomic_load_n(&c->fds, __ATOMIC_ACQUIRE) > 1) {
		/* The transport's own number for the socket is going away
		 * while a dup lives on: hand it that one. */
		struct other_arg a = {c, fd, -1};
		shunt_fd_foreach(SHUNT_FD_KERNEL, find_other, &a);
		if (a.found >= 0)
			c->fd = a.found;
	}
	struct shunt_stat_slot *st = e->stat;
	if (c && st && c->stat == st) {
		/* The counters follow the connection: to another of its
		 * numbers when one lives on, else they close with it. */
		struct other_arg a = {c, fd, -1};
		if (__atomic_load_n(&c->fds, __ATOMIC_ACQUIRE) > 1)
			shunt_fd_foreach(SHUNT_FD_KERNEL, find_other, &a);
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

void shunt_conn_on_close_then(int fd, struct shunt_fd *e)
{
	closing_then = 1;
	shunt_conn_on_close(fd, e);
	closing_then = 0;
}

void shunt_conn_closed(void)
{
	struct shunt_conn *c = closing;
	if (!c)
		return;
	closing = NULL;
	c->ops->life->closed(c);
	c->after_close = 0;
	shunt_conn_put(c);
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
	if (k == SHUNT_FD_LISTEN) {
		n->listener = e->listener;
		if (n->listener)
			shunt_listen_dup(n->listener);
	} else if (k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL) {
		n->conn = e->conn;
		if (n->conn) {
			shunt_conn_hold(n->conn);
			__atomic_add_fetch(&n->conn->fds, 1, __ATOMIC_RELAXED);
		}
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
	int quiet = !c->ops->transport;
	if (!quiet)
		shunt_stats_demoted(c->stat, why);
	struct finish_arg a = {c, why};
	shunt_fd_foreach(SHUNT_FD_ACCEL, finish_one, &a);
	if (!quiet)
		SHUNT_INFO("moved fd=%d from=%s transport=kernel reason=%s", c->fd,
			   shunt_conn_name(c), shunt_reason_name(why));
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
	shunt_conn_hold(a->nw);
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
	if (!c->ops->life->demote) {
		/* Nowhere to go (a spill): it stays until drained. */
		shunt_conn_put(c);
		return;
	}
	c->ops->life->demote(c, why);
	shunt_conn_finish(c, why);
	shunt_conn_put(c);
}

/* Connections the application still holds: an ACCEL entry, or a KERNEL
 * one whose connection lives until its last close. */
static struct shunt_conn *held(struct shunt_fd *e)
{
	enum shunt_fd_kind k = shunt_fd_kind(e);
	return k == SHUNT_FD_KERNEL || k == SHUNT_FD_ACCEL ? e->conn : NULL;
}

static void fork_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shunt_conn *c = held(e);
	/* Shared with another process from now on, which may set timeouts
	 * this one never hears of. */
	if (c)
		c->timeo = 1;
	if (c && c->ops->life->fork)
		c->ops->life->fork(c);
}

void shunt_conn_before_fork(void)
{
	shunt_fd_foreach(SHUNT_FD_KERNEL, fork_one, NULL);
}

static void forked_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	struct shunt_conn *c = held(e);
	if (c && c->ops->life->forked)
		c->ops->life->forked(c, *(int *)arg);
}

void shunt_conn_after_fork_parent(void)
{
	int child = 0;
	shunt_fd_foreach(SHUNT_FD_KERNEL, forked_one, &child);
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
	struct shunt_conn *c = held(e);
	if (c && c->stat == old)
		c->stat = e->stat;
}

void shunt_conn_after_fork_child(void)
{
	int child = 1;
	shunt_stats_after_fork_child();
	shunt_fd_foreach(SHUNT_FD_KERNEL, child_stats, NULL);
	shunt_fd_foreach(SHUNT_FD_KERNEL, forked_one, &child);
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

struct foreach_arg {
	const struct shunt_transport_ops *t;
	void (*fn)(int fd, struct shunt_conn *c, void *arg);
	void *arg;
};

static void foreach_one(int fd, struct shunt_fd *e, void *p)
{
	struct foreach_arg *a = p;
	struct shunt_conn *c = __atomic_load_n(&e->conn, __ATOMIC_ACQUIRE);
	if (shunt_fd_kind(e) == SHUNT_FD_ACCEL && c && c->ops->transport == a->t &&
	    __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE) == fd)
		a->fn(fd, c, a->arg);
}

void shunt_conn_foreach(const struct shunt_transport_ops *t,
			void (*fn)(int fd, struct shunt_conn *c, void *arg), void *arg)
{
	struct foreach_arg a = {t, fn, arg};
	shunt_fd_foreach(SHUNT_FD_ACCEL, foreach_one, &a);
}

int shunt_tcp_peek(struct shunt_conn *c)
{
	char b;
	int fd = __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE);
	if (fd < 0)
		return -2;
	ssize_t r = REAL(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r > 0)
		return 1;
	if (r == 0) {
		c->tcp_eof = 1;
		return 0;
	}
	return errno == EAGAIN || errno == EINTR ? -2 : -1;
}

int shunt_recv_begin(struct shunt_conn *c, struct msghdr *m, int flags, size_t *total)
{
	if (m->msg_iovlen > SHUNT_IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (flags & MSG_OOB) {
		errno = EINVAL;
		return -1;
	}
	*total = shunt_iov_total(m->msg_iov, m->msg_iovlen);
	m->msg_flags = 0;
	m->msg_controllen = 0;
	if (m->msg_name)
		m->msg_namelen = 0;
	return *total && !c->rd_shut;
}

size_t shunt_recv_rest(int fd, const struct msghdr *m, int flags, size_t done, size_t total)
{
	if (!(flags & MSG_WAITALL) || (flags & MSG_PEEK) || done >= total)
		return done;
	struct iovec w[SHUNT_IOV_MAX];
	size_t k = shunt_iov_skip(m->msg_iov, m->msg_iovlen, done, w);
	struct msghdr rest = {.msg_iov = w, .msg_iovlen = k};
	ssize_t r = REAL(recvmsg)(fd, &rest, flags);
	return r > 0 ? done + (size_t)r : done;
}

int shunt_ioctl_counts(unsigned long req, void *arg, uint64_t unread, uint64_t unacked,
		       uint64_t unconsumed)
{
	uint64_t n;
	if (req == FIONREAD)
		n = unread;
	else if (req == SIOCOUTQ)
		n = unacked;
	else if (req == SHUNT_IOC_UNCONSUMED)
		n = unconsumed;
	else {
		errno = ENOTTY;
		return -1;
	}
	*(int *)arg = n > INT_MAX ? INT_MAX : (int)n;
	return 0;
}

void shunt_conn_send_fin(struct shunt_conn *c)
{
	int fd = __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE);
	if (fd >= 0 && __atomic_load_n(&c->fin_pending, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&c->fin_pending, 0, __ATOMIC_ACQ_REL))
		REAL(shutdown)(fd, SHUT_WR);
}

ssize_t shunt_broken_pipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	errno = EPIPE;
	return -1;
}
