#include <criterion/criterion.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/shunt_waitpolicy.h"

#define CAP 20000u

static struct shunt_presence peer_at(enum shunt_where w, int cpu)
{
	struct shunt_presence p = {0};
	shunt_presence_set(&p, w, cpu);
	return p;
}

Test(spin, same_cpu_hands_off_at_once)
{
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	struct shunt_presence p = peer_at(SHUNT_AT_APP, 1);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 0, CAP, &beat), SHUNT_SPIN_SAME_CPU);
	p = peer_at(SHUNT_AT_SPIN, 1);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 0, CAP, &beat), SHUNT_SPIN_SAME_CPU);
	/* Just woken, and queued on our CPU: still ours to give up. */
	p = peer_at(SHUNT_AT_SLEEP, 1);
	cr_assert_eq(shunt_spin_check(&p, 1, 1, 0, CAP, &beat), SHUNT_SPIN_SAME_CPU);
}

Test(spin, other_cpu_running_spins)
{
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	struct shunt_presence p = peer_at(SHUNT_AT_APP, 0);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 100, CAP, &beat), SHUNT_SPIN_ON);
}

Test(spin, peer_asleep_is_not_waited_for_unless_woken)
{
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	struct shunt_presence p = peer_at(SHUNT_AT_SLEEP, 0);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 0, CAP, &beat), SHUNT_SPIN_PEER_ASLEEP);
	cr_assert_eq(shunt_spin_check(&p, 1, 1, 0, CAP, &beat), SHUNT_SPIN_ON);
}

Test(spin, stalled_spinner_stops_us)
{
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	struct shunt_presence p = peer_at(SHUNT_AT_SPIN, 0);
	p.beat = 7;
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 10, CAP, &beat), SHUNT_SPIN_ON);
	p.beat = 8;
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 20, CAP, &beat), SHUNT_SPIN_ON);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, 30, CAP, &beat), SHUNT_SPIN_PEER_STALLED);
}

Test(spin, budget_runs_out)
{
	uint32_t beat = SHUNT_SPIN_NO_BEAT;
	struct shunt_presence p = peer_at(SHUNT_AT_APP, 0);
	cr_assert_eq(shunt_spin_check(&p, 1, 0, CAP, CAP, &beat), SHUNT_SPIN_BUDGET);
	cr_assert_eq(shunt_spin_check(NULL, 1, 0, CAP - 1, CAP, &beat), SHUNT_SPIN_ON);
}

/* The limits of the defaults: spin_us 20, spin_max_us 100. */
static const struct shunt_spin_limits LIM = {20000, 100000};

/* A wait trace replayed against the policy: each wait spins its budget or
 * until the answer (a, ns), whichever is first, then learns a, as
 * shunt_conn_wait does whether it saw the answer spinning or after a
 * sleep.  Returns the waits whose answer a spin saw; *cpu: the spin CPU
 * spent (ns). */
static unsigned replay(struct shunt_spin_state *s, const uint32_t *trace, unsigned n,
		       uint64_t *cpu)
{
	unsigned hits = 0;
	*cpu = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = shunt_spin_budget(s, &LIM);
		if (b >= trace[i]) {
			hits++;
			*cpu += trace[i];
		} else {
			*cpu += b;
		}
		shunt_spin_learn(s, &LIM, trace[i]);
	}
	return hits;
}

static void fill(uint32_t *t, unsigned n, uint32_t v)
{
	for (unsigned i = 0; i < n; i++)
		t[i] = v;
}

Test(spin, cover_rule)
{
	uint32_t a[8];
	fill(a, 8, 300);
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 1375,
		     "fast answers: a little over the slowest");
	fill(a, 8, 10000);
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 13500, "10 us answers are covered");
	fill(a, 8, 100000);
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 0, "answers past the cap: sleep at once");
	fill(a, 8, 30000);
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 0,
		     "within the cap, but each would cost more than kernel TCP's round trip");
	/* One slow answer among fast ones (a slow first request) does not
	 * stop the spin; a majority of slow ones does. */
	fill(a, 8, 2000);
	a[3] = 5000000;
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 3500);
	fill(a, 8, 5000000);
	a[0] = a[1] = a[2] = 2000;
	cr_assert_eq(shunt_spin_cover(a, 8, &LIM), 0);
	cr_assert_eq(shunt_spin_cover(a, 0, &LIM), 0);
	struct shunt_spin_limits off = {0, 100000};
	cr_assert_eq(shunt_spin_cover(a, 3, &off), 0, "spin_us 0 never spins");
}

/* Answers at once (64 B: 0.3 us; 64 KiB: 10 us; a server computing 2, 5,
 * 10 us), after a slow setup: every wait past the first few sees its
 * answer spinning. */
