/* shunt bench's verdict (tools/shunt_bench_verdict.c) on synthetic
 * figures: when a row of a shunt column is a regression against kernel
 * TCP, which rows and columns are judged, the exit status, and the
 * targets.  No measurement here: the figures are made up. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/shunt_bench.h"

/* ---- the rule, on the rounds' figures ------------------------------------ */

Test(bench_worse, latency_worse_beyond_margin_and_apart)
{
	double shm[] = { 110, 112, 111 }, tcp[] = { 100, 101, 99 };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 1);
}

Test(bench_worse, within_margin_is_not)
{
	/* 4 % slower, every round apart: noise of that size is not a verdict */
	double shm[] = { 104, 104.5, 103.8 }, tcp[] = { 100, 100.2, 99.9 };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 0);
}

Test(bench_worse, overlapping_rounds_are_not)
{
	/* the median 20 % worse, but one round of shunt beats one of TCP */
	double shm[] = { 120, 95, 121 }, tcp[] = { 100, 101, 99 };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 0);
	double shm2[] = { 120, 119, 121 }, tcp2[] = { 100, 125, 99 };
	cr_expect_eq(bench_worse(shm2, 3, tcp2, 3, 1), 0);
}

Test(bench_worse, better_is_not)
{
	double shm[] = { 10, 11, 9 }, tcp[] = { 100, 101, 99 };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 0);
	cr_expect_eq(bench_worse(tcp, 3, shm, 3, 0), 0); /* a rate: 10x higher */
}

Test(bench_worse, rates_the_other_way)
{
	double shm[] = { 80, 82, 81 }, tcp[] = { 100, 99, 101 };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 0), 1, "a lower rate is worse");
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 0, "a lower latency is better");
}

Test(bench_worse, margin_edge)
{
	/* ratio exactly 0.95 is within; just below is not (one round: the
	 * margin alone decides) */
	double tcp[] = { 100 }, at[] = { 95 }, below[] = { 94.9 };
	cr_expect_eq(bench_worse(at, 1, tcp, 1, 0), 0);
	cr_expect_eq(bench_worse(below, 1, tcp, 1, 0), 1);
}

Test(bench_worse, missing_figures_give_no_verdict)
{
	double none[] = { NAN, NAN, NAN }, tcp[] = { 100, 101, 99 };
	cr_expect_eq(bench_worse(none, 3, tcp, 3, 1), -1);
	cr_expect_eq(bench_worse(tcp, 3, none, 3, 1), -1);
	cr_expect_eq(bench_worse(tcp, 0, tcp, 3, 1), -1);
	double zero[] = { 0, 0, 0 };
	cr_expect_eq(bench_worse(tcp, 3, zero, 3, 0), -1, "no reference rate");
	cr_expect_eq(bench_worse(zero, 3, tcp, 3, 0), 1, "a rate of nothing is worse");
}

Test(bench_worse, rounds_without_figures_are_left_out)
{
	/* the NAN round is not "apart" or "overlapping": it is not there */
	double shm[] = { 120, NAN, 121 }, tcp[] = { 100, 101, NAN };
	cr_expect_eq(bench_worse(shm, 3, tcp, 3, 1), 1);
}

/* ---- the confirmation of a suspect, on fresh rounds --------------------- */

Test(bench_worse_confirmed, steady_regression_is)
{
	double shm[] = { 110, 112, 111, 113, 109, 112 }, tcp[] = { 100, 101, 99, 102, 100, 98 };
	cr_expect_eq(bench_worse_confirmed(shm, 6, tcp, 6, 1), 1);
	/* one round of six better than every TCP round: still worse (p about 0.03) */
	double shm2[] = { 110, 112, 95, 113, 109, 112 };
	cr_expect_eq(bench_worse_confirmed(shm2, 6, tcp, 6, 1), 1);
}

