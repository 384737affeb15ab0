/* The fabric transport's control path: offer, connect back, decline,
 * demotion, fork, close.  The data path is in fab_data.c.
 *
 *   client connect():  provider for dst (auto: verbs if routable, else
 *                      kernel path, no-rdma-route)
 *                      -> bind (so the 4-tuple is known)
 *                      -> registered rings and CQ; passive endpoint of the
 *                         process on the routed source address
 *                      -> fab_rdv_offer(token) to the agent at dst's host
 *                      -> real connect(); may write at once (staged)
 *   server accept():   fab_rdv_take() for the accepted 4-tuple
 *                      -> endpoint, fi_connect(client's passive endpoint,
 *                         token + our rx ring) and wait for FI_CONNECTED
 *   client thread:     token matches an OFFERED connection -> fi_accept
 *                      (our rx ring); anything else -> fi_reject
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
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"
#include "core/shunt_spill.h"

/* ---- locks and objects ---------------------------------------------------- */

void fab_lock(struct fab_conn *c)
{
	unsigned spins = 0;
	while (__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE)) {
		if (++spins > 64)
			sched_yield();
		else
			shunt_cpu_relax();
	}
}

void fab_unlock(struct fab_conn *c)
{
	__atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE);
}

/* Recycled, never freed: a racing shunt_conn_get() may read a dead one. */
static struct fab_conn *pool;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

static struct fab_conn *conn_new(int client)
{
	pthread_mutex_lock(&pool_mu);
	struct fab_conn *c = pool;
	if (c)
		pool = c->next;
	pthread_mutex_unlock(&pool_mu);
	if (!c)
		c = calloc(1, sizeof *c);
	else
		memset((char *)c + sizeof c->base.ops, 0, sizeof *c - sizeof c->base.ops);
	if (!c)
		return NULL;
	c->base.ops = &fab_ops;
	c->client = client;
	c->pid = getpid();
	c->wait_fd = -1;
	c->kick[0] = c->kick[1] = -1;
	const char *f = getenv("SHUNT_FABRIC_FAIL_AFTER");
	c->fail_after = f && *f ? strtoull(f, NULL, 10) : 0;
	f = getenv("SHUNT_FABRIC_FAIL_DEAD");
	c->fail_dead = c->fail_after && f && *f == '1';
	return c;
}

/* Registered ring memory kept across connections.  Mapping a connection's
 * rings, faulting their first pages in, registering them, and unmapping
 * them at the end cost more than the rest of its setup here (the unmap
 * alone ~150 us: with the passive thread running it is a TLB shootdown).
 * So a released connection's buffer goes here with its registration, up to
 * FAB_IDLE_BUFS, for the next connection of the same ring size.  Only the
 * memory: the CQ, EQ, endpoint and eventfds are each connection's own, as
 * an application's epoll set may still hold the old ones' fds.  Nothing of
 * a connection lives in the buffer (positions, flags, keys are in struct
 * fab_conn, zeroed by conn_new; a reader reads only what its new peer
 * wrote), and its endpoint is closed before the buffer comes here, so no
 * late write can land in it.  A forked child never takes the parent's
 * (their registration is the parent's domain).  Registered memory may be
 * pinned (verbs) and count against RLIMIT_MEMLOCK: the list holds at most
 * FAB_IDLE_BYTES, and a registration that fails empties it and retries. */
#define FAB_IDLE_BUFS 8
#define FAB_IDLE_BYTES ((size_t)32 << 20)

struct fab_buf {
	uint8_t *buf;
	size_t len;
	struct fid_mr *mr;
	struct fid_domain *domain;
	pid_t pid;
};
static struct fab_buf idle_bufs[FAB_IDLE_BUFS];
static int n_idle_bufs;
static size_t idle_bytes;

