/* shunt ab's output parsers (tools/shunt_ab_parse.c), on output recorded
 * from real runs of the programs on a Debian 12 machine
 * (tests/fixtures/ab/). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/shunt_ab.h"

static char *fixture(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", SHUNT_AB_FIXTURES, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s", path);
	char *buf = malloc(1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The figure called name, which must be there exactly once. */
static const struct ab_fig *fig(const struct ab_figs *figs, const char *name)
{
	const struct ab_fig *found = NULL;
	for (int i = 0; i < figs->n; i++)
		if (!strcmp(figs->f[i].name, name)) {
			cr_assert_null(found, "figure '%s' twice", name);
			found = &figs->f[i];
		}
	cr_assert_not_null(found, "no figure '%s'", name);
	return found;
}

static void expect(const struct ab_figs *figs, const char *name, double v, int higher_better)
{
	const struct ab_fig *f = fig(figs, name);
	cr_expect(fabs(f->value - v) <= fabs(v) * 1e-9, "%s: %.9g, expected %.9g", name, f->value, v);
	cr_expect_eq(f->higher_better, higher_better, "%s: direction", name);
}

static const char *parse(const char *file, const char *format, struct ab_figs *figs)
{
	char *text = fixture(file);
	memset(figs, 0, sizeof(*figs));
	const char *fmt = ab_parse(format, text, figs);
	free(text);
	return fmt;
}

Test(ab_parse, sockperf_pingpong)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("sockperf_pingpong.txt", "auto", &f), "sockperf");
	cr_expect_eq(f.n, 5);
	expect(&f, "latency avg (us, RTT/2)", 10.729, 0);
	expect(&f, "latency p50 (us, RTT/2)", 8.836, 0);
	expect(&f, "latency p99 (us, RTT/2)", 35.111, 0);
	expect(&f, "latency p99.9 (us, RTT/2)", 121.294, 0);
	expect(&f, "latency max (us, RTT/2)", 1419.528, 0);
	cr_expect_eq(f.ops, 46991, "round trips of the whole run: %g", f.ops);
}

Test(ab_parse, sockperf_throughput)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("sockperf_throughput.txt", "sockperf", &f), "sockperf");
	cr_expect_eq(f.n, 2);
	expect(&f, "message rate (msg/s)", 399201, 1);
	expect(&f, "bandwidth (MB/s)", 389.845, 1);
	cr_expect_eq(f.ops, 399425, "messages sent: %g", f.ops);
}

Test(ab_parse, redis_quiet)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("redis_benchmark_q.txt", "auto", &f), "redis-benchmark");
	cr_expect_eq(f.n, 4);
	expect(&f, "SET (req/s)", 30959.75, 1);
	expect(&f, "SET p50 (ms)", 0.159, 0);
	expect(&f, "GET (req/s)", 45766.59, 1);
	expect(&f, "GET p50 (ms)", 0.111, 0);
	cr_expect_eq(f.ops, 0, "-q does not say how many requests");
}

Test(ab_parse, redis_csv)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("redis_benchmark_csv.txt", "redis-benchmark", &f), "redis-benchmark");
	cr_expect_eq(f.n, 4);
	expect(&f, "SET (req/s)", 45662.10, 1);
	expect(&f, "SET p50 (ms)", 0.111, 0);
	expect(&f, "GET (req/s)", 45766.59, 1);
	expect(&f, "GET p50 (ms)", 0.119, 0);
}

Test(ab_parse, redis_full_report)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("redis_benchmark_full.txt", "auto", &f), "redis-benchmark");
	cr_expect_eq(f.n, 6);
	expect(&f, "SET (req/s)", 45351.47, 1);
	expect(&f, "SET p50 (ms)", 0.111, 0);
	expect(&f, "GET (req/s)", 45766.59, 1);
	expect(&f, "LPUSH (req/s)", 31645.57, 1);
	expect(&f, "LPUSH p50 (ms)", 0.151, 0);
	cr_expect_eq(f.ops, 60000, "three tests of 20000 requests: %g", f.ops);
}

Test(ab_parse, iperf3_text)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("iperf3.txt", "auto", &f), "iperf3");
	cr_expect_eq(f.n, 2);
	expect(&f, "received (Gbit/s)", 11.0, 1);
	expect(&f, "sent (Gbit/s)", 11.0, 1);
}

Test(ab_parse, iperf3_json)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("iperf3.json", "iperf3", &f), "iperf3");
	cr_expect_eq(f.n, 2);
	expect(&f, "received (Gbit/s)", 7042406535.5729866 / 1e9, 1);
	expect(&f, "sent (Gbit/s)", 7091888193.9053917 / 1e9, 1);
}

Test(ab_parse, wrk)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("wrk.txt", "auto", &f), "wrk");
	cr_expect_eq(f.n, 4);
	expect(&f, "requests/s", 27843.07, 1);
	expect(&f, "transfer (MB/s)", 6.37, 1);
	expect(&f, "latency avg (us)", 152.49, 0);
	/* 4 connections at 27843.07 requests/s: wrk's own figure includes its
	 * correction's made-up samples, this one does not. */
	expect(&f, "latency mean, conns/rate (us)", 4 / 27843.07 * 1e6, 0);
	cr_expect_eq(f.ops, 30575, "%g", f.ops);
}

Test(ab_parse, wrk_latency_distribution)
{
	struct ab_figs f;
	cr_assert_str_eq(parse("wrk_latency.txt", "wrk", &f), "wrk");
	cr_expect_eq(f.n, 6);
	expect(&f, "requests/s", 31580.35, 1);
	expect(&f, "latency mean, conns/rate (us)", 8 / 31580.35 * 1e6, 0);
	expect(&f, "latency avg (us)", 257.67, 0);
	expect(&f, "latency p50 (us)", 232.0, 0);
	expect(&f, "latency p99 (us)", 507.0, 0);
	cr_expect_eq(f.ops, 31622, "%g", f.ops);
}

/* A format that is not the output's finds nothing, and other programs'
 * output is no known format. */
Test(ab_parse, mismatch)
{
	struct ab_figs f;
	cr_expect_null(parse("wrk.txt", "sockperf", &f));
	cr_expect_eq(f.n, 0);
	cr_expect_null(parse("sockperf_pingpong.txt", "redis-benchmark", &f));
	cr_expect_null(parse("iperf3.json", "wrk", &f));
	memset(&f, 0, sizeof(f));
	cr_expect_null(ab_parse("auto", "hello\nworld\n", &f));
	cr_expect_eq(f.n, 0);
}
