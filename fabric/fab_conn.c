/* The fabric connection object: recycled, never freed; its registered
 * buffers (kept across connections), CQ, EQ and endpoint.  Its close, fork
 * and exit in fab_life.c, rendezvous in fab_offer.c, data path in
 * fab_data.c, leaving the fabric in fab_demote.c. */
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
#include "fab_verbs.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_forklock.h"
#include "core/shunt_real.h"
#include "core/shunt_rundir.h"

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

static struct shunt_conn_pool pool = SHUNT_CONN_POOL(struct fab_conn);
SHUNT_FORK_MUTEX(pool.mu, SHUNT_RANK_POOL)

struct fab_conn *fab_conn_new(const struct shunt_conn_ops *ops, int client)
{
	struct fab_conn *c = shunt_conn_alloc(&pool);
	if (!c)
		return NULL;
	c->base.ops = ops;
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
 * fab_conn, zeroed by fab_conn_new; a reader reads only what its new peer
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
static pthread_mutex_t bufs_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(bufs_mu, SHUNT_RANK_FAB_BUFS)
static int n_idle_bufs;
static size_t idle_bytes;

/* A kept buffer of len bytes registered in d: 1 with it in c. */
static int buf_take(struct fab_conn *c, struct fid_domain *d)
{
	int got = 0;
	pid_t me = getpid();
	pthread_mutex_lock(&bufs_mu);
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
	pthread_mutex_unlock(&bufs_mu);
	return got;
}

/* Keep c's registered buffer for a later connection: 1 if kept. */
static int buf_keep(struct fab_conn *c, struct fid_domain *d)
{
	int kept = 0;
	pthread_mutex_lock(&bufs_mu);
	if (n_idle_bufs < FAB_IDLE_BUFS && idle_bytes + c->buf_len <= FAB_IDLE_BYTES && d) {
		idle_bufs[n_idle_bufs++] = (struct fab_buf){c->buf, c->buf_len, c->mr, d, c->pid};
		idle_bytes += c->buf_len;
		kept = 1;
	}
	pthread_mutex_unlock(&bufs_mu);
	return kept;
}

/* Deregister and unmap every kept buffer of ours: 1 if there was one. */
static int buf_drain(void)
{
	struct fab_buf v[FAB_IDLE_BUFS];
	int n = 0;
	pid_t me = getpid();
	pthread_mutex_lock(&bufs_mu);
	for (int i = 0; i < n_idle_bufs; i++)
		if (idle_bufs[i].pid == me)
			v[n++] = idle_bufs[i];
	n_idle_bufs = 0;
	idle_bytes = 0;
	pthread_mutex_unlock(&bufs_mu);
	for (int i = 0; i < n; i++) {
		fi_close(&v[i].mr->fid);
		munmap(v[i].buf, v[i].len);
	}
	return n > 0;
}

void fab_conn_release(struct fab_conn *c)
{
	if (fab_vrb_on() && c->ep) {
		char r[320];
		fab_vrb_report(r, sizeof r);
		SHUNT_DEBUG("fabric: verbs rules (process so far): %s", r);
	}
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
	shunt_conn_recycle(&pool, &c->base);
}

/* Rings, their registration and the CQ: before the endpoint, so a client
 * can stage bytes in registered memory while its offer is open. */
int fab_conn_mem(struct fab_conn *c, struct fid_domain *d, uint64_t ring)
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
	fab_ctx_init(&c->ctxs);
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

int fab_conn_ep(struct fab_conn *c, struct fid_domain *d, struct fid_fabric *fab,
		   struct fi_info *info)
{
	struct fi_eq_attr ea = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
	if (fi_eq_open(fab, &ea, &c->eq, NULL) != 0 ||
	    fi_endpoint(d, info, &c->ep, c) != 0 ||
	    fi_ep_bind(c->ep, &c->eq->fid, 0) != 0 ||
	    fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV) != 0 ||
	    fi_enable(c->ep) != 0)
		return -1;
	struct fab_attrs a;
	fab_attrs_for(info, &a);
	c->rx_cq_data = (a.mode & FI_RX_CQ_DATA) != 0;
	size_t depth = a.tx_size ? a.tx_size : 64;
	c->tx_depth = depth > 128 ? 64 : (depth > 2 ? depth / 2 : 1);
	c->chunk = fab_attrs_chunk(&a, (uint64_t)256 << 10);
	/* Where remote CQ data consumes a receive (verbs), keep receives
	 * posted: zero-byte, into the scratch page. */
	if (c->rx_cq_data)
		for (int i = 0; i < FAB_RX_POSTS; i++)
			if (fab_op_recv(c) != 0)
				return -1;
	return 0;
}

/* Our rx ring, as the peer names it in its RMA writes. */
uint64_t fab_ring_addr_rx(struct fab_conn *c)
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
	SHUNT_WARN("fabric: fd=%d reset: the endpoint failed and no exact demotion to TCP "
		   "was possible",
		   fd);
}
