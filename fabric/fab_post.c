/* What one end posts to its endpoint and the completions that come back,
 * all with the connection's lock held: the data writes out of the tx ring,
 * credits, the zero-byte writes carrying only CQ data (SHUT, CLOSE,
 * DEMOTE), and reading the CQ, which moves the stream positions.  Under
 * the data path (fab_data.c) and the demotion (fab_demote.c), which both
 * post. */
#include <string.h>
#include <unistd.h>

#include "fab_internal.h"
#include "fab_verbs.h"
#include "core/shunt_log.h"
#include "core/shunt_real.h"

static inline int state_of(struct fab_conn *c)
{
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
}

/* Threads share the CQ: one that reads it may take the event another one
 * sleeps for.  Pairs with the fence in fab_arm(): either the sleeper sees
 * what we read, or we see it counted and wake it. */
void fab_kick(struct fab_conn *c, int role)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->waiters[role], __ATOMIC_RELAXED) && c->kick[role] >= 0) {
		uint64_t one = 1;
		if (REAL(write)(c->kick[role], &one, sizeof one) < 0) {
			/* full counter: a wakeup is pending anyway */
		}
	}
}

/* An error completion (lock held): its operation is over; the first
 * error is kept for the end of the read, which judges it. */
static void cq_error(struct fab_conn *c, const struct fi_cq_err_entry *err, int *err_seen)
{
	/* By its context: verbs fills an error's flags only for work
	 * requests that succeeded, and a receive flushed at the end is no
	 * write. */
	int k = fab_op_done(c, err->op_context);
	if ((k == FAB_CTX_TX || (k < 0 && !(err->flags & FI_REMOTE_WRITE))) && c->tx_inflight)
		c->tx_inflight--;
	if (!*err_seen)
		*err_seen = err->err ? err->err : FI_EIO;
}

/* Read the CQ (lock held): 1 if anything moved.  full: on to -FI_EAGAIN, so the provider's progress runs
 * once more after the last entry (what the control paths want: everything
 * the provider can show now).  Otherwise stop at a short read: see below. */
static int cq_read(struct fab_conn *c, int full)
{
	struct fi_cq_data_entry ent[16];
	int moved = 0;
	if (!c->cq || c->dead)
		return 0;
	int err_seen = 0;
	c->cq_fresh = 0;
	for (;;) {
		ssize_t n = fi_cq_read(c->cq, ent, 16);
		if (n == -FI_EAGAIN) {
			c->cq_fresh = !err_seen;
			if (err_seen && !c->peer_closed) {
				if (!c->failed)
					SHUNT_DEBUG("fabric: fd=%d completion error: %s", c->base.fd,
						    fi_strerror(err_seen));
				c->failed = 2;
				fab_kick(c, FAB_RX);
				fab_kick(c, FAB_TX);
			}
			return moved;
		}
		if (n == -FI_EAVAIL) {
			/* libfabric reports errors ahead of the entries queued
			 * before them: read on, then judge (a peer's CLOSE
			 * may be among them, and then its endpoint going away
			 * under our credits in flight is harmless). */
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(c->cq, &err, 0) <= 0) {
				c->failed = 2;
				return 1;
			}
			cq_error(c, &err, &err_seen);
			moved = 1;
			continue;
		}
		if (n < 0) {
			c->failed = 2;
			return 1;
		}
		int rx_moved = 0, tx_moved = 0;
		for (ssize_t i = 0; i < n; i++) {
			moved = 1;
			if (fab_vrb_on()) {
				fab_vrb_completion(c, &ent[i]);
				/* The peer's CLOSE: its endpoint goes, and verbs
				 * flushes our posted receives as errors, reported
				 * ahead of the entries before them. */
				struct fi_cq_err_entry fl;
				while (fab_vrb_flush(c, &ent[i], &fl))
					cq_error(c, &fl, &err_seen);
			}
			/* A write of ours completing carries its context: some
			 * providers (sockets) flag its CQ data there too. */
			int k = ent[i].op_context ? fab_op_done(c, ent[i].op_context) : -1;
			if (k == FAB_CTX_TX || (k < 0 && !(ent[i].flags & FI_REMOTE_CQ_DATA))) {
				if (c->tx_inflight)
					c->tx_inflight--;
				tx_moved = 1; /* a post that found the queue full may go */
				continue;
			}
			if (fab_imm_type(ent[i].data) == FAB_IMM_CREDIT)
				tx_moved = 1;
			else
				rx_moved = tx_moved = 1; /* data, or the state */
			if (c->rx_cq_data)
				fab_op_recv(c); /* the one this data consumed */
			c->peer_ready = 1;
			uint32_t v = fab_imm_pos(ent[i].data);
			switch (fab_imm_type(ent[i].data)) {
			case FAB_IMM_DATA: {
				uint64_t p = fab_pos_recon(c->rx_arrived, v);
				if (fab_data_pos_ok(p, c->rx_consumed, c->ring))
					c->rx_arrived = p;
				break;
			}
			case FAB_IMM_CREDIT: {
				uint64_t p = fab_pos_recon(c->tx_acked, v);
				if (fab_peer_pos_ok(p, c->tx_acked, c->tx_posted))
					c->tx_acked = p;
				break;
			}
			case FAB_IMM_SHUT:
			case FAB_IMM_CLOSE:
				c->peer_shut = 1;
				c->peer_shut_at = fab_pos_recon(c->rx_consumed, v);
				if (fab_imm_type(ent[i].data) == FAB_IMM_CLOSE)
					c->peer_closed = 1;
				break;
			case FAB_IMM_DEMOTE: {
				uint64_t p = fab_pos_recon(c->tx_acked, v);
				if (fab_peer_pos_ok(p, c->tx_acked, c->tx_posted)) {
					c->peer_demote = p;
					c->got_demote = 1;
				} else {
					c->failed = 2; /* a position we never sent */
				}
				break;
			}
			}
		}
		/* After the positions moved, not before: a woken sleeper
		 * must find them. */
		if (rx_moved)
			fab_kick(c, FAB_RX);
		if (tx_moved)
			fab_kick(c, FAB_TX);
		/* A short read emptied the CQ: in the data path another read
		 * would only run the provider's progress again (a system call
		 * with the tcp provider) between the data and the
		 * application; the next look does that.  After an error, read
		 * on to the end before judging it (above). */
		if (!full && n < 16 && !err_seen) {
			c->cq_fresh = 1;
			return moved;
		}
	}
}

