/* The shm transport's data path: every read and write call of an
 * accelerated connection ends here, and so do poll/select/epoll readiness.
 *
 * No system call while data or space is in the ring.  When a call would
 * block it waits in core/shunt_wait.c: a spin while the peer runs on
 * another CPU (each end publishes where it is: shm_presence), then a sleep
 * on a futex word of the ring (shm_sleep) that the peer moves when it
 * writes, reads or changes the state.  Once the peer closed, or the
 * connection is leaving, the socket speaks first, so the wait arms the
 * wake socket and the TCP socket instead (shm_arm), as poll/select/epoll
 * always do. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_bulk.h"
#include "core/shunt_clock.h"
#include "core/shunt_iov.h"
#include "core/shunt_log.h"
#include "core/shunt_real.h"
#include "core/shunt_rendezvous.h"
#include "core/shunt_wait.h"
#include "shm_internal.h"

/* A poll/epoll wait with no wake socket (none could be bound: out of fds)
 * looks again this often instead of sleeping with no wakeup. */
#define SHM_NOFD_POLL_MS 5

static inline uint32_t state_of(struct shm_conn *c)
{
	return __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
}

/* The socket (shunt_tcp_peek): bytes waiting are a demotion's replay, or
 * a peer that never ran shunt; a number closed in another thread answers
 * -2, and the rings still work. */
static int tcp_peek(struct shm_conn *c)
{
	return shunt_tcp_peek(&c->base);
}

/* Demote this end when it is due: the peer demoted or refused the offer
 * (this end then replays its part), or a client's offer is over.  1 when
 * this end is demoted now. */
static int demote_if_due(struct shm_conn *c)
{
	uint32_t st = state_of(c);
	if (st >= SHM_DEMOTING) {
		/* A server that committed has written its pid (before the
		 * demoting CAS, which releases it); one that refused never
		 * does.  Our own flag may have missed a short COMMITTED. */
		if (!c->why)
			c->why = c->committed || __atomic_load_n(&c->hdr->pid[SHM_SERVER],
								 __ATOMIC_RELAXED)
					 ? SHUNT_R_PEER_DEMOTED
					 : SHUNT_R_DECLINED;
		shm_replay(c);
		return 1;
	}
	if (st == SHM_COMMITTED)
		c->committed = 1;
	if (st == SHM_OFFERED && c->side == SHM_CLIENT) {
		/* A server without shunt answers on TCP (or closes); one that
		 * never answers costs offer_timeout_ms. */
		if (shunt_offer_over(&c->base)) {
			shm_demote(&c->base, SHUNT_R_OFFER_TIMEOUT);
			return 1;
		}
	}
	return 0;
}

/* This end is demoted: finish.  Nothing is left in the rx ring for us, the
 * peer replays over TCP what we had not consumed.  1 when finished. */
static int finish(struct shm_conn *c)
{
	/* Not while a stash holds bytes: they come before the socket's. */
	if (shm_stash_left(c))
		return 0;
	shunt_conn_finish(&c->base, c->why ? c->why : SHUNT_R_PEER_DEMOTED);
	return 1;
}

/* A large transfer moves through the ring in pieces, each published (head
 * or tail) and its waiters woken before the next is copied, so the peer
 * copies the first piece out while this end copies the second in.  Whole,
 * a 1 MiB write filled a 1 MiB ring in one copy that the reader could not
 * start on, then waited (asleep: longer than a spin's budget) while the
 * reader copied it all out: the two copies ran one after the other, and
 * each end paid a wakeup per write (31 against 117 Gbit/s for 64 KiB
 * writes).  A quarter of the ring at most, so a piece always finds room
 * while the reader works on the one before. */
#define SHM_PIECE (128u * 1024u)

static inline size_t piece_of(const struct shm_conn *c, const struct shm_ring *r)
{
	(void)c;
	size_t q = (size_t)(r->size / 4);
	return q < SHM_PIECE ? (q ? q : 1) : SHM_PIECE;
}

/* v cut to at most max bytes: how many entries are left. */
static inline size_t iov_cap(struct iovec *v, size_t k, size_t max)
{
	size_t t = 0;
	for (size_t i = 0; i < k; i++) {
		if (v[i].iov_len >= max - t) {
			v[i].iov_len = max - t;
			return i + 1;
		}
		t += v[i].iov_len;
	}
	return k;
}