/* A kept buffer of len bytes registered in d: 1 with it in c. */
static int buf_take(struct fab_conn *c, struct fid_domain *d)
{
	int got = 0;
	pid_t me = getpid();
	pthread_mutex_lock(&pool_mu);
	for (int i = n_idle_bufs - 1; i >= 0 && !got; i--) {
		struct fab_buf *b = &idle_bufs[i];
		if (b->pid != me) {
			/* The parent's, in a forked child: forgotten, not
			 * unmapped (verbs maps it MADV_DONTFORK, so the range
			 * may be free here, or someone else's by now). */
			idle_bytes -= b->len;
			idle_bufs[i] = idle_bufs[--n_idle_bufs];
			continue;
		}
		if (b->len != c->buf_len || b->domain != d)
			continue;
		c->buf = b->buf;
		c->mr = b->mr;
		idle_bytes -= b->len;
		idle_bufs[i] = idle_bufs[--n_idle_bufs];
		got = 1;
	}
	pthread_mutex_unlock(&pool_mu);
	return got;
}

/* Keep c's registered buffer for a later connection: 1 if kept. */
static int buf_keep(struct fab_conn *c, struct fid_domain *d)
{
	int kept = 0;
	pthread_mutex_lock(&pool_mu);
	if (n_idle_bufs < FAB_IDLE_BUFS && idle_bytes + c->buf_len <= FAB_IDLE_BYTES && d) {
		idle_bufs[n_idle_bufs++] = (struct fab_buf){c->buf, c->buf_len, c->mr, d, c->pid};
		idle_bytes += c->buf_len;
		kept = 1;
	}
	pthread_mutex_unlock(&pool_mu);
	return kept;
}

/* Deregister and unmap every kept buffer of ours: 1 if there was one. */
static int buf_drain(void)
{
	struct fab_buf v[FAB_IDLE_BUFS];
	int n = 0;
	pid_t me = getpid();
	pthread_mutex_lock(&pool_mu);
	for (int i = 0; i < n_idle_bufs; i++)
		if (idle_bufs[i].pid == me)
			v[n++] = idle_bufs[i];
	n_idle_bufs = 0;
	idle_bytes = 0;
	pthread_mutex_unlock(&pool_mu);
	for (int i = 0; i < n; i++) {
		fi_close(&v[i].mr->fid);
		munmap(v[i].buf, v[i].len);
	}
	return n > 0;
}

static void conn_release(struct fab_conn *c)
{
	/* A forked child's copies point at the parent's sockets: closing
	 * them here would shut the parent's endpoint down. */
	int owner = fab_is_owner(c->pid);
	if (owner) {
		if (c->ep)
			fi_close(&c->ep->fid);
		if (c->cq)
			fi_close(&c->cq->fid);
		if (c->eq)
			fi_close(&c->eq->fid);
		/* After the endpoint: nothing can write into it any more. */
		if (c->mr && c->buf && buf_keep(c, fab_domain_of_process()))
			c->buf = NULL;
		else if (c->mr)
			fi_close(&c->mr->fid);
	}
	for (int r = 0; r < 2; r++) {
		if (c->kick[r] >= 0)
			shunt_fd_release(c->kick[r]);
		c->kick[r] = -1;
	}
	c->ep = NULL;
	c->mr = NULL;
	c->cq = NULL;
	c->eq = NULL;
	/* In a forked child the parent's buffer is forgotten, not unmapped
	 * (see buf_take). */
	if (c->buf && owner)
		munmap(c->buf, c->buf_len);
	c->buf = NULL;
	pthread_mutex_lock(&pool_mu);
	c->next = pool;
	pool = c;
	pthread_mutex_unlock(&pool_mu);
}

/* Rings, their registration and the CQ: before the endpoint, so a client
 * can stage bytes in registered memory while its offer is open. */
