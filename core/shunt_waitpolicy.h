/* When a blocking call spins, and for how long.
 *
 * Spinning pays only while the peer runs on another CPU and answers within
 * the budget: then the answer is seen a few hundred nanoseconds after it is
 * written, where a sleep costs a wakeup (one to tens of microseconds).
 * Spinning against a peer that shares our CPU, or that is asleep, or that
 * the scheduler has taken off its CPU only delays it: every end of a pair
 * then burns its budget in turn.  So each end publishes where it is
 * (struct shunt_presence, in memory both ends map) and a waiter decides
 * from that, from its own CPU, and from what its past waits taught it
 * (struct shunt_spin_state), as adaptive mutexes and the kernel's busy
 * polling do.  Pure logic: the only system call is sched_getcpu (vDSO). */
#ifndef SHUNT_WAITPOLICY_H
#define SHUNT_WAITPOLICY_H

#include <stdint.h>

#include "shunt_presence.h"

/* Recent answers a wait direction remembers. */
#define SHUNT_SPIN_HISTORY 8u

/* What one direction of one end's waits have taught it: when the recent
 * answers came, counted from the wait's start to readiness, whether the
 * wait saw it spinning or after a sleep (the peer stamps when it woke us:
 * shunt_presence.woke_ns).  Private to the end (not shared). */
struct shunt_spin_state {
	uint32_t ans[SHUNT_SPIN_HISTORY]; /* ns, saturated at UINT32_MAX */
	uint32_t budget_ns; /* the budget they give (shunt_spin_cover) */
	uint8_t at, n;      /* next slot; answers held */
	uint16_t idle;      /* waits since the last probe, while budget is 0 */
};

/* What a spin may cost: cost_ns, the mean CPU a wait may spend spinning
 * (about what kernel TCP spends per round trip at one end: spin_us), and
 * max_ns, the longest one spin may last (spin_max_us). */
struct shunt_spin_limits {
	uint64_t cost_ns, max_ns;
};

/* Why a spin stops (SHUNT_SPIN_ON: it goes on). */
enum shunt_spin_verdict {
	SHUNT_SPIN_ON = 0,
	SHUNT_SPIN_SAME_CPU,     /* the peer is on our CPU: hand it the CPU */
	SHUNT_SPIN_PEER_ASLEEP,  /* the peer sleeps and was not just woken */
	SHUNT_SPIN_PEER_STALLED, /* the peer spins but its beat stopped */
	SHUNT_SPIN_BUDGET,       /* the budget ran out */
	SHUNT_SPIN_CROWDED,      /* a young connection on a machine with no
				    CPU to spare, or any wait on an
				    oversubscribed one (shunt_spin_crowd) */
};

/* A connection's first waits are its peer's setup (accept, the first
 * request, the last close): on a crowded machine a spin there only takes
 * CPU from it.  Later waits are the application's exchanges, where the
 * budget (probes included) says whether spinning pays, crowded or not:
 * two ends that happen to share the CPUs' time answer each other in
 * microseconds while they both run. */
#define SHUNT_SPIN_YOUNG_WAITS 8u

/* Below this the budget counts as none: a spin shorter than a wakeup is
 * not worth the CPU. */
#define SHUNT_SPIN_FLOOR_NS 500u
/* An event loop's wait (poll, select, epoll over several accelerated
 * connections) may spin this many times the limits.  Its next event is the
 * next answer of a server serving many connections, which comes later
 * than one connection's round trip; every sleep that spin avoids saves a
 * wakeup datagram at the peer, two context switches and a drain here.  wrk
 * against nginx (2 CPUs, 4 busy threads): 20 µs made most spins fail
 * and ~100k requests/s; 100 µs, ~125k. */
#define SHUNT_SPIN_LOOP_X 5u
/* Such a wait yields its CPU once its successful spins add up to this
 * since it last slept or yielded (shunt_spin_run). */
