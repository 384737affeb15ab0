/* shunt ab's verdicts: the median shunt/plain ratio of a figure over the
 * paired runs and a distribution-free 95% interval for it.
 *
 * Runs are paired: run r of each side ran back to back, so each pair saw
 * the same state of the machine, and the per-pair ratio shunt/plain
 * cancels what drifts between pairs.  The interval is the one for a median
 * from order statistics (the sign test's): with the n ratios sorted,
 * [r(k), r(n+1-k)] holds the true median with probability
 * 1 - 2 P(Binomial(n, 1/2) <= k-1), whatever their distribution, if pairs
 * are independent.  k is the largest that keeps that at 95% or more; it
 * needs n >= 6 (with 5 pairs the widest interval covers only 93.8%).  No
 * random resampling: the same runs give the same answer. */
#ifndef SHUNT_AB_STATS_H
#define SHUNT_AB_STATS_H

#define AB_MAX_RUNS 100
#define AB_MIN_PAIRS 6
#define AB_CONFIDENCE 0.95

enum ab_verdict {
	AB_NO_DATA,         /* no pair with both values, plain's not 0 */
	AB_TOO_FEW,         /* fewer than AB_MIN_PAIRS pairs */
	AB_SAME,            /* the interval holds 1 */
	AB_BETTER,          /* the interval excludes 1, on shunt's side */
	AB_WORSE,           /* the interval excludes 1, on plain's side */
};

struct ab_summary {
	int pairs;                    /* runs with both values, plain's not 0 */
	double plain, shunt;          /* medians over the runs with both values */
	double ratio;                 /* median of the pairs' shunt/plain */
	double lo, hi;                /* the interval; NAN with too few pairs */
	double coverage;              /* its exact coverage; NAN likewise */
	enum ab_verdict verdict;
};

/* The summary of one figure: plain[r] and shunt[r] for r < nruns, NAN
 * where a run has no value (at most AB_MAX_RUNS are read); higher_better
 * says which way is better. */
void ab_summarize(const double *plain, const double *shunt, int nruns, int higher_better,
		  struct ab_summary *out);

/* For n ratios: the order-statistic rank k (1-based) of the interval,
 * 0 when n is too small; *coverage gets its coverage. */
int ab_interval_rank(int n, double *coverage);

/* "better", "worse", "no significant difference", "too few runs for a
 * verdict", "no data". */
const char *ab_verdict_text(enum ab_verdict v);

#endif