int fab_cq_drain_locked(struct fab_conn *c)
{
	return cq_read(c, 1);
}

int fab_cq_read_locked(struct fab_conn *c)
{
	return cq_read(c, 0);
}

/* A zero-byte write carrying only CQ data.  -1 when it cannot be posted.
 * CLOSE and DEMOTE complete only once the peer has taken them in (and so,
 * in order, everything before them): after them this end may close the
 * endpoint, and a provider socket closed with unread input resets, which
 * would drop at the peer whatever it had not read yet. */
int fab_post_imm(struct fab_conn *c, enum fab_imm t, uint64_t pos)
{
	uint64_t flags = 0;
	if (c->dead)
		return -1;
	if (t == FAB_IMM_CLOSE || t == FAB_IMM_DEMOTE)
		flags |= FI_DELIVERY_COMPLETE;
	for (int tries = 0; tries < 100000; tries++) {
		if (c->tx_inflight < c->tx_depth + 8 && c->peer_ready) {
			ssize_t r = fab_op_write(c, 2 * c->ring, 0, 0, t, pos, flags);
			if (r == 0) {
				c->tx_inflight++;
				return 0;
			}
			if (r != -FI_EAGAIN) {
				c->failed = 2;
				return -1;
			}
		}
		fab_cq_drain_locked(c);
		if (c->failed == 2)
			return -1;
	}
	return -1;
}

void fab_credit_locked(struct fab_conn *c)
{
	if (state_of(c) != FAB_UP || c->sent_demote || c->failed || !c->peer_ready)
		return;
	if (!fab_credit_due(c->rx_consumed, c->rx_credited, c->ring))
		return;
	if (c->tx_inflight < c->tx_depth + 8) {
		ssize_t r = fab_op_write(c, 2 * c->ring, 0, 0, FAB_IMM_CREDIT, c->rx_consumed, 0);
		if (r == 0) {
			c->tx_inflight++;
			c->rx_credited = c->rx_consumed;
		} else if (r != -FI_EAGAIN) {
			c->failed = 2;
		}
	}
}

void fab_flush(struct fab_conn *c)
{
	/* The server writes only once the client's first message shows the
	 * client's endpoint up: a write racing the client's own FI_CONNECTED
	 * could find it still accepting. */
	if (state_of(c) != FAB_UP || c->sent_demote || c->got_demote || c->failed ||
	    !c->peer_ready)
		return;
	while (c->tx_posted < c->tx_head && c->tx_inflight < c->tx_depth) {
		uint64_t off = c->tx_posted & (c->ring - 1);
		uint64_t n = c->tx_head - c->tx_posted;
		if (n > c->ring - off)
			n = c->ring - off;
		if (n > c->chunk)
			n = c->chunk;
		if (c->fail_after && c->tx_posted + n > c->fail_after) {
			/* Test knob: the provider "fails" here.  Post up to the
			 * limit, then take the error path. */
			n = c->fail_after > c->tx_posted ? c->fail_after - c->tx_posted : 0;
			if (!n) {
				c->failed = 1;
				/* ...or the endpoint is gone both ways: nothing
				 * more in or out, not even DEMOTE. */
				c->dead = c->fail_dead;
				return;
			}
		}
		uint64_t end = c->tx_posted + n;
		ssize_t r = fab_op_write(c, off, n, off, FAB_IMM_DATA, end, 0);
		if (r == -FI_EAGAIN) {
			fab_cq_drain_locked(c);
			continue;
		}
		if (r != 0) {
			c->failed = 1; /* posting failed: the endpoint still works */
			return;
		}
		c->tx_posted = end;
		c->tx_inflight++;
	}
	if (c->shut_wr == 1 && c->tx_posted == c->tx_head &&
	    fab_post_imm(c, FAB_IMM_SHUT, c->tx_head) == 0)
		c->shut_wr = 2;
}