/* rx_take, tx_put and plain_sailing are inlined wherever they are called:
 * they are on every transfer, and their calls and frames were some 50
 * instructions of a 64-byte call's 310 (callgrind). */

/* A read's step under the ring's read lock: up to the iovecs' length of
 * what the ring holds (0: nothing), counted and the peer's space waiters
 * woken.  -1 when the connection is leaving: the caller demotes, and every
 * byte left comes again by TCP. */
static inline __attribute__((always_inline)) ssize_t
rx_take(struct shm_conn *c, const struct iovec *v, size_t k, int peek)
{
	shm_lock(&c->rx.ctl->rlock, &c->lk);
	/* Under the lock a demoting peer waits to see free: once it has,
	 * every byte left in the ring comes again by TCP.  (This load and the
	 * peer's CAS of the state are SEQ_CST, as are our lock and its look
	 * at it: one of the two sees the other.) */
	if (__atomic_load_n(&c->hdr->state, __ATOMIC_SEQ_CST) >= SHM_DEMOTING) {
		shm_unlock(&c->rx.ctl->rlock);
		return -1;
	}
	size_t n = k == 1 && !peek ? shm_ring_get(&c->rx, v->iov_base, v->iov_len)
				   : shm_ring_read(&c->rx, v, k, peek);
	/* The fence the wake check needs, in the unlock's instruction where
	 * it can be (a barrier less per call). */
	if (n && !peek)
		shm_unlock_fence(&c->rx.ctl->rlock);
	else
		shm_unlock(&c->rx.ctl->rlock);
	if (n && !peek) {
		c->base.bytes_in += n;
		SHUNT_STAT_ADD(&c->base, bytes_in, n);
		SHUNT_STAT_ADD(&c->base, calls_in, 1);
		shm_wake_space(c);
	}
	return (ssize_t)n;
}

