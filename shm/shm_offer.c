/* The shm transport's rendezvous: listeners, the client's offer, the
 * server's commit or refusal.
 *
 * Rendezvous (docs/ARCHITECTURE.md, "Offer and commit"):
 *   client connect():  registry says a live shunt listener has dst
 *                      -> announce an offer to dst (shm_pending.c)
 *                      -> a ring slot: header + two rings, OFFERED
 *                      -> real connect(), as without shunt
 *                      -> the 4-tuple is known: name the slot o/<key>,
 *                         end the announcement; may write at once
 *   server accept():   the offer o/<key> for the accepted 4-tuple (waiting
 *                      while one is announced and not named yet)
 *                      -> owner uid, size, header checked
 *                      -> CAS OFFERED -> COMMITTED
 *                      -> unlink the offer, wake the client
 *   decline (either):  CAS -> DEMOTING: the client sends its unread ring
 *                      bytes over TCP (see shm_demote.c).
 * No byte of this goes over the TCP connection. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_clock.h"
#include "core/shunt_log.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_registry.h"
#include "core/shunt_rendezvous.h"
#include "core/shunt_sockmap.h"
#include "core/shunt_transport.h"
#include "core/shunt_wait.h"
#include "shm_internal.h"

/* ---- listen --------------------------------------------------------------- */

/* Listeners are registered by core (shunt_listen.h); what dead processes
 * left in o/ is swept now, before offers come. */
static void shm_on_listen(int fd)
{
	(void)fd;
	shm_sweep();
	shm_broker_listened();
}

/* exit(): names only; peers keep what they mapped or were sending to. */
static void shm_at_exit(void)
{
	if (!shunt_rundir())
		return;
	shm_wake_exit();
	shm_arena_exit();
}

/* ---- client: offer -------------------------------------------------------- */

/* Name the offer for c's 4-tuple: the header's tuple, the peer's wake
 * names, then the name itself, made last: whoever finds it finds a complete
 * header.  In the rundir's table (shm_names.c), else as a symlink o/<key>.
 * 0, or -1 (nothing named). */
static int name_offer(struct shm_conn *c, const struct shunt_tuple *t, const char *target)
{
	char path[SHUNT_PATH_MAX];
	shunt_tuple_key(t, c->key, sizeof c->key);
	c->hdr->tuple = *t;
	if (shm_wake_bind_peer(c, t) < 0)
		return -1;
	if (shm_names_put(t, target) == 0) {
		c->named = 1;
		return 0;
	}
	if (shm_path(path, sizeof path, c->key, ""))
		return -1;
	/* Counted first: a server that misses the table looks for the name
	 * only while the count says one may exist.  EEXIST: left by a
	 * connection with the same 4-tuple that died. */
	shm_names_link(1);
	if (symlink(target, path) < 0 &&
	    (errno != EEXIST || shm_names_unlink(path) < 0 || symlink(target, path) < 0)) {
		shm_names_link(-1);
		return -1;
	}
	c->named = 2;
	return 0;
}

static enum shunt_reason shm_connect(int fd, struct shunt_fd *e, const struct sockaddr *dst,
				     socklen_t dlen)
{
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	SHUNT_GUARD_ENTER();
	struct sockaddr_storage local;
	socklen_t llen;
	struct shunt_tuple t;
	struct shm_conn *c = NULL;
	int pending = -1;
	int reg = shunt_registry_lookup(rd, dst);
	if (reg == SHUNT_REG_NONE)
		goto out;
	why = SHUNT_R_SERVER_CRED;
	if (reg == SHUNT_REG_REFUSES)
		goto out;
	shm_sweep();
	/* Servers look for symlink names only while the table counts one:
	 * without the table, an offer could go unseen. */
	why = SHUNT_R_RING_ALLOC;
	if (!shm_names_ready())
		goto out;
	/* Announced, the offer is named once connect() has picked the port
	 * (shm_connected); otherwise the port is picked here. */
	pending = shm_pending_begin(dst);
	why = SHUNT_R_BIND_FAILED;
	if (pending < 0 && (shunt_bind_local(fd, dst, dlen, &local, &llen) < 0 ||
			    shunt_tuple_make(&t, (struct sockaddr *)&local, dst) < 0))
		goto out;
	why = SHUNT_R_RING_ALLOC;
	uint64_t ring = shunt_config()->ring_size;
	struct shm_slot slot;
	char target[sizeof c->target];
	if (shm_arena_alloc(ring, &slot, target, sizeof target) < 0)
		goto out;
	struct shm_hdr *h = slot.hdr;
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->ring_size = ring;
	h->file_size = slot.len;
	h->pid[SHM_CLIENT] = shunt_pid();
	h->uid[SHM_CLIENT] = shunt_euid();
	h->netns[SHM_CLIENT] = shunt_netns();
	/* The server's CPU is not known until it accepts (a zeroed header
	 * would say CPU 0). */
	shunt_presence_set(&h->pres[SHM_CLIENT], SHUNT_AT_APP, sched_getcpu());
	shunt_presence_set(&h->pres[SHM_SERVER], SHUNT_AT_APP, -1);
	__atomic_store_n(&h->state, SHM_OFFERED, __ATOMIC_RELEASE);
	c = shm_conn_new(&shm_conn_ops, &slot, SHM_CLIENT, ring);
	if (!c) {
		shm_arena_release(&slot);
		goto out;
	}
	memcpy(c->target, target, sizeof target);
	c->pending = pending;
	pending = -1;
	/* (Wake sockets are bound only when a poll/epoll wait needs one.) */
	if (c->pending < 0) {
		if (name_offer(c, &t, c->target) < 0) {
			shm_conn_free(c);
			c = NULL;
			goto out;
		}
		memcpy(c->base.local16, t.caddr, sizeof c->base.local16);
		c->base.lport = t.cport;
	}
	shunt_sm_keep_off(fd);
	shunt_offer_start(&c->base);
	e->conn = &c->base;
	why = SHUNT_R_NONE;
out:
	shm_pending_end(pending);
	SHUNT_GUARD_LEAVE();
	return why;
}

