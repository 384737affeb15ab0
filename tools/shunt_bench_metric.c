/* shunt bench: what the columns, placements and measured quantities are
 * called, which way each quantity is better, and the medians over the
 * rounds that the table, the verdict and the picture all show. */
#include <math.h>
#include <stddef.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"

const char *const bench_tp_name[BT_COUNT] = {
	"raw ring", "unix socket", "kernel TCP", "shunt-shm", "shunt-fabric", "sockmap",
};
const char *const bench_tp_key[BT_COUNT] = { "ring", "unix", "tcp", "shm", "fabric",
						    "sockmap" };
const char *const bench_place_key[BP_COUNT] = { "free", "pinned", "neighbour", "oversub" };

/* The CSV test name of each test, as bench_metric[].test spells it. */
const char *const bench_test_key[] = { [BTEST_PINGPONG] = "pingpong", [BTEST_STREAM] = "stream",
				       [BTEST_MSGS] = "msgrate", [BTEST_CONNECT] = "connect",
				       [BTEST_IDLE] = "idle" };

/* Judged: the rows the issue names (latency percentiles, round trips,
 * stream, messages, connections).  Not judged: the maximum (one sample, not
 * a percentile: the noisiest figure there is) and the CPU rows (a cost
 * shown next to the speed, not a speed). */
const struct bench_metric_info bench_metric[BM_COUNT] = {
	[BM_P50] = { "p50_us", "us", "pingpong", 1, 1, 1 },
	[BM_P90] = { "p90_us", "us", "pingpong", 1, 1, 1 },
	[BM_P99] = { "p99_us", "us", "pingpong", 1, 1, 1 },
	[BM_P999] = { "p999_us", "us", "pingpong", 1, 1, 1 },
	[BM_MAX] = { "max_us", "us", "pingpong", 1, 0, 1 },
	[BM_RTTS] = { "round_trips_per_s", "RTT/s", "pingpong", 0, 1, 1 },
	[BM_CPU_RTT] = { "cpu_us_per_rtt", "us", "pingpong", 1, 0, 1 },
	[BM_CPU_RTT_C] = { "cpu_us_per_rtt_client", "us", "pingpong", 1, 0, 0 },
	[BM_CPU_RTT_S] = { "cpu_us_per_rtt_server", "us", "pingpong", 1, 0, 0 },
	[BM_GBPS] = { "throughput_gbps", "Gbit/s", "stream", 0, 1, 1 },
	[BM_CPU_MB] = { "cpu_us_per_mb", "us", "stream", 1, 0, 1 },
	[BM_CPU_MB_C] = { "cpu_us_per_mb_client", "us", "stream", 1, 0, 0 },
	[BM_CPU_MB_S] = { "cpu_us_per_mb_server", "us", "stream", 1, 0, 0 },
	[BM_MSGS] = { "messages_per_s", "msg/s", "msgrate", 0, 1, 1 },
	[BM_CPU_MSG] = { "cpu_ns_per_msg", "ns", "msgrate", 1, 0, 1 },
	[BM_CPU_MSG_C] = { "cpu_ns_per_msg_client", "ns", "msgrate", 1, 0, 0 },
	[BM_CPU_MSG_S] = { "cpu_ns_per_msg_server", "ns", "msgrate", 1, 0, 0 },
	[BM_CONNS] = { "connections_per_s", "conn/s", "connect", 0, 1, 1 },
	[BM_CONN_P50] = { "connect_p50_us", "us", "connect", 1, 1, 1 },
	[BM_CPU_CONN] = { "cpu_us_per_conn", "us", "connect", 1, 0, 1 },
	[BM_CPU_CONN_C] = { "cpu_us_per_conn_client", "us", "connect", 1, 0, 0 },
	[BM_CPU_CONN_S] = { "cpu_us_per_conn_server", "us", "connect", 1, 0, 0 },
	[BM_IDLE] = { "idle_cpu_us_per_s", "us/s", "idle", 1, 0, 1 },
	[BM_IDLE_C] = { "idle_cpu_us_per_s_client", "us/s", "idle", 1, 0, 0 },
	[BM_IDLE_S] = { "idle_cpu_us_per_s_server", "us/s", "idle", 1, 0, 0 },
};

double bench_median(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		    enum bench_metric m, int s)
{
	double v[BENCH_MAX_ROUNDS];
	size_t n = 0;
	for (int r = 0; r < b->o.rounds; r++) {
		double x = BV(b, pl, tp, m, s, r);
		if (!isnan(x))
			v[n++] = x;
	}
	return median_d(v, n);
}

/* Quantile by quantile, the median latency over the rounds. */
void bench_median_cdf(const struct bench *b, enum bench_place pl, enum bench_tp tp, int s,
		      struct bench_cdf *out)
{
	out->n = 0;
	int first = -1;
	for (int r = 0; r < b->o.rounds && first < 0; r++)
		if (BCDF(b, pl, tp, s, r).n > 0)
			first = r;
	if (first < 0)
		return;
	const struct bench_cdf *ref = &BCDF(b, pl, tp, s, first);
	for (int i = 0; i < ref->n; i++) {
		double v[BENCH_MAX_ROUNDS];
		size_t n = 0;
		for (int r = 0; r < b->o.rounds; r++) {
			const struct bench_cdf *c = &BCDF(b, pl, tp, s, r);
			if (c->n == ref->n)
				v[n++] = c->us[i];
		}
		out->q[i] = ref->q[i];
		out->us[i] = median_d(v, n);
	}
	out->n = ref->n;
}

double bench_ratio(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		   enum bench_metric m, int s)
{
	double ref = bench_median(b, pl, BT_TCP, m, s), v = bench_median(b, pl, tp, m, s);
	if (isnan(ref) || isnan(v) || ref <= 0 || v <= 0)
		return NAN;
	return bench_metric[m].lower_better ? ref / v : v / ref;
}

int bench_smallest(const struct bench *b)
{
	int k = 0;
	for (int s = 1; s < b->o.nsizes; s++)
		if (b->o.sizes[s] < b->o.sizes[k])
			k = s;
	return k;
}

int bench_size_index(const struct bench *b, unsigned bytes)
{
	for (int s = 0; s < b->o.nsizes; s++)
		if (b->o.sizes[s] == bytes)
			return s;
	return -1;
}
