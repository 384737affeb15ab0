/* Demoting a fabric connection: the DEMOTE exchange, the replay over TCP, an offer
 * given up.  (DESIGN: docs/ARCHITECTURE.md, "Fabric demotion".)
 *
 * An end that leaves freezes its rx ring at what its application has read
 * (rx_limit = rx_consumed), posts DEMOTE(rx_limit) as its last fabric
 * message and turns DEMOTING.  From then on its reads take the ring up to
 * rx_limit, then the socket: the peer replays from exactly there.  Its
 * writes are staged in the tx ring until the peer's DEMOTE(p) says where
 * the peer stopped reading; then tx bytes from p are resent over TCP, and
 * once they are all out (and our DEMOTE has left the provider) the
 * connection is DEMOTED: only the socket is used.
 *
 * Nothing in this waits for the peer while a call is in progress, except
 * when the caller must leave now (fork, exec, close: fab_demote_now_locked).
 * A demotion blocking one connection would stall every other connection
 * of a single-threaded program, and the peer may be waiting on one of
 * those: so the exchange advances a step at each call the application
 * makes on the connection (or each wait that includes it). */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fab_internal.h"
#include "core/shunt_log.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"
#include "core/shunt_spill.h"
#include "agent/agent_proto.h"

/* How long both processes may live without the exchange completing before
 * the connection is reset rather than guessed at. */
#define DEMOTE_WAIT_MS 5000
/* A DEMOTE not through the fabric by then goes through the agents. */
#define RELAY_AFTER_MS 300
/* A peer whose socket closed without a CLOSE: what it sent over the fabric
 * may still be on its way through the provider. */
#define DEATH_GRACE_MS 200

static inline int state_of(struct fab_conn *c)
{
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
}

/* While our replay waits for room, the peer may be replaying too and be
 * waiting for us to read: take what the socket holds into the rx ring,
 * behind what is left to deliver there.  The ring is free: the freeze
 * stopped consuming it, and every write the peer made into it landed
 * before its DEMOTE.  The peer's replay fits, as it is at most a ring.
 * Only bytes the socket has (FIONREAD): its EOF or error stays there for
 * the application to see. */
static void stash_peer_replay(struct fab_conn *c, int fd)
{
	for (;;) {
		int avail = 0;
		uint64_t used = c->rx_limit - c->rx_consumed;
		if (used >= c->ring || REAL(ioctl)(fd, FIONREAD, &avail) < 0 || avail <= 0)
			return;
		uint64_t off = c->rx_limit & (c->ring - 1), n = c->ring - used;
		if (n > c->ring - off)
			n = c->ring - off;
		if (n > (uint64_t)avail)
			n = (uint64_t)avail;
		ssize_t r = REAL(recv)(fd, c->buf + c->ring + off, n, MSG_DONTWAIT);
		if (r <= 0)
			return;
		c->rx_limit += (uint64_t)r;
		c->tcp_taken = 1;
	}
}

/* Resend tx bytes [tx_acked, tx_head) over the socket, as far as it takes
 * them now; what went counts as consumed (it is the peer's now).  1 all
 * out, 0 more to go, -1 the socket failed. */
static int replay_some(struct fab_conn *c)
{
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	while (c->tx_acked < c->tx_head) {
		if (fd < 0) {
			errno = EBADF;
			return -1;
		}
		uint64_t off = c->tx_acked & (c->ring - 1);
		uint64_t n = c->tx_head - c->tx_acked;
		if (n > c->ring - off)
			n = c->ring - off;
		ssize_t r = REAL(send)(fd, c->buf + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			c->tx_acked += (uint64_t)r;
			/* The kernel path counts them again where they go. */
			c->base.bytes_out -= (uint64_t)r;
			SHUNT_STAT_ADD(&c->base, bytes_out, -(uint64_t)r);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			stash_peer_replay(c, fd);
			return 0;
		}
		return -1;
	}
	return 1;
}