#define SHUNT_SPIN_RUN_MAX_NS 200000u
/* With a budget of 0, one wait in this many spins anyway (shunt_spin_probe
 * long), so a direction whose answers became faster finds out even where
 * nothing stamps a slept wait's answer (a remote peer, an event loop). */
#define SHUNT_SPIN_PROBE_EVERY 32u

/* Start a direction with nothing learnt: it spins a probe's length. */
void shunt_spin_init(struct shunt_spin_state *s, const struct shunt_spin_limits *l);

/* The spin that covers recent answers (ans, n of them, in any order)
 * within the limits: the answer of the latest of them it covers, with a
 * quarter and 1 µs to spare, such that (1) at least half of them come
 * within it, (2) it lasts at most max_ns, and (3) the mean CPU it spends
 * per wait (each answer it covers costs its time, each it misses the whole
 * spin, before a sleep) stays within cost_ns.  0 when no spin does: the
 * answers come later, and a wait sleeps at once.  Pure. */
uint64_t shunt_spin_cover(const uint32_t *ans, unsigned n, const struct shunt_spin_limits *l);

/* A probe's length: long enough to see any answer a spin could pay for
 * (cost_ns and a quarter), at most max_ns. */
uint64_t shunt_spin_probe(const struct shunt_spin_limits *l);

/* The budget of the next wait, in ns: 0 means sleep at once.  Takes one
 * wait from the probe count. */
uint64_t shunt_spin_budget(struct shunt_spin_state *s, const struct shunt_spin_limits *l);

/* After every wait, spun or slept: the answer came answer_ns after the
 * wait began (for a wait that ended without one, its length; 0 for one
 * seen within the spin's first beat, before it read the clock). */
void shunt_spin_learn(struct shunt_spin_state *s, const struct shunt_spin_limits *l,
		      uint64_t answer_ns);

/* Asked every few dozen polls while spinning: may it go on?  peer is NULL
 * when the transport has no presence (a remote peer: only the budget
 * counts).  *beat carries the peer's beat from the previous check (start it
 * at SHUNT_SPIN_NO_BEAT).  woke is non-zero when this end woke the peer
 * for this exchange (it sleeps, but not for long). */
#define SHUNT_SPIN_NO_BEAT 0xffffffffu
enum shunt_spin_verdict shunt_spin_check(const struct shunt_presence *peer, int mycpu,
					 int woke, uint64_t spent_ns, uint64_t budget_ns,
					 uint32_t *beat);

/* 1 when a spin would take a CPU that someone wants: runnable tasks on
 * the machine (/proc/loadavg's count, which includes us) besides us and
 * our peer (peer_running: it is on a CPU or waiting for one, not asleep)
 * leave no CPU free for both of us among ncpus. */
int shunt_spin_crowded(unsigned runnable, unsigned ncpus, int peer_running);

/* 1 when a wait past its connection's setup should not spin: the
 * runnable tasks besides us and our peer (runnable counts all, us
 * included; < 0 unknown: 0) could fill every CPU by themselves.  Two ends
 * that then answer each other within a spin keep both their CPUs for whole
 * slices while everyone else waits: with 4 ping-pong pairs on 2 CPUs one
 * pair at a time did 0.3 us round trips and the others waited for its
 * slices (64 B p99.9 1.2-1.9 ms, kernel TCP's 85-140 us), in some runs and
 * not others.  One busy neighbour on a 2-CPU machine does not count: the
 * pair still has a CPU to share. */
int shunt_spin_oversubscribed(int runnable, unsigned ncpus);

/* 1 when a wait whose peer runs on another CPU should not spin, for the
 * crowd: a young connection's (young: within SHUNT_SPIN_YOUNG_WAITS, its
 * peer's setup) when the machine has no CPU to spare (shunt_spin_crowded),
 * any later one, an exchange or a one-way stream alike, when the others
 * could fill every CPU (shunt_spin_oversubscribed).  A stream's ends that
 * spin there wait, as often as not, for a peer the scheduler took off its
 * CPU while it still says it runs: with 4 64 KiB streams on 2 CPUs they
 * ran whole slices each (about 2,800 context switches a second), at 55-100
 * Gbit/s in most runs against 250-270 where they slept and were woken
 * (40,000 a second). */
