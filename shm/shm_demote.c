/* Demoting an shm connection: each end replays over TCP what the other
 * has not consumed, then uses the socket alone; bytes nobody is left to
 * replay go to a spill.
 *
 * Exact because a consumer checks the state under its ring's read lock, and
 * the demoter, after turning the state DEMOTING, waits to see that lock
 * free before it takes its snapshot: from then on the peer consumes nothing
 * more.  The demoter never takes the peer's lock (shm_lock_wait_free): a
 * peer killed inside it, or one that wrote anything there, cannot hold it
 * up.  As both ends do the same, two ends demoting at once (exec on both
 * sides) lose nothing either.  Nor do they wait on each other: a replay
 * that finds the socket full reads what the peer's replay brings into a
 * stash meanwhile (bytes the application gets before the socket's). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "core/shunt_iov.h"
#include "core/shunt_log.h"
#include "core/shunt_real.h"
#include "core/shunt_spill.h"
#include "shm_internal.h"

/* While our replay waits for room, the peer may be replaying too, and be
 * waiting for us to read: take what the socket holds into the stash.  The
 * peer's replay is at most its ring (our rx ring's size): the stash stops
 * there, so a peer that sends on and on after it cannot grow it.  Only
 * bytes the socket has (FIONREAD): its EOF or error stays there for the
 * application.  0 when it took nothing. */
static int stash_peer_replay(struct shm_conn *c)
{
	size_t cap = (size_t)c->rx.size;
	int took = 0;
	for (;;) {
		int avail = 0;
		if (c->stash_len >= cap || REAL(ioctl)(c->base.fd, FIONREAD, &avail) < 0 ||
		    avail <= 0)
			return took;
		size_t n = cap - c->stash_len;
		if (n > (size_t)avail)
			n = (size_t)avail;
		/* Grown as it fills (a ring may be 1 GiB): doubling, within
		 * the cap. */
		if (c->stash_len + n > c->stash_cap) {
			size_t want = c->stash_cap ? c->stash_cap * 2 : 65536;
			if (want < c->stash_len + n)
				want = c->stash_len + n;
			if (want > cap)
				want = cap;
			char *p = realloc(c->stash, want);
			if (!p)
				return took;
			c->stash = p;
			c->stash_cap = want;
		}
		ssize_t r = REAL(recv)(c->base.fd, c->stash + c->stash_len, n, MSG_DONTWAIT);
		if (r <= 0)
			return took;
		c->stash_len += (size_t)r;
		took = 1;
	}
}

/* Write every byte of our tx ring the peer has not consumed to the socket,
 * in order, before anything else we send there (tx write lock held);
 * may_stash: the peer may be replaying (it is not gone). */
static int replay_tx(struct shm_conn *c, int may_stash)
{
	struct iovec v[2];
	size_t n = shm_ring_unread(&c->tx, v);
	size_t done = 0;
	while (done < n) {
		struct iovec w[2];
		size_t cnt = shunt_iov_skip(v, 2, done, w);
		struct msghdr m = {.msg_iov = w, .msg_iovlen = cnt};
		ssize_t r = REAL(sendmsg)(c->base.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			/* As a blocked send would: until the peer reads (a
			 * peer gone closes its socket, which ends the poll),
			 * reading what it replays meanwhile.  Only this end's
			 * own lock is held: the peer never takes it. */
			short in = may_stash && c->stash_len < c->rx.size ? POLLIN : 0;
			struct pollfd p = {c->base.fd, (short)(POLLOUT | in), 0};
			REAL(poll)(&p, 1, -1);
			/* Readable with nothing to take: EOF, which stays. */
			if ((p.revents & POLLIN) && !stash_peer_replay(c))
				may_stash = 0;
			continue;
		}
		return -1;
	}
	if (c->stash_len)
		SHUNT_DEBUG("fd=%d: %zu bytes of the peer's replay taken while ours waited",
			    c->base.fd, c->stash_len);
	/* The peer's view: those bytes are gone from the ring.  The stats
	 * slot keeps them: it counts what the application sent, whichever
	 * path carried it (the peer counts them once, where it reads them). */
	shm_ring_consume(&c->tx, n);
	c->base.bytes_out -= n;
	return 0;
}

