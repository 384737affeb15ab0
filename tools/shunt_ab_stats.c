/* shunt ab's verdicts (see shunt_ab_stats.h). */
#include "shunt_ab_stats.h"

#include <math.h>

#include "bench/bench_util.h"

/* P(Binomial(n, 1/2) <= j) */
static double binom_half_cdf(int n, int j)
{
	double term = pow(0.5, n), sum = 0; /* C(n, 0) / 2^n */
	for (int i = 0; i <= j; i++) {
		sum += term;
		term = term * (n - i) / (i + 1);
	}
	return sum;
}

int ab_interval_rank(int n, double *coverage)
{
	int best = 0;
	double cov = NAN;
	for (int k = 1; 2 * k <= n; k++) {
		double c = 1 - 2 * binom_half_cdf(n, k - 1);
		if (c < AB_CONFIDENCE)
			break;
		best = k;
		cov = c;
	}
	if (coverage)
		*coverage = cov;
	return best;
}

void ab_summarize(const double *plain, const double *shunt, int nruns, int higher_better,
		  struct ab_summary *out)
{
	double p[AB_MAX_RUNS], s[AB_MAX_RUNS], r[AB_MAX_RUNS];
	int m = 0, n = 0;
	for (int i = 0; i < nruns && i < AB_MAX_RUNS; i++) {
		if (isnan(plain[i]) || isnan(shunt[i]))
			continue;
		p[m] = plain[i];
		s[m++] = shunt[i];
		/* a plain 0 (CPU time below the clock's tick) has no ratio */
		if (plain[i] != 0)
			r[n++] = shunt[i] / plain[i];
	}
	out->pairs = n;
	out->lo = out->hi = out->coverage = NAN;
	out->plain = median_d(p, (size_t)m);
	out->shunt = median_d(s, (size_t)m);
	if (!n) {
		out->ratio = NAN;
		out->verdict = AB_NO_DATA;
		return;
	}
	out->ratio = median_d(r, (size_t)n); /* and r is sorted */
	int k = n >= AB_MIN_PAIRS ? ab_interval_rank(n, &out->coverage) : 0;
	if (!k) {
		out->verdict = AB_TOO_FEW;
		return;
	}
	out->lo = r[k - 1];
	out->hi = r[n - k];
	if (out->lo > 1)
		out->verdict = higher_better ? AB_BETTER : AB_WORSE;
	else if (out->hi < 1)
		out->verdict = higher_better ? AB_WORSE : AB_BETTER;
	else
		out->verdict = AB_SAME;
}

const char *ab_verdict_text(enum ab_verdict v)
{
	switch (v) {
	case AB_NO_DATA: return "no data";
	case AB_TOO_FEW: return "too few runs for a verdict";
	case AB_SAME: return "no significant difference";
	case AB_BETTER: return "better";
	case AB_WORSE: return "worse";
	}
	return "?";
}