void fab_send_fin(struct fab_conn *c)
{
	if (state_of(c) == FAB_DEMOTED)
		shunt_conn_send_fin(&c->base);
}

/* Sleep until the CQ or the socket has something, at most ms. */
static void nap(struct fab_conn *c, int ms)
{
	struct fid *f = &c->cq->fid;
	struct fid_fabric *fab = fab_fabric();
	struct pollfd p[2];
	int n = 0;
	if (c->cq && c->wait_fd >= 0 && fab && fi_trywait(fab, &f, 1) == FI_SUCCESS)
		p[n++] = (struct pollfd){c->wait_fd, POLLIN, 0};
	else if (c->cq && c->wait_fd >= 0)
		return;
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	short ev = (short)(c->base.tcp_eof ? 0 : POLLIN | POLLRDHUP);
	if (c->got_demote && c->tx_acked < c->tx_head)
		ev |= POLLOUT;
	if (fd >= 0 && ev)
		p[n++] = (struct pollfd){fd, ev, 0};
	REAL(poll)(p, (nfds_t)n, ms);
}

void fab_demote_offer_locked(struct fab_conn *c)
{
	int st = FAB_OFFERED;
	if (!__atomic_compare_exchange_n(&c->state, &st, FAB_DECLINED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE) &&
	    st != FAB_DECLINED)
		return; /* the passive thread won: the connection is coming up */
	fab_offer_del(c);
	if (!c->why)
		c->why = st == FAB_DECLINED ? SHUNT_R_DECLINED : SHUNT_R_OFFER_TIMEOUT;
	/* Never up: the peer reads only the socket, which has everything the
	 * application wrote after what was staged.  The rx ring holds what
	 * the socket brings meanwhile (stash_peer_replay). */
	c->rx_limit = c->rx_consumed = 0;
	c->tx_acked = 0;
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	while (replay_some(c) == 0) {
		struct pollfd p = {fd, POLLOUT | (c->rx_limit - c->rx_consumed < c->ring ? POLLIN : 0),
				   0};
		REAL(poll)(&p, 1, -1);
	}
	__atomic_store_n(&c->state, FAB_DEMOTED, __ATOMIC_RELEASE);
}

/* The peer is gone (CLOSE, or its socket closed) and never answered our
 * DEMOTE: what it sent over the fabric is all in our ring, in order, unless
 * it was replaying already (then the socket has the rest from rx_limit). */
static void peer_gone(struct fab_conn *c)
{
	fab_cq_drain_locked(c);
	if (!c->tcp_taken)
		c->rx_limit = c->rx_arrived;
	__atomic_store_n(&c->state, FAB_DEMOTED, __ATOMIC_RELEASE);
}

/* ---- the relay: positions through the agents ------------------------------ */

/* Our DEMOTE reached the peer: posted, and every write completed since
 * (DEMOTE is the last one, with delivery completion). */
static int demote_delivered(struct fab_conn *c)
{
	return c->sent_demote == 2 && !c->tx_inflight && c->failed != 2 && !c->dead;
}

/* Send our position to the peer's host's agent, which files it for the
 * peer; once. */
static void relay_send(struct fab_conn *c)
{
	if (c->relay_sent || !c->peer_salen || demote_delivered(c))
		return;
	c->relay_sent = 1;
	struct agent_relay r = {.pos = c->rx_limit, .to_client = !c->client};
	fab_tuple_to_wire(&r.tuple, &c->tuple);
	/* The proof: a MAC under the connection's key, which only its two
	 * ends hold (fab_wire.h). */
	fab_relay_proof(c->key, &r, r.token);
	int rc = fab_rdv_relay((const struct sockaddr *)&c->peer_sa, c->peer_salen, &r, 0);
	SHUNT_DEBUG("fabric: fd=%d DEMOTE %llu relayed through the peer's agent: %s", c->base.fd,
		    (unsigned long long)c->rx_limit, rc == 0 ? "filed" : "failed");
}