ssize_t shm_recvmsg(struct shunt_conn *b, struct msghdr *m, int flags)
{
	struct shm_conn *c = (struct shm_conn *)b;
	size_t total, done = 0;
	int go = shunt_recv_begin(&c->base, m, flags, &total);
	if (go <= 0)
		return go;
	int peek = flags & MSG_PEEK, all = (flags & MSG_WAITALL) && !peek;
	uint64_t deadline = 0; /* 0: not asked yet */
	struct iovec v[SHUNT_IOV_MAX];
	for (;;) {
		if (c->demoted && shm_stash_left(c)) {
			if (done)
				return (ssize_t)done;
			ssize_t r = shm_stash_recv(c, m, flags, total);
			if (r != SHM_STASH_GONE)
				return r;
		}
		if (c->demoted && finish(c)) {
			if (done)
				return (ssize_t)done;
			SHUNT_DEBUG("fd=%d read from TCP after the demotion", c->base.fd);
			ssize_t r = REAL(recvmsg)(c->base.fd, m, flags);
			if (r > 0 && !peek) {
				SHUNT_STAT_ADD(&c->base, bytes_in, (uint64_t)r);
				SHUNT_STAT_ADD(&c->base, calls_in, 1);
			}
			return r;
		}
		/* An empty ring is left alone: the lock would guard no byte,
		 * and what follows asks the state itself.  Most blocking reads
		 * start so (the answer has not come yet), and the lock's
		 * locked instruction would wait for the request just sent to
		 * reach the peer's CPU. */
		ssize_t n = 0;
		if (shm_ring_used(&c->rx)) {
			size_t k = shunt_iov_skip(m->msg_iov, m->msg_iovlen, done, v);
			if (!peek)
				k = iov_cap(v, k, piece_of(c, &c->rx));
			n = rx_take(c, v, k, peek);
			if (n < 0) {
				if (done)
					return (ssize_t)done;
				demote_if_due(c);
				continue;
			}
		}
		if (n) {
			done += (size_t)n;
			/* A piece: more may be there already. */
			if (done == total || (!all && (peek || !shm_ring_used(&c->rx))))
				return (ssize_t)done;
			continue;
		}
		if (c->demoted)
			continue;
		if (!shm_ring_sane(&c->rx)) {
			errno = ECONNRESET;
			return done ? (ssize_t)done : -1;
		}
		if (demote_if_due(c))
			continue;
		/* EOF only once the ring is seen empty after the flag: the
		 * peer publishes its last bytes before it shuts down. */
		if (__atomic_load_n(&c->rx.ctl->wr_shut, __ATOMIC_ACQUIRE)) {
			if (shm_ring_used(&c->rx))
				continue;
			SHUNT_DEBUG("fd=%d EOF: peer shut down (done=%zu)", c->base.fd, done);
			return (ssize_t)done; /* peer's shutdown(SHUT_WR) */
		}
		if (state_of(c) == SHM_COMMITTED &&
		    (c->base.tcp_hint || c->base.tcp_eof ||
		     __atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE))) {
			int t = tcp_peek(c);
			if (t <= 0 && t != -2 && shm_ring_used(&c->rx))
				continue;
			if (t == 0) {
				SHUNT_DEBUG("fd=%d EOF: TCP FIN (done=%zu hint=%d eof=%d closed=%u)",
					    c->base.fd, done, c->base.tcp_hint, c->base.tcp_eof,
					    c->rx.ctl->closed_hint);
				return (ssize_t)done; /* the last holder closed: EOF */
			}
			if (t == -1)
				return done ? (ssize_t)done : -1;
			c->base.tcp_hint = 0;
			if (t == 1)
				continue; /* replay bytes: the state says DEMOTING */
		}
		if (done && !all)
			return (ssize_t)done;
		ssize_t ret;
		/* A large buffer may take the writer's bytes in one copy. */
		int cs, posted = 0;
		if (!peek && total - done >= SHUNT_CMA_MIN_LOW && !c->base.nonblock) {
			size_t k = shunt_iov_skip(m->msg_iov, m->msg_iovlen, done, v);
			posted = k && shm_cma_post(c, v[0].iov_base, v[0].iov_len, &cs);
		}
		int stop = shunt_conn_block(&c->base, POLLIN, flags, done, &deadline, &ret);
		if (posted) {
			int fault;
			size_t got = shm_cma_settle(c, cs, &fault);
			if (got) {
				done += got;
				if (!all || done == total)
					return (ssize_t)done;
				continue;
			}
			if (fault) {
				if (done)
					return (ssize_t)done;
				errno = EFAULT;
				return -1;
			}
		}
		if (stop)
			return ret;
	}
}

/* Has the peer gone for good?  Its close is only a hint (the socket may
 * live in another process); the TCP FIN of the last close is the proof. */
static int peer_gone(struct shm_conn *c)
{
	if (!__atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE) && !c->base.tcp_hint &&
	    !c->base.tcp_eof)
		return 0;
	if (!c->base.tcp_eof) {
		int t = tcp_peek(c);
		if (t == -1)
			return 1;
	}
	if (!c->base.tcp_eof)
		return 0;
	if (__atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE))
		return 1;
	/* FIN without a close hint: the peer only shut down its side, or it
	 * died (SIGKILL closes without running shunt).  Its hold on the slot
	 * (its process's tag) tells, in whatever PID namespace it ran (a pid
	 * would not). */
	return !shm_arena_side_held(&c->slot, !c->side);
}

/* A write's step under the ring's write lock: as much of the iovecs as
 * fits (0: none), counted and the peer's readers woken.  Under the lock
 * because a demotion replays under it too: no byte enters the ring after
 * the replay took its snapshot. */
static inline __attribute__((always_inline)) size_t
tx_put(struct shm_conn *c, const struct iovec *v, size_t k, int streaming)
{
	shm_lock(&c->tx.ctl->wlock, &c->lk);
	size_t n = 0;
	if (!c->demoted)
		n = k == 1 && !streaming ? shm_ring_put(&c->tx, v->iov_base, v->iov_len)
					 : shm_ring_write_bulk(&c->tx, v, k, 0, streaming);
	if (!n) {
		shm_unlock(&c->tx.ctl->wlock);
		return 0;
	}
	shm_unlock_fence(&c->tx.ctl->wlock);
	c->base.bytes_out += n;
	SHUNT_STAT_ADD(&c->base, bytes_out, n);
	SHUNT_STAT_ADD(&c->base, calls_out, 1);
	shm_wake_data(c);
	return n;
}

