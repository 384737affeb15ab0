/* shunt bench: the table (per placement: medians over the rounds, ratios
 * to kernel TCP, the rows that regressed; then the regressions and the
 * targets) and the CSV file (every run, the medians, the verdicts). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"
#include "shunt_outfmt.h"

#define LABEL_W 42
#define CELL_W 13

/* The rows of a placement's table: a metric and, per size, its index. */
struct row {
	enum bench_metric m;
	int s;
	char label[64];   /* with its unit, for the medians */
	char rlabel[64];  /* for the ratios */
};

static void add_row(struct row *rw, int *n, enum bench_metric m, int s, const char *label,
		    const char *rlabel)
{
	rw[*n] = (struct row){ .m = m, .s = s };
	snprintf(rw[*n].label, sizeof(rw[0].label), "%s", label);
	snprintf(rw[*n].rlabel, sizeof(rw[0].rlabel), "%s", rlabel);
	(*n)++;
}

#define MAX_ROWS (BENCH_MAX_SIZES * 7 + 8)

static int rows(const struct bench *b, struct row *out)
{
	static const char *const pname[] = { "p50", "p90", "p99", "p99.9", "max" };
	char l[64], rl[40];
	int n = 0;
	for (int s = 0; s < b->o.nsizes; s++) {
		unsigned z = b->o.sizes[s];
		for (int m = BM_P50; m <= BM_MAX; m++) {
			snprintf(rl, sizeof(rl), "ping-pong %u B %s", z, pname[m]);
			snprintf(l, sizeof(l), "%s (us)", rl);
			add_row(out, &n, m, s, l, rl);
		}
		snprintf(l, sizeof(l), "ping-pong %u B round trips/s", z);
		add_row(out, &n, BM_RTTS, s, l, l);
		snprintf(rl, sizeof(rl), "ping-pong %u B CPU", z);
		snprintf(l, sizeof(l), "%s (us/RTT, both ends)", rl);
		add_row(out, &n, BM_CPU_RTT, s, l, rl);
	}
	snprintf(l, sizeof(l), "stream %u B writes (Gbit/s)", b->o.stream_size);
	snprintf(rl, sizeof(rl), "stream %u B writes", b->o.stream_size);
	add_row(out, &n, BM_GBPS, 0, l, rl);
	add_row(out, &n, BM_CPU_MB, 0, "stream CPU (us/MB, both ends)", "stream CPU");
	snprintf(l, sizeof(l), "messages/s (%u B stream)", b->o.sizes[bench_smallest(b)]);
	add_row(out, &n, BM_MSGS, 0, l, l);
	add_row(out, &n, BM_CPU_MSG, 0, "messages CPU (ns/msg, both ends)", "messages CPU");
	add_row(out, &n, BM_CONNS, 0, "connections/s (connect+RTT+close)",
		"connections/s (connect+RTT+close)");
	add_row(out, &n, BM_CONN_P50, 0, "connect+RTT+close p50 (us)", "connect+RTT+close p50");
	add_row(out, &n, BM_CPU_CONN, 0, "connection CPU (us/conn, both ends)", "connection CPU");
	add_row(out, &n, BM_IDLE, 0, "idle connection CPU (us/s, both ends)",
		"idle connection CPU");
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

static void header(FILE *f, const char *title)
{
	fprintf(f, "%-*s", LABEL_W, title);
	for (int tp = 0; tp < BT_COUNT; tp++)
		fprintf(f, " %*s", CELL_W, bench_tp_name[tp]);
	fprintf(f, "\n");
}

/* "REGRESSION shunt-shm" for the columns of a row that regressed, or "". */
static void marks(const struct bench *b, enum bench_place pl, const struct row *rw, char *buf,
		  size_t len)
{
	buf[0] = '\0';
	for (int tp = BT_SHM; tp <= BT_FABRIC; tp++) {
		if (bench_regressed(b, pl, tp, rw->m, rw->s) != 1)
			continue;
		size_t l = strlen(buf);
		snprintf(buf + l, len - l, "%s%s", l ? ", " : "  REGRESSION ", bench_tp_name[tp]);
	}
}

static void print_placement(const struct bench *b, enum bench_place pl, FILE *f)
{
	struct row rw[MAX_ROWS];
	int nrows = rows(b, rw);
	char cell[32], desc[160];
	if (!b->place_ok[pl]) {
		fprintf(f, "== placement %s: skipped: %s ==\n\n", bench_place_key[pl],
			b->place_why[pl]);
		return;
	}
	bench_place_describe(b, pl, desc, sizeof(desc));
	fprintf(f, "== placement %s: %s ==\n", bench_place_key[pl], desc);
	if (pl == BP_OVERSUB)
		fprintf(f, "(all pairs at once: latencies are the median of the pairs', rates "
			"their sum, CPU per operation over all pairs, idle CPU per connection%s%s)\n",
			b->place_why[pl][0] ? "; " : "", b->place_why[pl]);
	fprintf(f, "\n");
	header(f, "medians");
	for (int i = 0; i < nrows; i++) {
		fprintf(f, "%-*s", LABEL_W, rw[i].label);
		for (int tp = 0; tp < BT_COUNT; tp++) {
			fmt(b->avail[tp] ? bench_median(b, pl, tp, rw[i].m, rw[i].s) : NAN, cell,
			    sizeof(cell));
			fprintf(f, " %*s", CELL_W, cell);
		}
		fprintf(f, "\n");
	}
	fprintf(f, "\n");
	header(f, "ratio to kernel TCP (>1 = better)");
	for (int i = 0; i < nrows; i++) {
		char mark[96];
		fprintf(f, "%-*s", LABEL_W, rw[i].rlabel);
		for (int tp = 0; tp < BT_COUNT; tp++) {
			/* the idle cost of kernel TCP is about nothing: no ratio */
			double x = b->avail[tp] && rw[i].m != BM_IDLE
					   ? bench_ratio(b, pl, tp, rw[i].m, rw[i].s)
					   : NAN;
			if (isnan(x))
				snprintf(cell, sizeof(cell), "-");
			else
				snprintf(cell, sizeof(cell), "%.2fx", x);
			fprintf(f, " %*s", CELL_W, cell);
		}
		marks(b, pl, &rw[i], mark, sizeof(mark));
		fprintf(f, "%s\n", mark);
	}
	fprintf(f, "\n");
}

int bench_quiet_warning(const struct bench *b, FILE *f)
{
	if (!(b->load[0] > 0.5 * b->ncpus) || !(b->place_ok[BP_FREE] || b->place_ok[BP_PINNED]))
		return 0;
	fprintf(f, "warning: the machine is not quiet: load average %.2f at the start, above "
		"0.5 x %d CPUs; the free and pinned figures are not those of an idle machine\n",
		b->load[0], b->ncpus);
	return 1;
}

static void print_regressions(const struct bench *b, FILE *f)
{
	struct row rw[MAX_ROWS];
	int nrows = rows(b, rw), n = bench_regressions(b), judged = 0;
	for (int tp = BT_SHM; tp <= BT_FABRIC; tp++)
		judged += bench_compared(b, tp);
	if (!judged) {
		fprintf(f, "regressions: not judged (no shunt column measured under the "
			"conditions of kernel TCP)\n");
		return;
	}
	if (!n)
		fprintf(f, "regressions: none\n");
	else
		fprintf(f, "regressions: %d row(s) where shunt is worse than kernel TCP:\n", n);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < b->o.nplace; i++) {
			enum bench_place pl = b->o.place[i];
			for (int k = 0; k < nrows; k++)
				for (int tp = BT_SHM; tp <= BT_FABRIC; tp++) {
					int reg = bench_regressed(b, pl, tp, rw[k].m, rw[k].s);
					int nc = bench_confirm_rounds(b, pl, tp, rw[k].m, rw[k].s);
					if (pass == 0 && reg == 1)
						fprintf(f, "  %s: %s: %s %.2fx%s\n", bench_place_key[pl],
							rw[k].rlabel, bench_tp_name[tp],
							bench_ratio(b, pl, tp, rw[k].m, rw[k].s),
							nc ? ", confirmed" : "");
					/* the suspects their confirmation cleared, in the open */
					if (pass == 1 && reg == 0 &&
					    bench_suspect(b, pl, tp, rw[k].m, rw[k].s) == 1)
						fprintf(f, "  not confirmed: %s: %s: %s %.2fx in the %d "
							"rounds, not worse in %d more\n",
							bench_place_key[pl], rw[k].rlabel,
							bench_tp_name[tp],
							bench_ratio(b, pl, tp, rw[k].m, rw[k].s),
							b->o.rounds, nc);
				}
		}
}

