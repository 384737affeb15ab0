/* shunt ab and sockperf's message-rate window (tools/shunt_ab_sockperf.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/shunt_ab_sockperf.h"

static const char *mps(const char *cmd, int want)
{
	static char out[512];
	cr_assert_eq(ab_sockperf_mps(cmd, out, sizeof(out)), want, "'%s' -> '%s'", cmd, out);
	return out;
}

Test(ab_sockperf, ping_pong_without_mps_gets_a_window)
{
	cr_expect_str_eq(mps("sockperf ping-pong --tcp -i 127.0.0.1 -p 11111 -t 5 -m 64", 1),
			 "sockperf ping-pong --mps=10000000 --tcp -i 127.0.0.1 -p 11111 -t 5 -m 64");
	cr_expect_str_eq(mps("sockperf pp -i 127.0.0.1", 1),
			 "sockperf pp --mps=10000000 -i 127.0.0.1");
	cr_expect_str_eq(mps("taskset -c 1 /usr/bin/sockperf  pp -t 1; echo done", 1),
			 "taskset -c 1 /usr/bin/sockperf  pp --mps=10000000 -t 1; echo done");
	cr_expect_str_eq(mps("sockperf ping-pong", 1), "sockperf ping-pong --mps=10000000");
}

Test(ab_sockperf, left_alone)
{
	static const char *const same[] = {
		"sockperf ping-pong --tcp --mps 10000",
		"sockperf pp --mps=max -t 5",
		"sockperf pp --pps=100000",
		"sockperf under-load --tcp -t 5",      /* 10000 msg/s: a load, no overflow */
		"sockperf ul -t 5",
		"sockperf throughput --tcp -t 5",
		"sockperf server --tcp",
		"redis-benchmark -p 6379 -q",
		"echo sockperf ping-pong-like",
		"mysockperf pp -t 1",
		"",
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		cr_expect_str_eq(mps(same[i], 0), same[i]);
}

Test(ab_sockperf, too_long)
{
	char out[24];
	cr_expect_eq(ab_sockperf_mps("sockperf pp -t 1", out, sizeof(out)), -1);
}

/* The error sockperf prints when its window overflows: a run's start as
 * recorded, ending in the line its exit_with_err() writes for it. */
Test(ab_sockperf, overflow_is_recognised)
{
	char path[4096], buf[4096];
	snprintf(path, sizeof(path), "%s/sockperf_seq_overflow.txt", SHUNT_AB_FIXTURES);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	cr_expect(ab_sockperf_overflowed(buf));
	snprintf(path, sizeof(path), "%s/sockperf_pingpong.txt", SHUNT_AB_FIXTURES);
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	cr_expect(!ab_sockperf_overflowed(buf));
}