int fab_relay_check(struct fab_conn *c)
{
	uint64_t pos;
	if (c->got_demote || !c->peer_salen ||
	    fab_rdv_relay_take(shunt_rundir(), &c->tuple, c->client, c->key, &pos) < 0)
		return 0;
	SHUNT_DEBUG("fabric: fd=%d the peer's DEMOTE %llu came through the agents", c->base.fd,
		    (unsigned long long)pos);
	/* As if it had come over the fabric (fab_cq_drain_locked). */
	if (!fab_peer_pos_ok(pos, c->tx_acked, c->tx_posted)) {
		c->failed = 2;
		return 0;
	}
	c->peer_demote = pos;
	c->got_demote = 1;
	/* The fabric is dead to the peer: nothing more goes into it. */
	c->dead = 1;
	return 1;
}

int fab_demote_begin(struct fab_conn *c, int why)
{
	if (state_of(c) != FAB_UP)
		return 0;
	if (!c->why)
		c->why = why ? why : SHUNT_R_PEER_DEMOTED;
	SHUNT_DEBUG("fabric: fd=%d leaving the fabric: why=%s failed=%d peer demoted=%d",
		    c->base.fd, shunt_reason_name(c->why), c->failed, c->got_demote);
	fab_cq_drain_locked(c);
	if (c->peer_closed) {
		/* The peer is gone after its last byte arrived: nothing to
		 * exchange, nobody reads what we would replay. */
		c->rx_limit = c->rx_arrived;
		__atomic_store_n(&c->state, FAB_DEMOTED, __ATOMIC_RELEASE);
		return 0;
	}
	/* Freeze at what the application has consumed: the peer replays the
	 * rest (it still holds it: its credits never run ahead of our
	 * consumption). */
	c->rx_limit = c->rx_consumed;
	c->sent_demote = 1;
	uint64_t now = shunt_now_ms();
	c->demote_end = now + DEMOTE_WAIT_MS;
	/* A fabric known dead cannot carry our DEMOTE: relay at once. */
	c->relay_at = c->dead || c->failed == 2 ? now : now + RELAY_AFTER_MS;
	c->eof_at = 0;
	if (c->failed != 2 && fab_post_imm(c, FAB_IMM_DEMOTE, c->rx_limit) == 0)
		c->sent_demote = 2;
	__atomic_store_n(&c->state, FAB_DEMOTING, __ATOMIC_RELEASE);
	return 1;
}

