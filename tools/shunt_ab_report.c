/* shunt ab: the report — a table for people, --json and --csv for
 * machines, all from the same summaries. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <shunt/version.h>

#include "shunt_ab.h"
#include "shunt_ab_sockperf.h"
#include "shunt_outfmt.h"
#include "core/shunt_stats_read.h"

int ab_shunt_transports(const struct ab *a, struct shunt_stat_totals *t, int *accelerated)
{
	int n = 0;
	memset(t, 0, sizeof(*t));
	for (int r = 0; r < a->runs; r++) {
		const struct ab_run *run = &a->run[AB_SHUNT][r];
		if (!run->ok || !run->have_stats)
			continue;
		for (unsigned i = 0; i < SHUNT_STATS_TRANSPORTS; i++)
			t->conns[i] += run->stats.conns[i];
		for (unsigned i = 0; i < SHUNT_STATS_REASONS; i++)
			t->fallbacks[i] += run->stats.fallbacks[i];
		n++;
	}
	*accelerated = t->conns[SHUNT_TP_SHM] + t->conns[SHUNT_TP_FABRIC] > 0;
	return n;
}

int ab_complete_pairs(const struct ab *a)
{
	int n = 0;
	for (int r = 0; r < a->runs; r++)
		n += a->run[AB_PLAIN][r].ok && a->run[AB_SHUNT][r].ok;
	return n;
}

static int accelerated(const struct ab *a)
{
	struct shunt_stat_totals t;
	int acc;
	ab_shunt_transports(a, &t, &acc);
	return acc;
}

/* The verdict's words for figure i: withheld when the shunt side was not
 * accelerated, whatever the numbers say. */
static const char *verdict_words(const struct ab *a, const struct ab_summary *s)
{
	if (!accelerated(a) && s->verdict != AB_NO_DATA)
		return "none: not accelerated";
	return ab_verdict_text(s->verdict);
}

static void summary(const struct ab *a, int i, struct ab_summary *s)
{
	ab_summarize(a->v[AB_PLAIN][i], a->v[AB_SHUNT][i], a->runs, a->higher_better[i], s);
}

/* ---- the table ---------------------------------------------------------- */

static void fmt(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else if (fabs(v) < 10)
		snprintf(buf, len, "%.3f", v);
	else if (fabs(v) < 1000)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.0f", v);
}

static void print_failures(const struct ab *a, FILE *f)
{
	int any = 0;
	for (int r = 0; r < a->runs; r++)
		for (int s = 0; s < 2; s++) {
			const struct ab_run *run = &a->run[s][r];
			if (!run->done || run->ok)
				continue;
			if (!any++)
				fprintf(f, "\nfailed runs, kept out (their pairs too):\n");
			fprintf(f, "  run %d, %s: %s\n", r + 1, ab_side_name[s], run->error);
			for (const char *p = run->tail; *p;) {
				size_t n = strcspn(p, "\n");
				fprintf(f, "    | %.*s\n", (int)n, p);
				p += n + (p[n] == '\n');
			}
		}
}

static void print_transports(const struct ab *a, FILE *f)
{
	struct shunt_stat_totals t;
	int acc, n = ab_shunt_transports(a, &t, &acc);
	char desc[512];
	shunt_statfile_describe(&t, desc, sizeof(desc));
	fprintf(f, "\nshunt side, the %s connections (library stats, %d run(s)): %s\n",
		a->server ? "server's" : "client's", n, n ? desc : "none recorded");
	if (!acc) {
		fprintf(f, "NO VERDICT: the shunt side took no accelerated connection (%s): "
			"nothing was accelerated, the figures compare the kernel path with "
			"itself, the library loaded on one side.\n",
			n ? "every one stayed on the kernel path" : "the library recorded none");
		return;
	}
	for (int r = 0; r < a->runs; r++) {
		const struct ab_run *run = &a->run[AB_SHUNT][r];
		if (run->ok && (!run->have_stats || run->stats.conns[SHUNT_TP_SHM] +
							     run->stats.conns[SHUNT_TP_FABRIC] == 0))
			fprintf(f, "warning: shunt run %d took no accelerated connection\n", r + 1);
	}
}