Test(bench_worse_confirmed, same_spread_is_not)
{
	/* scheduler tails: both columns from one spread, interleaved ranks */
	double shm[] = { 2500, 1700, 3900, 1500, 2900, 2100 };
	double tcp[] = { 2400, 3200, 1800, 2600, 1600, 3500 };
	cr_expect_eq(bench_worse_confirmed(shm, 6, tcp, 6, 1), 0);
	/* worse in median by 16 %, but two rounds of six better than every
	 * TCP round: not enough to say (p about 0.2) */
	double shm3[] = { 120, 121, 122, 119, 90, 91 }, tcp3[] = { 100, 101, 99, 118, 117, 92 };
	cr_expect_eq(bench_worse_confirmed(shm3, 6, tcp3, 6, 1), 0);
}

Test(bench_worse_confirmed, within_margin_is_not)
{
	double shm[] = { 104, 104.5, 103.8, 104.2, 104.1, 103.9 };
	double tcp[] = { 100, 100.2, 99.9, 100.1, 100, 99.8 };
	cr_expect_eq(bench_worse_confirmed(shm, 6, tcp, 6, 1), 0, "ranked worse, but by 4 %%");
}

Test(bench_worse_confirmed, rates_and_missing)
{
	double shm[] = { 80, 82, 81, 79, 83, 80 }, tcp[] = { 100, 99, 101, 98, 102, 100 };
	cr_expect_eq(bench_worse_confirmed(shm, 6, tcp, 6, 0), 1, "a lower rate is worse");
	cr_expect_eq(bench_worse_confirmed(shm, 6, tcp, 6, 1), 0, "a lower latency is better");
	double none[] = { NAN, NAN };
	cr_expect_eq(bench_worse_confirmed(none, 2, tcp, 6, 0), -1);
	cr_expect_eq(bench_worse_confirmed(shm, 6, none, 2, 0), -1);
}

Test(bench_exit_status, statuses)
{
	cr_expect_eq(bench_exit_status(0, 0), 0);
	cr_expect_eq(bench_exit_status(0, 1), 3);
	cr_expect_eq(bench_exit_status(0, 17), 3);
	cr_expect_eq(bench_exit_status(1, 0), 1);
	cr_expect_eq(bench_exit_status(1, 4), 1, "a failed measurement comes first");
}

/* ---- a whole run's rows --------------------------------------------------- */

static struct bench *make_confirm(int rounds, int confirm)
{
	struct bench *b = calloc(1, sizeof(*b));
	cr_assert_not_null(b);
	b->o.rounds = rounds;
	b->o.confirm = confirm;
	b->o.nsizes = 2;
	b->o.sizes[0] = 64;
	b->o.sizes[1] = 4096;
	b->o.stream_size = 65536;
	b->o.pairs = 4;
	b->o.nplace = BP_COUNT;
	for (int pl = 0; pl < BP_COUNT; pl++) {
		b->o.place[pl] = (enum bench_place)pl;
		b->place_ok[pl] = 1;
	}
	b->ncpus = 2;
	size_t nv = (size_t)BP_COUNT * BT_COUNT * BM_COUNT * BENCH_MAX_SIZES * BENCH_SLOTS(b);
	b->v = malloc(nv * sizeof(*b->v));
	b->cdf = calloc((size_t)BP_COUNT * BT_COUNT * BENCH_MAX_SIZES * BENCH_SLOTS(b),
			sizeof(*b->cdf));
	cr_assert(b->v && b->cdf);
	for (size_t i = 0; i < nv; i++)
		b->v[i] = NAN;
	b->avail[BT_RING] = b->avail[BT_UNIX] = b->avail[BT_TCP] = b->avail[BT_SHM] = 1;
	return b;
}

static struct bench *make(int rounds)
{
	return make_confirm(rounds, 0);
}

static void unmake(struct bench *b)
{
	free(b->v);
	free(b->cdf);
	free(b);
}

/* Every round of column tp in placement pl: v0, v0 + step, ... */
static void set(struct bench *b, enum bench_place pl, enum bench_tp tp, enum bench_metric m,
		int s, double v0, double step)
{
	for (int r = 0; r < b->o.rounds; r++)
		BV(b, pl, tp, m, s, r) = v0 + step * r;
}

