/* The wait policy (shunt_waitpolicy.h): pure logic, no system call. */
#include "shunt_waitpolicy.h"

void shunt_spin_init(struct shunt_spin_state *s, const struct shunt_spin_limits *l)
{
	*s = (struct shunt_spin_state){0};
	uint64_t p = shunt_spin_probe(l);
	s->budget_ns = p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
}

uint64_t shunt_spin_probe(const struct shunt_spin_limits *l)
{
	uint64_t p = l->cost_ns + l->cost_ns / 4;
	if (p > l->max_ns)
		p = l->max_ns;
	return p < SHUNT_SPIN_FLOOR_NS && p ? SHUNT_SPIN_FLOOR_NS : p;
}

/* The spin that waits for an answer of a ns, with room for its jitter. */
static uint64_t cover_of(uint64_t a)
{
	uint64_t b = a + a / 4 + 1000;
	return b < SHUNT_SPIN_FLOOR_NS ? SHUNT_SPIN_FLOOR_NS : b;
}

uint64_t shunt_spin_cover(const uint32_t *ans, unsigned n, const struct shunt_spin_limits *l)
{
	uint32_t v[SHUNT_SPIN_HISTORY];
	if (n > SHUNT_SPIN_HISTORY)
		n = SHUNT_SPIN_HISTORY;
	if (!n || !l->cost_ns || !l->max_ns)
		return 0;
	/* Sorted, the fastest first (insertion: eight at most). */
	for (unsigned i = 0; i < n; i++) {
		unsigned j = i;
		for (; j > 0 && v[j - 1] > ans[i]; j--)
			v[j] = v[j - 1];
		v[j] = ans[i];
	}
	uint64_t sum = 0, best = 0;
	/* Covering the j+1 fastest: each costs its own time, the others the
	 * whole spin; the longest spin within the limits wins. */
	for (unsigned j = 0; j < n; j++) {
		sum += v[j];
		uint64_t b = cover_of(v[j]);
		if (b > l->max_ns)
			break;
		if (2 * (j + 1) < n)
			continue; /* less than half of them: sleeping is the better bet */
		if (sum + (uint64_t)(n - 1 - j) * b <= (uint64_t)n * l->cost_ns)
			best = b;
	}
	return best;
}

uint64_t shunt_spin_budget(struct shunt_spin_state *s, const struct shunt_spin_limits *l)
{
	if (!l->cost_ns || !l->max_ns)
		return 0;
	if (s->budget_ns)
		return s->budget_ns < l->max_ns ? s->budget_ns : l->max_ns;
	/* The answers come later than a spin can pay for.  Look again now and
	 * then where nothing else tells: the peer may have become faster. */
	if (++s->idle < SHUNT_SPIN_PROBE_EVERY)
		return 0;
	s->idle = 0;
	return shunt_spin_probe(l);
}