/* The send loop: all of m's total bytes, unless it must stop first;
 * streaming: the copy bulk sends use now (core/shunt_bulk.h). */
static ssize_t send_all(struct shm_conn *c, const struct msghdr *m, int flags, size_t total,
			int streaming)
{
	size_t done = 0;
	uint64_t deadline = 0; /* 0: not asked yet */
	struct iovec v[SHUNT_IOV_MAX];
	for (;;) {
		if (c->demoted) {
			if (done)
				return (ssize_t)done;
			finish(c);
			ssize_t r = REAL(sendmsg)(c->base.fd, m, flags);
			if (r > 0) {
				SHUNT_STAT_ADD(&c->base, bytes_out, (uint64_t)r);
				SHUNT_STAT_ADD(&c->base, calls_out, 1);
			}
			return r;
		}
		if (demote_if_due(c))
			continue;
		if (peer_gone(c)) {
			if (done)
				return (ssize_t)done;
			/* The kernel's answer, whatever it is: it takes the
			 * first send after the peer's close (which answers
			 * it with RST) and fails only the next, with EPIPE
			 * and SIGPIPE unless MSG_NOSIGNAL.  Nobody reads
			 * the ring any more, so nothing overtakes it. */
			ssize_t r = REAL(sendmsg)(c->base.fd, m, flags);
			if (r > 0) {
				SHUNT_STAT_ADD(&c->base, bytes_out, (uint64_t)r);
				SHUNT_STAT_ADD(&c->base, calls_out, 1);
			}
			return r;
		}
		size_t k = shunt_iov_skip(m->msg_iov, m->msg_iovlen, done, v);
		/* A reader waiting with a large buffer: one copy into it. */
		if (total - done >= SHUNT_CMA_MIN_LOW) {
			size_t n = shm_cma_push(c, v, k);
			if (n) {
				done += n;
				if (done == total)
					return (ssize_t)done;
				continue;
			}
		}
		k = iov_cap(v, k, piece_of(c, &c->tx));
		size_t n = tx_put(c, v, k, streaming);
		if (n) {
			done += n;
			if (done == total)
				return (ssize_t)done;
			continue;
		}
		if (c->demoted)
			continue;
		if (shm_ring_space(&c->tx) == 0 && !shm_ring_sane(&c->tx)) {
			errno = ECONNRESET;
			return done ? (ssize_t)done : -1;
		}
		ssize_t ret;
		if (shunt_conn_block(&c->base, POLLOUT, flags, done, &deadline, &ret))
			return ret;
	}
}

ssize_t shm_sendmsg(struct shunt_conn *b, const struct msghdr *m, int flags)
{
	struct shm_conn *c = (struct shm_conn *)b;
	if (m->msg_iovlen > SHUNT_IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	size_t total = shunt_iov_total(m->msg_iov, m->msg_iovlen);
	if (__atomic_load_n(&c->tx.ctl->wr_shut, __ATOMIC_RELAXED))
		return shunt_broken_pipe(flags);
	if (total == 0)
		return 0;
	if (total < SHUNT_BULK_MIN || !SHUNT_BULK_CHOOSES)
		return send_all(c, m, flags, total, 0);
	/* A bulk send is timed, whole (its waits for space are the reader's
	 * pace): two clock reads against microseconds of copying.  Whether
	 * the ends take turns on the CPUs is told by its waits (did it give
	 * the CPU away?), where the peer last ran, and whether the machine has
	 * more work than CPUs. */
	uint32_t gave = c->base.gave_cpu;
	uint64_t t0 = shunt_now_ns();
	ssize_t r = send_all(c, m, flags, total, shunt_bulk_streaming(&c->bulk));
	if (r > 0) {
		uint64_t t1 = shunt_now_ns();
		int pc = __atomic_load_n(&c->hdr->pres[!c->side].cpu, __ATOMIC_RELAXED);
		int turn = c->base.gave_cpu != gave || pc < 0 || pc == sched_getcpu() ||
			   shunt_spin_oversubscribed_now(t1);
		uint8_t was = c->bulk.streaming;
		shunt_bulk_note(&c->bulk, (uint64_t)r, t1 - t0, t1, turn);
		if (c->bulk.streaming != was)
			SHUNT_DEBUG("fd=%d bulk sends now copy with %s stores", c->base.fd,
				    c->bulk.streaming ? "streaming" : "cached");
	}
	return r;
}

/* Nothing the loops of shm_recvmsg and send_all would stop for before
 * they move bytes or wait: committed, neither end shut down or closed, the
 * socket quiet.  What is left of those loops' work then is the step under
 * the lock, which the one-buffer calls below take directly. */
static inline __attribute__((always_inline)) int plain_sailing(struct shm_conn *c)
{
	if (c->demoted || state_of(c) != SHM_COMMITTED || c->base.tcp_hint || c->base.tcp_eof ||
	    __atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE))
		return 0;
	c->committed = 1; /* as demote_if_due notes it */
	return 1;
}

