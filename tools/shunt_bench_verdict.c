/* shunt bench: is shunt worse than kernel TCP anywhere, and the targets.
 *
 * A regression is a row of a placement (a judged metric, at a size) where
 * a shunt column is worse than kernel TCP, on both counts:
 *   - its median, as a ratio to kernel TCP's turned so that > 1 is better
 *     (the ratio the table shows), is below 1 - BENCH_MARGIN (0.95): worse
 *     by more than 5 %;
 *   - the ranges of the rounds do not overlap: its best round is worse than
 *     kernel TCP's worst.
 * The margin keeps a steady difference of a few per cent (a frequency
 * step, the page cache) from counting; the ranges keep one noisy round
 * from counting.  With one round the margin alone decides.
 *
 * Such a row is a suspect, not yet a regression.  Where two columns
 * have the same spread (a p99.9 made of scheduler slices with more tasks
 * than CPUs: 0.2 to 4 ms from round to round for both), three rounds of
 * one fall all below three of the other once in twenty; over the dozen
 * noisy rows of a run, one run in three would cry wolf.  So the test of
 * a suspect row is run again, --confirm rounds (6) of both columns,
 * interleaved, and the row is a regression when those fresh rounds say
 * so too: their median ratio beyond the margin and a one-sided rank test
 * (Mann-Whitney, normal approximation) at p < 0.05.  A steady regression
 * passes both easily (six rounds all worse: p about 0.003); noise passes the
 * two tests together about once in 400 suspects.  With --confirm 0, or
 * when the confirmation could not be measured, a suspect is a
 * regression.  The judged
 * metrics are bench_metric[].judged; the judged columns shunt-shm and
 * shunt-fabric, each against kernel TCP run under the same conditions
 * (both on loopback, or both across --netns).
 *
 * The targets are the issue's, for shunt-shm; they are printed as met or
 * not met and do not change the exit status.  A target's ratio is the
 * median of the rounds' ratios (each round's two columns ran minutes
 * apart at most), not the ratio of the medians: a host that moves the
 * virtual CPUs between rounds changes both columns of a round alike (a
 * raw ring of 0.25 us in one round, 1.07 us in the next), and medians
 * taken apart can pair one column's fast round with the other's slow
 * one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"

/* The figures of n rounds without the NANs (at most BENCH_MAX_ROUNDS),
 * with their lowest and highest. */
struct figs {
	double v[BENCH_MAX_ROUNDS], min, max;
	size_t n;
};

static void figs_of(struct figs *f, const double *x, int n)
{
	f->n = 0;
	f->min = INFINITY;
	f->max = -INFINITY;
	for (int i = 0; i < n && f->n < BENCH_MAX_ROUNDS; i++)
		if (!isnan(x[i])) {
			f->v[f->n++] = x[i];
			f->min = fmin(f->min, x[i]);
			f->max = fmax(f->max, x[i]);
		}
}

/* Gathers both sides' figures; returns the column's median over the
 * reference's, turned so that > 1 is better, or NAN when a side has no
 * figure or the reference is not positive (nothing to be worse than). */
static double median_ratio(struct figs *c, const double *col, int ncol, struct figs *t,
			   const double *ref, int nref, int lower_better)
{
	figs_of(c, col, ncol);
	figs_of(t, ref, nref);
	if (!c->n || !t->n)
		return NAN;
	double mc = median_d(c->v, c->n), mt = median_d(t->v, t->n);
	if (!(mt > 0))
		return NAN;
	return lower_better ? (mc > 0 ? mt / mc : INFINITY) : mc / mt;
}

int bench_worse(const double *col, int ncol, const double *ref, int nref, int lower_better)
{
	struct figs c, t;
	double ratio = median_ratio(&c, col, ncol, &t, ref, nref, lower_better);
	if (isnan(ratio))
		return -1;
	int apart = lower_better ? c.min > t.max : c.max < t.min;
	return ratio < 1 - BENCH_MARGIN && apart;
}