/* The TCP connect has started: the 4-tuple is known, the announced offer
 * is named (or, if it cannot be, this end moves to TCP at once). */
static void shm_connected(int fd, struct shunt_conn *b, const struct sockaddr *dst,
			  socklen_t dlen)
{
	(void)dlen;
	struct shm_conn *c = (struct shm_conn *)b;
	if (c->pending < 0)
		return;
	SHUNT_GUARD_ENTER();
	struct sockaddr_storage local;
	socklen_t llen = sizeof local;
	struct shunt_tuple t;
	int ok = getsockname(fd, (struct sockaddr *)&local, &llen) == 0 &&
		 shunt_tuple_make(&t, (struct sockaddr *)&local, dst) == 0 &&
		 name_offer(c, &t, c->target) == 0;
	if (ok) {
		memcpy(b->local16, t.caddr, sizeof b->local16);
		b->lport = t.cport;
	}
	shm_pending_end(c->pending);
	c->pending = -1;
	if (!ok) {
		c->key[0] = 0;
		shm_demote(b, SHUNT_R_RING_ALLOC);
	}
	SHUNT_GUARD_LEAVE();
}

/* ---- server: commit or decline ------------------------------------------- */

/* Hold the slot the offer for t (named key) names, if there is a valid one
 * from a user we trust: 0; -2 when there is no offer for it; -1 with *why
 * when there is one that cannot be taken.  *link: 1 when it was named by a
 * symlink in o/ (the taker removes it), 0 in the table (taken with it).
 * A symlink is looked for only while the table counts one, or when last
 * (a client of a build from before the table names its offers only so,
 * uncounted: it is then declined at once, by its header's version, rather
 * than left waiting for its offer's deadline).  path (SHUNT_PATH_MAX
 * bytes): the symlink's, when one was looked for. */
static int open_offer(const struct shunt_tuple *t, const char *key, int sock,
		      struct shm_slot *s, enum shunt_reason *why, int *link, int last, char *path)
{
	char target[128];
	*why = SHUNT_R_NO_PEER_SHIM;
	*link = 0;
	if (shm_names_take(t, target, sizeof target))
		return shm_arena_attach(target, sock, s, why);
	if (!last && !shm_names_links())
		return -2; /* nobody named an offer by a symlink */
	if (shm_path(path, SHUNT_PATH_MAX, key, ""))
		return -1;
	*link = 1;
	ssize_t n = readlink(path, target, sizeof target - 1);
	if (n < 0) {
		if (errno == ENOENT)
			return -2; /* none (yet) */
		if (errno == EINVAL)
			*why = SHUNT_R_BAD_OFFER; /* not a name for a slot */
		return -1;
	}
	target[n] = 0;
	return shm_arena_attach(target, sock, s, why);
}

/* How long an accept() watches an announced offer before it sleeps. */
#define PENDING_SPIN_NS 20000

/* 1 when bucket b's sequence number moved from seq within the spin. */
static int pending_spin(int b, uint32_t seq)
{
	uint64_t budget = (uint64_t)shunt_config()->spin_us * 1000;
	if (budget > PENDING_SPIN_NS)
		budget = PENDING_SPIN_NS;
	/* No CPU to spare (a busy neighbour, more pairs than CPUs): the
	 * sleep leaves ours to the client. */
	if (!budget || shunt_spin_crowded_now(1))
		return 0;
	/* The client may be queued on our CPU, in the middle of it. */
	sched_yield();
	uint64_t t0 = shunt_now_ns();
	for (unsigned i = 1;; i++) {
		if (shm_pending_seq(b) != seq)
			return 1;
		shunt_cpu_relax();
		if ((i & 63) == 0 && shunt_now_ns() - t0 >= budget)
			break;
	}
	return 0;
}