void shunt_spin_learn(struct shunt_spin_state *s, const struct shunt_spin_limits *l,
		      uint64_t answer_ns)
{
	uint32_t a = answer_ns > UINT32_MAX ? UINT32_MAX : (uint32_t)answer_ns;
	int same = s->n == SHUNT_SPIN_HISTORY && s->ans[s->at] == a;
	s->ans[s->at] = a;
	s->at = (uint8_t)((s->at + 1) % SHUNT_SPIN_HISTORY);
	/* The same answers as before (answers within a beat, all 0): the
	 * same budget, and nothing to compute on the data's way. */
	if (same)
		return;
	if (s->n < SHUNT_SPIN_HISTORY)
		s->n++;
	uint64_t b = shunt_spin_cover(s->ans, s->n, l);
	s->budget_ns = b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

enum shunt_spin_verdict shunt_spin_check(const struct shunt_presence *peer, int mycpu,
					 int woke, uint64_t spent_ns, uint64_t budget_ns,
					 uint32_t *beat)
{
	if (spent_ns >= budget_ns)
		return SHUNT_SPIN_BUDGET;
	if (!peer)
		return SHUNT_SPIN_ON;
	uint32_t where = __atomic_load_n(&peer->where, __ATOMIC_ACQUIRE);
	int cpu = __atomic_load_n(&peer->cpu, __ATOMIC_RELAXED);
	/* Our CPU is the one the peer needs (a peer woken there is queued
	 * there too): every nanosecond spun is taken from it. */
	if (mycpu >= 0 && cpu == mycpu)
		return SHUNT_SPIN_SAME_CPU;
	if (where == SHUNT_AT_SLEEP) {
		*beat = SHUNT_SPIN_NO_BEAT;
		return woke ? SHUNT_SPIN_ON : SHUNT_SPIN_PEER_ASLEEP;
	}
	if (where == SHUNT_AT_SPIN) {
		/* Both ends waiting on each other is not a reason to stop (each
		 * may wait for something else); a spinner that no longer
		 * advances is off its CPU, and our spin keeps it there if the
		 * scheduler would run it here. */
		uint32_t b = __atomic_load_n(&peer->beat, __ATOMIC_RELAXED);
		uint32_t last = *beat;
		*beat = b;
		if (last != SHUNT_SPIN_NO_BEAT && b == last)
			return SHUNT_SPIN_PEER_STALLED;
		return SHUNT_SPIN_ON;
	}
	*beat = SHUNT_SPIN_NO_BEAT;
	return SHUNT_SPIN_ON;
}

int shunt_spin_crowded(unsigned runnable, unsigned ncpus, int peer_running)
{
	unsigned us = 1 + (peer_running ? 1u : 0u);
	unsigned others = runnable > us ? runnable - us : 0;
	/* Both ends need a CPU each while we spin, whether the peer runs now
	 * or is about to be woken. */
	return ncpus < 2 || others + 2 > ncpus;
}

int shunt_spin_oversubscribed(int runnable, unsigned ncpus)
{
	return runnable >= 0 && (unsigned)(runnable > 2 ? runnable - 2 : 0) >= ncpus;
}

int shunt_spin_crowd(int young, int peer_running, int runnable, unsigned ncpus)
{
	if (young)
		return runnable >= 0 && shunt_spin_crowded((unsigned)runnable, ncpus, peer_running);
	return shunt_spin_oversubscribed(runnable, ncpus);
}

int shunt_spin_run(uint64_t *run_ns, uint64_t spun)
{
	*run_ns += spun;
	if (*run_ns < SHUNT_SPIN_RUN_MAX_NS)
		return 0;
	*run_ns = 0;
	return 1;
}

int shunt_spin_yield_ok(enum shunt_spin_verdict why, int unknown, int oneway, int runnable,
			unsigned ncpus)
{
	if (why != SHUNT_SPIN_SAME_CPU && !unknown)
		return 0;
	if (why == SHUNT_SPIN_SAME_CPU && oneway)
		return 1;
	/* An exchange yields exactly where it would spin: while the others
	 * alone cannot fill every CPU. */
	return runnable >= 0 && !shunt_spin_oversubscribed(runnable, ncpus);
}

enum shunt_spin_verdict shunt_wait_plan(const struct shunt_wait_view *v, uint32_t *beat,
					int *yield_first)
{
	*yield_first = 0;
	*beat = SHUNT_SPIN_NO_BEAT;
	if (!v->budget_ns)
		return SHUNT_SPIN_BUDGET;
	enum shunt_spin_verdict why =
		shunt_spin_check(v->peer, v->mycpu, v->woke, 0, v->budget_ns, beat);
	if (why != SHUNT_SPIN_ON || !v->peer)
		return why;
	/* Others want the CPUs: sleep until the answer, as the kernel's
	 * sockets do (shunt_spin_crowd). */
	int running = __atomic_load_n(&v->peer->where, __ATOMIC_RELAXED) != SHUNT_AT_SLEEP;
	if (shunt_spin_crowd(v->young, running, v->runnable, v->ncpus))
		return SHUNT_SPIN_CROWDED;
	*yield_first = __atomic_load_n(&v->peer->cpu, __ATOMIC_RELAXED) < 0;
	return SHUNT_SPIN_ON;
}