int shunt_spin_crowd(int young, int peer_running, int runnable, unsigned ncpus);

/* 1 when a wait that will not spin should give its CPU away with
 * sched_yield() rather than sleep; only for a peer on our CPU (why is
 * SHUNT_SPIN_SAME_CPU, or unknown: the peer has not said where it runs).
 *
 * A yield puts us behind every runnable task of the CPU, not only the
 * peer, and forfeits our slice; a sleep is woken by the answer itself, and
 * a woken task is let run soon.  Where others wait for the CPU, an
 * exchange (this end sent since its last wait for input, or received
 * since its last wait for output) that yields comes back after their
 * slices, long after the answer: with 4 ping-pong pairs on 2 CPUs the
 * 64 B p99 went to 4x kernel TCP's.  So an exchange yields only while the
 * runnable tasks besides us and the peer (runnable counts all, us
 * included; < 0 unknown) are fewer than the CPUs, each then having one
 * that is not ours (a busy neighbour).
 *
 * A one-way stream (oneway: nothing came the other way since this end's
 * last wait in the same direction) yields whatever the crowd: each wakeup
 * of a sleeping reader lets it take the CPU from the writer for one
 * message, and 64 B messages with 4 pairs on 2 CPUs went from 15 M/s to
 * 0.65 M/s when they slept.  A stream is judged by its rate, not by one
 * wait's latency.  The caller passes oneway for a young connection's
 * waits too (SHUNT_SPIN_YOUNG_WAITS): what the peer does there is its
 * setup, short work that our CPU is best handed to. */
int shunt_spin_yield_ok(enum shunt_spin_verdict why, int unknown, int oneway, int runnable,
			unsigned ncpus);

/* An event loop's wait (poll, select, epoll over several connections)
 * whose spin paid after spun ns: 1 when it must now give its CPU away
 * (sched_yield), because its paying spins add up to SHUNT_SPIN_RUN_MAX_NS
 * since it last did (*run_ns, reset then).  Spins that pay thanks to peers
 * on the other CPUs never let it sleep, and a peer queued behind it on its
 * own CPU would wait for the end of its slice (milliseconds). */
int shunt_spin_run(uint64_t *run_ns, uint64_t spun);

/* For a wait in one direction: 1 when nothing went the other way since
 * this end's last wait in this direction (other: the bytes moved the other
 * way so far; *mark: that count at the last such wait, updated). */
static inline int shunt_spin_oneway(uint64_t *mark, uint64_t other)
{
	int same = *mark == other;
	*mark = other;
	return same;
}

/* What a wait on one connection knows as it starts. */
struct shunt_wait_view {
	uint64_t budget_ns;                 /* shunt_spin_budget's (0: none) */
	const struct shunt_presence *peer;  /* NULL: nothing known (remote) */
	int mycpu;                          /* -1 unknown */
	int woke;     /* this end woke the peer for this exchange */
	int young;    /* within SHUNT_SPIN_YOUNG_WAITS: the peer's setup */
	int runnable; /* tasks runnable on the machine, us included; -1 unknown */
	unsigned ncpus;
};

/* A wait's first step, from what it knows: SHUNT_SPIN_ON to spin (with
 * *yield_first set when the peer has not said where it runs: a server
 * that has not accepted yet may be queued on our CPU, waiting for the very
 * slice a spin would burn, so it is let run first), else why it hands off
 * at once (shunt_spin_yield_ok then says yield or sleep).  *beat starts
 * the peer's beat for shunt_spin_check. */
enum shunt_spin_verdict shunt_wait_plan(const struct shunt_wait_view *v, uint32_t *beat,
					int *yield_first);

#endif