/* The offer for the accepted tuple t: open_offer(), waiting while a client
 * has announced an offer to t's destination and not named it yet (its
 * connect() has returned, or is about to: a matter of microseconds, unless
 * it was preempted; offer_timeout_ms at most, as the client waits for our
 * answer no longer). */
static int find_offer(const struct shunt_tuple *t, const char *key, int sock,
		      struct shm_slot *s, enum shunt_reason *why, int *link, char *path)
{
	int b = shm_pending_bucket(t->saddr, t->sport);
	uint64_t deadline = 0;
	for (;;) {
		uint32_t seq = shm_pending_seq(b);
		int r = open_offer(t, key, sock, s, why, link, 0, path);
		if (r != -2)
			return r;
		if (!shm_pending_held(b))
			/* Named before the announcement ended, if at all. */
			return open_offer(t, key, sock, s, why, link, 1, path) == 0 ? 0 : -1;
		uint64_t now = shunt_now_ms();
		if (!deadline) {
			deadline = now + shunt_config()->offer_timeout_ms;
			/* The client names its offer a few microseconds after
			 * its connect() returned, on another CPU as a rule: a
			 * short look at the bucket first, as a sleep and its
			 * wakeup cost more than that. */
			if (pending_spin(b, seq))
				continue;
		}
		if (now >= deadline)
			return -1;
		shm_pending_sleep(b, seq, (int)(deadline - now));
	}
}

