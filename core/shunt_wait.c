/* A blocking call's wait on one accelerated connection (shunt_wait.h). */
#include "shunt_wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>

#include "shunt_clock.h"
#include "shunt_conn.h"
#include "shunt_core.h"
#include "shunt_real.h"
#include "shunt_signal.h"

/* A peer runnable on our CPU (it runs there, or we just woke it there)
 * needs that CPU, not our spin.  One yield gives it, when nobody else
 * waits for the CPU (shunt_spin_yield_ok): the peer answers, and we find
 * the answer with no sleep and no wakeup for it to pay.  Once only: if
 * the CPU went to someone else, a sleep is the next step, not another
 * spin (each end yielding in turn against a busy neighbour is what costs
 * 2x). */
int shunt_wait_handoff(struct shunt_conn *c, enum shunt_spin_verdict why, int unknown,
		       int oneway)
{
	if (why != SHUNT_SPIN_SAME_CPU && !unknown)
		return 1;
	unsigned ncpus = 1;
	int r = (why == SHUNT_SPIN_SAME_CPU && oneway) ? 0 : shunt_runnable_sample(&ncpus, 0);
	if (shunt_spin_yield_ok(why, unknown, oneway, r, ncpus)) {
		if (c)
			c->gave_cpu++;
		sched_yield();
	}
	return 1;
}

