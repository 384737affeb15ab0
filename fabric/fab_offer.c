/* The fabric transport's rendezvous: the client's offer through the
 * agent, the server's connect-back, the client's passive thread taking it,
 * a refusal.
 *
 *   client connect():  provider for dst (auto: verbs if routable, else
 *                      kernel path, no-rdma-route)
 *                      -> bind (so the 4-tuple is known)
 *                      -> registered rings and CQ; passive endpoint of the
 *                         process on the routed source address
 *                      -> fab_rdv_countersign() by our own agent, the
 *                         socket passed as the proof that we hold the tuple
 *                      -> fab_rdv_offer(token) to the agent at dst's host
 *                      -> real connect(); may write at once (staged)
 *   server accept():   fab_rdv_take() for the accepted 4-tuple
 *                      -> endpoint, fi_connect(client's passive endpoint,
 *                         the offer's id + our rx ring, with a MAC under
 *                         the connection's key) and wait for FI_CONNECTED
 *   client thread:     a request for an OFFERED connection, made with its
 *                      key, from the server's address -> fi_accept (our rx
 *                      ring, MAC'ed too); anything else -> fi_reject
 * Who decides: the client, by one CAS on its state when the request comes
 * (OFFERED -> ACCEPTING) or when it stops waiting (OFFERED -> DECLINED,
 * after offer_timeout_ms or when the socket speaks).  The server follows
 * the answer it gets: accepted -> fabric, rejected -> kernel.  No byte of
 * this travels on the TCP connection. */
#include <errno.h>
#include <poll.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "fab_internal.h"
#include "agent/agent_hmac.h"
#include "core/shunt_forklock.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"
#include "core/shunt_rendezvous.h"
#include "core/shunt_transport.h"

/* Wait on an endpoint's EQ for FI_CONNECTED.  0 connected (data copied to
 * rep), 1 refused or failed, -1 no answer within timeout_ms. */
int fab_wait_connected(struct fid_eq *eq, int timeout_ms, void *rep, size_t replen)
{
	union {
		struct fi_eq_cm_entry cm;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} ev;
	uint64_t end = shunt_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t now = shunt_now_ms();
		if (now >= end)
			return -1;
		uint32_t event;
		ssize_t n = fi_eq_sread(eq, &event, &ev, sizeof ev, (int)(end - now), 0);
		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};
			fi_eq_readerr(eq, &err, 0);
			return 1;
		}
		if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT || n == -FI_EINTR)
			continue;
		if (n < 0)
			return 1;
		if (event == FI_SHUTDOWN)
			return 1;
		if (event != FI_CONNECTED)
			continue;
		if (rep) {
			size_t dl = (size_t)n > sizeof ev.cm ? (size_t)n - sizeof ev.cm : 0;
			if (dl < replen)
				return 1;
			memcpy(rep, ev.cm.data, replen);
		}
		return 0;
	}
}

int fab_offer_answer(struct fid_domain *d, struct fi_eq_cm_entry *e, size_t len)
{
	struct fab_cm_req req;
	const char *why = "not our connection data";
	if (!d || fab_cm_req_parse(&req, e->data, len) < 0) {
		SHUNT_INFO("fabric: connection request refused: %s", why);
		return 0;
	}
	int won;
	struct fab_conn *c = fab_offer_claim(&req, e->info, &why, &won);
	if (!c)
		/* A server that gave up before we did sends one too: info,
		 * not a warning. */
		SHUNT_INFO("fabric: connection request refused: %s", why);
	if (won && req.decline) {
		/* The client replays over TCP at its next call: wake it. */
		fab_kick(c, FAB_RX);
		fab_kick(c, FAB_TX);
		shunt_conn_put(&c->base);
	}
	if (!won || req.decline)
		return 0;
	c->peer_addr = req.rx_addr;
	c->peer_key = req.rx_key;
	struct fid_fabric *fab = fab_fabric();
	struct fab_cm_rep rep;
	uint8_t raw[FAB_CM_REP_LEN];
	fab_cm_rep_make(&rep, raw, c->key, &req, fab_ring_addr_rx(c), fab_mr_key(c));
	int rc = -1;
	if (fab_conn_ep(c, d, fab, e->info) == 0 && fi_accept(c->ep, raw, sizeof raw) == 0) {
		rc = fab_wait_connected(c->eq, 2000 + (int)shunt_config()->offer_timeout_ms, NULL, 0);
		fab_lock(c);
		if (rc == 0) {
			__atomic_store_n(&c->state, FAB_UP, __ATOMIC_RELEASE);
			/* The server waits for this before it writes. */
			c->peer_ready = 1;
			if (fab_post_imm(c, FAB_IMM_CREDIT, 0) < 0)
				c->failed = 2;
			fab_flush(c);
			fab_watch_add(c);
		} else {
			/* Accepted, then lost: the server may have seen the
			 * connection up, and its bytes may have moved. */
			fab_reset_tcp(c);
		}
		fab_unlock(c);
	} else {
		/* Nothing was sent back: the server sees a refusal. */
		__atomic_store_n(&c->state, FAB_DECLINED, __ATOMIC_RELEASE);
	}
	fab_kick(c, FAB_RX);
	fab_kick(c, FAB_TX);
	SHUNT_DEBUG("fabric: connect-back %s", rc == 0 ? "accepted" : "failed");
	shunt_conn_put(&c->base);
	return 1;
}