void shm_replay(struct shm_conn *c)
{
	if (__atomic_load_n(&c->demoted, __ATOMIC_ACQUIRE))
		return;
	shm_lock(&c->tx.ctl->wlock, &c->lk);
	if (!c->demoted) {
		/* Wait out a consume in flight; after it the peer sees the
		 * state and consumes nothing more.  Its lock is only looked
		 * at, never taken: a peer killed inside it (or one that
		 * wrote anything there) cannot hold this end. */
		shm_lock_wait_free(&c->tx.ctl->rlock, &c->lk);
		replay_tx(c, 1);
		__atomic_store_n(&c->demoted, 1, __ATOMIC_RELEASE);
	}
	shm_unlock(&c->tx.ctl->wlock);
	/* A shutdown(SHUT_WR) made while the offer was open: after the
	 * replayed bytes, as the application wrote them. */
	shunt_conn_send_fin(&c->base);
}

/* Bytes in our rx ring the application has not read, when the peer that
 * would replay them over TCP has closed (or is gone): moved to a spill
 * (core/shunt_spill.h) and consumed from the ring, as the caller hands
 * the fd to the kernel path (exec).  Consumed, they are not resent by a
 * copy of the peer still alive elsewhere (fork): each byte comes once, the
 * spill's first.  A live peer replays them instead, which also reaches
 * reads shunt does not see (stdio after fdopen, a program without shunt).
 * (Another thread reading the ring between this and the state change would
 * get later bytes ahead of the spill's; a program exec'ing or fdopen'ing a
 * socket another thread still reads has no order to keep.) */
static struct shunt_conn *spill_unread(struct shm_conn *c, enum shunt_reason why)
{
	struct shunt_conn *sp = NULL;
	shm_lock(&c->rx.ctl->rlock, &c->lk);
	struct iovec v[2];
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	/* The close flag is only a hint: it is also set when this very
	 * process (a child about to exec) closes its copy of the other end
	 * while the peer lives on elsewhere.  Only a slot the peer no longer
	 * holds, or the FIN of the last close, says nobody is left to
	 * replay. */
	int gone = !shm_arena_side_held(&c->slot, !c->side);
	if (!gone && __atomic_load_n(&c->rx.ctl->closed_hint, __ATOMIC_ACQUIRE)) {
		int t = shunt_tcp_peek(&c->base);
		gone = t == 0 || t == -1;
	}
	size_t n = st == SHM_COMMITTED && gone && shm_ring_sane(&c->rx) ? shm_ring_unread(&c->rx, v)
									  : 0;
	if (n && (sp = shunt_spill_new(&c->base, v, 2, why)) != NULL)
		shm_ring_consume(&c->rx, n);
	shm_unlock(&c->rx.ctl->rlock);
	if (n && !sp)
		SHUNT_WARN("fd=%d: %zu unread bytes may be lost: no memory to keep them",
			   c->base.fd, n);
	return sp;
}

int shm_withdraw(struct shunt_conn *base)
{
	struct shm_conn *c = (struct shm_conn *)base;
	/* Published by the CAS below (seq_cst), which a server's failed
	 * commit reads with acquire. */
	__atomic_store_n(&c->hdr->left_why, SHUNT_R_CLIENT_CLOSED, __ATOMIC_RELAXED);
	/* Only an offer still open is withdrawn.  A server whose commit won
	 * the race has a connection: demoting it now would have it report
	 * peer-demoted and read the rest from TCP, where a close hint and
	 * the FIN say what happened.  (shm_demote's own CAS would move
	 * COMMITTED too; from DEMOTING, ours or a refusal's, it moves
	 * nothing and replays.) */
	uint32_t st = SHM_OFFERED;
	if (!__atomic_compare_exchange_n(&c->hdr->state, &st, SHM_DEMOTING, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_ACQUIRE) &&
	    st == SHM_COMMITTED)
		return 0;
	shm_demote(base, SHUNT_R_NONE);
	return 1;
}

