/* The fabric transport's data path: every read and write of an accelerated
 * remote connection, and poll/select/epoll readiness.
 *
 * Each end owns one registered buffer: its tx ring, its rx ring and a
 * scratch page.  The writer copies the application's bytes into its tx ring
 * and RMA-writes them to the same offset of the peer's rx ring with remote
 * CQ data (type, end position); the reader copies them out of its rx ring
 * and returns credits (its consumed position) as zero-byte writes with CQ
 * data.  A byte stays in the writer's tx ring until a credit covers it, so
 * a demotion can replay it over TCP.
 *
 * Leaving the fabric (DESIGN: docs/ARCHITECTURE.md, "Fabric demotion"):
 * each end stops consuming at rx_consumed, sends DEMOTE(rx_consumed) as its
 * last message and then reads the socket; when the peer's DEMOTE(p)
 * arrives it replays over TCP its tx bytes from p on, then writes only to
 * the socket.  The position comes from the receiver, which knows exactly
 * what it has delivered, never from a credit, which may lag: nothing is
 * sent twice, nothing skipped. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fab_internal.h"
#include "core/shunt_copy.h"
#include "core/shunt_iov.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_rendezvous.h"
#include "core/shunt_wait.h"

/* How long a send after the peer's CLOSE waits for its FIN (which its
 * close sends right after). */
#define FIN_WAIT_MS 200

static inline int state_of(struct fab_conn *c)
{
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
}

/* Start demoting (lock held).  The application may not call again soon:
 * the exchange must not wait for it, the watcher moves it. */
static void begin_watched(struct fab_conn *c, int why)
{
	if (fab_demote_begin(c, why))
		fab_watch_demoting(c);
}

/* Anything that makes this end leave the fabric now (lock held).  1 when
 * the state moved. */
static int advance(struct fab_conn *c)
{
	int st = state_of(c);
	if (st == FAB_DECLINED) {
		fab_demote_offer_locked(c);
		fab_send_fin(c); /* a shutdown(SHUT_WR) made while offered */
		return 1;
	}
	if (st == FAB_OFFERED && c->client) {
		if (shunt_offer_over(&c->base)) {
			fab_demote_offer_locked(c);
			fab_send_fin(c);
			return state_of(c) != FAB_OFFERED;
		}
		return 0;
	}
	if (st == FAB_DEMOTING) {
		int moved = fab_demote_step(c);
		fab_send_fin(c);
		return moved;
	}
	if (st != FAB_UP)
		return 0;
	if (__atomic_load_n(&c->relay_hint, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&c->relay_hint, 0, __ATOMIC_ACQ_REL))
		fab_relay_check(c); /* the watcher saw the peer's position filed */
	fab_cq_read_locked(c);
	if (c->got_demote || c->failed) {
		begin_watched(c, c->got_demote ? SHUNT_R_PEER_DEMOTED : SHUNT_R_PROVIDER_ERROR);
		fab_demote_step(c);
		fab_send_fin(c);
		return 1;
	}
	fab_flush(c);
	/* A credit that found the send queue full goes now. */
	fab_credit_locked(c);
	if (c->failed) {
		begin_watched(c, SHUNT_R_PROVIDER_ERROR);
		fab_demote_step(c);
		fab_send_fin(c);
		return 1;
	}
	return 0;
}

/* Demoted, with the ring drained: finish (the fd goes to the kernel path). */
static int finish_if_drained(struct fab_conn *c)
{
	if (state_of(c) != FAB_DEMOTED || c->rx_consumed < c->rx_limit)
		return 0;
	shunt_conn_finish(&c->base, c->why ? c->why : SHUNT_R_PEER_DEMOTED);
	return 1;
}

/* ---- read and write ------------------------------------------------------- */

/* Copy len bytes between ring (of c->ring bytes, from stream position pos
 * on, wrapping) and the iovec (from its byte skip on): out of the ring when
 * to_ring is 0, into it otherwise.  Returns the bytes copied. */