ssize_t shm_recv(struct shunt_conn *b, void *buf, size_t n, int flags)
{
	struct shm_conn *c = (struct shm_conn *)b;
	struct iovec v = {buf, n};
	/* Flags that change what is read, an empty buffer or a shut read
	 * side: the general loop. */
	if (!(flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL)) && n && !c->base.rd_shut) {
		uint64_t deadline = 0; /* 0: not asked yet */
		for (;;) {
			uint64_t used = shm_ring_used(&c->rx);
			if (used > c->rx.size || !plain_sailing(c))
				break;
			if (used) {
				size_t piece = piece_of(c, &c->rx), got = 0;
				for (;;) {
					struct iovec p = {(char *)buf + got, n - got};
					if (p.iov_len > piece)
						p.iov_len = piece;
					ssize_t r = rx_take(c, &p, 1, 0);
					if (r <= 0)
						break;
					got += (size_t)r;
					if (got == n || !shm_ring_used(&c->rx))
						break;
				}
				if (got)
					return (ssize_t)got;
				break; /* leaving */
			}
			/* Empty, and the peer still writes: wait, unless the
			 * call must not (the loop then says EAGAIN). */
			if ((flags & MSG_DONTWAIT) ||
			    __atomic_load_n(&c->rx.ctl->wr_shut, __ATOMIC_ACQUIRE))
				break;
			ssize_t ret;
			int cs, posted = n >= SHUNT_CMA_MIN_LOW && !c->base.nonblock &&
					 shm_cma_post(c, buf, n, &cs);
			int stop = shunt_conn_block(&c->base, POLLIN, flags, 0, &deadline, &ret);
			if (posted) {
				int fault;
				size_t got = shm_cma_settle(c, cs, &fault);
				if (got)
					return (ssize_t)got;
				if (fault) {
					errno = EFAULT;
					return -1;
				}
			}
			if (stop)
				return ret;
		}
	}
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	return shm_recvmsg(b, &m, flags);
}

ssize_t shm_send(struct shunt_conn *b, const void *buf, size_t n, int flags)
{
	struct shm_conn *c = (struct shm_conn *)b;
	struct iovec v = {(void *)buf, n};
	/* A bulk send is timed as a whole (shm_sendmsg); a shut write side
	 * fails there. */
	size_t put = 0;
	if (n && n < SHUNT_BULK_MIN && !__atomic_load_n(&c->tx.ctl->wr_shut, __ATOMIC_RELAXED) &&
	    plain_sailing(c)) {
		put = tx_put(c, &v, 1, 0);
		if (put == n)
			return (ssize_t)n;
		/* The ring is full: the loop waits for space, and a send
		 * that cannot wait returns what went. */
		v.iov_base = (char *)buf + put;
		v.iov_len = n - put;
	}
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	ssize_t r = shm_sendmsg(b, &m, flags);
	if (!put)
		return r;
	return r < 0 ? (ssize_t)put : (ssize_t)put + r;
}

/* Returns 1 when the FIN must wait (the caller then skips the socket's
 * shutdown): bytes in the ring may still have to go by TCP (a declined
 * offer, a later demotion), and must go before FIN. */