/* The socket's SO_RCVTIMEO / SO_SNDTIMEO, as a deadline (0 = none). */
static uint64_t deadline_of(struct shunt_conn *c, int opt)
{
	struct timeval tv;
	socklen_t l = sizeof tv;
	if (REAL(getsockopt)(c->fd, SOL_SOCKET, opt, &tv, &l) < 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return 0;
	return shunt_now_ms() + (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000 + 1;
}

void shunt_wait_limits(struct shunt_spin_limits *l, int many)
{
	const struct shunt_config *cfg = shunt_config();
	uint64_t x = many ? SHUNT_SPIN_LOOP_X : 1u;
	l->cost_ns = (uint64_t)cfg->spin_us * 1000 * x;
	l->max_ns = (uint64_t)cfg->spin_max_us * 1000;
	/* spin_max_us below that: the older single knob's meaning (and an
	 * event loop's cap of 5 x spin_us, as before). */
	if (l->max_ns < l->cost_ns)
		l->max_ns = l->cost_ns;
}

/* One wait on one connection: what it waits for, and where the two ends
 * are. */
struct conn_wait {
	struct shunt_conn *c;
	short ev;
	int cpu;                           /* ours, -1 unknown */
	int oneway;                        /* the wait continues a one-way stream */
	const struct shunt_presence *peer; /* NULL: nothing known */
	struct shunt_presence *mine;
	struct shunt_spin_state *st;       /* what this direction learnt */
	struct shunt_spin_limits lim;
	uint64_t t0;                       /* when the wait began */
	uint64_t budget;                   /* its spin's budget (0: none) */
	unsigned polls;                    /* looks of a spin that saw it ready */
};

/* Ready, or demoted: a poll() that hands the connection to the kernel
 * path answers 0 ("ask the kernel"), and the caller must then go to the
 * socket rather than sleep on wake fds nobody will signal again.  (A close
 * in another thread is not a reason to stop: as with the kernel's socket,
 * a blocked read goes on waiting for data or EOF.) */
static int conn_ready(const struct conn_wait *a)
{
	return a->c->ops->wait->poll(a->c, a->ev) != 0 ||
	       __atomic_load_n(&a->c->left, __ATOMIC_ACQUIRE);
}

/* Spin until ready or shunt_spin_check says stop (*why).  A peer that
 * moves bytes (the ring's progress: it copies a large message, or takes
 * ours) is not stalled, and keeps the spin going a budget past its last
 * move, within spin_max_us.  "Spinning" is said only once the spin lasts
 * (its first beat): a wait answered within a few hundred nanoseconds
 * writes nothing the peer reads, and to the peer it looks as what it is,
 * an end that runs. */
static int spin_loop(const struct conn_wait *a, int woke, uint64_t budget, uint64_t t0,
		     uint32_t *beat, enum shunt_spin_verdict *why, unsigned *polls)
{
	struct shunt_presence *mine = a->mine;
	uint64_t (*progress)(struct shunt_conn *) = a->c->ops->wait->progress;
	uint64_t seq = 0, from = t0;
	for (unsigned i = 1;; i++) {
		if (conn_ready(a)) {
			*polls = i;
			return 1;
		}
		shunt_cpu_relax();
		if ((i & 63) == 0) {
			if (mine) {
				__atomic_store_n(&mine->beat, mine->beat + 1, __ATOMIC_RELAXED);
				if (i == 64)
					__atomic_store_n(&mine->where, SHUNT_AT_SPIN,
							 __ATOMIC_RELEASE);
			}
			uint64_t now = shunt_now_ns();
			/* (Read from the first beat on: the counter is a line
			 * the peer writes, a miss an answer at once need not
			 * pay.) */
			uint64_t s = progress ? progress(a->c) : seq;
			if (i == 64)
				seq = s;
			if (s != seq && now - t0 < a->lim.max_ns) {
				seq = s;
				from = now;
				*beat = SHUNT_SPIN_NO_BEAT;
			}
			*why = shunt_spin_check(a->peer, a->cpu, woke, now - from, budget, beat);
			if (*why != SHUNT_SPIN_ON)
				return 0;
		}
	}
}

/* Spin while spinning pays (shunt_waitpolicy.h): 1 when c is ready. */
static int spin(struct conn_wait *a)
{
	struct shunt_conn *c = a->c;
	struct shunt_wait_view v = {.peer = a->peer, .mycpu = a->cpu, .runnable = -1, .ncpus = 1};
	v.budget_ns = a->budget = shunt_spin_budget(a->st, &a->lim);
	/* Not an exchange: a locked instruction here would wait for the
	 * stores of the call that came before (the data just sent) to reach
	 * the peer. */
	v.woke = __atomic_load_n(&c->woke, __ATOMIC_RELAXED);
	if (v.woke)
		__atomic_store_n(&c->woke, 0, __ATOMIC_RELAXED);
	v.young = c->waits < SHUNT_SPIN_YOUNG_WAITS;
	if (v.young) {
		/* The peer's setup (shunt_waitpolicy.h): hand it our CPU
		 * rather than sleep, whatever the crowd. */
		a->oneway = 1;
		c->waits++;
	}
	if (v.budget_ns && a->peer)
		v.runnable = shunt_runnable_sample(&v.ncpus, a->t0);
	uint32_t beat;
	int yield_first;
	enum shunt_spin_verdict why = shunt_wait_plan(&v, &beat, &yield_first);
	uint64_t t0 = a->t0;
	if (yield_first) {
		shunt_wait_handoff(c, why, 1, 0);
		if (conn_ready(a))
			return 1;
		t0 = shunt_now_ns(); /* the spin starts after the yield */
	}
	/* Not worth a spin (the peer shares our CPU, or sleeps, or the
	 * answers come later than a spin pays for): hand off at once. */
	if (why != SHUNT_SPIN_ON)
		return shunt_wait_handoff(c, why, 0, a->oneway) && conn_ready(a);
	if (a->mine)
		shunt_presence_note(a->mine, SHUNT_AT_APP, a->cpu);
	if (spin_loop(a, v.woke, v.budget_ns, t0, &beat, &why, &a->polls))
		return 1;
	return shunt_wait_handoff(c, why, 0, a->oneway) && conn_ready(a);
}

/* What a wait that slept teaches: when its answer came.  A peer that
 * publishes its presence stamps the wakeup it sent (then that is when),
 * and one that did not send any answered without one (now is when).  Of a
 * peer that says nothing (a remote one) only this is known: the answer
 * came after the spin, if there was one, and a sleep's wakeup is no
 * measure of it.  0: nothing to learn. */
static uint64_t slept_answer(const struct conn_wait *a, uint64_t now)
{
	if (!a->peer)
		return a->budget ? a->budget + 1 : 0;
	uint64_t w = __atomic_load_n(&a->peer->woke_ns, __ATOMIC_RELAXED);
	return (w >= a->t0 && w <= now ? w : now) - a->t0;
}

/* One sleep of at most timeout_ms (-1: the transport's slice): 0 to look
 * again, SHUNT_SLEEP_AGAIN (nothing happened: sleep on, longer), or -1
 * with *err. */
static int sleep_once(const struct conn_wait *a, int timeout, int recheck, int *err)
{
	struct shunt_conn *c = a->c;
	const struct shunt_conn_wait_ops *w = c->ops->wait;
	int r = SHUNT_SLEEP_ARM;
	if (w->sleep) {
		r = w->sleep(c, a->ev, timeout < 0 || timeout > recheck ? recheck : timeout);
		*err = errno;
		if (r != SHUNT_SLEEP_ARM)
			return r;
	}
	struct pollfd p[SHUNT_ARM_MAX];
	int n = w->arm(c, a->ev, p, &timeout);
	if (conn_ready(a)) {
		w->disarm(c, a->ev, p, 0);
		return 0;
	}
	r = REAL(poll)(p, (nfds_t)n, timeout);
	*err = errno;
	w->disarm(c, a->ev, p, r > 0 ? n : 0);
	return r < 0 ? -1 : 0;
}

/* Sleep until woken, the deadline dl (ms, 0: none) or a signal: 0 to look
 * again, -1 with errno EAGAIN or EINTR (or the sleep's own error). */
static int sleep_until(const struct conn_wait *a, uint64_t dl)
{
	int recheck = SHUNT_RECHECK_FIRST_MS;
	unsigned mark = shunt_sig_mark();
	for (;;) {
		int timeout = -1, err = 0;
		if (dl) {
			uint64_t now = shunt_now_ms();
			if (now >= dl)
				break;
			timeout = (int)(dl - now);
		}
		int r = sleep_once(a, timeout, recheck, &err);
		if (r == SHUNT_SLEEP_AGAIN) {
			if (recheck < SHUNT_RECHECK_MAX_MS)
				recheck *= 2;
			continue;
		}
		if (r < 0 && err == EINTR) {
			/* As the kernel's socket calls: restarted after a
			 * handler with SA_RESTART, EINTR otherwise, and never
			 * restarted with a timeout set, whatever the handler.
			 * Which handlers ran is known when the application
			 * installed them through libc (core/shunt_signal.h). */
			int again = shunt_sig_restart_since(mark);
			if (again < 0)
				again = shunt_sig_all_restart();
			if (!dl && again) {
				mark = shunt_sig_mark();
				continue;
			}
		}
		if (r < 0) {
			errno = err;
			return -1;
		}
		/* Woken, or the time ran out with something to look at; a
		 * slice that ran out before the deadline is looked at too. */
		if (!dl || shunt_now_ms() < dl || conn_ready(a))
			return 0;
		break;
	}
	errno = EAGAIN;
	return -1;
}

int shunt_conn_wait(struct shunt_conn *c, short ev, int opt, uint64_t *deadline)
{
	int in = (ev & POLLOUT) == 0;
	struct conn_wait a = {c, ev, -1, 0, NULL, NULL, &c->spin[!in], {0, 0}, shunt_now_ns(), 0, 0};
	a.peer = c->ops->wait->presence ? c->ops->wait->presence(c, &a.mine) : NULL;
	a.cpu = a.mine ? sched_getcpu() : -1;
	shunt_wait_limits(&a.lim, 0);
	/* Has anything gone the other way since this end last waited in this
	 * direction?  (Plain reads: a thread sharing the end may race, and a
	 * wrong guess costs a yield or a sleep, never a byte.) */
	a.oneway = shunt_spin_oneway(&c->wait_mark[!in], in ? c->bytes_out : c->bytes_in);
	/* Not asked again after a spin that saw it ready: for a transport
	 * whose readiness test calls into a provider, that is a system call
	 * between the data and the application. */
	if (spin(&a)) {
		if (a.mine)
			shunt_presence_note(a.mine, SHUNT_AT_APP, a.cpu);
		/* An answer before the spin's first look at the clock teaches
		 * "within a beat" (0); not reading the clock keeps a vDSO call
		 * off the path from the data to the application. */
		shunt_spin_learn(a.st, &a.lim,
				 a.polls && a.polls < 64 ? 0 : shunt_now_ns() - a.t0);
		SHUNT_STAT_ADD(c, spin_hits, 1);
		return 0;
	}
	SHUNT_STAT_ADD(c, sleeps, 1);
	c->gave_cpu++;
	/* The socket's timeout, asked only now: a system call the spinning
	 * path must not pay.  (UINT64_MAX: asked, none set.) */
	if (!*deadline) {
		*deadline = c->timeo ? deadline_of(c, opt) : 0;
		if (!*deadline)
			*deadline = UINT64_MAX;
	}
	if (a.mine)
		shunt_presence_set(a.mine, SHUNT_AT_SLEEP, a.cpu);
	int rc = sleep_until(&a, *deadline == UINT64_MAX ? 0 : *deadline);
	/* Where the scheduler woke us, which need not be where we slept: the
	 * peer's spin decisions read it (one vDSO call per sleep). */
	if (a.mine)
		shunt_presence_set(a.mine, SHUNT_AT_APP, sched_getcpu());
	uint64_t learnt = slept_answer(&a, shunt_now_ns());
	if (learnt)
		shunt_spin_learn(a.st, &a.lim, learnt);
	return rc;
}

int shunt_conn_block(struct shunt_conn *c, short ev, int flags, size_t done, uint64_t *deadline,
		     ssize_t *ret)
{
	int stop = (flags & MSG_DONTWAIT) || __atomic_load_n(&c->nonblock, __ATOMIC_RELAXED);
	if (stop && !done)
		errno = EAGAIN;
	if (!stop && shunt_conn_wait(c, ev, ev == POLLOUT ? SO_SNDTIMEO : SO_RCVTIMEO,
				     deadline) == 0)
		return 0;
	*ret = done ? (ssize_t)done : -1;
	return 1;
}