void ab_print_report(const struct ab *a, FILE *f)
{
	char cell[64];
	int pairs = ab_complete_pairs(a);
	fprintf(f, "shunt ab: %d run(s) each way after %d warm-up(s), plain and under shunt "
		"alternately\n", a->runs, a->warmup);
	fprintf(f, "shunt:   %s; settings: %s; rundir: a private one per run\n", SHUNT_VERSION,
		a->settings[0] ? a->settings : "defaults");
	if (a->server)
		fprintf(f, "server:  %s\n", a->server);
	fprintf(f, "client:  %s\n", a->client);
	if (a->mps_added)
		fprintf(f, "         (%s added by shunt ab: sockperf ping-pong sizes its message "
			"window for 600k msg/s without it, and aborts a faster run)\n",
			AB_SOCKPERF_MPS);
	fprintf(f, "machine: %s; at the end %.2f\n", a->machine, a->load_end);
	if (a->cpus[0] >= 0)
		fprintf(f, "pinning: server on CPU %d, client on CPU %d\n", a->cpus[1], a->cpus[0]);
	else
		fprintf(f, "pinning: none\n");
	fprintf(f, "output:  %s\n\n", a->format_seen ? a->format_seen
				       : "no known format: compared by wall time and CPU time");
	fprintf(f, "%-32s %14s %14s %11s %-17s %-27s %s\n", "figure", "plain (median)",
		"shunt (median)", "shunt/plain", "[95% interval]", "verdict", "runs: plain | shunt");
	for (int i = 0; i < a->nnames; i++) {
		struct ab_summary s;
		summary(a, i, &s);
		fprintf(f, "%-32s", a->names[i]);
		fmt(s.plain, cell, sizeof(cell));
		fprintf(f, " %14s", cell);
		fmt(s.shunt, cell, sizeof(cell));
		fprintf(f, " %14s", cell);
		if (isnan(s.ratio))
			snprintf(cell, sizeof(cell), "-");
		else
			snprintf(cell, sizeof(cell), "%.3fx", s.ratio);
		fprintf(f, " %11s", cell);
		if (isnan(s.lo))
			snprintf(cell, sizeof(cell), "-");
		else
			snprintf(cell, sizeof(cell), "[%.3f, %.3f]", s.lo, s.hi);
		fprintf(f, " %-17s %-27s", cell, verdict_words(a, &s));
		for (int side = 0; side < 2; side++) {
			fprintf(f, "%s", side ? " |" : "");
			for (int r = 0; r < a->runs; r++) {
				fmt(a->v[side][i][r], cell, sizeof(cell));
				fprintf(f, " %s", cell);
			}
		}
		fprintf(f, "\n");
	}
	double cov;
	int k = ab_interval_rank(pairs, &cov);
	fprintf(f, "\nmethod: per figure, the median of the paired shunt/plain ratios (run r of "
		"each side back to back; %d complete pair(s)); ", pairs);
	if (k)
		fprintf(f, "the interval holds the true median with %.1f%% probability "
			"(order statistics %d and %d of the ratios, no resampling); ", 100 * cov, k,
			pairs + 1 - k);
	fprintf(f, "better/worse only when it excludes 1; a verdict needs %d pairs\n",
		AB_MIN_PAIRS);
	fprintf(f, "CPU: user + system; the client's whole run, the server's while the client "
		"ran; per op: over the operations the client reported\n");
	print_transports(a, f);
	print_failures(a, f);
}

/* ---- --json ------------------------------------------------------------- */

static FILE *open_out(const char *path)
{
	if (!strcmp(path, "-"))
		return stdout;
	FILE *f = fopen(path, "w");
	if (!f)
		perror(path);
	return f;
}

