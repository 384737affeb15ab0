/* A fabric connection's life after its rendezvous: close (the goodbye
 * after the last bytes), fork (which leaves the fabric), free, and exit,
 * which says goodbye for every connection the process owns.  The object
 * itself in fab_conn.c; the tables put together in fab_offer.c. */
#include <poll.h>
#include <sched.h>

#include "fab_internal.h"
#include "core/shunt_log.h"
#include "core/shunt_forklock.h"
#include "core/shunt_real.h"
#include "core/shunt_spill.h"

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
	fab_wait_accepting(c);
	fab_lock(c);
	int st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
	if (st == FAB_OFFERED || st == FAB_DECLINED) {
		/* Never up: TCP keeps the bytes for the server's accept(). */
		fab_demote_offer_locked(c);
	} else if (st == FAB_DEMOTING) {
		/* Leaving already: finish, so what we staged reaches the peer. */
		fab_demote_now_locked(c, 0);
	} else if (st == FAB_UP) {
		/* Say goodbye after the last bytes, and wait until they are in
		 * the peer's memory: nothing of ours survives our exit. */
		fab_cq_drain_locked(c);
		uint64_t end = shunt_now_ms() + 2000;
		if (exit_deadline && end > exit_deadline)
			end = exit_deadline;
		while (c->tx_posted != c->tx_head && !c->got_demote && !c->failed &&
		       shunt_now_ms() < end) {
			fab_flush(c);
			fab_cq_drain_locked(c);
		}
		if (c->got_demote || c->failed) {
			fab_demote_now_locked(c, c->got_demote ? SHUNT_R_PEER_DEMOTED
							   : SHUNT_R_PROVIDER_ERROR);
		} else if (fab_post_imm(c, FAB_IMM_CLOSE, c->tx_head) == 0) {
			c->base.fin_pending = 0;
			struct fid *cqf = &c->cq->fid;
			for (unsigned spins = 0; c->tx_inflight && !c->failed && shunt_now_ms() < end; spins++) {
				if (fab_cq_drain_locked(c) || spins < 64)
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
	__atomic_store_n(&c->base.fd, -1, __ATOMIC_RELEASE);
	SHUNT_GUARD_LEAVE();
}

/* A process that exits without closing (the usual way) never runs
 * fab_close: its last bytes may still sit in the provider, which dies with
 * it, where the kernel would have kept sending them.  Say goodbye to every
 * connection it owns here.  (_exit and signals skip this, as they skip
 * stdio buffers.) */
static void exit_one(int fd, struct shunt_conn *c, void *arg)
{
	(void)arg;
	struct fab_conn *fc = (struct fab_conn *)c;
	if (!fab_is_owner(fc->pid))
		return;
	/* exit() from a signal handler (libinfinipath, loaded with libfabric,
	 * exits on SIGTERM) may have interrupted this very thread inside the
	 * connection's lock: never wait for it for good. */
	uint64_t end = shunt_now_ms() + 50;
	while (__atomic_exchange_n(&fc->lock, 1, __ATOMIC_ACQUIRE)) {
		if (shunt_now_ms() >= end) {
			SHUNT_WARN("fabric: fd=%d busy at exit: closed without a goodbye", fd);
			return;
		}
		sched_yield();
	}
	fab_unlock(fc);
	shunt_conn_close_at_exit(c);
}

void fab_at_exit(const struct shunt_transport_ops *t)
{
	if (shunt_any_accel()) {
		exit_deadline = shunt_now_ms() + 2000;
		shunt_conn_foreach(t, exit_one, NULL);
	}
}

static void fab_free(struct shunt_conn *base)
{
	SHUNT_GUARD_ENTER();
	fab_conn_release((struct fab_conn *)base);
	SHUNT_GUARD_LEAVE();
}

const struct shunt_conn_life_ops fab_life_ops = {
	.close = fab_close,
	.free = fab_free,
	.demote = fab_demote,
	.fork = fab_fork,
};