int shm_shutdown(struct shunt_conn *b, int how)
{
	struct shm_conn *c = (struct shm_conn *)b;
	int deferred = 0;
	if (how == SHUT_WR || how == SHUT_RDWR) {
		uint32_t st = state_of(c);
		if (st >= SHM_DEMOTING)
			demote_if_due(c); /* replay first, if it is ours to do */
		if (c->demoted)
			goto rd;
		/* The peer learns of EOF from the ring flag.  The FIN waits
		 * until this end leaves the rings (after its replay, if the
		 * connection is ever demoted) or closes: sent now, it could
		 * overtake bytes that may still have to go by TCP. */
		c->base.fin_pending = 1;
		deferred = 1;
		__atomic_store_n(&c->tx.ctl->wr_shut, 1, __ATOMIC_RELEASE);
		shm_wake_peer(c);
	}
rd:
	if (how == SHUT_RD || how == SHUT_RDWR)
		c->base.rd_shut = 1;
	return deferred;
}

int shm_ioctl(struct shunt_conn *b, unsigned long req, void *arg)
{
	struct shm_conn *c = (struct shm_conn *)b;
	if (c->demoted && arg && req == FIONREAD && shm_stash_left(c)) {
		int k = 0;
		if (REAL(ioctl)(c->base.fd, FIONREAD, &k) < 0)
			k = 0;
		*(int *)arg = k + (int)shm_stash_left(c);
		return 0;
	}
	if (c->demoted || !arg) {
		errno = ENOTTY;
		return -1;
	}
	/* SIOCOUTQ counts what the peer has not acknowledged yet.  A byte in
	 * the ring is already where the peer reads it, as a byte in its
	 * receive queue is, acknowledged: none.  (A program that waits for
	 * SIOCOUTQ to reach 0 before it closes would otherwise wait for its
	 * peer to read.) */
	return shunt_ioctl_counts(req, arg, shm_ring_used(&c->rx), 0,
				  c->tx.size - shm_ring_space(&c->tx));
}

short shm_poll(struct shunt_conn *b, short events)
{
	struct shm_conn *c = (struct shm_conn *)b;
	short r = 0;
	if (!c->demoted && demote_if_due(c) && !c->demoted)
		return 0;
	if (c->demoted) {
		if (shm_stash_left(c))
			return shm_stash_poll(c, events);
		finish(c);
		return 0; /* the caller now asks the kernel */
	}
	if (shm_ring_used(&c->rx) || (c->cma_posted && shm_cma_done(c)))
		r |= POLLIN | POLLRDNORM;
	if (__atomic_load_n(&c->rx.ctl->wr_shut, __ATOMIC_ACQUIRE) || c->base.rd_shut)
		r |= POLLIN | POLLRDNORM | POLLRDHUP;
	if (!(r & POLLIN) && state_of(c) == SHM_COMMITTED &&
	    (c->base.tcp_hint || __atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE))) {
		int t = c->base.tcp_eof ? 0 : tcp_peek(c);
		if (t == 0)
			r |= POLLIN | POLLRDNORM | POLLRDHUP;
		else if (t == -1)
			r |= POLLIN | POLLERR | POLLHUP;
		else
			c->base.tcp_hint = 0;
	}
	/* Only when asked: the tail is the line the peer's reads write, and
	 * a spin waiting for input that looked at it would take that line
	 * from the peer on every pass. */
	if ((events & (POLLOUT | POLLWRNORM)) && shm_ring_space(&c->tx) &&
	    !__atomic_load_n(&c->tx.ctl->wr_shut, __ATOMIC_RELAXED))
		r |= POLLOUT | POLLWRNORM;
	return (short)(r & (events | POLLERR | POLLHUP));
}