Test(bench_verdict, rows_and_columns_judged)
{
	struct bench *b = make(3);
	set(b, BP_FREE, BT_TCP, BM_P50, 0, 60, 1);
	set(b, BP_FREE, BT_SHM, BM_P50, 0, 80, 1);     /* worse: a regression */
	set(b, BP_FREE, BT_TCP, BM_MAX, 0, 600, 1);
	set(b, BP_FREE, BT_SHM, BM_MAX, 0, 9000, 1);   /* max: not judged */
	set(b, BP_FREE, BT_TCP, BM_CPU_RTT, 0, 20, 1);
	set(b, BP_FREE, BT_SHM, BM_CPU_RTT, 0, 90, 1); /* CPU: shown, not judged */
	set(b, BP_FREE, BT_TCP, BM_GBPS, 0, 10, 0.1);
	set(b, BP_FREE, BT_SHM, BM_GBPS, 0, 40, 0.1);  /* better */
	set(b, BP_PINNED, BT_TCP, BM_RTTS, 1, 20000, 100);
	set(b, BP_PINNED, BT_SHM, BM_RTTS, 1, 15000, 100); /* 4096 B: a regression */
	set(b, BP_FREE, BT_RING, BM_P50, 0, 200, 1);   /* the ring is never judged */

	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_P50, 0), 1);
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_MAX, 0), -1);
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_CPU_RTT, 0), -1);
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_GBPS, 0), 0);
	cr_expect_eq(bench_regressed(b, BP_PINNED, BT_SHM, BM_RTTS, 1), 1);
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_P99, 0), -1, "no figures");
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_RING, BM_P50, 0), -1);
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_FABRIC, BM_P50, 0), -1, "not measured");
	cr_expect_eq(bench_regressions(b), 2);

	/* a placement that was skipped has no verdict, whatever it holds */
	b->place_ok[BP_PINNED] = 0;
	cr_expect_eq(bench_regressed(b, BP_PINNED, BT_SHM, BM_RTTS, 1), -1);
	cr_expect_eq(bench_regressions(b), 1);
	/* nor one left out of --placement */
	b->o.nplace = 1;
	b->o.place[0] = BP_PINNED;
	cr_expect_eq(bench_regressions(b), 0);
	unmake(b);
}

/* Confirmation round i of column tp: the figures of fig[]. */
static void set_confirm(struct bench *b, enum bench_place pl, enum bench_tp tp,
			enum bench_metric m, int s, const double *fig)
{
	for (int i = 0; i < b->o.confirm; i++)
		BV(b, pl, tp, m, s, b->o.rounds + i) = fig[i];
}