Test(spin, trace_fast_answers)
{
	static const uint32_t answer[] = {300, 1400, 3000, 10300, 2300, 5300, 12000};
	for (unsigned k = 0; k < sizeof answer / sizeof *answer; k++) {
		struct shunt_spin_state s;
		shunt_spin_init(&s, &LIM);
		uint32_t t[200];
		fill(t, 200, answer[k]);
		t[0] = 3000000; /* the accept, the first request */
		t[1] = 800000;
		uint64_t cpu;
		unsigned hits = replay(&s, t, 200, &cpu);
		cr_assert_geq(hits, 196, "answers at %u ns: %u of 200 seen spinning", answer[k],
			      hits);
		cr_assert_leq(cpu / 200, LIM.cost_ns, "answers at %u ns", answer[k]);
	}
}

/* A slow server (100 us, 1 ms per answer): the waiter sleeps at once, and
 * its probes cost far less than the round trip kernel TCP spends. */
Test(spin, trace_slow_server)
{
	static const uint32_t answer[] = {100000, 1000000, 40000};
	for (unsigned k = 0; k < sizeof answer / sizeof *answer; k++) {
		struct shunt_spin_state s;
		shunt_spin_init(&s, &LIM);
		uint32_t t[1000];
		fill(t, 1000, answer[k]);
		uint64_t cpu;
		unsigned hits = replay(&s, t, 1000, &cpu);
		cr_assert_eq(hits, 0);
		cr_assert_leq(cpu / 1000, 2000, "answers at %u ns: %llu ns of spin per wait",
			      answer[k], (unsigned long long)(cpu / 1000));
	}
}

/* A server that turns slow and fast again: the policy follows within a
 * few waits each way, slept waits teaching it as spun ones do. */
Test(spin, trace_slow_then_fast_again)
{
	struct shunt_spin_state s;
	shunt_spin_init(&s, &LIM);
	uint32_t t[300];
	fill(t, 100, 5000);
	fill(t + 100, 100, 200000);
	fill(t + 200, 100, 5000);
	uint64_t cpu;
	cr_assert_geq(replay(&s, t, 100, &cpu), 99);
	unsigned slow = replay(&s, t + 100, 100, &cpu);
	cr_assert_eq(slow, 0);
	cr_assert_leq(cpu, 6 * shunt_spin_cover(t, 1, &LIM) + 4 * shunt_spin_probe(&LIM),
		      "a few spins, then sleeps: %llu ns", (unsigned long long)cpu);
	cr_assert_eq(s.budget_ns, 0);
	unsigned fast = replay(&s, t + 200, 100, &cpu);
	cr_assert_geq(fast, 94, "fast again after a few slept waits: %u of 100", fast);
}

/* A crowded machine: answers scattered between microseconds and
 * milliseconds.  Whatever the mix, the spin CPU per wait stays within
 * spin_us (what kernel TCP spends per round trip). */
Test(spin, trace_crowded_machine)
{
	uint32_t t[4000];
	uint32_t x = 12345;
	for (unsigned i = 0; i < 4000; i++) {
		x = x * 1103515245u + 12345u;
		unsigned r = (x >> 16) % 10;
		t[i] = r < 4 ? 1000 + (x % 4000) : r < 7 ? 20000 + (x % 80000) : 300000 + (x % 3000000);
	}
	struct shunt_spin_state s;
	shunt_spin_init(&s, &LIM);
	uint64_t cpu;
	replay(&s, t, 4000, &cpu);
	cr_assert_leq(cpu / 4000, LIM.cost_ns, "%llu ns per wait", (unsigned long long)(cpu / 4000));
	/* Most answers fast, a few slow: it spins for the fast ones. */
	for (unsigned i = 0; i < 4000; i++)
		t[i] = i % 5 == 0 ? 2000000 : 3000;
	shunt_spin_init(&s, &LIM);
	unsigned hits = replay(&s, t, 4000, &cpu);
	cr_assert_geq(hits, 3000);
	cr_assert_leq(cpu / 4000, LIM.cost_ns);
}

/* Nothing learnt says sleep: one wait in SHUNT_SPIN_PROBE_EVERY spins a
 * probe, long enough to see an answer a spin could pay for. */
Test(spin, probes_while_sleeping)
{
	struct shunt_spin_state s;
	shunt_spin_init(&s, &LIM);
	for (int i = 0; i < 8; i++)
		shunt_spin_learn(&s, &LIM, 500000);
	int probes = 0;
	for (unsigned i = 0; i < 4 * SHUNT_SPIN_PROBE_EVERY; i++)
		probes += shunt_spin_budget(&s, &LIM) != 0;
	cr_assert_eq(probes, 4);
	cr_assert_eq(shunt_spin_probe(&LIM), 25000);
	struct shunt_spin_limits low = {20000, 10000};
	cr_assert_eq(shunt_spin_probe(&low), 10000, "never past spin_max_us");
}