int shm_arm(struct shunt_conn *b, short events, struct pollfd out[], int *timeout_ms)
{
	struct shm_conn *c = (struct shm_conn *)b;
	int n = 0;
	/* A poll/epoll waiter about to sleep: the peer must not spin for it
	 * (unless it wakes it). */
	shunt_presence_set(&c->hdr->pres[c->side], SHUNT_AT_SLEEP, sched_getcpu());
	/* Before counting ourselves in: a waker that sees us waiting after
	 * this finds no wakeup pending and sends one.  (One sent earlier may
	 * have gone to a socket not bound yet, or to another thread.) */
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP))
		__atomic_store_n(&c->hdr->wake_pending[c->side][SHM_WAKE_RX], 0, __ATOMIC_RELAXED);
	if (events & (POLLOUT | POLLWRNORM))
		__atomic_store_n(&c->hdr->wake_pending[c->side][SHM_WAKE_TX], 0, __ATOMIC_RELAXED);
	/* Wake sockets are bound on first need: a connection that only ever
	 * blocks in read/write (futex) spends no fd on them.  One that cannot
	 * be bound (out of fds) makes the wait look again every few ms rather
	 * than sleep with no wakeup. */
	int nofd = 0;
	/* Release: a waker that sees us counted in sees the id of the wake
	 * socket bound just before (shm_wake.c). */
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP)) {
		int fd = shm_wake_fd(c, SHM_WAKE_RX);
		__atomic_add_fetch(&c->rx.ctl->reader_fd, 1, __ATOMIC_RELEASE);
		if (fd >= 0)
			out[n++] = (struct pollfd){fd, POLLIN, 0};
		else
			nofd = 1;
	}
	if (events & (POLLOUT | POLLWRNORM)) {
		int fd = shm_wake_fd(c, SHM_WAKE_TX);
		__atomic_add_fetch(&c->tx.ctl->writer_fd, 1, __ATOMIC_RELEASE);
		if (fd >= 0)
			out[n++] = (struct pollfd){fd, POLLIN, 0};
		else
			nofd = 1;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* Once EOF has been seen the socket stays readable: watching it would
	 * spin.  POLLERR/POLLHUP are reported whatever the events. */
	out[n++] = (struct pollfd){c->base.fd, (short)(c->base.tcp_eof ? 0 : POLLIN | POLLRDHUP), 0};
	int limit = -1;
	if (state_of(c) == SHM_OFFERED && c->side == SHM_CLIENT)
		limit = shunt_offer_ms_left(&c->base);
	/* A dead peer sends no FIN we can still see after EOF; look again now
	 * and then.  So does a second waiter of the same role, which may have
	 * missed a wakeup the first one drained. */
	if (c->base.tcp_eof || __atomic_load_n(&c->rx.ctl->reader_fd, __ATOMIC_RELAXED) > 1 ||
	    __atomic_load_n(&c->tx.ctl->writer_fd, __ATOMIC_RELAXED) > 1)
		limit = limit < 0 || limit > 100 ? 100 : limit;
	if (nofd)
		limit = limit < 0 || limit > SHM_NOFD_POLL_MS ? SHM_NOFD_POLL_MS : limit;
	/* Between network namespaces a wakeup reaches a wake socket by its
	 * name in the rundir, which anyone who can write there may unlink (a
	 * cleaner, an operator's rm -rf): then it is lost, and only looking
	 * again ends the sleep.  (An abstract one has no name to lose; the
	 * look also bounds a wakeup that went to another process's socket
	 * after a fork.) */
	if (limit < 0 || limit > SHUNT_RECHECK_MAX_MS)
		limit = SHUNT_RECHECK_MAX_MS;
	if (limit >= 0 && (*timeout_ms < 0 || *timeout_ms > limit))
		*timeout_ms = limit;
	return n;
}

void shm_disarm(struct shunt_conn *b, short events, const struct pollfd *fds, int n)
{
	struct shm_conn *c = (struct shm_conn *)b;
	__atomic_store_n(&c->hdr->pres[c->side].where, SHUNT_AT_APP, __ATOMIC_RELEASE);
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP))
		__atomic_sub_fetch(&c->rx.ctl->reader_fd, 1, __ATOMIC_RELAXED);
	if (events & (POLLOUT | POLLWRNORM))
		__atomic_sub_fetch(&c->tx.ctl->writer_fd, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++) {
		if (!fds[i].revents)
			continue;
		if (fds[i].fd == c->base.fd) {
			c->base.tcp_hint = 1;
			continue;
		}
		/* The pending flag keeps it to about one datagram per sleep:
		 * take one.  A second one left behind only makes the next wait
		 * return at once and be drained then; an EAGAIN probe on every
		 * wakeup would cost more. */
		char buf[64];
		REAL(recv)(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
	}
}

uint64_t shm_progress(struct shunt_conn *b)
{
	struct shm_conn *c = (struct shm_conn *)b;
	return __atomic_load_n(&c->rx.ctl->head, __ATOMIC_ACQUIRE) +
	       __atomic_load_n(&c->tx.ctl->tail, __ATOMIC_ACQUIRE);
}