Test(bench_verdict, a_suspect_is_judged_by_its_confirmation)
{
	struct bench *b = make_confirm(3, 6);
	double tcp[] = { 2400, 3200, 1800, 2600, 1600, 3500 };
	double noise[] = { 2500, 1700, 3900, 1500, 2900, 2100 };
	double worse[] = { 4100, 4500, 3900, 4800, 4300, 4000 };
	/* worse in all three rounds, ranges apart: a suspect */
	set(b, BP_OVERSUB, BT_TCP, BM_P999, 1, 2000, 100);
	set(b, BP_OVERSUB, BT_SHM, BM_P999, 1, 3500, 100);
	cr_expect_eq(bench_suspect(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 1);
	cr_expect_eq(bench_regressed(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 1,
		     "no confirmation measured: the suspect stands");
	/* its confirmation says noise: not a regression */
	set_confirm(b, BP_OVERSUB, BT_TCP, BM_P999, 1, tcp);
	set_confirm(b, BP_OVERSUB, BT_SHM, BM_P999, 1, noise);
	cr_expect_eq(bench_confirm_rounds(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 6);
	cr_expect_eq(bench_regressed(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 0);
	cr_expect_eq(bench_regressions(b), 0);
	/* its confirmation says worse again: a regression */
	set_confirm(b, BP_OVERSUB, BT_SHM, BM_P999, 1, worse);
	cr_expect_eq(bench_regressed(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 1);
	cr_expect_eq(bench_regressions(b), 1);
	/* a row that was not a suspect is not judged by confirmation rounds
	 * (they were run for another row of its test) */
	set(b, BP_OVERSUB, BT_TCP, BM_P99, 1, 100, 1);
	set(b, BP_OVERSUB, BT_SHM, BM_P99, 1, 80, 1);
	double p99_tcp[] = { 100, 100, 100, 100, 100, 100 }, p99_shm[] = { 300, 300, 300, 300, 300, 300 };
	set_confirm(b, BP_OVERSUB, BT_TCP, BM_P99, 1, p99_tcp);
	set_confirm(b, BP_OVERSUB, BT_SHM, BM_P99, 1, p99_shm);
	cr_expect_eq(bench_regressed(b, BP_OVERSUB, BT_SHM, BM_P99, 1), 0);
	/* the table's medians are the rounds', not the confirmation's */
	cr_expect_float_eq(bench_median(b, BP_OVERSUB, BT_SHM, BM_P999, 1), 3600, 1e-9);
	unmake(b);
}

Test(bench_verdict, fabric_against_tcp_across_netns_only)
{
	struct bench *b = make(3);
	b->avail[BT_FABRIC] = 1;
	set(b, BP_FREE, BT_TCP, BM_P50, 0, 60, 1);
	set(b, BP_FREE, BT_SHM, BM_P50, 0, 80, 1);
	set(b, BP_FREE, BT_FABRIC, BM_P50, 0, 90, 1);
	cr_expect(bench_compared(b, BT_SHM) && bench_compared(b, BT_FABRIC));
	cr_expect_eq(bench_regressions(b), 2);
	/* --netns: kernel TCP and fabric cross the veth, shm stays on loopback */
	b->o.netns = 1;
	cr_expect(!bench_compared(b, BT_SHM));
	cr_expect(bench_compared(b, BT_FABRIC));
	cr_expect_eq(bench_regressed(b, BP_FREE, BT_SHM, BM_P50, 0), -1);
	cr_expect_eq(bench_regressions(b), 1);
	/* without kernel TCP nothing is judged */
	b->avail[BT_TCP] = 0;
	cr_expect_eq(bench_regressions(b), 0);
	unmake(b);
}

Test(bench_verdict, exit_status_of_a_run)
{
	struct bench *b = make(3);
	set(b, BP_NEIGHBOUR, BT_TCP, BM_CONNS, 0, 9000, 10);
	set(b, BP_NEIGHBOUR, BT_SHM, BM_CONNS, 0, 9100, 10);
	cr_expect_eq(bench_exit_status(0, bench_regressions(b)), 0);
	set(b, BP_NEIGHBOUR, BT_SHM, BM_CONNS, 0, 3000, 10);
	cr_expect_eq(bench_exit_status(0, bench_regressions(b)), 3);
	unmake(b);
}

/* ---- targets -------------------------------------------------------------- */

static const struct bench_target *target(const struct bench_target *t, int n, const char *key,
					 enum bench_place pl)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].key, key) && (t[i].pl == pl || !strcmp(key, "idle_cpu_above_tcp")))
			return &t[i];
	cr_assert_fail("no target %s in %s", key, bench_place_key[pl]);
	return NULL;
}

/* The host moved the virtual CPUs between rounds: each round's columns
 * moved together.  The ratio is the rounds' median ratio (1.2x), not the
 * ratio of medians taken apart (0.6 / 0.25 = 2.4x). */
Test(bench_targets, ratio_is_the_median_of_the_rounds_ratios)
{
	struct bench *b = make(3);
	struct bench_target t[BENCH_TARGETS];
	double ring[3] = {0.25, 1.0, 0.25}, shm[3] = {0.30, 1.2, 0.6};
	for (int r = 0; r < 3; r++) {
		BV(b, BP_PINNED, BT_RING, BM_P50, 0, r) = ring[r];
		BV(b, BP_PINNED, BT_SHM, BM_P50, 0, r) = shm[r];
	}
	int n = bench_targets(b, t);
	const struct bench_target *x = target(t, n, "p50_vs_ring", BP_PINNED);
	cr_expect_float_eq(x->value, 1.2, 1e-9);
	cr_expect_eq(x->state, BTS_MET);
	/* a round one column lacks is left out */
	BV(b, BP_PINNED, BT_RING, BM_P50, 0, 1) = NAN;
	n = bench_targets(b, t);
	x = target(t, n, "p50_vs_ring", BP_PINNED);
	cr_expect_float_eq(x->value, (1.2 + 2.4) / 2, 1e-9);
	unmake(b);
}

Test(bench_targets, met_not_met_not_checked)
{
	struct bench *b = make(3);
	struct bench_target t[BENCH_TARGETS];
	set(b, BP_FREE, BT_RING, BM_P50, 0, 1.0, 0);
	set(b, BP_FREE, BT_SHM, BM_P50, 0, 1.4, 0);    /* 1.4x the ring: <= 1.5 met */
	set(b, BP_PINNED, BT_RING, BM_P50, 0, 1.0, 0);
	set(b, BP_PINNED, BT_SHM, BM_P50, 0, 1.4, 0);  /* > 1.3: not met */
	set(b, BP_NEIGHBOUR, BT_TCP, BM_P50, 0, 10, 0);
	set(b, BP_NEIGHBOUR, BT_SHM, BM_P50, 0, 7, 0); /* 0.7x: met */
	set(b, BP_OVERSUB, BT_TCP, BM_RTTS, 0, 1000, 0);
	set(b, BP_OVERSUB, BT_SHM, BM_RTTS, 0, 1400, 0); /* 1.4x: not met */
	set(b, BP_FREE, BT_TCP, BM_MSGS, 0, 100, 0);
	set(b, BP_FREE, BT_SHM, BM_MSGS, 0, 300, 0);
	set(b, BP_FREE, BT_TCP, BM_GBPS, 0, 10, 0);
	set(b, BP_FREE, BT_SHM, BM_GBPS, 0, 49, 0);
	set(b, BP_FREE, BT_TCP, BM_CONNS, 0, 10000, 0);
	set(b, BP_FREE, BT_SHM, BM_CONNS, 0, 10000, 0);
	set(b, BP_FREE, BT_TCP, BM_IDLE, 0, 300, 0);
	set(b, BP_FREE, BT_SHM, BM_IDLE, 0, 500, 0);
	set(b, BP_NEIGHBOUR, BT_TCP, BM_IDLE, 0, 300, 0);
	set(b, BP_NEIGHBOUR, BT_SHM, BM_IDLE, 0, 1400, 0); /* 1100 above: not met */

	int n = bench_targets(b, t);
	cr_assert_eq(n, 8 + 10, "the 8 of before, and 4 sizes pinned (p50, mean) and 2 free against the ring");
	const struct bench_target *x = target(t, n, "p50_vs_ring", BP_FREE);
	cr_expect_eq(x->state, BTS_MET);
	cr_expect_float_eq(x->value, 1.4, 1e-9);
	cr_expect_eq(target(t, n, "p50_vs_ring", BP_PINNED)->state, BTS_NOT_MET);
	cr_expect_eq(target(t, n, "p50_vs_tcp", BP_NEIGHBOUR)->state, BTS_MET);
	cr_expect_eq(target(t, n, "rtts_vs_tcp", BP_OVERSUB)->state, BTS_NOT_MET);
	cr_expect_eq(target(t, n, "msgs_vs_tcp", BP_FREE)->state, BTS_MET);
	cr_expect_eq(target(t, n, "stream_vs_tcp", BP_FREE)->state, BTS_NOT_MET);
	cr_expect_eq(target(t, n, "conns_vs_tcp", BP_FREE)->state, BTS_MET, "1.0x is met");
	x = target(t, n, "idle_cpu_above_tcp", BP_FREE);
	cr_expect_eq(x->state, BTS_NOT_MET);
	cr_expect_eq(x->pl, BP_NEIGHBOUR, "the worst placement is named");
	cr_expect_float_eq(x->value, 1100, 1e-9);

	/* what cannot be checked says why */
	b->place_ok[BP_PINNED] = 0;
	b->o.stream_size = 4096;
	b->o.sizes[0] = 128;
	n = bench_targets(b, t);
	x = target(t, n, "p50_vs_ring", BP_PINNED);
	cr_expect_eq(x->state, BTS_NOT_CHECKED);
	cr_expect(strstr(x->why, "skipped"), "%s", x->why);
	x = target(t, n, "p50_vs_ring", BP_FREE);
	cr_expect_eq(x->state, BTS_NOT_CHECKED);
	cr_expect(strstr(x->why, "64 B"), "%s", x->why);
	cr_expect_eq(target(t, n, "stream_vs_tcp", BP_FREE)->state, BTS_NOT_CHECKED);
	cr_expect_eq(target(t, n, "msgs_vs_tcp", BP_FREE)->state, BTS_NOT_CHECKED);
	b->o.nplace = 1; /* --placement free */
	n = bench_targets(b, t);
	x = target(t, n, "p50_vs_tcp", BP_NEIGHBOUR);
	cr_expect_eq(x->state, BTS_NOT_CHECKED);
	cr_expect(strstr(x->why, "not run"), "%s", x->why);
	unmake(b);
}

/* The rows of message sizes and of servers that compute (--think): p50
 * against the raw ring's times a factor plus a constant, or against the
 * computing time plus 2 us; at 100 us and more, p50 and the client's CPU
 * per round trip against kernel TCP's. */
Test(bench_targets, sizes_and_think)
{
	struct bench *b = make(3);
	struct bench_target t[BENCH_TARGETS];
	b->o.nsizes = 3;
	b->o.sizes[2] = 16384;
	set(b, BP_PINNED, BT_RING, BM_P50, 0, 1.0, 0);
	set(b, BP_PINNED, BT_SHM, BM_P50, 0, 1.6, 0);  /* <= 1.5 x 1.0 + 0.2 */
	set(b, BP_PINNED, BT_RING, BM_P50, 2, 3.0, 0);
	set(b, BP_PINNED, BT_SHM, BM_P50, 2, 43.5, 0); /* the sleep: not met */
	int n = bench_targets(b, t), seen = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(t[i].key, "p50_vs_ring_bound") || t[i].pl != BP_PINNED)
			continue;
		seen++;
		if (strstr(t[i].what, "64 B")) {
			cr_expect_eq(t[i].state, BTS_MET);
			cr_expect_float_eq(t[i].value, 1.6 / 1.7, 1e-9);
		} else if (strstr(t[i].what, "16384 B")) {
			cr_expect_eq(t[i].state, BTS_NOT_MET);
		} else if (strstr(t[i].what, "65536 B")) {
			cr_expect_eq(t[i].state, BTS_NOT_CHECKED);
			cr_expect(strstr(t[i].why, "--sizes"), "%s", t[i].why);
		}
	}
	cr_expect_eq(seen, 4);
	/* The mean, from the round trips per second: 1.2 us against 2 x 1.0 + 0.5. */
	set(b, BP_PINNED, BT_RING, BM_RTTS, 0, 1e6, 0);
	set(b, BP_PINNED, BT_SHM, BM_RTTS, 0, 1e6 / 1.2, 0);
	n = bench_targets(b, t);
	const struct bench_target *m = target(t, n, "mean_vs_ring_bound", BP_PINNED);
	cr_expect_eq(m->state, BTS_MET);
	cr_expect_float_eq(m->value, 1.2 / 2.5, 1e-9);
	b->o.think_us = 10;
	set(b, BP_PINNED, BT_SHM, BM_P50, 0, 11.5, 0);
	n = bench_targets(b, t);
	const struct bench_target *x = target(t, n, "p50_vs_think_bound", BP_PINNED);
	cr_expect_eq(x->state, BTS_MET, "11.5 us <= 10 + 2");
	b->o.think_us = 100;
	set(b, BP_PINNED, BT_TCP, BM_P50, 0, 160, 0);
	set(b, BP_PINNED, BT_SHM, BM_P50, 0, 150, 0);
	set(b, BP_PINNED, BT_TCP, BM_CPU_RTT_C, 0, 25, 0);
	set(b, BP_PINNED, BT_SHM, BM_CPU_RTT_C, 0, 101, 0); /* spins the whole wait */
	n = bench_targets(b, t);
	cr_expect_eq(target(t, n, "think_p50_vs_tcp", BP_PINNED)->state, BTS_MET);
	cr_expect_eq(target(t, n, "think_cpu_vs_tcp", BP_PINNED)->state, BTS_NOT_MET);
	unmake(b);
}