/* Tell the client to carry on over TCP (it replays what it wrote). */
static void refuse(struct shm_hdr *h)
{
	uint32_t st = SHM_OFFERED;
	__atomic_compare_exchange_n(&h->state, &st, SHM_DEMOTING, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

static enum shunt_reason shm_accept(int lfd, int fd, struct shunt_fd *e,
				    const struct sockaddr *peer, socklen_t plen)
{
	(void)lfd;
	(void)plen;
	const char *rd = shunt_rundir();
	if (!rd)
		return SHUNT_R_RING_ALLOC;
	struct shunt_tuple t;
	char key[96], path[SHUNT_PATH_MAX];
	enum shunt_reason why = SHUNT_R_NO_PEER_SHIM;
	struct shm_slot slot;
	SHUNT_GUARD_ENTER();
	struct shm_hdr *h = NULL;
	struct shm_conn *c = NULL;
	if (shunt_tuple_accepted(&t, fd, peer) < 0)
		goto out;
	shunt_tuple_key(&t, key, sizeof key);
	int link;
	if (find_offer(&t, key, fd, &slot, &why, &link, path) < 0)
		goto out;
	if (!link)
		path[0] = 0; /* taken from the table: no name to remove */
	h = slot.hdr;
	uint64_t ring, use = __atomic_load_n(&h->use, __ATOMIC_ACQUIRE);
	if (shm_hdr_check(h, slot.len, &t, &ring) < 0) {
		why = SHUNT_R_BAD_OFFER;
		/* Another connection's offer now (the slot was handed out
		 * again since this one was named): not ours to refuse. */
		if (h->version == SHM_VERSION && memcmp(&h->tuple, &t, sizeof t))
			goto fail;
		goto refuse;
	}
	/* Held from here, unless the owner handed the slot out again since
	 * we read its use: then the offer we found is gone. */
	if (!shm_arena_claim(&slot, use)) {
		why = SHUNT_R_NO_PEER_SHIM;
		goto fail;
	}
	c = shm_conn_new(&shm_conn_ops, &slot, SHM_SERVER, ring);
	if (!c) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	memcpy(c->key, key, strlen(key) + 1);
	if (shm_wake_bind_peer(c, &t) < 0) {
		why = SHUNT_R_RING_ALLOC;
		goto refuse;
	}
	/* The client binds its wake sockets in the abstract namespace of its
	 * own network namespace, before we answer: they must be ours too, or
	 * no wakeup of ours would reach it (a route that looks local and is
	 * not: a NAT between namespaces).  Unknown (no /proc) is taken on
	 * trust. */
	uint64_t cns = __atomic_load_n(&h->netns[SHM_CLIENT], __ATOMIC_RELAXED);
	if (c->wake_abs && cns && shunt_netns() && cns != shunt_netns()) {
		why = SHUNT_R_BAD_OFFER;
		goto refuse;
	}
	h->netns[SHM_SERVER] = shunt_netns();
	/* The client's hold on its slot proves it is alive (in whatever PID
	 * namespace): an offer left by a dead process, for a 4-tuple now
	 * reused, must not be taken. */
	if (!shm_arena_side_held(&c->slot, SHM_CLIENT)) {
		if (path[0])
			shm_names_unlink(path);
		why = SHUNT_R_NO_PEER_SHIM;
		goto fail;
	}
	uint32_t st = SHM_OFFERED;
	if (!__atomic_compare_exchange_n(&h->state, &st, SHM_COMMITTED, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* The client left the offer and is on TCP: it closed the
		 * socket, moved to TCP for a reason of its own, or gave up
		 * waiting (offer_timeout_ms).  Only the values it may say are
		 * taken from the header. */
		uint32_t left = __atomic_load_n(&h->left_why, __ATOMIC_RELAXED);
		why = left == SHUNT_R_CLIENT_CLOSED || left == SHUNT_R_PEER_DEMOTED
			      ? (enum shunt_reason)left
			      : SHUNT_R_OFFER_TIMEOUT;
		goto fail;
	}
	memcpy(c->base.local16, t.saddr, sizeof c->base.local16);
	c->base.lport = t.sport;
	h->pid[SHM_SERVER] = shunt_pid();
	/* Where we run, for the client's next wait: spin, or yield to us. */
	shunt_presence_set(&h->pres[SHM_SERVER], SHUNT_AT_APP, sched_getcpu());
	h->uid[SHM_SERVER] = shunt_euid();
	c->committed = 1;
	if (path[0])
		shm_names_unlink(path);
	/* No wakeup: nothing a client waits for comes with the commit itself.
	 * Its reads wait for our bytes, its writes for space we free, and each
	 * of those wakes it; a wakeup now would be a trip through the
	 * scheduler for it to find nothing and sleep again (its sleep before
	 * the commit ends at the offer's deadline at the latest, and then it
	 * sees the state). */
	e->conn = &c->base;
	SHUNT_GUARD_LEAVE();
	return SHUNT_R_NONE;
refuse:
	refuse(h);
	if (path[0])
		shm_names_unlink(path); /* refused: nobody will take it */
	if (c) {
		shm_wake_peer(c);
	} else {
		/* A view of the header, to wake the client: the ring size
		 * it offered may be the bad part, so none is used. */
		struct shm_conn v = {.wake = {-1, -1}};
		shm_conn_view(&v, h, SHM_SERVER, 0);
		snprintf(v.key, sizeof v.key, "%s", key);
		if (shm_wake_bind_peer(&v, &t) == 0)
			shm_wake_peer(&v);
	}
fail:
	if (c)
		shm_conn_free(c);
	else
		shm_arena_release(&slot);
out:
	SHUNT_GUARD_LEAVE();
	return why;
}

static void shm_decline(int fd, const struct sockaddr *peer, socklen_t plen)
{
	(void)plen;
	const char *rd = shunt_rundir();
	struct shunt_tuple t;
	char key[96];
	struct shm_slot slot;
	enum shunt_reason why;
	if (!rd || shunt_tuple_accepted(&t, fd, peer) < 0)
		return;
	SHUNT_GUARD_ENTER();
	shunt_tuple_key(&t, key, sizeof key);
	int link;
	char path[SHUNT_PATH_MAX];
	if (find_offer(&t, key, fd, &slot, &why, &link, path) == 0) {
		struct shm_hdr *h = slot.hdr;
		uint64_t ring, use = __atomic_load_n(&h->use, __ATOMIC_ACQUIRE);
		if (shm_hdr_check(h, slot.len, &t, &ring) == 0 && shm_arena_claim(&slot, use)) {
			/* A view of the header, to wake the client. */
			struct shm_conn c = {.wake = {-1, -1}};
			shm_conn_view(&c, h, SHM_SERVER, ring);
			refuse(h);
			if (link)
				shm_names_unlink(path);
			snprintf(c.key, sizeof c.key, "%s", key);
			if (shm_wake_bind_peer(&c, &t) == 0)
				shm_wake_peer(&c);
		}
		shm_arena_release(&slot);
	}
	SHUNT_GUARD_LEAVE();
}

const struct shunt_transport_ops shunt_transport_shm = {
	.name = "shm",
	.id = SHUNT_TP_SHM,
	.on_listen = shm_on_listen,
	.connect = shm_connect,
	.connected = shm_connected,
	.accept = shm_accept,
	.decline = shm_decline,
	.at_exit = shm_at_exit,
	.fork = shm_broker_fork,
	.setid = shm_broker_setid,
};

const struct shunt_conn_ops shm_conn_ops = {
	.transport = &shunt_transport_shm,
	.life = &shm_life_ops,
	.data = &shm_data_ops,
	.wait = &shm_wait_ops,
};
