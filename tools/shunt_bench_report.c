/* shunt bench: the table (medians over the rounds, ratios to kernel TCP)
 * and the CSV file (every run and the medians). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"

/* What each metric is called and how it compares. */
static const struct {
	const char *key, *unit;
	const char *test;       /* CSV test name */
	int lower_better;
} metric[BM_COUNT] = {
	[BM_P50] = { "p50_us", "us", "pingpong", 1 },
	[BM_P90] = { "p90_us", "us", "pingpong", 1 },
	[BM_P99] = { "p99_us", "us", "pingpong", 1 },
	[BM_P999] = { "p999_us", "us", "pingpong", 1 },
	[BM_MAX] = { "max_us", "us", "pingpong", 1 },
	[BM_GBPS] = { "throughput_gbps", "Gbit/s", "stream", 0 },
	[BM_MSGS] = { "messages_per_s", "msg/s", "msgrate", 0 },
	[BM_CONNS] = { "connections_per_s", "conn/s", "connect", 0 },
	[BM_CONN_P50] = { "connect_p50_us", "us", "connect", 1 },
};

double bench_median(const struct bench *b, enum bench_tp tp, enum bench_metric m, int s)
{
	double v[BENCH_MAX_ROUNDS];
	size_t n = 0;
	for (int r = 0; r < b->o.rounds; r++) {
		double x = BV(b, tp, m, s, r);
		if (!isnan(x))
			v[n++] = x;
	}
	return median_d(v, n);
}

/* Quantile by quantile, the median latency over the rounds. */
void bench_median_cdf(const struct bench *b, enum bench_tp tp, int s, struct bench_cdf *out)
{
	out->n = 0;
	int first = -1;
	for (int r = 0; r < b->o.rounds && first < 0; r++)
		if (BCDF(b, tp, s, r).n > 0)
			first = r;
	if (first < 0)
		return;
	const struct bench_cdf *ref = &BCDF(b, tp, s, first);
	for (int i = 0; i < ref->n; i++) {
		double v[BENCH_MAX_ROUNDS];
		size_t n = 0;
		for (int r = 0; r < b->o.rounds; r++) {
			const struct bench_cdf *c = &BCDF(b, tp, s, r);
			if (c->n == ref->n)
				v[n++] = c->us[i];
		}
		out->q[i] = ref->q[i];
		out->us[i] = median_d(v, n);
	}
	out->n = ref->n;
}

/* The rows of the table: a metric and, for latencies, the size index. */
struct row {
	enum bench_metric m;
	int s;
	char label[64];
};

static int rows(const struct bench *b, struct row *out)
{
	static const char *const pname[] = { "p50", "p90", "p99", "p99.9", "max" };
	int n = 0;
	unsigned smallest = b->o.sizes[0];
	for (int s = 0; s < b->o.nsizes; s++) {
		if (b->o.sizes[s] < smallest)
			smallest = b->o.sizes[s];
		for (int m = BM_P50; m <= BM_MAX; m++) {
			out[n] = (struct row){ .m = m, .s = s };
			snprintf(out[n++].label, sizeof(out[0].label), "ping-pong %u B %s (us)",
				 b->o.sizes[s], pname[m]);
		}
	}
	out[n] = (struct row){ .m = BM_GBPS };
	snprintf(out[n++].label, sizeof(out[0].label), "stream %u B writes (Gbit/s)",
		 b->o.stream_size);
	out[n] = (struct row){ .m = BM_MSGS };
	snprintf(out[n++].label, sizeof(out[0].label), "messages/s (%u B stream)", smallest);
	out[n] = (struct row){ .m = BM_CONNS };
	snprintf(out[n++].label, sizeof(out[0].label), "connections/s (connect+RTT+close)");
	out[n] = (struct row){ .m = BM_CONN_P50 };
	snprintf(out[n++].label, sizeof(out[0].label), "connect+RTT+close p50 (us)");
	return n;
}

static void fmt(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else if (v < 10)
		snprintf(buf, len, "%.2f", v);
	else if (v < 1000)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.0f", v);
}

/* > 1: better than kernel TCP, whichever way the metric goes. */
static double ratio(const struct bench *b, enum bench_tp tp, const struct row *rw)
{
	double ref = bench_median(b, BT_TCP, rw->m, rw->s), v = bench_median(b, tp, rw->m, rw->s);
	if (isnan(ref) || isnan(v) || ref <= 0 || v <= 0)
		return NAN;
	return metric[rw->m].lower_better ? ref / v : v / ref;
}