static int conn_mem(struct fab_conn *c, struct fid_domain *d, uint64_t ring)
{
	c->ring = ring;
	c->buf_len = 2 * ring + 4096;
	if (!buf_take(c, d)) {
		void *p = mmap(NULL, c->buf_len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		c->buf = p;
		uint64_t acc = FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
		if (fab_mr_reg(d, c->buf, c->buf_len, acc, &c->mr) != 0) {
			c->mr = NULL;
			if (!buf_drain() || fab_mr_reg(d, c->buf, c->buf_len, acc, &c->mr) != 0) {
				c->mr = NULL;
				return -1;
			}
		}
	}
	memset(c->buf + 2 * ring, 0, 4096);
	c->desc = fi_mr_desc(c->mr);
	struct fi_cq_attr ca = {.size = 512, .format = FI_CQ_FORMAT_DATA,
				.wait_obj = FI_WAIT_FD};
	if (fi_cq_open(d, &ca, &c->cq, NULL) != 0)
		return -1;
	if (fi_control(&c->cq->fid, FI_GETWAIT, &c->wait_fd) != 0)
		c->wait_fd = -1;
	/* Threads share the CQ: one that reads it wakes the others here. */
	for (int r = 0; r < 2; r++) {
		int k = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (k < 0)
			return -1;
		c->kick[r] = shunt_fd_own(k, &c->kick[r]);
		struct shunt_fd *e = shunt_fd_peek(c->kick[r]);
		if (e)
			e->owner = &c->kick[r];
	}
	return 0;
}

static int conn_ep(struct fab_conn *c, struct fid_domain *d, struct fid_fabric *fab,
		   struct fi_info *info)
{
	struct fi_eq_attr ea = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
	if (fi_eq_open(fab, &ea, &c->eq, NULL) != 0 ||
	    fi_endpoint(d, info, &c->ep, c) != 0 ||
	    fi_ep_bind(c->ep, &c->eq->fid, 0) != 0 ||
	    fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV) != 0 ||
	    fi_enable(c->ep) != 0)
		return -1;
	c->rx_cq_data = (info->mode & FI_RX_CQ_DATA) != 0;
	size_t depth = info->tx_attr ? info->tx_attr->size : 64;
	c->tx_depth = depth > 128 ? 64 : (depth > 2 ? depth / 2 : 1);
	/* Where remote CQ data consumes a receive (verbs), keep receives
	 * posted: zero-byte, into the scratch page. */
	if (c->rx_cq_data)
		for (int i = 0; i < 64; i++)
			if (fi_recv(c->ep, c->buf + 2 * c->ring, 0, c->desc, 0, NULL) != 0)
				return -1;
	return 0;
}

/* Our rx ring, as the peer names it in its RMA writes. */
static uint64_t ring_addr_rx(struct fab_conn *c)
{
	return fab_mr_remote_addr(c->buf, c->buf + c->ring);
}

/* The TCP connection can no longer carry the stream exactly: reset it, as a
 * peer that vanished would, rather than hand the application a stream with
 * a hole or a repeat in it. */
void fab_reset_tcp(struct fab_conn *c)
{
	__atomic_store_n(&c->state, FAB_BROKEN, __ATOMIC_RELEASE);
	int fd = __atomic_load_n(&c->base.fd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		struct sockaddr sa = {.sa_family = AF_UNSPEC};
		REAL(connect)(fd, &sa, sizeof sa);
	}
	SHUNT_WARN("fabric: fd=%d reset: the endpoint failed and no exact switch to TCP "
		   "was possible",
		   fd);
}

/* ---- offers waiting for their connect-back ------------------------------ */

static struct fab_conn *offers;
static pthread_mutex_t offers_mu = PTHREAD_MUTEX_INITIALIZER;

void fab_offer_add(struct fab_conn *c)
{
	pthread_mutex_lock(&offers_mu);
	c->next = offers;
	offers = c;
	pthread_mutex_unlock(&offers_mu);
}