const struct shunt_presence *shm_presence(struct shunt_conn *b, struct shunt_presence **mine)
{
	struct shm_conn *c = (struct shm_conn *)b;
	*mine = &c->hdr->pres[c->side];
	return &c->hdr->pres[!c->side];
}

/* A futex sleep found nothing new after timeout_ms: the peer may have died
 * (a SIGKILL closes its socket without a word in the rings).  0 when the
 * socket says something (the data path looks), SHUNT_SLEEP_AGAIN when it
 * is quiet. */
static int recheck(struct shm_conn *c)
{
	if (c->base.tcp_eof)
		return 0;
	int t = tcp_peek(c);
	if (t == -2)
		return SHUNT_SLEEP_AGAIN;
	c->base.tcp_hint = 1;
	return 0;
}

int shm_sleep(struct shunt_conn *b, short ev, int timeout_ms)
{
	struct shm_conn *c = (struct shm_conn *)b;
	/* Once leaving, the socket speaks first (the bytes of a replay); after
	 * the peer closed an fd, the FIN of its last close comes there, not in
	 * the rings.  Only an armed wait hears it at once. */
	uint32_t st = state_of(c);
	if (c->demoted || (st != SHM_COMMITTED && st != SHM_OFFERED))
		return SHUNT_SLEEP_ARM;
	if (__atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE))
		/* The hint comes after the FIN when the peer closed with
		 * close(): usually it is there, and binding a wake socket to
		 * find it would cost more than this look. */
		return shm_poll(b, ev) ? 0 : SHUNT_SLEEP_ARM;
	/* A client waiting for the commit sleeps on the futex as well: the
	 * server's accept() moves the state and wakes it, and binding a wake
	 * socket for that one wait cost five system calls per connection.
	 * What the futex cannot hear is a server without shunt behind a
	 * registered address that speaks first on TCP: the first recheck
	 * (10 ms) hears it, and the offer's deadline bounds the sleep. */
	if (st == SHM_OFFERED) {
		if (c->side != SHM_CLIENT)
			return SHUNT_SLEEP_ARM;
		int left = shunt_offer_ms_left(&c->base);
		if (left <= 0)
			return 0; /* over: the data path demotes */
		if (timeout_ms < 0 || timeout_ms > left)
			timeout_ms = left;
	}
	int rd = (ev & (POLLIN | POLLRDNORM | POLLRDHUP)) != 0;
	uint32_t *seq = rd ? &c->rx.ctl->data_seq : &c->tx.ctl->space_seq;
	uint32_t *cnt = rd ? &c->rx.ctl->reader_sleep : &c->tx.ctl->writer_sleep;
	uint32_t v = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
	__atomic_add_fetch(cnt, 1, __ATOMIC_RELAXED);
	/* Pairs with the waker's fence (shm_wake.c): either it sees us
	 * counted in and moves seq, or we see what it published. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int r = 0;
	if (!shm_poll(b, ev) && !__atomic_load_n(&b->left, __ATOMIC_ACQUIRE)) {
		struct timespec ts, *tp = NULL;
		if (timeout_ms >= 0) {
			ts.tv_sec = timeout_ms / 1000;
			ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000;
			tp = &ts;
		}
		if (REAL(syscall)(SYS_futex, seq, FUTEX_WAIT, v, tp, NULL, 0) < 0) {
			if (errno == EINTR)
				r = -1;
			else if (errno == ETIMEDOUT)
				r = recheck(c);
			/* EAGAIN: seq moved before we slept: look again. */
		}
	}
	int err = errno;
	__atomic_sub_fetch(cnt, 1, __ATOMIC_RELAXED);
	errno = err;
	return r;
}

const struct shunt_conn_data_ops shm_data_ops = {
	.recvmsg = shm_recvmsg,
	.sendmsg = shm_sendmsg,
	.recv = shm_recv,
	.send = shm_send,
	.shutdown = shm_shutdown,
	.ioctl = shm_ioctl,
};

const struct shunt_conn_wait_ops shm_wait_ops = {
	.poll = shm_poll,
	.arm = shm_arm,
	.disarm = shm_disarm,
	.progress = shm_progress,
	.presence = shm_presence,
	.sleep = shm_sleep,
};
