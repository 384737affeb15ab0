/* shunt ab's verdicts (tools/shunt_ab_stats.c): the median of the paired
 * shunt/plain ratios, its order-statistic interval, and the words. */
#include <criterion/criterion.h>
#include <math.h>

#include "tools/shunt_ab_stats.h"

#define N NAN

/* The interval's rank and coverage: 1 - 2 P(Bin(n, 1/2) <= k - 1). */
Test(ab_stats, interval_rank)
{
	double cov;
	cr_expect_eq(ab_interval_rank(5, &cov), 0, "5 pairs cannot give 95%%");
	cr_expect(isnan(cov));
	cr_expect_eq(ab_interval_rank(6, &cov), 1);
	cr_expect(fabs(cov - (1 - 2.0 / 64)) < 1e-12, "6: %.6f", cov);
	cr_expect_eq(ab_interval_rank(8, &cov), 1); /* k = 2 covers 93.0% */
	cr_expect_eq(ab_interval_rank(9, &cov), 2);
	cr_expect(fabs(cov - (1 - 2.0 * 10 / 512)) < 1e-12, "9: %.6f", cov);
	cr_expect_eq(ab_interval_rank(12, &cov), 3);
	cr_expect(fabs(cov - (1 - 2.0 * 79 / 4096)) < 1e-12, "12: %.6f", cov);
	cr_expect_eq(ab_interval_rank(100, &cov), 40);
	cr_expect(cov >= 0.95 && cov < 0.97, "100: %.6f", cov);
}

/* Latency (lower is better): shunt at half of plain in every pair. */
Test(ab_stats, better_when_the_interval_excludes_one)
{
	double plain[] = { 10, 12, 11, 9, 10, 13 }, shunt[] = { 5, 6.3, 5.4, 4.6, 4.9, 6.4 };
	struct ab_summary s;
	ab_summarize(plain, shunt, 6, 0, &s);
	cr_expect_eq(s.pairs, 6);
	cr_expect_eq(s.verdict, AB_BETTER, "%s", ab_verdict_text(s.verdict));
	cr_expect(fabs(s.plain - 10.5) < 1e-12);
	cr_expect(fabs(s.shunt - 5.2) < 1e-12, "%g", s.shunt);
	/* ratios .5 .525 .4909 .5111 .49 .4923: median of the middle two */
	cr_expect(fabs(s.ratio - (0.4923076923076923 + 0.5) / 2) < 1e-9, "%g", s.ratio);
	cr_expect(fabs(s.lo - 0.49) < 1e-12 && fabs(s.hi - 0.525) < 1e-12, "[%g, %g]", s.lo, s.hi);
	/* the same numbers for a throughput figure: worse */
	ab_summarize(plain, shunt, 6, 1, &s);
	cr_expect_eq(s.verdict, AB_WORSE);
	cr_expect_str_eq(ab_verdict_text(AB_WORSE), "worse");
}

/* One pair the other way round: the interval takes in 1. */
Test(ab_stats, no_significant_difference)
{
	double plain[] = { 10, 10, 10, 10, 10, 10 }, shunt[] = { 9, 9, 9, 9, 9, 11 };
	struct ab_summary s;
	ab_summarize(plain, shunt, 6, 0, &s);
	cr_expect_eq(s.verdict, AB_SAME);
	cr_expect(s.lo < 1 && s.hi > 1);
	cr_expect_str_eq(ab_verdict_text(s.verdict), "no significant difference");
	/* a ratio of exactly 1 at the edge is not excluded */
	double same[] = { 10, 10, 10, 10, 10, 10 }, edge[] = { 9, 9, 9, 9, 9, 10 };
	ab_summarize(same, edge, 6, 0, &s);
	cr_expect_eq(s.verdict, AB_SAME);
}

/* Five pairs, however clear, are too few; one failed run makes six five. */
Test(ab_stats, too_few_runs)
{
	double plain[] = { 10, 10, 10, 10, 10, 10 }, shunt[] = { 1, 1, 1, 1, 1, N };
	struct ab_summary s;
	ab_summarize(plain, shunt, 6, 0, &s);
	cr_expect_eq(s.pairs, 5);
	cr_expect_eq(s.verdict, AB_TOO_FEW);
	cr_expect(fabs(s.ratio - 0.1) < 1e-12, "the ratio is still shown: %g", s.ratio);
	cr_expect(isnan(s.lo) && isnan(s.hi) && isnan(s.coverage));
	cr_expect_str_eq(ab_verdict_text(s.verdict), "too few runs for a verdict");
	ab_summarize(plain, shunt, 1, 0, &s);
	cr_expect_eq(s.pairs, 1);
	cr_expect_eq(s.verdict, AB_TOO_FEW);
}

/* Unpaired values are left out; a plain 0 has no ratio but its pair
 * counts in the medians (CPU time below a clock tick is 0, not missing). */
Test(ab_stats, pairs_only)
{
	double plain[] = { 100, N, 0, 10, 10, 10, 10, 10, 10 };
	double shunt[] = { 1, 5, 3, 20, 20, 20, 20, 20, 20 };
	struct ab_summary s;
	ab_summarize(plain, shunt, 9, 1, &s);
	cr_expect_eq(s.pairs, 7);
	cr_expect(fabs(s.plain - 10) < 1e-12, "%g", s.plain);
	cr_expect(fabs(s.shunt - 20) < 1e-12, "%g", s.shunt);
	cr_expect(fabs(s.ratio - 2) < 1e-12);
	cr_expect_eq(s.verdict, AB_SAME, "one pair at 0.01 keeps 1 in a 7-pair interval");
	double none_p[] = { N, 0 }, none_s[] = { 1, 1 };
	ab_summarize(none_p, none_s, 2, 1, &s);
	cr_expect_eq(s.pairs, 0);
	cr_expect_eq(s.verdict, AB_NO_DATA);
	cr_expect(isnan(s.ratio));
	cr_expect(s.plain == 0 && s.shunt == 1, "%g %g", s.plain, s.shunt);
	double one_p[] = { N }, one_s[] = { 1 };
	ab_summarize(one_p, one_s, 1, 1, &s);
	cr_expect(s.pairs == 0 && isnan(s.plain) && isnan(s.shunt) && s.verdict == AB_NO_DATA);
}

/* The same input, the same output: nothing random. */
Test(ab_stats, reproducible)
{
	double plain[] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3 }, shunt[] = { 2, 7, 1, 8, 2, 8, 1, 8, 2, 8 };
	struct ab_summary a, b;
	ab_summarize(plain, shunt, 10, 1, &a);
	ab_summarize(plain, shunt, 10, 1, &b);
	cr_expect(a.ratio == b.ratio && a.lo == b.lo && a.hi == b.hi && a.verdict == b.verdict);
}