static size_t ring_copy(struct fab_conn *c, uint8_t *ring, uint64_t pos, size_t len,
			const struct iovec *v, size_t nv, size_t skip, int to_ring)
{
	size_t done = 0;
	for (size_t i = 0; i < nv && done < len; i++) {
		if (skip >= v[i].iov_len) {
			skip -= v[i].iov_len;
			continue;
		}
		size_t room = v[i].iov_len - skip, want = len - done;
		size_t n = room < want ? room : want;
		uint8_t *app = (uint8_t *)v[i].iov_base + skip;
		skip = 0;
		while (n) {
			uint64_t off = (pos + done) & (c->ring - 1);
			size_t k = c->ring - off < n ? c->ring - off : n;
			if (to_ring)
				shunt_copy(ring + off, app, k);
			else
				shunt_copy(app, ring + off, k);
			app += k;
			n -= k;
			done += k;
		}
	}
	return done;
}

ssize_t fab_recvmsg(struct shunt_conn *b, struct msghdr *m, int flags)
{
	struct fab_conn *c = (struct fab_conn *)b;
	size_t total, done = 0;
	int go = shunt_recv_begin(&c->base, m, flags, &total);
	if (go <= 0)
		return go;
	int peek = flags & MSG_PEEK, all = (flags & MSG_WAITALL) && !peek;
	uint64_t deadline = 0;
	for (;;) {
		fab_lock(c);
		/* Bytes already in the ring: no call into the provider. */
		if (!(state_of(c) == FAB_UP && c->rx_arrived > c->rx_consumed && !c->failed &&
		      !c->got_demote))
			advance(c);
		int st = state_of(c);
		if (st == FAB_BROKEN) {
			fab_unlock(c);
			errno = ECONNRESET;
			return done ? (ssize_t)done : -1;
		}
		uint64_t limit =
			st == FAB_DEMOTED || st == FAB_DEMOTING ? c->rx_limit : c->rx_arrived;
		size_t n = 0;
		if (limit > c->rx_consumed) {
			size_t avail = (size_t)(limit - c->rx_consumed);
			n = ring_copy(c, c->buf + c->ring, c->rx_consumed,
				      avail < total - done ? avail : total - done, m->msg_iov,
				      m->msg_iovlen, done, 0);
			if (!peek) {
				c->rx_consumed += n;
				c->base.bytes_in += n;
				fab_credit_locked(c);
			}
		}
		int eof = st == FAB_UP && !n && c->peer_shut && c->rx_consumed >= c->peer_shut_at;
		int dead = 0, sock = 0;
		if (st == FAB_DEMOTING && !n) {
			/* Past the frozen ring the socket has the stream (the
			 * peer replays from there); its EOF or error counts
			 * only once the peer has answered: before that it is
			 * a death, which the exchange sorts out. */
			int t = shunt_tcp_peek(&c->base);
			sock = t == 1 || ((t == 0 || t == -1) && c->got_demote);
		}
		if (st == FAB_UP && !n && !eof && (c->base.tcp_hint || c->base.tcp_eof)) {
			/* The socket spoke while the fabric is up: FIN or RST of
			 * a peer that died without its CLOSE. */
			int t = shunt_tcp_peek(&c->base);
			c->base.tcp_hint = 0;
			if (t == 0 || t == -1) {
				fab_demote_now_locked(c, SHUNT_R_PEER_DEMOTED);
				dead = 1;
			}
		}
		fab_unlock(c);
		if (n) {
			done += n;
			if (!peek) {
				SHUNT_STAT_ADD(&c->base, bytes_in, n);
				SHUNT_STAT_ADD(&c->base, calls_in, 1);
			}
			if (!all || done == total)
				return (ssize_t)done;
			continue;
		}
		if (eof)
			return (ssize_t)done;
		if (dead)
			continue;
		if (sock && !done) {
			ssize_t r = REAL(recvmsg)(c->base.fd, m, flags | MSG_DONTWAIT);
			if (r > 0 && !peek)
				c->tcp_taken = 1;
			if (r >= 0 || errno != EAGAIN)
				return r;
		}
		if (st == FAB_DEMOTED) {
			if (done)
				return (ssize_t)done;
			finish_if_drained(c);
			return REAL(recvmsg)(c->base.fd, m, flags);
		}
		if (done && !all)
			return (ssize_t)done;
		ssize_t ret;
		if (shunt_conn_block(&c->base, POLLIN, flags, done, &deadline, &ret))
			return ret;
	}
}