int fab_demote_step(struct fab_conn *c)
{
	if (state_of(c) != FAB_DEMOTING)
		return 0;
	fab_cq_drain_locked(c);
	uint64_t now = shunt_now_ms();
	if (!c->got_demote) {
		if (c->peer_closed) {
			peer_gone(c);
			return 1;
		}
		int t = c->base.tcp_eof ? 0 : shunt_tcp_peek(&c->base);
		if (t == 0 || t == -1) {
			if (!c->eof_at)
				c->eof_at = now + DEATH_GRACE_MS;
			if (now >= c->eof_at) {
				peer_gone(c);
				return 1;
			}
		}
		if (now >= c->relay_at) {
			/* The fabric did not carry the exchange: the agents
			 * do (both ways dead, a NIC gone, a link down). */
			relay_send(c);
			if (fab_relay_check(c))
				return fab_demote_step(c);
		}
		if (now >= c->demote_end) {
			SHUNT_DEBUG("fabric: fd=%d no DEMOTE from the peer in %d ms", c->base.fd,
				    DEMOTE_WAIT_MS);
			/* Both processes alive, no exchange possible: the exact
			 * position cannot be known (docs/ARCHITECTURE.md). */
			fab_reset_tcp(c);
			return 1;
		}
		return 0;
	}
	if (!c->replaying) {
		/* From the peer's position on (never behind a credit: see
		 * fab_cq_drain_locked), the bytes go again, by TCP. */
		c->replaying = 1;
		c->tx_acked = c->peer_demote;
		SHUNT_DEBUG("fabric: fd=%d on TCP: ring up to %llu, replaying from %llu",
			    c->base.fd, (unsigned long long)c->rx_limit,
			    (unsigned long long)c->peer_demote);
	}
	int r = replay_some(c);
	if (r < 0) {
		/* The peer's socket is gone (it resent, then closed): nobody
		 * reads the rest, and what it sent is ours to read still. */
		SHUNT_DEBUG("fabric: fd=%d replay from %llu failed: %s", c->base.fd,
			    (unsigned long long)c->tx_acked, strerror(errno));
		c->tx_acked = c->tx_head;
		__atomic_store_n(&c->state, FAB_DEMOTED, __ATOMIC_RELEASE);
		return 1;
	}
	/* Our DEMOTE must have left the provider before nobody calls it any
	 * more (manual progress); its completion says it reached the peer. */
	if (r == 1 && !demote_delivered(c) && now >= c->relay_at)
		relay_send(c); /* the peer may still wait for our position */
	if (r == 1 && (demote_delivered(c) || c->relay_sent || now >= c->demote_end)) {
		__atomic_store_n(&c->state, FAB_DEMOTED, __ATOMIC_RELEASE);
		fab_send_fin(c);
		return 1;
	}
	return 0;
}

int fab_demote_now_locked(struct fab_conn *c, int why)
{
	int st = state_of(c);
	if (st == FAB_OFFERED || st == FAB_DECLINED) {
		if (!c->why && why)
			c->why = why;
		fab_demote_offer_locked(c);
		return 0;
	}
	fab_demote_begin(c, why);
	while (state_of(c) == FAB_DEMOTING) {
		if (!fab_demote_step(c))
			nap(c, 10);
	}
	return state_of(c) == FAB_BROKEN ? -1 : 0;
}

/* ---- leaving now: the demote op ------------------------------------------------ */

/* Bytes the peer sent that the application has not read and nobody will
 * replay (the peer closed or died after they arrived): 0 or the iovecs. */
static int unread_spans(struct fab_conn *c, struct iovec v[2])
{
	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != FAB_DEMOTED ||
	    c->rx_limit <= c->rx_consumed)
		return 0;
	return fab_ring_spans(c->buf + c->ring, c->ring, c->rx_consumed, c->rx_limit, v);
}

/* The caller hands the fd to the kernel path when this returns (exec,
 * fork, fdopen, ...), so bytes still in the ring with nobody left to
 * replay them go to a spill (core/shunt_spill.h) first. */
void fab_demote(struct shunt_conn *base, enum shunt_reason why)
{
	struct fab_conn *c = (struct fab_conn *)base;
	SHUNT_GUARD_ENTER();
	fab_wait_accepting(c);
	fab_lock(c);
	fab_demote_now_locked(c, why);
	struct iovec v[2];
	int nv = unread_spans(c, v);
	struct shunt_conn *sp = nv ? shunt_spill_new(base, v, nv, why) : NULL;
	if (sp) {
		c->rx_consumed = c->rx_limit; /* the spill delivers them */
	} else if (nv) {
		SHUNT_WARN("fabric: fd=%d: %llu unread bytes lost: no memory to keep them",
			   c->base.fd, (unsigned long long)(c->rx_limit - c->rx_consumed));
	}
	fab_unlock(c);
	fab_send_fin(c);
	if (sp)
		shunt_spill_install(base, sp);
	SHUNT_GUARD_LEAVE();
}

/* Registered memory and the provider's sockets do not survive fork in a
 * usable way (verbs maps them MADV_DONTFORK; the tcp provider's sockets
 * would be shared by two processes): the connection leaves the fabric
 * before the fork, and both processes continue on TCP. */