int bench_worse_confirmed(const double *col, int ncol, const double *ref, int nref,
			  int lower_better)
{
	struct figs c, t;
	double ratio = median_ratio(&c, col, ncol, &t, ref, nref, lower_better);
	if (isnan(ratio))
		return -1;
	/* U: the pairs (one round of each) where the column is worse, ties
	 * counting half */
	double u = 0;
	for (size_t i = 0; i < c.n; i++)
		for (size_t j = 0; j < t.n; j++) {
			int worse = lower_better ? c.v[i] > t.v[j] : c.v[i] < t.v[j];
			u += c.v[i] == t.v[j] ? 0.5 : worse;
		}
	double n1 = (double)c.n, n2 = (double)t.n;
	double mu = n1 * n2 / 2, sigma = sqrt(n1 * n2 * (n1 + n2 + 1) / 12);
	/* P(U >= u) under the same distribution, with continuity correction */
	double p = 0.5 * erfc((u - 0.5 - mu) / sigma / M_SQRT2);
	return ratio < 1 - BENCH_MARGIN && p < BENCH_CONFIRM_P;
}

int bench_compared(const struct bench *b, enum bench_tp tp)
{
	return (tp == BT_SHM || tp == BT_FABRIC) && b->avail[tp] && b->avail[BT_TCP] &&
	       BENCH_CROSS(b, tp) == BENCH_CROSS(b, BT_TCP);
}

/* Rounds first .. first + n - 1 of the row, both columns. */
static void rounds_of(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		      enum bench_metric m, int s, int first, int n, double *col, double *ref)
{
	for (int i = 0; i < n; i++) {
		col[i] = BV(b, pl, tp, m, s, first + i);
		ref[i] = BV(b, pl, BT_TCP, m, s, first + i);
	}
}

int bench_suspect(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		  enum bench_metric m, int s)
{
	if (!bench_metric[m].judged || !bench_compared(b, tp) || !b->place_ok[pl])
		return -1;
	double col[BENCH_MAX_ROUNDS], ref[BENCH_MAX_ROUNDS];
	rounds_of(b, pl, tp, m, s, 0, b->o.rounds, col, ref);
	return bench_worse(col, b->o.rounds, ref, b->o.rounds, bench_metric[m].lower_better);
}

int bench_confirm_rounds(const struct bench *b, enum bench_place pl, enum bench_tp tp,
			 enum bench_metric m, int s)
{
	int n = 0;
	for (int i = 0; i < b->o.confirm; i++)
		n += !isnan(BV(b, pl, tp, m, s, b->o.rounds + i)) &&
		     !isnan(BV(b, pl, BT_TCP, m, s, b->o.rounds + i));
	return n;
}

int bench_regressed(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		    enum bench_metric m, int s)
{
	int v = bench_suspect(b, pl, tp, m, s);
	if (v != 1 || !bench_confirm_rounds(b, pl, tp, m, s))
		return v;
	double col[BENCH_MAX_ROUNDS], ref[BENCH_MAX_ROUNDS];
	rounds_of(b, pl, tp, m, s, b->o.rounds, b->o.confirm, col, ref);
	return bench_worse_confirmed(col, b->o.confirm, ref, b->o.confirm,
				     bench_metric[m].lower_better) == 1;
}

int bench_regressions(const struct bench *b)
{
	int n = 0;
	for (int i = 0; i < b->o.nplace; i++)
		for (int m = 0; m < BM_COUNT; m++)
			for (int s = 0; s < (BM_PER_SIZE(m) ? b->o.nsizes : 1); s++)
				for (int tp = BT_SHM; tp <= BT_FABRIC; tp++)
					n += bench_regressed(b, b->o.place[i], tp, m, s) == 1;
	return n;
}

int bench_exit_status(int failed, int regressions)
{
	/* an incomplete run has no verdict to give */
	return failed ? 1 : regressions ? 3 : 0;
}

/* ---- targets ------------------------------------------------------------ */