ssize_t fab_sendmsg(struct shunt_conn *b, const struct msghdr *m, int flags)
{
	struct fab_conn *c = (struct fab_conn *)b;
	if (m->msg_iovlen > SHUNT_IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	size_t total = shunt_iov_total(m->msg_iov, m->msg_iovlen), done = 0;
	uint64_t deadline = 0;
	if (c->shut_wr)
		return shunt_broken_pipe(flags);
	if (total == 0)
		return 0;
	for (;;) {
		fab_lock(c);
		/* Right after a CQ read that emptied it (a wait's, a read's),
		 * with the way clear, write without another call into the
		 * provider: it would cost a system call per message between
		 * the application and the wire.  Once per CQ read, so a peer's
		 * CLOSE or DEMOTE that arrived since is seen by the next call,
		 * as a kernel socket's write after the peer's FIN succeeds
		 * and the next one fails. */
		if (c->cq_fresh && state_of(c) == FAB_UP && !c->failed && !c->got_demote &&
		    !c->sent_demote && !c->peer_closed && c->peer_ready &&
		    c->tx_posted == c->tx_head && c->tx_inflight < c->tx_depth &&
		    fab_tx_room(c->ring, c->tx_head, c->tx_acked))
			c->cq_fresh = 0;
		else
			advance(c);
		int st = state_of(c);
		if (st == FAB_DEMOTED || st == FAB_BROKEN) {
			fab_unlock(c);
			if (done)
				return (ssize_t)done;
			if (st == FAB_BROKEN) {
				errno = ECONNRESET;
				return -1;
			}
			finish_if_drained(c);
			return REAL(sendmsg)(c->base.fd, m, flags);
		}
		if (c->peer_closed) {
			fab_unlock(c);
			if (done)
				return (ssize_t)done;
			/* The kernel's answer, as on shm: it takes the first
			 * send after the peer's close (answered with RST) and
			 * fails the next with EPIPE, SIGPIPE unless
			 * MSG_NOSIGNAL.  Nobody reads the ring any more.  The
			 * peer's FIN follows its CLOSE at once: the socket
			 * must have it first, or the RST finds it established
			 * and the next send says ECONNRESET, not EPIPE. */
			if (!c->base.tcp_eof) {
				struct pollfd p = {c->base.fd, POLLRDHUP, 0};
				REAL(poll)(&p, 1, FIN_WAIT_MS);
			}
			return REAL(sendmsg)(c->base.fd, m, flags);
		}
		uint64_t space = fab_tx_room(c->ring, c->tx_head, c->tx_acked);
		size_t n = total - done < space ? total - done : (size_t)space;
		if (n) {
			n = ring_copy(c, c->buf, c->tx_head, n, m->msg_iov, m->msg_iovlen, done, 1);
			c->tx_head += n;
			c->base.bytes_out += n;
			if (st == FAB_DEMOTING)
				fab_demote_step(c); /* resent once the peer answers */
			else
				fab_flush(c);
		}
		fab_unlock(c);
		if (n) {
			done += n;
			SHUNT_STAT_ADD(&c->base, bytes_out, n);
			SHUNT_STAT_ADD(&c->base, calls_out, 1);
			if (done == total)
				return (ssize_t)done;
			continue;
		}
		ssize_t ret;
		if (shunt_conn_block(&c->base, POLLOUT, flags, done, &deadline, &ret))
			return ret;
	}
}

/* 1: the FIN waits (bytes may still have to go by TCP first, after a
 * demotion); the peer learns of EOF from SHUT on the endpoint. */
int fab_shutdown(struct shunt_conn *b, int how)
{
	struct fab_conn *c = (struct fab_conn *)b;
	int deferred = 0;
	fab_lock(c);
	int st = state_of(c);
	if ((how == SHUT_WR || how == SHUT_RDWR) && st != FAB_DEMOTED && st != FAB_BROKEN &&
	    !c->shut_wr) {
		c->shut_wr = 1;
		c->base.fin_pending = 1;
		deferred = 1;
		fab_flush(c);
	}
	if (how == SHUT_RD || how == SHUT_RDWR)
		c->base.rd_shut = 1;
	fab_unlock(c);
	return deferred;
}

int fab_ioctl(struct shunt_conn *b, unsigned long req, void *arg)
{
	struct fab_conn *c = (struct fab_conn *)b;
	int st = state_of(c);
	if (!arg || st == FAB_BROKEN || (st == FAB_DEMOTED && c->rx_consumed >= c->rx_limit)) {
		errno = ENOTTY;
		return -1;
	}
	if (st == FAB_DEMOTING && req == FIONREAD && c->rx_consumed >= c->rx_limit) {
		errno = ENOTTY; /* the socket's, now */
		return -1;
	}
	uint64_t limit = st == FAB_DEMOTED || st == FAB_DEMOTING ? c->rx_limit : c->rx_arrived;
	return shunt_ioctl_counts(req, arg, limit - c->rx_consumed, c->tx_head - c->tx_acked,
				  c->tx_head - c->tx_acked);
}

/* ---- readiness ------------------------------------------------------------ */

short fab_poll(struct shunt_conn *b, short events)
{
	struct fab_conn *c = (struct fab_conn *)b;
	short r = 0;
	/* Another thread in the data path holds the lock: answer from what
	 * is known; it will make progress. */
	if (!__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE)) {
		advance(c);
		fab_unlock(c);
	}
	int st = state_of(c);
	if (st == FAB_BROKEN)
		return (short)(POLLIN | POLLOUT | POLLERR | POLLHUP) & (events | POLLERR | POLLHUP);
	if (st == FAB_DEMOTED) {
		/* On TCP with ring bytes left to deliver: the socket answers
		 * for everything else. */
		if (finish_if_drained(c))
			return 0; /* the caller asks the kernel now */
		struct pollfd p = {__atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE),
				   (short)(events & ~(POLLIN | POLLRDNORM)), 0};
		if (p.fd >= 0)
			REAL(poll)(&p, 1, 0);
		return (short)((p.revents | POLLIN | POLLRDNORM) & (events | POLLERR | POLLHUP));
	}
	if (st == FAB_DEMOTING) {
		/* The frozen ring, then the socket (fab_recvmsg); writes are
		 * staged in the tx ring until they can be resent. */
		struct pollfd p = {__atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE),
				   POLLIN | POLLRDHUP, 0};
		if (p.fd >= 0)
			REAL(poll)(&p, 1, 0);
		if (c->rx_limit > c->rx_consumed || (p.revents & POLLIN) ||
		    ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) && c->got_demote))
			r |= POLLIN | POLLRDNORM;
		if (fab_tx_room(c->ring, c->tx_head, c->tx_acked) && !c->shut_wr)
			r |= POLLOUT | POLLWRNORM;
		return (short)(r & (events | POLLERR | POLLHUP));
	}
	if (c->rx_arrived > c->rx_consumed)
		r |= POLLIN | POLLRDNORM;
	if ((c->peer_shut && c->rx_consumed >= c->peer_shut_at) || c->base.rd_shut)
		r |= POLLIN | POLLRDNORM | POLLRDHUP;
	if (st == FAB_UP && !(r & POLLIN) && (c->base.tcp_hint || c->base.tcp_eof)) {
		/* A dead peer: the read finds out and demotes. */
		int t = shunt_tcp_peek(&c->base);
		if (t == 0 || t == -1)
			r |= POLLIN | POLLRDNORM;
		else
			c->base.tcp_hint = 0;
	}
	if (fab_tx_room(c->ring, c->tx_head, c->tx_acked) && !c->shut_wr)
		r |= POLLOUT | POLLWRNORM;
	if (c->peer_closed)
		r |= POLLOUT | POLLWRNORM; /* the write fails with EPIPE at once */
	return (short)(r & (events | POLLERR | POLLHUP));
}