/* ---- client ---------------------------------------------------------------- */

static int ring_ok(uint64_t r)
{
	return r >= FAB_MIN_RING && r <= FAB_MAX_RING && (r & (r - 1)) == 0;
}

/* The reason a connection takes the kernel path after the agent's answer. */
static enum shunt_reason rdv_reason(enum fab_rdv_result r)
{
	return r == FAB_RDV_NO_AGENT	   ? SHUNT_R_NO_AGENT
	       : r == FAB_RDV_NO_LISTENER ? SHUNT_R_NO_PEER_SHIM
					   : SHUNT_R_DECLINED;
}

static enum shunt_reason fab_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t dlen)
{
	/* Same host: shm's business (its reason stands). */
	if (shunt_sa_loopback(dst))
		return SHUNT_R_NO_PEER_SHIM;
	char prov[32];
	unsigned wait = shunt_config()->fabric_load_wait_ms;
	enum shunt_reason why = fab_provider_for(dst, dlen, prov, wait);
	if (why != SHUNT_R_NONE)
		return why;
	/* A host known to have no agent (or to refuse us): nothing below can
	 * lead anywhere, so nothing of it is done (no bind, no rings, no
	 * endpoint): the connection costs what plain TCP costs. */
	enum fab_rdv_result cached;
	if (fab_rdv_host_cached(dst, &cached))
		return rdv_reason(cached);
	/* libfabric not up yet: this one goes by TCP now rather than wait
	 * for its start-up (fab_start.c), which goes on meanwhile. */
	why = fab_start(prov, wait);
	if (why != SHUNT_R_NONE)
		return why;
	struct agent_offer o;
	struct shunt_tuple t;
	struct sockaddr_storage local;
	socklen_t llen;
	struct fab_conn *c = NULL;
	memset(&o, 0, sizeof o);
	SHUNT_GUARD_ENTER();
	why = SHUNT_R_BIND_FAILED;
	if (shunt_bind_local(fd, dst, dlen, &local, &llen) < 0 ||
	    shunt_tuple_make(&t, (struct sockaddr *)&local, dst) < 0)
		goto out;
	fab_tuple_to_wire(&o.tuple, &t);
	why = SHUNT_R_PROVIDER_ERROR;
	struct fid_domain *d = fab_domain(prov, NULL);
	if (!d || fab_pep_addr(prov, (struct sockaddr *)&local, llen, &o, fab_offer_answer) < 0)
		goto out;
	uint64_t ring = shunt_config()->ring_size;
	if (ring > FAB_MAX_RING)
		ring = FAB_MAX_RING;
	c = fab_conn_new(&fab_conn_ops, 1);
	if (!c)
		goto out;
	why = SHUNT_R_RING_ALLOC;
	if (fab_conn_mem(c, d, ring) < 0)
		goto out;
	why = SHUNT_R_INTERNAL;
	if (getrandom(o.token, sizeof o.token, 0) != sizeof o.token)
		goto out;
	memcpy(c->key, o.token, sizeof c->key);
	fab_offer_id(c->key, c->id);
	o.ring_size = ring;
	c->tuple = t;
	if (dlen <= sizeof c->peer_sa) {
		memcpy(&c->peer_sa, dst, dlen);
		c->peer_salen = dlen;
	}
	c->state = FAB_OFFERED;
	fab_offer_add(c);
	/* Our agent vouches that this process holds the tuple (the socket,
	 * bound above, is the proof); an agent that requires it files nothing
	 * unsigned.  Without a local agent, or one without the key, the offer
	 * goes unsigned. */
	if (fab_rdv_countersign(shunt_rundir(), fd, &o, (int)shunt_config()->agent_timeout_ms) < 0)
		SHUNT_DEBUG("fabric: offer not countersigned fd=%d (no local agent, "
			    "no countersign key, or refused)", fd);
	enum fab_rdv_result r =
		fab_rdv_offer(dst, dlen, &o, (int)shunt_config()->agent_timeout_ms);
	if (r != FAB_RDV_OK) {
		fab_offer_del(c);
		why = rdv_reason(r);
		goto out;
	}
	shunt_offer_start(&c->base);
	e->conn = &c->base;
	why = SHUNT_R_NONE;
	SHUNT_DEBUG("fabric: offer filed fd=%d provider=%s", fd, prov);
out:
	if (why != SHUNT_R_NONE && c)
		fab_conn_release(c);
	SHUNT_GUARD_LEAVE();
	return why;
}