void bench_print_table(const struct bench *b, FILE *f)
{
	struct row rw[BENCH_MAX_SIZES * 5 + 8];
	int nrows = rows(b, rw);
	char cell[32];

	fprintf(f, "shunt bench: %d round(s), %g s per measurement, columns interleaved; "
		"ping-pong warm-up %u round trips; ", b->o.rounds, b->o.duration, b->o.warmup);
	if (b->o.cpus[0] >= 0)
		fprintf(f, "client on CPU %d, server on CPU %d\n", b->o.cpus[0], b->o.cpus[1]);
	else
		fprintf(f, "not pinned\n");
	fprintf(f, "machine: %s\n\n", b->machine);

	fprintf(f, "%-36s", "medians");
	for (int tp = 0; tp < BT_COUNT; tp++)
		fprintf(f, " %13s", bench_tp_name[tp]);
	fprintf(f, "\n");
	for (int i = 0; i < nrows; i++) {
		fprintf(f, "%-36s", rw[i].label);
		for (int tp = 0; tp < BT_COUNT; tp++) {
			fmt(b->avail[tp] ? bench_median(b, tp, rw[i].m, rw[i].s) : NAN, cell,
			    sizeof(cell));
			fprintf(f, " %13s", cell);
		}
		fprintf(f, "\n");
	}

	fprintf(f, "\n%-36s", "ratio to kernel TCP (>1 = better)");
	for (int tp = 0; tp < BT_COUNT; tp++)
		fprintf(f, " %13s", bench_tp_name[tp]);
	fprintf(f, "\n");
	for (int i = 0; i < nrows; i++) {
		char label[64];
		snprintf(label, sizeof(label), "%s", rw[i].label);
		char *paren = strstr(label, " (");
		if (paren && rw[i].m != BM_MSGS && rw[i].m != BM_CONNS)
			*paren = '\0'; /* the unit; a ratio has none */
		fprintf(f, "%-36s", label);
		for (int tp = 0; tp < BT_COUNT; tp++) {
			double x = b->avail[tp] ? ratio(b, tp, &rw[i]) : NAN;
			if (isnan(x))
				snprintf(cell, sizeof(cell), "-");
			else
				snprintf(cell, sizeof(cell), "%.2fx", x);
			fprintf(f, " %13s", cell);
		}
		fprintf(f, "\n");
	}
	fprintf(f, "\nlatency ratios are kernel TCP / column, rate ratios column / kernel TCP.\n");
	for (int tp = 0; tp < BT_COUNT; tp++) {
		if (!(b->o.only & (1 << tp)) && tp != BT_FABRIC)
			continue;
		if (!b->avail[tp])
			fprintf(f, "%s: not measured: %s\n", bench_tp_name[tp],
				b->why[tp][0] ? b->why[tp] : "not available");
		else if (tp == BT_SHM || tp == BT_FABRIC)
			fprintf(f, "%s: transport confirmed from the library's stats in %llu run(s)%s%s\n",
				bench_tp_name[tp], b->verified[tp], b->why[tp][0] ? "; last problem: " : "",
				b->why[tp]);
	}
	fprintf(f, "raw ring: no connection to set up (connection rows: -)\n");
	if (b->o.netns)
		fprintf(f, "--netns: kernel TCP and shunt-fabric ran across two network namespaces "
			"joined by veth (%s -> %s); the other columns on loopback\n",
			BENCH_NETNS_CLIENT, BENCH_NETNS_SERVER);
}

/* RFC 4180: quote a field holding a comma or a quote. */
static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int bench_write_csv(const struct bench *b, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	fprintf(f, "round,transport,test,size_bytes,metric,value,unit\n");
	unsigned smallest = b->o.sizes[0];
	for (int s = 1; s < b->o.nsizes; s++)
		if (b->o.sizes[s] < smallest)
			smallest = b->o.sizes[s];
	/* every run, then the medians */
	for (int r = 0; r <= b->o.rounds; r++) {
		for (int tp = 0; tp < BT_COUNT; tp++) {
			if (!b->avail[tp])
				continue;
			for (int m = 0; m < BM_COUNT; m++) {
				int ns = m <= BM_MAX ? b->o.nsizes : 1;
				for (int s = 0; s < ns; s++) {
					double v = r < b->o.rounds ? BV(b, tp, m, s, r)
								   : bench_median(b, tp, m, s);
					if (isnan(v))
						continue;
					unsigned size = m <= BM_MAX ? b->o.sizes[s]
						      : m == BM_GBPS ? b->o.stream_size
						      : m == BM_MSGS ? smallest : 64;
					if (r < b->o.rounds)
						fprintf(f, "%d,", r + 1);
					else
						fprintf(f, "median,");
					csv_field(f, bench_tp_name[tp]);
					fprintf(f, ",%s,%u,%s,%.6g,%s\n", metric[m].test, size,
						metric[m].key, v, metric[m].unit);
				}
			}
		}
	}
	if (fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}
