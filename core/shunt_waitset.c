/* An event loop's wait (shunt_waitset.h). */
#include "shunt_waitset.h"

#include <sched.h>

#include "shunt_clock.h"
#include "shunt_conn.h"
#include "shunt_core.h"
#include "shunt_wait.h"
#include "shunt_waitpolicy.h"

int shunt_conn_worth_spin(struct shunt_conn *c, int cpu)
{
	struct shunt_presence *mine;
	const struct shunt_presence *peer = c->ops->wait->presence ? c->ops->wait->presence(c, &mine) : NULL;
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	if (!peer)
		return SHUNT_WORTH_SPIN;
	switch (shunt_spin_check(peer, cpu, __atomic_load_n(&c->woke, __ATOMIC_RELAXED), 0, 1,
				 &beat)) {
	case SHUNT_SPIN_ON:
		return SHUNT_WORTH_SPIN;
	case SHUNT_SPIN_SAME_CPU:
		return SHUNT_WORTH_YIELD;
	default:
		return SHUNT_WORTH_NOT;
	}
}

/* Spin until ready or the budget or the peers say stop: 1 when ready,
 * with *why what stopped it otherwise. */
static int spin_loop(int (*ready)(void *), int (*worth)(void *, int), void *arg, int cpu,
		     uint64_t budget, uint64_t t0, enum shunt_spin_verdict *why)
{
	*why = SHUNT_SPIN_BUDGET;
	for (unsigned i = 1;; i++) {
		if (ready(arg))
			return 1;
		shunt_cpu_relax();
		if ((i & 63) == 0) {
			if (shunt_now_ns() - t0 >= budget)
				return 0;
			int w = worth(arg, cpu);
			if (w != SHUNT_WORTH_SPIN) {
				*why = w == SHUNT_WORTH_YIELD ? SHUNT_SPIN_SAME_CPU
							      : SHUNT_SPIN_PEER_ASLEEP;
				return 0;
			}
		}
	}
}

uint64_t shunt_conn_woke_at(struct shunt_conn *c)
{
	struct shunt_presence *mine;
	const struct shunt_presence *peer = c->ops->wait->presence ? c->ops->wait->presence(c, &mine) : NULL;
	return peer ? __atomic_load_n(&peer->woke_ns, __ATOMIC_RELAXED) : 0;
}

/* One budget per thread: a thread waits in one event loop, and what its
 * waits teach it is about the peers of that loop. */
static __thread struct shunt_spin_state loop_st;
static __thread uint8_t loop_init;
/* Spun since this thread last gave its CPU away (ns). */
static __thread uint64_t run_ns;

/* Spin while spinning pays: 1 when ready, with the spin's length in
 * *spun. */
static int spin(struct shunt_waitset *w, const struct shunt_spin_limits *l, uint64_t *spun)
{
	*spun = 0;
	uint64_t budget = shunt_spin_budget(&loop_st, l);
	if (!budget)
		return 0;
	int cpu = sched_getcpu();
	int wv = w->worth(w->arg, cpu);
	if (wv != SHUNT_WORTH_SPIN)
		return wv == SHUNT_WORTH_YIELD &&
		       shunt_wait_handoff(NULL, SHUNT_SPIN_SAME_CPU, 0, 0) && w->ready(w->arg);
	uint64_t t0 = shunt_now_ns();
	enum shunt_spin_verdict why;
	int ok = spin_loop(w->ready, w->worth, w->arg, cpu, budget, t0, &why);
	*spun = shunt_now_ns() - t0;
	if (!ok) {
		run_ns = 0; /* it sleeps or yields now */
		return why == SHUNT_SPIN_SAME_CPU && shunt_wait_handoff(NULL, why, 0, 0) &&
		       w->ready(w->arg);
	}
	if (w->many && shunt_spin_run(&run_ns, *spun))
		sched_yield();
	return 1;
}

static int spin_locked(struct shunt_waitset *w, const struct shunt_spin_limits *l)
{
	uint64_t spun;
	if (w->lock)
		pthread_mutex_lock(w->lock);
	int ok = spin(w, l, &spun);
	if (w->lock)
		pthread_mutex_unlock(w->lock);
	return ok;
}

/* What the wait teaches: when its answer came, from its start t0 (the
 * peers' stamps of a wakeup during a sleep, when the interposer can read
 * them), for a wait that ended with something ready. */
static void learn(struct shunt_waitset *w, const struct shunt_spin_limits *l, uint64_t t0)
{
	if (w->rc <= 0)
		return;
	uint64_t now = shunt_now_ns();
	uint64_t at = w->slept && w->woke_at ? w->woke_at(w->arg, t0, now) : 0;
	shunt_spin_learn(&loop_st, l, (at >= t0 && at <= now ? at : now) - t0);
}

int shunt_waitset_run(struct shunt_waitset *w)
{
	int kernel = 1;
	uint64_t t0 = shunt_now_ns();
	struct shunt_spin_limits l;
	w->spun = w->slept = 0;
	for (;;) {
		if (w->look(w, kernel))
			break;
		int ms = shunt_remaining_ms(w->deadline_ns);
		if (ms == 0)
			return 0;
		if (!w->spun && w->can_spin) {
			shunt_wait_limits(&l, w->many);
			if (!loop_init) {
				shunt_spin_init(&loop_st, &l);
				loop_init = 1;
			}
			/* Nothing came: the sleep asks the kernel (it returns at
			 * once for a ready fd), so the next look need not. */
			w->spun = 1;
			kernel = spin_locked(w, &l);
			continue;
		}
		w->told = 0;
		w->slept = 1;
		if (w->sleep(w, ms))
			break;
		kernel = !w->told;
	}
	if (w->spun)
		learn(w, &l, t0);
	return w->rc;
}