/* ---- server ---------------------------------------------------------------- */

/* The offer the agent holds for the connection accept() returned (its
 * tuple in *t). */
static int take_offer(int fd, const struct sockaddr *peer, struct shunt_tuple *t,
		      struct agent_offer *o)
{
	const char *rd = shunt_rundir();
	/* Asking the agent is a round trip on its socket for every accepted
	 * connection: only where an offer could be taken. */
	if (!rd || shunt_sa_loopback(peer) || !fab_may_take() || shunt_tuple_accepted(t, fd, peer) < 0)
		return -1;
	return fab_rdv_take(rd, t, o);
}

/* Our endpoint's requests leave from the address the client connected to
 * (the TCP connection's local address, fd's), whichever source the route to
 * its passive endpoint would pick: the client takes requests from that
 * address only (from_server).  0, or -1 when info cannot say so. */
static int bind_to_local(struct fi_info *info, int fd)
{
	struct sockaddr_storage ss, out;
	socklen_t sl = sizeof ss, ol;
	uint8_t a[16];
	uint16_t port;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    shunt_addr16((struct sockaddr *)&ss, a, &port) < 0)
		return -1;
	memset(&out, 0, sizeof out);
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (info->addr_format == FI_SOCKADDR_IN && !memcmp(a, mapped, sizeof mapped)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&out;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, a + 12, 4);
		ol = sizeof *s4;
	} else if (info->addr_format == FI_SOCKADDR_IN6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, a, 16);
		ol = sizeof *s6;
	} else {
		return -1;
	}
	void *p = malloc(ol);
	if (!p)
		return -1;
	memcpy(p, &out, ol);
	free(info->src_addr);
	info->src_addr = p;
	info->src_addrlen = ol;
	return 0;
}

/* Tell a waiting client to go on over TCP now rather than at its timeout
 * (fd: the accepted connection). */
