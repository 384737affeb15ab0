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

Test(spin, budget_adapts)
{
	struct shunt_spin_state s;
	shunt_spin_init(&s, CAP);
	cr_assert_eq(shunt_spin_budget(&s, CAP), CAP);
	/* Answers that never come in time halve it down to nothing. */
	for (int i = 0; i < 8; i++)
		shunt_spin_learn(&s, CAP, shunt_spin_budget(&s, CAP), 0, SHUNT_SPIN_BUDGET);
	cr_assert_eq(s.budget_ns, 0);
	/* Then most waits sleep at once, and one in PROBE_EVERY looks again. */
	int probes = 0;
	for (unsigned i = 0; i < 4 * SHUNT_SPIN_PROBE_EVERY; i++)
		probes += shunt_spin_budget(&s, CAP) != 0;
	cr_assert_eq(probes, 4);
	/* A probe that pays restores a budget fitted to the answers seen. */
	shunt_spin_learn(&s, CAP, 1500, 1, SHUNT_SPIN_ON);
	cr_assert_eq(shunt_spin_budget(&s, CAP), 6000);
	/* A placement refusal (same CPU, peer asleep) does not shrink it. */
	shunt_spin_learn(&s, CAP, 100, 0, SHUNT_SPIN_SAME_CPU);
	cr_assert_eq(shunt_spin_budget(&s, CAP), 6000);
	/* Never above the cap, never when the cap is 0. */
	shunt_spin_learn(&s, CAP, 100000, 1, SHUNT_SPIN_ON);
	cr_assert_eq(shunt_spin_budget(&s, CAP), CAP);
	cr_assert_eq(shunt_spin_budget(&s, 0), 0);
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
	/* The verdict is a placement's: it leaves the budget as it was. */
	struct shunt_spin_state s;
	shunt_spin_init(&s, CAP);
	shunt_spin_learn(&s, CAP, 100, 0, SHUNT_SPIN_CROWDED);
	cr_assert_eq(shunt_spin_budget(&s, CAP), CAP);
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