static int placement_run(const struct bench *b, enum bench_place pl, char *why, size_t len)
{
	for (int i = 0; i < b->o.nplace; i++)
		if (b->o.place[i] == pl) {
			if (b->place_ok[pl])
				return 1;
			snprintf(why, len, "placement %s skipped", bench_place_key[pl]);
			return 0;
		}
	snprintf(why, len, "placement %s not run (--placement)", bench_place_key[pl]);
	return 0;
}

/* The median over the rounds of shunt-shm's m over column den's, at size
 * index s (-1: the size is not measured, size_why says which). */
static void ratio_target(struct bench_target *t, const struct bench *b, const char *key,
			 enum bench_place pl, enum bench_metric m, int s, const char *size_why,
			 enum bench_tp den, double limit, int at_most, const char *what)
{
	memset(t, 0, sizeof(*t));
	t->key = key;
	t->pl = pl;
	t->limit = limit;
	t->at_most = at_most;
	t->unit = "x";
	t->value = NAN;
	snprintf(t->what, sizeof(t->what), "%s: shunt-shm / %s", what, bench_tp_name[den]);
	if (!placement_run(b, pl, t->why, sizeof(t->why)))
		return;
	if (s < 0) {
		snprintf(t->why, sizeof(t->why), "%s", size_why);
		return;
	}
	if (!b->avail[BT_SHM] || !b->avail[den]) {
		snprintf(t->why, sizeof(t->why), "%s not measured",
			 bench_tp_name[b->avail[BT_SHM] ? den : BT_SHM]);
		return;
	}
	if (den == BT_TCP && BENCH_CROSS(b, BT_TCP)) {
		snprintf(t->why, sizeof(t->why), "kernel TCP ran across --netns, shunt-shm did not");
		return;
	}
	double q[BENCH_MAX_ROUNDS];
	size_t nq = 0;
	for (int r = 0; r < b->o.rounds && nq < BENCH_MAX_ROUNDS; r++) {
		double num = BV(b, pl, BT_SHM, m, s, r), d = BV(b, pl, den, m, s, r);
		if (!isnan(num) && !isnan(d) && d > 0)
			q[nq++] = num / d;
	}
	if (!nq) {
		snprintf(t->why, sizeof(t->why), "no figure");
		return;
	}
	t->value = median_d(q, nq);
	t->state = (at_most ? t->value <= limit : t->value >= limit) ? BTS_MET : BTS_NOT_MET;
}

/* shunt-shm's p50 against a bound in microseconds: mult x the raw ring's
 * p50 + add (ring), or think + add (no ring: a server that computes);
 * the value is the median over the rounds of p50 / bound, met at <= 1. */
static void bound_target(struct bench_target *t, const struct bench *b, enum bench_place pl,
			 unsigned bytes, double mult, double add, int ring)
{
	int s = bench_size_index(b, bytes);
	memset(t, 0, sizeof(*t));
	t->key = ring ? "p50_vs_ring_bound" : "p50_vs_think_bound";
	t->pl = pl;
	t->limit = 1;
	t->at_most = 1;
	t->unit = "x";
	t->value = NAN;
	if (ring)
		snprintf(t->what, sizeof(t->what), "%u B ping-pong p50, %s: shunt-shm / (%gx raw ring + %g us)",
			 bytes, bench_place_key[pl], mult, add);
	else
		snprintf(t->what, sizeof(t->what), "%u B ping-pong p50, %s, server computes %u us: shunt-shm / (%u + %g us)",
			 bytes, bench_place_key[pl], b->o.think_us, b->o.think_us, add);
	if (!placement_run(b, pl, t->why, sizeof(t->why)))
		return;
	if (s < 0) {
		snprintf(t->why, sizeof(t->why), "no %u B ping-pong (--sizes)", bytes);
		return;
	}
	if (!b->avail[BT_SHM] || (ring && !b->avail[BT_RING])) {
		snprintf(t->why, sizeof(t->why), "%s not measured",
			 bench_tp_name[b->avail[BT_SHM] ? BT_RING : BT_SHM]);
		return;
	}
	double q[BENCH_MAX_ROUNDS];
	size_t nq = 0;
	for (int r = 0; r < b->o.rounds && nq < BENCH_MAX_ROUNDS; r++) {
		double v = BV(b, pl, BT_SHM, BM_P50, s, r);
		double bound = ring ? mult * BV(b, pl, BT_RING, BM_P50, s, r) + add
				    : b->o.think_us + add;
		if (!isnan(v) && !isnan(bound) && bound > 0)
			q[nq++] = v / bound;
	}
	if (!nq) {
		snprintf(t->why, sizeof(t->why), "no figure");
		return;
	}
	t->value = median_d(q, nq);
	t->state = t->value <= 1 ? BTS_MET : BTS_NOT_MET;
}

