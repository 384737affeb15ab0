/* The shm connection object: recycled, never freed; its life ops (close,
 * fork, free).  Its files in shm_files.c, rendezvous in shm_offer.c (with
 * the transport's tables), data path in shm_data.c, leaving the rings in
 * shm_demote.c, wake sockets in shm_wake.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/shunt_forklock.h"
#include "core/shunt_log.h"
#include "core/shunt_rundir_open.h"
#include "core/shunt_transport.h"
#include "shm_internal.h"


static struct shunt_conn_pool pool = SHUNT_CONN_POOL(struct shm_conn);
SHUNT_FORK_MUTEX(pool.mu, SHUNT_RANK_POOL)

void shm_conn_view(struct shm_conn *c, struct shm_hdr *h, int side, uint64_t ring)
{
	c->hdr = h;
	c->side = side;
	uint8_t *c2s = (uint8_t *)h + SHM_HDR_SIZE, *s2c = c2s + ring;
	if (side == SHM_CLIENT) {
		shm_ring_init(&c->tx, &h->ring[0], c2s, ring);
		shm_ring_init(&c->rx, &h->ring[1], s2c, ring);
	} else {
		shm_ring_init(&c->tx, &h->ring[1], s2c, ring);
		shm_ring_init(&c->rx, &h->ring[0], c2s, ring);
	}
}

struct shm_conn *shm_conn_new(const struct shunt_conn_ops *ops, const struct shm_slot *slot,
			     int side, uint64_t ring)
{
	struct shm_conn *c = shunt_conn_alloc(&pool);
	if (!c)
		return NULL;
	c->base.ops = ops;
	c->slot = *slot;
	c->slot.fork_fd = -1;
	c->wake[0] = c->wake[1] = -1;
	c->wake_id[0] = c->wake_id[1] = 0;
	c->wake_abs = 0;
	c->pending = -1;
	c->named = 0;
	c->cma_ok = 0;
	c->cma_tx_off = c->cma_posted = c->cma_said = 0;
	c->cma_in = c->cma_out = 0;
	c->lk = (struct shm_lock_owner){c->slot.tag, shm_arena_tag_alive, &c->slot};
	shm_conn_view(c, slot->hdr, side, ring);
	return c;
}

void shm_conn_free(struct shm_conn *c)
{
	shm_stash_free(c);
	shm_pending_end(c->pending);
	c->pending = -1;
	shm_wake_release(c);
	if (c->hdr)
		shm_arena_release(&c->slot);
	c->hdr = NULL;
	shunt_conn_recycle(&pool, &c->base);
}

static void shm_fork(struct shunt_conn *base)
{
	struct shm_conn *c = (struct shm_conn *)base;
	if (c->demoted && shm_stash_left(c)) {
		/* Private memory: the child would serve the same bytes again.
		 * A spill, which both share, serves them once. */
		shm_demote(base, SHUNT_R_FORK_SHARED);
		shunt_conn_finish(base, SHUNT_R_FORK_SHARED);
		return;
	}
	c->forked = 1;
	SHUNT_GUARD_ENTER();
	shm_arena_fork(&c->slot);
	SHUNT_GUARD_LEAVE();
}

static void shm_forked(struct shunt_conn *base, int child)
{
	SHUNT_GUARD_ENTER();
	struct shm_conn *c = (struct shm_conn *)base;
	shm_arena_forked(&c->slot, child);
	c->lk.tag = c->slot.tag;
	SHUNT_GUARD_LEAVE();
}

/* Tell the peer this end's last number here closed, and wake it only if
 * it sleeps: one awake sees the hint.  (One asleep on a futex does not hear
 * the FIN.) */
static void closed_hint(struct shm_conn *c)
{
	__atomic_store_n(&c->tx.ctl->closed_hint, 1, __ATOMIC_RELEASE);
	shm_wake_peer(c);
}

static void shm_close(struct shunt_conn *base)
{
	struct shm_conn *c = (struct shm_conn *)base;
	SHUNT_GUARD_ENTER();
	shm_cma_close(c);
	uint32_t st = __atomic_load_n(&c->hdr->state, __ATOMIC_ACQUIRE);
	/* Never accepted yet: give the bytes to TCP, which keeps them for the
	 * server's accept() as it would have anyway (this end is demoted
	 * then).  Unless a server committed since we looked: then it is
	 * closed as the committed connection it is. */
	if (c->side == SHM_CLIENT && st == SHM_OFFERED && !shm_withdraw(base))
		st = SHM_COMMITTED;
	if (st >= SHM_DEMOTING && !c->demoted) {
		/* Declined (or demoted by the peer) while we were not looking:
		 * what the peer never read must still reach it, before FIN. */
		shm_replay(c);
	} else if (!c->demoted) {
		/* Only a hint: the socket may live on in another process.
		 * The peer trusts the TCP FIN, which comes with the last
		 * close.  Given after the real close when it is close():
		 * told before the FIN, the peer would look at a quiet socket,
		 * again and again while it spins, then arm a wait for it. */
		if (base->after_close)
			c->wake_at_closed = 1;
		else
			closed_hint(c);
	}
	/* A connect() that failed: its offer will never be named. */
	shm_pending_end(c->pending);
	c->pending = -1;
	if (c->side == SHM_CLIENT && !c->committed && st != SHM_COMMITTED && c->named) {
		/* The server removes an offer it takes; one never taken is
		 * ours to remove. */
		char path[SHUNT_PATH_MAX];
		if (c->named == 1)
			shm_names_drop(&c->hdr->tuple, c->target);
		else if (!shm_path(path, sizeof path, c->key, ""))
			shm_names_unlink(path);
	}
	/* The number is about to be closed: a call still in flight in
	 * another thread must not touch it (it may be reused). */
	__atomic_store_n(&c->base.fd, -1, __ATOMIC_RELEASE);
	SHUNT_GUARD_LEAVE();
}

static void shm_closed(struct shunt_conn *base)
{
	struct shm_conn *c = (struct shm_conn *)base;
	if (!c->wake_at_closed)
		return;
	c->wake_at_closed = 0;
	SHUNT_GUARD_ENTER();
	closed_hint(c);
	SHUNT_GUARD_LEAVE();
}

static void shm_free(struct shunt_conn *base)
{
	SHUNT_GUARD_ENTER();
	shm_conn_free((struct shm_conn *)base);
	SHUNT_GUARD_LEAVE();
}

const struct shunt_conn_life_ops shm_life_ops = {
	.close = shm_close,
	.closed = shm_closed,
	.free = shm_free,
	.demote = shm_demote,
	.fork = shm_fork,
	.forked = shm_forked,
};