int fab_arm(struct shunt_conn *b, short events, struct pollfd out[], int *timeout_ms)
{
	struct fab_conn *c = (struct fab_conn *)b;
	(void)events;
	int n = 0;
	int st = state_of(c);
	/* The same fds whatever the state: epoll registers them once, when
	 * the application adds the socket (asking for both events). */
	int rx = (events & (POLLIN | POLLRDNORM | POLLRDHUP)) != 0;
	int tx = (events & (POLLOUT | POLLWRNORM)) != 0;
	if (rx)
		__atomic_add_fetch(&c->waiters[FAB_RX], 1, __ATOMIC_RELAXED);
	if (tx)
		__atomic_add_fetch(&c->waiters[FAB_TX], 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (rx && c->kick[FAB_RX] >= 0)
		out[n++] = (struct pollfd){c->kick[FAB_RX], POLLIN, 0};
	if (tx && c->kick[FAB_TX] >= 0)
		out[n++] = (struct pollfd){c->kick[FAB_TX], POLLIN, 0};
	if (c->wait_fd >= 0) {
		struct fid *f = &c->cq->fid;
		struct fid_fabric *fab = fab_fabric();
		/* FI_SUCCESS: the CQ is empty and its fd will signal the next
		 * completion; otherwise there is something to read now. */
		if (st == FAB_UP && (!fab || fi_trywait(fab, &f, 1) != FI_SUCCESS))
			*timeout_ms = 0;
		out[n++] = (struct pollfd){c->wait_fd, POLLIN, 0};
	}
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	short tev = (short)(c->base.tcp_eof ? 0 : POLLIN | POLLRDHUP);
	if (st == FAB_DEMOTED)
		tev |= (short)(events & (POLLOUT | POLLWRNORM));
	if (st == FAB_DEMOTING && c->got_demote && c->tx_acked < c->tx_head)
		tev |= POLLOUT; /* the replay goes on when the socket has room */
	out[n++] = (struct pollfd){fd, tev, 0};
	/* The exchange is short and moves at each look: look often (epoll
	 * registers the socket for input only). */
	int limit = st == FAB_DEMOTING ? 10 : -1;
	/* Demoted with ring bytes left for the application: the socket
	 * answers for writing, but epoll registered it for input only. */
	if (st == FAB_DEMOTED && tx)
		limit = 10;
	if (st == FAB_OFFERED || st == FAB_ACCEPTING) {
		/* The passive thread kicks us when the connection is up; the
		 * offer's deadline is ours to watch. */
		limit = shunt_offer_ms_left(&c->base);
		if (st == FAB_ACCEPTING && limit < 10)
			limit = 10;
	}
	if (c->base.tcp_eof && (limit < 0 || limit > 100))
		limit = 100;
	/* A second sleeper of a role may miss a kick the first one drained. */
	if ((__atomic_load_n(&c->waiters[FAB_RX], __ATOMIC_RELAXED) > 1 ||
	     __atomic_load_n(&c->waiters[FAB_TX], __ATOMIC_RELAXED) > 1) &&
	    (limit < 0 || limit > 10))
		limit = 10;
	if (limit >= 0 && (*timeout_ms < 0 || *timeout_ms > limit))
		*timeout_ms = limit;
	return n;
}

void fab_disarm(struct shunt_conn *b, short events, const struct pollfd *fds, int n)
{
	struct fab_conn *c = (struct fab_conn *)b;
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP))
		__atomic_sub_fetch(&c->waiters[FAB_RX], 1, __ATOMIC_RELAXED);
	if (events & (POLLOUT | POLLWRNORM))
		__atomic_sub_fetch(&c->waiters[FAB_TX], 1, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		if (!fds[i].revents)
			continue;
		if (fds[i].fd == fd) {
			c->base.tcp_hint = 1;
			continue;
		}
		for (int r = 0; r < 2; r++) {
			uint64_t v;
			if (fds[i].fd == c->kick[r] && REAL(read)(c->kick[r], &v, sizeof v) < 0) {
				/* another waiter of the role drained it */
			}
		}
	}
}

uint64_t fab_progress(struct shunt_conn *b)
{
	struct fab_conn *c = (struct fab_conn *)b;
	return c->rx_arrived + c->tx_acked + (uint64_t)state_of(c) +
	       (uint64_t)c->peer_shut;
}

const struct shunt_conn_data_ops fab_data_ops = {
	.recvmsg = fab_recvmsg,
	.sendmsg = fab_sendmsg,
	.shutdown = fab_shutdown,
	.ioctl = fab_ioctl,
};

/* No presence (the peer is on another host: the spin budget alone
 * decides) and no futex sleep (the CQ's fd is armed). */
const struct shunt_conn_wait_ops fab_wait_ops = {
	.poll = fab_poll,
	.arm = fab_arm,
	.disarm = fab_disarm,
	.progress = fab_progress,
};