void shm_demote(struct shunt_conn *base, enum shunt_reason why)
{
	struct shm_conn *c = (struct shm_conn *)base;
	if (!c->why)
		c->why = why;
	SHUNT_GUARD_ENTER();
	struct shunt_conn *sp = spill_unread(c, why);
	shm_lock(&c->tx.ctl->wlock, &c->lk);
	/* A client that leaves its offer for a reason of its own (io_uring,
	 * exec...) tells a server whose commit then fails: peer-demoted, not
	 * offer-timeout.  Published by the CAS below, as shm_withdraw's. */
	if (why != SHUNT_R_NONE && why != SHUNT_R_OFFER_TIMEOUT && why != SHUNT_R_DECLINED)
		__atomic_store_n(&c->hdr->left_why, SHUNT_R_PEER_DEMOTED, __ATOMIC_RELAXED);
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	while ((st == SHM_OFFERED || st == SHM_COMMITTED) &&
	       !__atomic_compare_exchange_n(&c->hdr->state, &st, SHM_DEMOTING, 0,
					    __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
		;
	/* A consume that saw the state before it moved ends before the
	 * replay's snapshot; later ones see DEMOTING (shm_recvmsg). */
	shm_lock_wait_free(&c->tx.ctl->rlock, &c->lk);
	if (!c->demoted) {
		replay_tx(c, sp == NULL);
		__atomic_store_n(&c->demoted, 1, __ATOMIC_RELEASE);
	}
	shm_unlock(&c->tx.ctl->wlock);
	shm_wake_peer(c);
	shunt_conn_send_fin(&c->base);
	/* A stash (ours now, or of an earlier replay) leaves with the
	 * connection: a spill serves it wherever the socket goes. */
	if (!sp && shm_stash_left(c)) {
		struct iovec v = {c->stash + c->stash_off, shm_stash_left(c)};
		sp = shunt_spill_new(base, &v, 1, c->why ? (enum shunt_reason)c->why : why);
		if (sp)
			shm_stash_free(c);
		else
			SHUNT_WARN("fd=%d: %zu unread bytes may be lost: no memory to keep them",
				   c->base.fd, v.iov_len);
	}
	if (sp)
		shunt_spill_install(base, sp);
	SHUNT_GUARD_LEAVE();
}

ssize_t shm_stash_recv(struct shm_conn *c, struct msghdr *m, int flags, size_t total)
{
	/* Threads may read at once, as a socket allows: one at a time here,
	 * under the rx ring's read lock (the peer never takes it). */
	shm_lock(&c->rx.ctl->rlock, &c->lk);
	size_t left = shm_stash_left(c);
	if (!left) {
		shm_unlock(&c->rx.ctl->rlock);
		return SHM_STASH_GONE; /* another thread took the last */
	}
	size_t n = left < total ? left : total;
	const char *from = c->stash + c->stash_off;
	for (size_t i = 0, k; from < c->stash + c->stash_off + n; i++, from += k) {
		k = m->msg_iov[i].iov_len;
		if (k > (size_t)(c->stash + c->stash_off + n - from))
			k = (size_t)(c->stash + c->stash_off + n - from);
		memcpy(m->msg_iov[i].iov_base, from, k);
	}
	if (flags & MSG_PEEK) {
		shm_unlock(&c->rx.ctl->rlock);
		return (ssize_t)n;
	}
	c->stash_off += n;
	if (!shm_stash_left(c))
		shm_stash_free(c);
	shm_unlock(&c->rx.ctl->rlock);
	n = shunt_recv_rest(c->base.fd, m, flags, n, total);
	SHUNT_STAT_ADD(&c->base, bytes_in, (uint64_t)n);
	SHUNT_STAT_ADD(&c->base, calls_in, 1);
	return (ssize_t)n;
}

short shm_stash_poll(struct shm_conn *c, short events)
{
	short r = POLLIN | POLLRDNORM;
	if (events & (POLLOUT | POLLWRNORM)) {
		struct pollfd p = {c->base.fd, POLLOUT, 0};
		if (REAL(poll)(&p, 1, 0) > 0)
			r |= (short)(p.revents & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP));
	}
	return r;
}

void shm_stash_free(struct shm_conn *c)
{
	free(c->stash);
	c->stash = NULL;
	c->stash_len = c->stash_off = c->stash_cap = 0;
}