/* shunt-shm's mean round trip (1 / round trips per second) against 2x the
 * raw ring's + 0.5 us, pinned: the value is the median over the rounds of
 * mean / bound, met at <= 1. */
static void mean_target(struct bench_target *t, const struct bench *b, unsigned bytes)
{
	int s = bench_size_index(b, bytes);
	memset(t, 0, sizeof(*t));
	t->key = "mean_vs_ring_bound";
	t->pl = BP_PINNED;
	t->limit = 1;
	t->at_most = 1;
	t->unit = "x";
	t->value = NAN;
	snprintf(t->what, sizeof(t->what), "%u B ping-pong mean, pinned: shunt-shm / (2x raw ring + 0.5 us)",
		 bytes);
	if (!placement_run(b, BP_PINNED, t->why, sizeof(t->why)))
		return;
	if (s < 0) {
		snprintf(t->why, sizeof(t->why), "no %u B ping-pong (--sizes)", bytes);
		return;
	}
	if (!b->avail[BT_SHM] || !b->avail[BT_RING]) {
		snprintf(t->why, sizeof(t->why), "%s not measured",
			 bench_tp_name[b->avail[BT_SHM] ? BT_RING : BT_SHM]);
		return;
	}
	double q[BENCH_MAX_ROUNDS];
	size_t nq = 0;
	for (int r = 0; r < b->o.rounds && nq < BENCH_MAX_ROUNDS; r++) {
		double v = BV(b, BP_PINNED, BT_SHM, BM_RTTS, s, r);
		double ring = BV(b, BP_PINNED, BT_RING, BM_RTTS, s, r);
		if (!isnan(v) && !isnan(ring) && v > 0 && ring > 0)
			q[nq++] = (1e6 / v) / (2 * 1e6 / ring + 0.5);
	}
	if (!nq) {
		snprintf(t->why, sizeof(t->why), "no figure");
		return;
	}
	t->value = median_d(q, nq);
	t->state = t->value <= 1 ? BTS_MET : BTS_NOT_MET;
}

/* The rows for message sizes and servers that compute (--think). */
static int size_targets(const struct bench *b, struct bench_target *t)
{
	static const unsigned pinned[] = {64, 4096, 16384, 65536}, free_[] = {64, 16384};
	int n = 0, s64 = bench_size_index(b, 64);
	if (b->o.think_us >= 100) {
		ratio_target(&t[n++], b, "think_p50_vs_tcp", BP_PINNED, BM_P50, s64,
			     "no 64 B ping-pong (--sizes)", BT_TCP, 1.0, 1,
			     "64 B ping-pong p50, pinned, server computes");
		ratio_target(&t[n++], b, "think_cpu_vs_tcp", BP_PINNED, BM_CPU_RTT_C, s64,
			     "no 64 B ping-pong (--sizes)", BT_TCP, 1.0, 1,
			     "64 B client CPU per round trip, pinned, server computes");
		return n;
	}
	if (b->o.think_us) {
		bound_target(&t[n++], b, BP_PINNED, 64, 0, 2, 0);
		return n;
	}
	/* A size not asked for is a row "not checked", so a run shows every
	 * row the targets name and what it takes to check it. */
	for (size_t i = 0; i < sizeof pinned / sizeof *pinned; i++) {
		bound_target(&t[n++], b, BP_PINNED, pinned[i], 1.5, 0.2, 1);
		mean_target(&t[n++], b, pinned[i]);
	}
	for (size_t i = 0; i < sizeof free_ / sizeof *free_; i++)
		bound_target(&t[n++], b, BP_FREE, free_[i], 2.0, 0.3, 1);
	return n;
}