/* A spin needs a CPU for each end; with other runnable tasks taking the
 * rest (a CPU-bound neighbour, more pairs than CPUs) it takes one from
 * them, or keeps the peer's wakeup from the CPU a sleep would leave idle. */
Test(spin, crowded_when_others_want_the_cpus)
{
	/* 2 CPUs, us and our peer running: room for both. */
	cr_assert_eq(shunt_spin_crowded(2, 2, 1), 0);
	/* The peer asleep (we are about to wake it): room still. */
	cr_assert_eq(shunt_spin_crowded(1, 2, 0), 0);
	/* One busy neighbour, the peer running or asleep: none. */
	cr_assert_eq(shunt_spin_crowded(3, 2, 1), 1);
	cr_assert_eq(shunt_spin_crowded(2, 2, 0), 1);
	/* Four pairs on two CPUs. */
	cr_assert_eq(shunt_spin_crowded(8, 2, 1), 1);
	/* One CPU: a spin always takes the peer's. */
	cr_assert_eq(shunt_spin_crowded(1, 1, 0), 1);
	/* Four CPUs and one neighbour: room for both. */
	cr_assert_eq(shunt_spin_crowded(3, 4, 1), 0);
	cr_assert_eq(shunt_spin_crowded(5, 4, 1), 1);
	/* A count that missed us (read between two states) is not negative. */
	cr_assert_eq(shunt_spin_crowded(0, 2, 1), 0);
}

Test(spin, an_exchange_yields_only_while_our_cpu_can_hold_just_the_pair)
{
	/* Us, the peer and one busy neighbour on 2 CPUs: the neighbour can
	 * have the other CPU, a yield reaches the peer. */
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, 3, 2));
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, 2, 2));
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_ON, 1, 0, 2, 2), "a peer that has not said where");
	/* Two others on 2 CPUs (oversubscribed): one may be queued on ours,
	 * and a yield would put us behind it. */
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, 4, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_ON, 1, 0, 8, 2));
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, 2, 1), "alone with the peer on 1 CPU");
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, 3, 1));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 0, -1, 2), "count unknown");
	/* Asleep, stalled, out of budget: the peer is not on our CPU. */
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_PEER_ASLEEP, 0, 0, 2, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_PEER_STALLED, 0, 0, 2, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_BUDGET, 0, 0, 2, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_CROWDED, 0, 0, 2, 2));
}

Test(spin, a_one_way_stream_yields_to_a_peer_here_whatever_the_crowd)
{
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 1, 8, 2));
	cr_assert(shunt_spin_yield_ok(SHUNT_SPIN_SAME_CPU, 0, 1, -1, 2));
	/* Only a peer known to be here. */
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_ON, 1, 1, 8, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_PEER_ASLEEP, 0, 1, 2, 2));
	cr_assert(!shunt_spin_yield_ok(SHUNT_SPIN_BUDGET, 0, 1, 2, 2));
}

/* A ping-pong client waits for input after each request; a stream's
 * reader waits for input with nothing sent in between. */
Test(spin, oneway_is_nothing_the_other_way_since_the_last_wait)
{
	uint64_t mark = 0, out = 0;
	out += 64; /* request */
	cr_assert(!shunt_spin_oneway(&mark, out));
	out += 64;
	cr_assert(!shunt_spin_oneway(&mark, out));
	/* Now a reader only. */
	cr_assert(shunt_spin_oneway(&mark, out));
	cr_assert(shunt_spin_oneway(&mark, out));
	out += 1;
	cr_assert(!shunt_spin_oneway(&mark, out));
}

/* The peer reads this line on every wait: a store of what is already there
 * would take the line from it for nothing.  A read-only page proves no
 * store happens (a store would fault). */
Test(spin, presence_note_stores_only_what_changed)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct shunt_presence *p =
		mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	shunt_presence_set(p, SHUNT_AT_APP, 3);
	cr_assert_eq(mprotect(p, (size_t)pg, PROT_READ), 0);
	shunt_presence_note(p, SHUNT_AT_APP, 3); /* unchanged: must not store */
	cr_assert_eq(mprotect(p, (size_t)pg, PROT_READ | PROT_WRITE), 0);
	shunt_presence_note(p, SHUNT_AT_APP, 5);
	cr_assert_eq(p->cpu, 5);
	cr_assert_eq(p->where, SHUNT_AT_APP);
	shunt_presence_note(p, SHUNT_AT_SLEEP, 5);
	cr_assert_eq(p->where, SHUNT_AT_SLEEP);
	cr_assert_eq(p->cpu, 5);
	munmap(p, (size_t)pg);
}