static int close_out(FILE *f, const char *path)
{
	if (f == stdout)
		return fflush(f) == 0 ? 0 : -1;
	if (fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.9g", v);
}

static void json_key(FILE *f, const char *key, int first)
{
	fprintf(f, "%s", first ? "" : ",");
	json_str(f, key);
	fputc(':', f);
}

static void json_kstr(FILE *f, const char *key, const char *v)
{
	json_key(f, key, 0);
	if (v)
		json_str(f, v);
	else
		fputs("null", f);
}

static void json_totals(FILE *f, const struct shunt_stat_totals *t)
{
	fprintf(f, "{\"shm\":%llu,\"fabric\":%llu,\"kernel\":%llu,\"fallbacks\":{",
		(unsigned long long)t->conns[SHUNT_TP_SHM],
		(unsigned long long)t->conns[SHUNT_TP_FABRIC],
		(unsigned long long)t->conns[SHUNT_TP_KERNEL]);
	int n = 0;
	for (unsigned r = 1; r < SHUNT_STATS_REASONS; r++)
		if (t->fallbacks[r]) {
			fprintf(f, "%s", n++ ? "," : "");
			json_str(f, shunt_stats_reason_name(r));
			fprintf(f, ":%llu", (unsigned long long)t->fallbacks[r]);
		}
	fputs("}}", f);
}

static void json_side(FILE *f, const struct ab *a, int i, int side, double median)
{
	fputs("{\"median\":", f);
	json_num(f, median);
	fputs(",\"values\":[", f);
	for (int r = 0; r < a->runs; r++) {
		fputs(r ? "," : "", f);
		json_num(f, a->v[side][i][r]);
	}
	fputs("]}", f);
}

int ab_write_json(const struct ab *a, const char *path)
{
	FILE *f = open_out(path);
	if (!f)
		return -1;
	struct shunt_stat_totals t;
	int acc, nstats = ab_shunt_transports(a, &t, &acc);
	fputc('{', f);
	json_key(f, "shunt_version", 1);
	json_str(f, SHUNT_VERSION);
	json_kstr(f, "settings", a->settings);
	json_kstr(f, "config", a->env.config ? a->env.config_abs : NULL);
	json_kstr(f, "transport", a->env.transport);
	json_kstr(f, "options", a->env.options);
	json_kstr(f, "machine", a->machine);
	json_key(f, "load_average_end", 0);
	json_num(f, a->load_end);
	json_kstr(f, "server", a->server);
	json_kstr(f, "client", a->client_given);
	json_kstr(f, "client_as_run", a->client);
	json_kstr(f, "client_note", a->mps_added ? AB_SOCKPERF_MPS " added: sockperf ping-pong "
				    "sizes its message window for 600k msg/s without it" : NULL);
	json_kstr(f, "format", a->format_seen);
	fprintf(f, ",\"runs\":%d,\"warmup\":%d,\"cpus\":", a->runs, a->warmup);
	if (a->cpus[0] >= 0)
		fprintf(f, "{\"server\":%d,\"client\":%d}", a->cpus[1], a->cpus[0]);
	else
		fputs("null", f);
	fprintf(f, ",\"complete_pairs\":%d,\"min_pairs_for_verdict\":%d", ab_complete_pairs(a),
		AB_MIN_PAIRS);
	json_kstr(f, "method", "median of paired shunt/plain ratios; distribution-free interval "
		  "of the median from order statistics");
	fprintf(f, ",\"accelerated\":%s,\"shunt_transports\":", acc ? "true" : "false");
	if (nstats)
		json_totals(f, &t);
	else
		fputs("null", f);
	fputs(",\"figures\":[", f);
	for (int i = 0; i < a->nnames; i++) {
		struct ab_summary s;
		summary(a, i, &s);
		fputs(i ? ",{" : "{", f);
		json_key(f, "name", 1);
		json_str(f, a->names[i]);
		fprintf(f, ",\"higher_is_better\":%s,\"pairs\":%d,\"plain\":",
			a->higher_better[i] ? "true" : "false", s.pairs);
		json_side(f, a, i, AB_PLAIN, s.plain);
		fputs(",\"shunt\":", f);
		json_side(f, a, i, AB_SHUNT, s.shunt);
		fputs(",\"ratio\":", f);
		json_num(f, s.ratio);
		fputs(",\"interval\":", f);
		if (isnan(s.lo)) {
			fputs("null", f);
		} else {
			fputc('[', f);
			json_num(f, s.lo);
			fputc(',', f);
			json_num(f, s.hi);
			fputc(']', f);
		}
		fputs(",\"coverage\":", f);
		json_num(f, s.coverage);
		json_kstr(f, "verdict", verdict_words(a, &s));
		fputc('}', f);
	}
	fputs("],\"run_details\":[", f);
	int first = 1;
	for (int r = 0; r < a->runs; r++)
		for (int side = 0; side < 2; side++) {
			const struct ab_run *run = &a->run[side][r];
			if (!run->done)
				continue;
			fprintf(f, "%s{\"run\":%d,\"side\":\"%s\",\"ok\":%s", first ? "" : ",", r + 1,
				ab_side_name[side], run->ok ? "true" : "false");
			first = 0;
			json_kstr(f, "error", run->ok ? NULL : run->error);
			json_kstr(f, "output_tail", run->ok ? NULL : run->tail);
			fputs(",\"wall_s\":", f);
			json_num(f, run->wall_s);
			fputs(",\"server_cpu_s\":", f);
			json_num(f, a->server ? run->server_cpu_s : NAN);
			fputs(",\"client_cpu_s\":", f);
			json_num(f, run->client_cpu_s);
			fputs(",\"ops\":", f);
			json_num(f, run->ops > 0 ? run->ops : NAN);
			fputs(",\"transports\":", f);
			if (run->have_stats)
				json_totals(f, &run->stats);
			else
				fputs("null", f);
			fputc('}', f);
		}
	fputs("]}\n", f);
	return close_out(f, path);
}

/* ---- --csv -------------------------------------------------------------- */

/* Long format: every run's value, then per figure the medians, the ratio,
 * its interval and the verdict. */
int ab_write_csv(const struct ab *a, const char *path)
{
	FILE *f = open_out(path);
	if (!f)
		return -1;
	fputs("run,side,figure,value\n", f);
	for (int r = 0; r < a->runs; r++)
		for (int side = 0; side < 2; side++)
			for (int i = 0; i < a->nnames; i++) {
				if (isnan(a->v[side][i][r]))
					continue;
				fprintf(f, "%d,%s,", r + 1, ab_side_name[side]);
				csv_field(f, a->names[i]);
				fprintf(f, ",%.9g\n", a->v[side][i][r]);
			}
	for (int i = 0; i < a->nnames; i++) {
		struct ab_summary s;
		summary(a, i, &s);
		const struct { const char *run, *side; double v; } rows[] = {
			{ "median", "plain", s.plain }, { "median", "shunt", s.shunt },
			{ "ratio", "shunt/plain", s.ratio }, { "ratio_low", "shunt/plain", s.lo },
			{ "ratio_high", "shunt/plain", s.hi },
		};
		for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			if (isnan(rows[k].v))
				continue;
			fprintf(f, "%s,%s,", rows[k].run, rows[k].side);
			csv_field(f, a->names[i]);
			fprintf(f, ",%.9g\n", rows[k].v);
		}
		fputs("verdict,shunt/plain,", f);
		csv_field(f, a->names[i]);
		fputc(',', f);
		csv_field(f, verdict_words(a, &s));
		fputc('\n', f);
	}
	return close_out(f, path);
}