/* An idle connection costs nothing: in every placement run, shunt-shm's
 * idle CPU is at most kernel TCP's plus 1000 us/s (0.1 % of a CPU; against
 * kernel TCP's own, as a virtual machine charges a sleeping process some
 * wake-up cost that no library can avoid). */
static void idle_target(struct bench_target *t, const struct bench *b)
{
	memset(t, 0, sizeof(*t));
	t->key = "idle_cpu_above_tcp";
	t->pl = BP_FREE;
	t->limit = 1000;
	t->at_most = 1;
	t->unit = "us/s";
	t->value = NAN;
	snprintf(t->what, sizeof(t->what),
		 "idle connection, every placement: shunt-shm - kernel TCP, CPU both ends");
	if (!b->avail[BT_SHM] || !b->avail[BT_TCP]) {
		snprintf(t->why, sizeof(t->why), "%s not measured",
			 bench_tp_name[b->avail[BT_SHM] ? BT_TCP : BT_SHM]);
		return;
	}
	for (int i = 0; i < b->o.nplace; i++) {
		enum bench_place pl = b->o.place[i];
		double d = bench_median(b, pl, BT_SHM, BM_IDLE, 0) - bench_median(b, pl, BT_TCP, BM_IDLE, 0);
		if (!b->place_ok[pl] || isnan(d) || !(isnan(t->value) || d > t->value))
			continue;
		t->value = d;
		t->pl = pl;
		snprintf(t->what, sizeof(t->what),
			 "idle connection, worst placement (%s): shunt-shm - kernel TCP, CPU both ends",
			 bench_place_key[pl]);
	}
	if (isnan(t->value))
		snprintf(t->why, sizeof(t->why), "no figure");
	else
		t->state = t->value <= t->limit ? BTS_MET : BTS_NOT_MET;
}

int bench_targets(const struct bench *b, struct bench_target *t)
{
	int n = 0, s64 = bench_size_index(b, 64);
	const char *no64 = "no 64 B ping-pong (--sizes)";
	char what[96];
	ratio_target(&t[n++], b, "p50_vs_ring", BP_FREE, BM_P50, s64, no64, BT_RING, 1.5, 1,
		     "64 B ping-pong p50, free");
	ratio_target(&t[n++], b, "p50_vs_ring", BP_PINNED, BM_P50, s64, no64, BT_RING, 1.3, 1,
		     "64 B ping-pong p50, pinned");
	ratio_target(&t[n++], b, "p50_vs_tcp", BP_NEIGHBOUR, BM_P50, s64, no64, BT_TCP, 0.7, 1,
		     "64 B ping-pong p50, neighbour");
	snprintf(what, sizeof(what), "64 B round trips/s, oversub (%d pairs on %d CPUs)",
		 b->o.pairs, b->ncpus);
	ratio_target(&t[n++], b, "rtts_vs_tcp", BP_OVERSUB, BM_RTTS, s64, no64, BT_TCP, 1.5, 0,
		     what);
	int msgs64 = b->o.sizes[bench_smallest(b)] == 64 ? 0 : -1;
	ratio_target(&t[n++], b, "msgs_vs_tcp", BP_FREE, BM_MSGS, msgs64,
		     "the message rate is not of 64 B (--sizes)", BT_TCP, 3, 0,
		     "64 B messages/s, free");
	ratio_target(&t[n++], b, "stream_vs_tcp", BP_FREE, BM_GBPS,
		     b->o.stream_size == 65536 ? 0 : -1, "the stream is not of 64 KiB writes "
		     "(--stream-size)", BT_TCP, 5, 0, "64 KiB stream, free");
	ratio_target(&t[n++], b, "conns_vs_tcp", BP_FREE, BM_CONNS, 0, "", BT_TCP, 1.0, 0,
		     "connections/s, free");
	idle_target(&t[n++], b);
	n += size_targets(b, t + n);
	return n;
}