static struct fab_conn *offer_find_locked(const uint8_t token[FAB_TOKEN_LEN], int remove)
{
	for (struct fab_conn **p = &offers; *p; p = &(*p)->next)
		if (memcmp((*p)->token, token, FAB_TOKEN_LEN) == 0) {
			struct fab_conn *c = *p;
			if (remove)
				*p = c->next;
			return c;
		}
	return NULL;
}

void fab_offer_del(struct fab_conn *c)
{
	pthread_mutex_lock(&offers_mu);
	for (struct fab_conn **p = &offers; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&offers_mu);
}

/* Wait on an endpoint's EQ for FI_CONNECTED.  0 connected (data copied to
 * rep), 1 refused or failed, -1 no answer within timeout_ms. */
static int wait_connected(struct fid_eq *eq, int timeout_ms, void *rep, size_t replen)
{
	union {
		struct fi_eq_cm_entry cm;
		uint8_t raw[sizeof(struct fi_eq_cm_entry) + 256];
	} ev;
	uint64_t end = fab_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t now = fab_now_ms();
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
	if (!d || len < sizeof req)
		return 0;
	memcpy(&req, e->data, sizeof req);
	if (req.magic != FAB_MAGIC || req.version != FAB_VERSION)
		return 0;
	pthread_mutex_lock(&offers_mu);
	struct fab_conn *c = offer_find_locked(req.token, 1);
	int st = FAB_OFFERED;
	int won = c && (uint64_t)1 << req.ring_log2 == c->ring &&
		  __atomic_compare_exchange_n(&c->state, &st,
					      req.decline ? FAB_DECLINED : FAB_ACCEPTING, 0,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	if (won)
		__atomic_add_fetch(&c->base.refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&offers_mu);
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
	struct fab_cm_rep rep = {.magic = FAB_MAGIC, .rx_addr = ring_addr_rx(c),
				 .rx_key = fi_mr_key(c->mr)};
	int rc = -1;
	if (conn_ep(c, d, fab, e->info) == 0 && fi_accept(c->ep, &rep, sizeof rep) == 0) {
		rc = wait_connected(c->eq, 2000 + (int)shunt_config()->offer_timeout_ms, NULL, 0);
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

static int route_source(const struct sockaddr *dst, socklen_t len,
			struct sockaddr_storage *src, socklen_t *slen)
{
	int s = REAL(socket)(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int rc = REAL(connect)(s, dst, len);
	if (rc == 0)
		rc = getsockname(s, (struct sockaddr *)src, slen);
	REAL(close)(s);
	return rc;
}

static int is_unspec(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

static in_port_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

/* Bind now so the 4-tuple names the offer before the SYN (as shm does). */
static int fix_local(int fd, const struct sockaddr *dst, socklen_t dlen,
		     struct sockaddr_storage *local, socklen_t *llen)
{
	socklen_t ll = sizeof *local;
	if (getsockname(fd, (struct sockaddr *)local, &ll) < 0)
		return -1;
	if (is_unspec(local)) {
		struct sockaddr_storage src;
		socklen_t sl = sizeof src;
		in_port_t port = port_of(local);
		if (route_source(dst, dlen, &src, &sl) < 0 || src.ss_family != local->ss_family)
			return -1;
		if (src.ss_family == AF_INET)
			((struct sockaddr_in *)&src)->sin_port = port;
		else
			((struct sockaddr_in6 *)&src)->sin6_port = port;
		if (REAL(bind)(fd, (struct sockaddr *)&src, sl) < 0)
			return -1;
	} else if (!port_of(local)) {
		if (REAL(bind)(fd, (struct sockaddr *)local, ll) < 0)
			return -1;
	}
	*llen = sizeof *local;
	return getsockname(fd, (struct sockaddr *)local, llen);
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a) ||
	       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

static int ring_ok(uint64_t r)
{
	return r >= FAB_MIN_RING && r <= FAB_MAX_RING && (r & (r - 1)) == 0;
}

static enum shunt_reason fab_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t dlen)
{
	/* Same host: shm's business (its reason stands). */
	if (is_loopback(dst))
		return SHUNT_R_NO_PEER_SHIM;
	char prov[32];
	enum shunt_reason why = fab_provider_for(dst, dlen, prov);
	if (why != SHUNT_R_NONE)
		return why;
	struct fab_offer o;
	struct sockaddr_storage local;
	socklen_t llen;
	struct fab_conn *c = NULL;
	memset(&o, 0, sizeof o);
	SHUNT_GUARD_ENTER();
	why = SHUNT_R_BIND_FAILED;
	if (fix_local(fd, dst, dlen, &local, &llen) < 0 ||
	    shm_tuple_make(&o.tuple, (struct sockaddr *)&local, dst) < 0)
		goto out;
	why = SHUNT_R_PROVIDER_ERROR;
	struct fid_domain *d = fab_domain(prov, NULL);
	if (!d || fab_pep_addr(prov, (struct sockaddr *)&local, llen, &o) < 0)
		goto out;
	uint64_t ring = shunt_config()->ring_size;
	if (ring > FAB_MAX_RING)
		ring = FAB_MAX_RING;
	c = conn_new(1);
	if (!c)
		goto out;
	why = SHUNT_R_RING_ALLOC;
	if (conn_mem(c, d, ring) < 0)
		goto out;
	why = SHUNT_R_INTERNAL;
	if (getrandom(c->token, sizeof c->token, 0) != sizeof c->token)
		goto out;
	memcpy(o.token, c->token, sizeof o.token);
	o.ring_size = ring;
	c->tuple = o.tuple;
	if (dlen <= sizeof c->peer_sa) {
		memcpy(&c->peer_sa, dst, dlen);
		c->peer_salen = dlen;
	}
	c->state = FAB_OFFERED;
	fab_offer_add(c);
	enum fab_rdv_result r =
		fab_rdv_offer(dst, dlen, &o, (int)shunt_config()->agent_timeout_ms);
	if (r != FAB_RDV_OK) {
		fab_offer_del(c);
		why = r == FAB_RDV_NO_AGENT	     ? SHUNT_R_NO_AGENT
		      : r == FAB_RDV_NO_LISTENER ? SHUNT_R_NO_PEER_SHIM
						 : SHUNT_R_DECLINED;
		goto out;
	}
	c->deadline = fab_now_ms() + shunt_config()->offer_timeout_ms;
	e->conn = &c->base;
	why = SHUNT_R_NONE;
	SHUNT_DEBUG("fabric: offer filed fd=%d provider=%s", fd, prov);
out:
	if (why != SHUNT_R_NONE && c)
		conn_release(c);
	SHUNT_GUARD_LEAVE();
	return why;
}

/* ---- server ---------------------------------------------------------------- */

static int tuple_of(int fd, const struct sockaddr *peer, struct shm_tuple *t)
{
	struct sockaddr_storage local;
	socklen_t ll = sizeof local;
	if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0)
		return -1;
	return shm_tuple_make(t, peer, (struct sockaddr *)&local);
}

static int take_offer(int fd, const struct sockaddr *peer, struct fab_offer *o)
{
	const char *rd = shunt_rundir();
	struct shm_tuple t;
	if (!rd || is_loopback(peer) || tuple_of(fd, peer, &t) < 0)
		return -1;
	return fab_rdv_take(rd, &t, o);
}

/* Tell a waiting client to go on over TCP now rather than at its timeout. */
static void refuse(const struct fab_offer *o)
{
	struct fid_fabric *fab;
	struct fid_domain *d = fab_domain(o->provider, &fab);
	struct fi_info *info = d ? fab_info_for_peer(o) : NULL;
	struct fid_eq *eq = NULL;
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = NULL;
	struct fi_eq_attr ea = {.size = 4, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr ca = {.size = 4, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fab_cm_req req = {.magic = FAB_MAGIC, .version = FAB_VERSION, .decline = 1};
	memcpy(req.token, o->token, sizeof req.token);
	while (o->ring_size > ((uint64_t)1 << req.ring_log2) && req.ring_log2 < 63)
		req.ring_log2++;
	/* (An endpoint enables only with its CQ bound, even one that never
	 * carries anything.) */
	int rc = -1;
	if (info && fi_eq_open(fab, &ea, &eq, NULL) == 0 && fi_cq_open(d, &ca, &cq, NULL) == 0 &&
	    fi_endpoint(d, info, &ep, NULL) == 0 && fi_ep_bind(ep, &eq->fid, 0) == 0 &&
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0 && fi_enable(ep) == 0 &&
	    fi_connect(ep, o->addr, &req, sizeof req) == 0)
		rc = wait_connected(eq, 200, NULL, 0);
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
	struct fab_offer o;
	SHUNT_GUARD_ENTER();
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	struct fab_conn *c = NULL;
	struct fi_info *info = NULL;
	if (take_offer(fd, peer, &o) < 0)
		goto out;
	why = SHUNT_R_BAD_OFFER;
	if (!ring_ok(o.ring_size) || o.addrlen > FAB_ADDR_MAX || o.provider[31] ||
	    o.addrlen == 0)
		goto refuse;
	char prov[32];
	why = fab_provider_for(peer, plen, prov);
	if (why != SHUNT_R_NONE)
		goto refuse;
	why = SHUNT_R_NO_TRANSPORT;
	if (strcmp(prov, o.provider) != 0)
		goto refuse;
	why = SHUNT_R_PROVIDER_ERROR;
	struct fid_fabric *fab;
	struct fid_domain *d = fab_domain(prov, &fab);
	if (!d || !(info = fab_info_for_peer(&o)) || !(c = conn_new(0)))
		goto refuse;
	why = SHUNT_R_RING_ALLOC;
	if (conn_mem(c, d, o.ring_size) < 0)
		goto refuse;
	why = SHUNT_R_PROVIDER_ERROR;
	if (conn_ep(c, d, fab, info) < 0)
		goto refuse;
	struct fab_cm_req req = {.magic = FAB_MAGIC, .version = FAB_VERSION,
				 .rx_addr = ring_addr_rx(c), .rx_key = fi_mr_key(c->mr)};
	memcpy(req.token, o.token, sizeof req.token);
	while (o.ring_size > ((uint64_t)1 << req.ring_log2))
		req.ring_log2++;
	if (fi_connect(c->ep, o.addr, &req, sizeof req) != 0)
		goto out;
	struct fab_cm_rep rep;
	int rc = wait_connected(c->eq, (int)shunt_config()->offer_timeout_ms + 2000, &rep,
				sizeof rep);
	if (rc == 1) {
		why = SHUNT_R_OFFER_TIMEOUT; /* the client gave up: it is on TCP */
		goto out;
	}
	if (rc < 0 || rep.magic != FAB_MAGIC) {
		/* The client may have accepted: neither path is safe now. */
		c->base.fd = fd;
		fab_reset_tcp(c);
		why = SHUNT_R_PROVIDER_ERROR;
		goto out;
	}
	c->peer_addr = rep.rx_addr;
	c->peer_key = rep.rx_key;
	memcpy(c->token, o.token, sizeof c->token);
	c->tuple = o.tuple;
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
	if (why != SHUNT_R_BAD_OFFER || o.addrlen <= FAB_ADDR_MAX)
		refuse(&o);
out:
	if (why != SHUNT_R_NONE && c)
		conn_release(c);
	fi_freeinfo(info);
	SHUNT_GUARD_LEAVE();
	return why;
}

static void fab_decline(int fd, const struct sockaddr *peer, socklen_t plen)
{
	(void)plen;
	struct fab_offer o;
	SHUNT_GUARD_ENTER();
	if (take_offer(fd, peer, &o) == 0 && o.addrlen <= FAB_ADDR_MAX && o.addrlen &&
	    !o.provider[31])
		refuse(&o);
	SHUNT_GUARD_LEAVE();
}

/* ---- demotion, fork, close ------------------------------------------------- */

/* The passive thread owns a connection between its CAS and its answer. */
static void wait_accepting(struct fab_conn *c)
{
	while (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == FAB_ACCEPTING)
		sched_yield();
}

/* Bytes the peer sent that the application has not read and nobody will
 * resend (the peer closed or died after they arrived): 0 or the iovecs. */
static int leftover(struct fab_conn *c, struct iovec v[2])
{
	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != FAB_SWITCHED ||
	    c->rx_limit <= c->rx_consumed)
		return 0;
	uint64_t len = c->rx_limit - c->rx_consumed, off = c->rx_consumed & (c->ring - 1);
	uint64_t first = len < c->ring - off ? len : c->ring - off;
	uint8_t *rx = c->buf + c->ring;
	v[0] = (struct iovec){rx + off, first};
	v[1] = (struct iovec){rx, len - first};
	return len > first ? 2 : 1;
}

/* The caller hands the fd to the kernel path when this returns (exec,
 * fork, fdopen, ...), so bytes still in the ring with nobody left to
 * resend them go to a spill (preload/shunt_spill.h) first. */
static void fab_demote(struct shunt_conn *base, enum shunt_reason why)
{
	struct fab_conn *c = (struct fab_conn *)base;
	SHUNT_GUARD_ENTER();
	wait_accepting(c);
	fab_lock(c);
	fab_switch_locked(c, why);
	struct iovec v[2];
	int nv = leftover(c, v);
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
static void fab_fork(struct shunt_conn *base)
{
	if (__atomic_load_n(&base->finished, __ATOMIC_ACQUIRE))
		return;
	fab_demote(base, SHUNT_R_FORK_SHARED);
	shunt_conn_finish(base, SHUNT_R_FORK_SHARED);
}

/* At exit every connection says goodbye within one shared bound, not one
 * each: a process with many connections to a peer that stopped reading
 * would otherwise take minutes to exit. */
static uint64_t exit_deadline;

static void fab_close(struct shunt_conn *base)
{
	struct fab_conn *c = (struct fab_conn *)base;
	SHUNT_GUARD_ENTER();
	fab_offer_del(c);
	wait_accepting(c);
	fab_lock(c);
	int st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	if (st == FAB_OFFERED || st == FAB_DECLINED) {
		/* Never up: TCP keeps the bytes for the server's accept(). */
		fab_give_up_locked(c);
	} else if (st == FAB_DEMOTING) {
		/* Leaving already: finish, so what we staged reaches the peer. */
		fab_switch_locked(c, 0);
	} else if (st == FAB_UP) {
		/* Say goodbye after the last bytes, and wait until they are in
		 * the peer's memory: nothing of ours survives our exit. */
		fab_progress_locked(c);
		uint64_t end = fab_now_ms() + 2000;
		if (exit_deadline && end > exit_deadline)
			end = exit_deadline;
		while (c->tx_posted != c->tx_head && !c->got_demote && !c->failed &&
		       fab_now_ms() < end) {
			fab_flush(c);
			fab_progress_locked(c);
		}
		if (c->got_demote || c->failed) {
			fab_switch_locked(c, c->got_demote ? SHUNT_R_PEER_DEMOTED
							   : SHUNT_R_PROVIDER_ERROR);
		} else if (fab_post_imm(c, FAB_IMM_CLOSE, c->tx_head) == 0) {
			c->fin_pending = 0;
			struct fid *cqf = &c->cq->fid;
			for (unsigned spins = 0; c->tx_inflight && !c->failed && fab_now_ms() < end; spins++) {
				if (fab_progress_locked(c) || spins < 64)
					continue;
				/* Sleep on the CQ's fd: the peer's provider needs a core to answer. */
				struct fid_fabric *fab = fab_fabric();
				if (c->wait_fd >= 0 && fab && fi_trywait(fab, &cqf, 1) == FI_SUCCESS) {
					struct pollfd p = {.fd = c->wait_fd, .events = POLLIN};
					REAL(poll)(&p, 1, 2);
				} else {
					sched_yield();
				}
			}
		}
		if (c->tx_inflight && !c->failed && !c->got_demote)
			SHUNT_WARN("fabric: fd=%d closed before the peer took its last bytes "
				   "(%zu writes in flight): they are lost if this process exits now",
				   c->base.fd, c->tx_inflight);
	}
	fab_unlock(c);
	fab_send_fin(c);
	if (shunt_log_on(SHUNT_LOG_DEBUG))
		shunt_log(SHUNT_LOG_DEBUG, "fabric close fd=%d bytes_in=%llu bytes_out=%llu",
			  c->base.fd, (unsigned long long)c->bytes_in,
			  (unsigned long long)c->bytes_out);
	__atomic_store_n(&c->base.fd, -1, __ATOMIC_RELEASE);
	SHUNT_GUARD_LEAVE();
}

/* A process that exits without closing (the usual way) never runs
 * fab_close: its last bytes may still sit in the provider, which dies with
 * it, where the kernel would have kept sending them.  Say goodbye to every
 * connection it owns here.  (_exit and signals skip this, as they skip
 * stdio buffers.) */
static void exit_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)fd;
	(void)arg;
	struct shunt_conn *c = e->conn;
	if (shunt_fd_kind(e) != SHUNT_FD_ACCEL || !c || c->ops != &fab_ops ||
	    !fab_is_owner(((struct fab_conn *)c)->pid) ||
	    __atomic_load_n(&c->fd, __ATOMIC_ACQUIRE) != fd)
		return;
	/* exit() from a signal handler (libinfinipath, loaded with libfabric,
	 * exits on SIGTERM) may have interrupted this very thread inside the
	 * connection's lock: never wait for it for good. */
	struct fab_conn *fc = (struct fab_conn *)c;
	uint64_t end = fab_now_ms() + 50;
	while (__atomic_exchange_n(&fc->lock, 1, __ATOMIC_ACQUIRE)) {
		if (fab_now_ms() >= end) {
			SHUNT_WARN("fabric: fd=%d busy at exit: closed without a goodbye", fd);
			return;
		}
		sched_yield();
	}
	fab_unlock(fc);
	fab_close(c);
	__atomic_store_n(&c->fd, fd, __ATOMIC_RELEASE);
}

__attribute__((destructor)) static void fab_at_exit(void)
{
	if (__atomic_load_n(&shunt_guard, __ATOMIC_RELAXED) == 0 && shunt_any_accel()) {
		exit_deadline = fab_now_ms() + 2000;
		shunt_fd_foreach(SHUNT_FD_ACCEL, exit_one, NULL);
	}
}

static void fab_free(struct shunt_conn *base)
{
	SHUNT_GUARD_ENTER();
	conn_release((struct fab_conn *)base);
	SHUNT_GUARD_LEAVE();
}

const struct shunt_transport_ops fab_ops = {
	.name = "fabric",
	.id = SHUNT_TP_FABRIC,
	.on_listen = fab_on_listen,
	.connect = fab_connect,
	.accept = fab_accept,
	.decline = fab_decline,
	.close = fab_close,
	.free = fab_free,
	.demote = fab_demote,
	.fork = fab_fork,
	.recvmsg = fab_recvmsg,
	.sendmsg = fab_sendmsg,
	.shutdown = fab_shutdown,
	.ioctl = fab_ioctl,
	.poll = fab_poll,
	.arm = fab_arm,
	.disarm = fab_disarm,
	.progress = fab_progress,
};
