#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void think_us(uint32_t us)
{
	if (!us)
		return;
	uint64_t end = now_ns() + (uint64_t)us * 1000;
	while (now_ns() < end)
		;
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int parse_start_at(const char *prog, const char *arg, uint64_t *ns)
{
	if (parse_u64(arg, ns, 0) == 0)
		return 0;
	fprintf(stderr, "%s: --start-at: expected CLOCK_MONOTONIC nanoseconds, got '%s'\n", prog,
		arg);
	return -1;
}

void sleep_until_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

int64_t proc_cpu_ns(pid_t pid)
{
	clockid_t clk = CLOCK_PROCESS_CPUTIME_ID;
	struct timespec ts;
	if (pid && clock_getcpuclockid(pid, &clk) != 0)
		return -1;
	if (clock_gettime(clk, &ts) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int parse_u64(const char *s, uint64_t *out, int suffixes)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	if (suffixes && *end) {
		unsigned shift = 0;
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' || *end == 'B')   /* KiB, KB, k */
			end++;
		if (*end == 'B')
			end++;
		if (v > (UINT64_MAX >> shift))
			return -1;
		v <<= shift;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

double pct_us(const uint32_t *v, size_t n, double p)
{
	size_t rank = (size_t)(p * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1] / 1000.0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double median_d(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void print_cdf(uint32_t size, const uint32_t *v, size_t n)
{
	/* every 2.5 % for the body, then the tail a log plot of it shows */
	static const double tail[] = { 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0 };
	if (!n)
		return;
	printf("cdf size=%u points=0:%.3f", size, v[0] / 1000.0);
	for (int i = 1; i <= 39; i++)
		printf(",%.3f:%.3f", i / 40.0, pct_us(v, n, i / 40.0));
	printf(",0.98:%.3f", pct_us(v, n, 0.98));
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		printf(",%g:%.3f", tail[i], pct_us(v, n, tail[i]));
	printf("\n");
}

void print_pingpong(uint32_t size, uint32_t *rtt, uint64_t n, int cdf)
{
	double sum = 0;
	for (uint64_t i = 0; i < n; i++)
		sum += rtt[i];
	qsort(rtt, n, sizeof(*rtt), cmp_u32);
	printf("pingpong size=%u iters=%" PRIu64 " p50_us=%.3f p90_us=%.3f"
	       " p99_us=%.3f p999_us=%.3f max_us=%.3f mean_us=%.3f\n",
	       size, n, pct_us(rtt, n, 0.50), pct_us(rtt, n, 0.90), pct_us(rtt, n, 0.99),
	       pct_us(rtt, n, 0.999), rtt[n - 1] / 1000.0, sum / (double)n / 1000.0);
	if (cdf)
		print_cdf(size, rtt, n);
}