static const char *state_name(const struct bench_target *t)
{
	return t->state == BTS_MET ? "met" : t->state == BTS_NOT_MET ? "not met" : "not checked";
}

static void print_targets(const struct bench *b, FILE *f)
{
	struct bench_target t[BENCH_TARGETS];
	int n = bench_targets(b, t);
	fprintf(f, "targets (informative, not in the exit status):\n");
	for (int i = 0; i < n; i++) {
		if (t[i].state == BTS_NOT_CHECKED)
			fprintf(f, "  %s: not checked: %s\n", t[i].what, t[i].why);
		else
			fprintf(f, "  %s %.2f%s (target %s %g%s): %s\n", t[i].what, t[i].value,
				t[i].unit[0] == 'x' ? "x" : " us/s", t[i].at_most ? "<=" : ">=",
				t[i].limit, t[i].unit[0] == 'x' ? "x" : " us/s", state_name(&t[i]));
	}
}

void bench_print_table(const struct bench *b, FILE *f)
{
	int nplaces = 0;
	for (int i = 0; i < b->o.nplace; i++)
		nplaces += b->place_ok[b->o.place[i]];
	fprintf(f, "shunt bench: %d round(s) of %d placement(s), %g s per measurement, columns "
		"interleaved; ping-pong warm-up %u round trips\n", b->o.rounds, nplaces,
		b->o.duration, b->o.warmup);
	fprintf(f, "machine: %s\n", b->machine);
	fprintf(f, "load average (1 minute): %.2f at the start, %.2f at the end\n", b->load[0],
		b->load[1]);
	bench_quiet_warning(b, f);
	fprintf(f, "\n");
	for (int i = 0; i < b->o.nplace; i++)
		print_placement(b, b->o.place[i], f);

	fprintf(f, "latency and CPU ratios are kernel TCP / column, rate ratios column / kernel "
		"TCP.\n");
	fprintf(f, "CPU: user + system time of both processes per operation (the clients' "
		"whole run, the servers' meanwhile; the raw ring's two ends are one client "
		"and its child); idle: while a connection stays idle, per second.\n");
	fprintf(f, "REGRESSION: a shunt column worse than kernel TCP by more than %.0f %% (ratio "
		"below %.2f) with the rounds' ranges apart, and again in %d more rounds of its "
		"test (median ratio, one-sided rank test p < %.2f); judged: the latency "
		"percentiles (not max), round trips/s, stream, messages/s, connections/s, "
		"connect p50.\n", BENCH_MARGIN * 100, 1 - BENCH_MARGIN, b->o.confirm,
		BENCH_CONFIRM_P);
	print_regressions(b, f);
	print_targets(b, f);
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

/* The message size of the CSV's size_bytes column for metric m. */
static unsigned csv_size(const struct bench *b, enum bench_metric m, int s)
{
	if (BM_PER_SIZE(m))
		return b->o.sizes[s];
	if (m >= BM_GBPS && m <= BM_CPU_MB_S)
		return b->o.stream_size;
	if (m >= BM_MSGS && m <= BM_CPU_MSG_S)
		return b->o.sizes[bench_smallest(b)];
	return 64; /* connect and idle: one 64-byte round trip */
}

static void csv_value(FILE *f, double v)
{
	if (!isnan(v))
		fprintf(f, "%.6g", v);
}

/* One line: placement,round,transport,test,size_bytes,metric,value,unit,
 * regression,note (empty fields where they do not apply). */
static void csv_line(FILE *f, const char *pl, const char *round, const char *tp,
		     const char *test, unsigned size, const char *metric, double v,
		     const char *unit, const char *regression, const char *note)
{
	fprintf(f, "%s,%s,", pl, round);
	csv_field(f, tp);
	fprintf(f, ",%s,", test);
	if (size)
		fprintf(f, "%u", size);
	fprintf(f, ",%s,", metric);
	csv_value(f, v);
	fprintf(f, ",%s,%s,", unit, regression);
	csv_field(f, note);
	fputc('\n', f);
}

int bench_write_csv(const struct bench *b, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	fprintf(f, "placement,round,transport,test,size_bytes,metric,value,unit,regression,note\n");
	csv_line(f, "", "", "", "machine", 0, "load_average_start", b->load[0], "", "", b->machine);
	csv_line(f, "", "", "", "machine", 0, "load_average_end", b->load[1], "", "", "");
	for (int i = 0; i < b->o.nplace; i++) {
		enum bench_place pl = b->o.place[i];
		const char *pk = bench_place_key[pl];
		char desc[160];
		if (!b->place_ok[pl]) {
			csv_line(f, pk, "", "", "placement", 0, "skipped", NAN, "", "",
				 b->place_why[pl]);
			continue;
		}
		bench_place_describe(b, pl, desc, sizeof(desc));
		csv_line(f, pk, "", "", "placement", 0, "pairs", bench_place_pairs(b, pl), "", "",
			 desc);
		/* every run, then the medians with their verdicts */
		/* the rounds, the median (r == o.rounds), then the confirmation
		 * rounds ("c1", ...), where a row was suspect */
		for (int r = 0; r <= BENCH_SLOTS(b); r++) {
			char round[16] = "median";
			int at = r < b->o.rounds ? r : r == b->o.rounds ? -1 : r - 1;
			if (r < b->o.rounds)
				snprintf(round, sizeof(round), "%d", r + 1);
			else if (at >= 0)
				snprintf(round, sizeof(round), "c%d", at - b->o.rounds + 1);
			for (int tp = 0; tp < BT_COUNT; tp++) {
				if (!b->avail[tp])
					continue;
				for (int m = 0; m < BM_COUNT; m++) {
					for (int s = 0; s < (BM_PER_SIZE(m) ? b->o.nsizes : 1); s++) {
						double v = at >= 0 ? BV(b, pl, tp, m, s, at)
								   : bench_median(b, pl, tp, m, s);
						if (isnan(v))
							continue;
						int reg = at >= 0 ? -1 : bench_regressed(b, pl, tp, m, s);
						csv_line(f, pk, round, bench_tp_name[tp], bench_metric[m].test,
							 csv_size(b, m, s), bench_metric[m].key, v,
							 bench_metric[m].unit,
							 reg < 0 ? "" : reg ? "yes" : "no", "");
					}
				}
			}
		}
	}
	struct bench_target t[BENCH_TARGETS];
	int n = bench_targets(b, t);
	for (int i = 0; i < n; i++) {
		char note[320];
		if (t[i].state == BTS_NOT_CHECKED)
			snprintf(note, sizeof(note), "%s: not checked: %s", t[i].what, t[i].why);
		else
			snprintf(note, sizeof(note), "%s %s %g: %s", t[i].what,
				 t[i].at_most ? "<=" : ">=", t[i].limit, state_name(&t[i]));
		csv_line(f, bench_place_key[t[i].pl], "median", bench_tp_name[BT_SHM], "target", 0,
			 t[i].key, t[i].value, t[i].unit, "", note);
	}
	if (fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}