static void refuse(int fd, const struct agent_offer *o)
{
	struct fid_fabric *fab;
	struct fid_domain *d = fab_domain(o->provider, &fab);
	struct fi_info *info = d ? fab_info_for_peer(o) : NULL;
	if (info && bind_to_local(info, fd) < 0) {
		fi_freeinfo(info);
		info = NULL;
	}
	struct fid_eq *eq = NULL;
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = NULL;
	struct fi_eq_attr ea = {.size = 4, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr ca = {.size = 4, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fab_cm_req req;
	uint8_t raw[FAB_CM_REQ_LEN];
	fab_cm_req_make(&req, raw, o->token, o->ring_size, 0, 0, 1);
	/* (An endpoint enables only with its CQ bound, even one that never
	 * carries anything.) */
	int rc = -1;
	if (info && fi_eq_open(fab, &ea, &eq, NULL) == 0 && fi_cq_open(d, &ca, &cq, NULL) == 0 &&
	    fi_endpoint(d, info, &ep, NULL) == 0 && fi_ep_bind(ep, &eq->fid, 0) == 0 &&
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0 && fi_enable(ep) == 0 &&
	    fi_connect(ep, o->addr, raw, sizeof raw) == 0)
		rc = fab_wait_connected(eq, 200, NULL, 0);
	SHUNT_DEBUG("fabric: offer refused (%s)", rc == 1 ? "client told" : "no answer");
	if (ep)
		fi_close(&ep->fid);
	if (cq)
		fi_close(&cq->fid);
	if (eq)
		fi_close(&eq->fid);
	fi_freeinfo(info);
}

static enum shunt_reason fab_accept(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t plen)
{
	(void)lfd;
	struct agent_offer o;
	struct shunt_tuple t;
	SHUNT_GUARD_ENTER();
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	struct fab_conn *c = NULL;
	struct fi_info *info = NULL;
	if (take_offer(fd, peer, &t, &o) < 0)
		goto out;
	why = SHUNT_R_BAD_OFFER;
	if (!ring_ok(o.ring_size) || o.addrlen > AGENT_ADDR_MAX || o.provider[31] ||
	    o.addrlen == 0)
		goto refuse;
	if (!fab_offer_addr_is_peer(&o, peer)) {
		SHUNT_WARN("fd=%d: the offer names a fabric endpoint away from the TCP peer: "
			   "refused (someone else filed it)",
			   fd);
		goto out; /* (no refusal sent there: that endpoint is not the client's) */
	}
	char prov[32];
	why = fab_provider_for(peer, plen, prov, FAB_WAIT_FOREVER);
	if (why != SHUNT_R_NONE)
		goto refuse;
	why = fab_start(prov, FAB_WAIT_FOREVER);
	if (why != SHUNT_R_NONE)
		goto refuse;
	why = SHUNT_R_NO_TRANSPORT;
	if (strcmp(prov, o.provider) != 0)
		goto refuse;
	why = SHUNT_R_PROVIDER_ERROR;
	struct fid_fabric *fab;
	struct fid_domain *d = fab_domain(prov, &fab);
	if (!d || !(info = fab_info_for_peer(&o)) || bind_to_local(info, fd) < 0 ||
	    !(c = fab_conn_new(&fab_conn_ops, 0)))
		goto refuse;
	why = SHUNT_R_RING_ALLOC;
	if (fab_conn_mem(c, d, o.ring_size) < 0)
		goto refuse;
	why = SHUNT_R_PROVIDER_ERROR;
	if (fab_conn_ep(c, d, fab, info) < 0)
		goto refuse;
	struct fab_cm_req req;
	uint8_t raw[FAB_CM_REQ_LEN], repraw[FAB_CM_REP_LEN];
	fab_cm_req_make(&req, raw, o.token, o.ring_size, fab_ring_addr_rx(c), fab_mr_key(c), 0);
	if (fi_connect(c->ep, o.addr, raw, sizeof raw) != 0)
		goto out;
	struct fab_cm_rep rep;
	int rc = fab_wait_connected(c->eq, (int)shunt_config()->offer_timeout_ms + 2000, repraw,
				sizeof repraw);
	if (rc == 1) {
		why = SHUNT_R_OFFER_TIMEOUT; /* the client gave up: it is on TCP */
		goto out;
	}
	if (rc < 0 || fab_cm_rep_check(&rep, repraw, sizeof repraw, o.token, &req) < 0) {
		/* The client may have accepted: neither path is safe now. */
		c->base.fd = fd;
		fab_reset_tcp(c);
		why = SHUNT_R_PROVIDER_ERROR;
		goto out;
	}
	c->peer_addr = rep.rx_addr;
	c->peer_key = rep.rx_key;
	memcpy(c->key, o.token, sizeof c->key);
	c->tuple = t;
	if (plen <= sizeof c->peer_sa) {
		memcpy(&c->peer_sa, peer, plen);
		c->peer_salen = plen;
	}
	c->state = FAB_UP;
	e->conn = &c->base;
	fab_watch_add(c);
	why = SHUNT_R_NONE;
	goto out;
refuse:
	if (why != SHUNT_R_BAD_OFFER || o.addrlen <= AGENT_ADDR_MAX)
		refuse(fd, &o);
out:
	if (why != SHUNT_R_NONE && c)
		fab_conn_release(c);
	fi_freeinfo(info);
	SHUNT_GUARD_LEAVE();
	return why;
}

static void fab_decline(int fd, const struct sockaddr *peer, socklen_t plen)
{
	(void)plen;
	struct agent_offer o;
	struct shunt_tuple t;
	SHUNT_GUARD_ENTER();
	if (take_offer(fd, peer, &t, &o) == 0 && o.addrlen <= AGENT_ADDR_MAX && o.addrlen &&
	    !o.provider[31])
		refuse(fd, &o);
	SHUNT_GUARD_LEAVE();
}

static void fab_exit(void)
{
	fab_at_exit(&shunt_transport_fabric);
}

const struct shunt_transport_ops shunt_transport_fabric = {
	.name = "fabric",
	.id = SHUNT_TP_FABRIC,
	.on_listen = fab_on_listen,
	.connect = fab_connect,
	.accept = fab_accept,
	.decline = fab_decline,
	.at_exit = fab_exit,
};

const struct shunt_conn_ops fab_conn_ops = {
	.transport = &shunt_transport_fabric,
	.life = &fab_life_ops,
	.data = &fab_data_ops,
	.wait = &fab_wait_ops,
};