Test(spin, an_exchange_does_not_spin_where_others_could_fill_every_cpu)
{
	/* 2 CPUs: the pair and a busy neighbour or two still spin */
	cr_assert_not(shunt_spin_oversubscribed(2, 2));
	cr_assert_not(shunt_spin_oversubscribed(3, 2));
	cr_assert_not(shunt_spin_oversubscribed(1, 2));
	cr_assert_not(shunt_spin_oversubscribed(0, 2));
	/* 4 pairs on 2 CPUs: 6 others */
	cr_assert(shunt_spin_oversubscribed(8, 2));
	cr_assert(shunt_spin_oversubscribed(4, 2));
	/* unknown: spin as before */
	cr_assert_not(shunt_spin_oversubscribed(-1, 2));
	/* 1 CPU: any other task */
	cr_assert(shunt_spin_oversubscribed(3, 1));
	cr_assert_not(shunt_spin_oversubscribed(2, 1));
}

Test(spin, a_wait_past_setup_does_not_spin_where_others_could_fill_every_cpu)
{
	/* 4 stream or ping-pong pairs on 2 CPUs: an exchange and a one-way
	 * stream alike (the caller no longer tells them apart here) */
	cr_assert(shunt_spin_crowd(0, 1, 8, 2));
	cr_assert(shunt_spin_crowd(0, 0, 8, 2));
	/* the pair and one busy neighbour: it still spins */
	cr_assert_not(shunt_spin_crowd(0, 1, 3, 2));
	/* unknown: spin */
	cr_assert_not(shunt_spin_crowd(0, 1, -1, 2));
}

Test(spin, a_young_connection_does_not_spin_where_no_cpu_is_spare)
{
	/* the peer's setup with a busy neighbour on 2 CPUs: no spin, where
	 * a later wait would */
	cr_assert(shunt_spin_crowd(1, 1, 3, 2));
	cr_assert_not(shunt_spin_crowd(0, 1, 3, 2));
	/* nothing else runs (the peer asleep): it spins */
	cr_assert_not(shunt_spin_crowd(1, 0, 1, 2));
	cr_assert(shunt_spin_crowd(1, 1, 2, 2) == shunt_spin_crowded(2, 2, 1));
	/* unknown: spin */
	cr_assert_not(shunt_spin_crowd(1, 1, -1, 2));
}

Test(spin, an_event_loop_whose_spins_keep_paying_yields_now_and_then)
{
	uint64_t run = 0;
	unsigned yields = 0;
	/* 1000 paying spins of 1 us: one yield per SHUNT_SPIN_RUN_MAX_NS. */
	for (int i = 0; i < 1000; i++)
		yields += (unsigned)shunt_spin_run(&run, 1000);
	cr_assert_eq(yields, 1000u * 1000u / SHUNT_SPIN_RUN_MAX_NS);
	cr_assert_lt(run, SHUNT_SPIN_RUN_MAX_NS);
	/* One long spin yields at once, and starts counting again. */
	run = 0;
	cr_assert_eq(shunt_spin_run(&run, SHUNT_SPIN_RUN_MAX_NS), 1);
	cr_assert_eq(run, 0);
	cr_assert_eq(shunt_spin_run(&run, 1), 0);
	cr_assert_eq(run, 1);
}

/* A wait's first step (shunt_wait_plan), from what it knows. */
Test(spin, plan_spins_only_where_the_policy_says)
{
	uint32_t beat;
	int yf;
	struct shunt_presence p = peer_at(SHUNT_AT_APP, 1);
	struct shunt_wait_view v = {.budget_ns = CAP, .peer = &p, .mycpu = 0, .runnable = 2,
				    .ncpus = 2};
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_ON);
	cr_assert_eq(yf, 0);
	v.budget_ns = 0;
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_BUDGET, "no budget: sleep");
	v.budget_ns = CAP;
	v.mycpu = 1;
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_SAME_CPU);
	v.mycpu = 0;
	v.runnable = 8;
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_CROWDED, "oversubscribed");
	v.runnable = 2;
	p = peer_at(SHUNT_AT_APP, -1);
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_ON);
	cr_assert_eq(yf, 1, "a peer that has not said where it runs is let run first");
	v.peer = NULL;
	v.runnable = 8;
	cr_assert_eq(shunt_wait_plan(&v, &beat, &yf), SHUNT_SPIN_ON, "remote: the budget decides");
	cr_assert_eq(yf, 0);
}
