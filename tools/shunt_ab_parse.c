/* shunt ab: the key figures in the output of the programs people compare
 * with: sockperf (ping-pong, under-load, throughput), redis-benchmark (-q,
 * --csv and the full report), iperf3 (text and -J) and wrk.  Each parser
 * looks for the summary lines the program prints at the end and ignores the
 * rest (progress lines, colours, warnings).  Fixtures recorded from real
 * runs are in tests/fixtures/ab/, checked by tests/unit/test_ab_parse.c. */
#include "shunt_ab.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ab_formats[] = { "sockperf", "redis-benchmark", "iperf3", "wrk", "time", NULL };

void ab_add(struct ab_figs *out, const char *name, double value, int higher_better)
{
	if (out->n >= AB_MAX_FIGS)
		return;
	struct ab_fig *f = &out->f[out->n++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->value = value;
	f->higher_better = higher_better;
}

/* The text without ANSI colour sequences (sockperf colours its summary)
 * and with every '\r' turned into '\n' (redis-benchmark redraws its
 * progress line with '\r'): one line per record.  malloc'ed. */
static char *clean(const char *text)
{
	size_t n = strlen(text);
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *p = text; *p; p++) {
		if (*p == '\033' && p[1] == '[') {
			p += 2;
			while (*p && !isalpha((unsigned char)*p))
				p++;
			if (!*p)
				break;
			continue;
		}
		*o++ = *p == '\r' ? '\n' : *p;
	}
	*o = '\0';
	return out;
}

/* The number after the first occurrence of key in line (blanks and '='
 * skipped).  0 or -1. */
static int num_after(const char *line, const char *key, double *v)
{
	const char *p = strstr(line, key);
	if (!p)
		return -1;
	p += strlen(key);
	while (*p == ' ' || *p == '\t' || *p == '=')
		p++;
	char *e;
	*v = strtod(p, &e);
	return e == p ? -1 : 0;
}

/* Next line: *line points at it, NUL-terminated in place; NULL at the end. */
static char *next_line(char **cursor)
{
	char *l = *cursor;
	if (!l || !*l)
		return NULL;
	char *nl = strchr(l, '\n');
	if (nl) {
		*nl = '\0';
		*cursor = nl + 1;
	} else {
		*cursor = l + strlen(l);
	}
	return l;
}

/* ---- sockperf ----------------------------------------------------------- */

static int sockperf(char *t, struct ab_figs *out)
{
	if (!strstr(t, "sockperf"))
		return -1;
	/* in a fixed order (sockperf prints the maximum first) */
	static const struct { const char *key, *name; int higher_better; } keys[] = {
		{ "Summary: Latency is", "latency avg (us, RTT/2)", 0 },
		{ "percentile 50.000 =", "latency p50 (us, RTT/2)", 0 },
		{ "percentile 99.000 =", "latency p99 (us, RTT/2)", 0 },
		{ "percentile 99.900 =", "latency p99.9 (us, RTT/2)", 0 },
		{ "<MAX> observation =", "latency max (us, RTT/2)", 0 },
		{ "Summary: Message Rate is", "message rate (msg/s)", 1 },
		{ "Summary: BandWidth is", "bandwidth (MB/s)", 1 },
	};
	enum { NKEYS = sizeof(keys) / sizeof(keys[0]) };
	double v[NKEYS];
	int seen[NKEYS] = { 0 }, any = 0;
	char *cur = t, *l;
	double ops;
	while ((l = next_line(&cur))) {
		for (int i = 0; i < NKEYS; i++)
			if (!seen[i] && num_after(l, keys[i].key, &v[i]) == 0)
				seen[i] = any = 1;
		/* the whole run's count, warm-up included, as CPU time is: round
		 * trips ("[Total Run] ... ReceivedMessages=N") or, one way,
		 * "Total of N messages sent" */
		if (strstr(l, "[Total Run]") && num_after(l, "ReceivedMessages=", &ops) == 0 &&
		    ops > 0)
			out->ops = ops;
		else if (num_after(l, "Total of", &ops) == 0 && strstr(l, "messages sent"))
			out->ops = ops;
	}
	for (int i = 0; i < NKEYS; i++)
		if (seen[i])
			ab_add(out, keys[i].name, v[i], keys[i].higher_better);
	return any ? 0 : -1;
}

/* ---- redis-benchmark ---------------------------------------------------- */

/* --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",... */
static int redis_csv(char *t, struct ab_figs *out)
{
	char *cur = t, *l;
	int in_csv = 0, n0 = out->n;
	while ((l = next_line(&cur))) {
		if (!strncmp(l, "\"test\",\"rps\"", 12)) {
			in_csv = 1;
			continue;
		}
		if (!in_csv || l[0] != '"')
			continue;
		char name[40], rps[32], p50[32] = "";
		char *q = strchr(l + 1, '"');
		if (!q || (size_t)(q - l - 1) >= sizeof(name))
			continue;
		memcpy(name, l + 1, (size_t)(q - l - 1));
		name[q - l - 1] = '\0';
		/* the fields after the name, each "..." */
		char *fields[8];
		int nf = 0;
		for (char *p = q + 1; nf < 8 && (p = strchr(p, '"'));) {
			char *e = strchr(p + 1, '"');
			if (!e)
				break;
			*e = '\0';
			fields[nf++] = p + 1;
			p = e + 1;
		}
		if (nf < 1)
			continue;
		snprintf(rps, sizeof(rps), "%s", fields[0]);
		if (nf >= 4)
			snprintf(p50, sizeof(p50), "%s", fields[3]);
		char label[64];
		snprintf(label, sizeof(label), "%s (req/s)", name);
		ab_add(out, label, strtod(rps, NULL), 1);
		if (p50[0]) {
			snprintf(label, sizeof(label), "%s p50 (ms)", name);
			ab_add(out, label, strtod(p50, NULL), 0);
		}
	}
	return out->n > n0 ? 0 : -1;
}

/* -q: "GET: 45766.59 requests per second, p50=0.111 msec"; the full report:
 * "====== GET ======" ... "throughput summary: 45766.59 requests per second"
 * and, two lines under "latency summary (msec):", avg min p50 p95 p99 max. */
static int redis_text(char *t, struct ab_figs *out)
{
	char *cur = t, *l, test[40] = "";
	int n0 = out->n, latency_in = -1;
	double v;
	while ((l = next_line(&cur))) {
		while (*l == ' ')
			l++;
		char label[64];
		if (latency_in >= 0 && --latency_in == 0 && test[0]) {
			double avg, mn, p50;
			if (sscanf(l, "%lf %lf %lf", &avg, &mn, &p50) == 3) {
				snprintf(label, sizeof(label), "%s p50 (ms)", test);
				ab_add(out, label, p50, 0);
			}
			continue;
		}
		if (!strncmp(l, "====== ", 7)) {
			char *e = strstr(l + 7, " ======");
			if (e && (size_t)(e - l - 7) < sizeof(test)) {
				memcpy(test, l + 7, (size_t)(e - l - 7));
				test[e - l - 7] = '\0';
			}
			continue;
		}
		if (num_after(l, "throughput summary:", &v) == 0 && test[0]) {
			snprintf(label, sizeof(label), "%s (req/s)", test);
			ab_add(out, label, v, 1);
			continue;
		}
		if (strstr(l, " requests completed in ") && sscanf(l, "%lf", &v) == 1) {
			out->ops += v;
			continue;
		}
		if (!strncmp(l, "latency summary (msec):", 23)) {
			latency_in = 2; /* the header line, then the figures */
			continue;
		}
		char *colon = strstr(l, ": ");
		if (colon && strstr(colon, " requests per second") && !strstr(l, "rps=") &&
		    (size_t)(colon - l) < sizeof(test)) {
			char name[40];
			memcpy(name, l, (size_t)(colon - l));
			name[colon - l] = '\0';
			snprintf(label, sizeof(label), "%s (req/s)", name);
			ab_add(out, label, strtod(colon + 2, NULL), 1);
			if (num_after(colon, "p50=", &v) == 0) {
				snprintf(label, sizeof(label), "%s p50 (ms)", name);
				ab_add(out, label, v, 0);
			}
		}
	}
	return out->n > n0 ? 0 : -1;
}

static int redis(char *t, struct ab_figs *out)
{
	if (!strstr(t, "requests per second") && !strstr(t, "\"test\",\"rps\""))
		return -1;
	char *copy = strdup(t);
	if (!copy)
		return -1;
	int rc = redis_csv(copy, out);
	free(copy);
	return rc == 0 ? 0 : redis_text(t, out);
}

/* ---- iperf3 ------------------------------------------------------------- */

/* -J: "bits_per_second" inside the end's "sum_sent" / "sum_received" (TCP)
 * or "sum" (UDP). */
static int iperf3_json(const char *t, struct ab_figs *out)
{
	static const struct { const char *obj, *name; } objs[] = {
		{ "\"sum_received\"", "received (Gbit/s)" },
		{ "\"sum_sent\"", "sent (Gbit/s)" },
	};
	const char *end = strstr(t, "\"end\"");
	if (!end)
		return -1;
	int n0 = out->n;
	double v;
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		const char *o = strstr(end, objs[i].obj);
		const char *close = o ? strchr(o, '}') : NULL;
		const char *b = o ? strstr(o, "\"bits_per_second\"") : NULL;
		if (b && b < close && num_after(b, "\"bits_per_second\":", &v) == 0)
			ab_add(out, objs[i].name, v / 1e9, 1);
	}
	if (out->n == n0) {
		const char *o = strstr(end, "\"sum\"");
		const char *b = o ? strstr(o, "\"bits_per_second\"") : NULL;
		if (b && num_after(b, "\"bits_per_second\":", &v) == 0)
			ab_add(out, "bitrate (Gbit/s)", v / 1e9, 1);
	}
	return out->n > n0 ? 0 : -1;
}

/* Text: the summary lines after the dashes end in "sender" / "receiver":
 * "[  5]   0.00-1.00   sec  1.28 GBytes  11.0 Gbits/sec   23   sender".
 * With -P, the "[SUM]" lines are the ones that count. */
static int iperf3_text(char *t, struct ab_figs *out)
{
	char *cur = t, *l;
	double rate[2] = { -1, -1 };   /* sender, receiver */
	int from_sum[2] = { 0, 0 }, n0 = out->n;
	while ((l = next_line(&cur))) {
		int which = strstr(l, " receiver") ? 1 : strstr(l, " sender") ? 0 : -1;
		if (which < 0 || l[0] != '[')
			continue;
		int sum = !strncmp(l, "[SUM]", 5);
		if (from_sum[which] && !sum)
			continue;
		char *u = strstr(l, "bits/sec");
		if (!u)
			continue;
		char *p = u;
		double scale = 1;
		if (p > l && strchr("KMG", p[-1])) {
			scale = p[-1] == 'K' ? 1e3 : p[-1] == 'M' ? 1e6 : 1e9;
			p--;
		}
		while (p > l && p[-1] == ' ')
			p--;
		while (p > l && (isdigit((unsigned char)p[-1]) || p[-1] == '.'))
			p--;
		rate[which] = strtod(p, NULL) * scale / 1e9;
		from_sum[which] = sum;
	}
	if (rate[1] >= 0)
		ab_add(out, "received (Gbit/s)", rate[1], 1);
	if (rate[0] >= 0)
		ab_add(out, "sent (Gbit/s)", rate[0], 1);
	return out->n > n0 ? 0 : -1;
}

static int iperf3(char *t, struct ab_figs *out)
{
	const char *p = t;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '{')
		return strstr(t, "\"bits_per_second\"") ? iperf3_json(t, out) : -1;
	if (!strstr(t, "iperf Done") && !strstr(t, "- - - - -"))
		return -1;
	return iperf3_text(t, out);
}

/* ---- wrk ---------------------------------------------------------------- */

/* "152.49us", "3.88ms", "1.02s" in microseconds */
static double wrk_time_us(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	if (!strncmp(e, "us", 2))
		return v;
	if (!strncmp(e, "ms", 2))
		return v * 1e3;
	if (*e == 's')
		return v * 1e6;
	if (*e == 'm')
		return v * 60e6;
	return v;
}

/* wrk's latency figures are not the requests' latencies: before it prints
 * them it adds, for every request slower than twice the mean interval
 * between one connection's requests (runtime / (requests / connections)),
 * made-up samples for the requests that "should" have been sent meanwhile
 * (its coordinated-omission correction, stats_correct).  The faster the
 * server, the shorter that interval and the more samples one stall
 * brings: a run 5x faster with the same stalls gets a worse average.  Each
 * connection has one request outstanding at a time, so the requests'
 * true mean latency is connections / requests per second (Little's law);
 * that figure is reported next to wrk's. */
static int wrk(char *t, struct ab_figs *out)
{
	if (!strstr(t, "Requests/sec:"))
		return -1;
	char *cur = t, *l;
	int n0 = out->n, dist = 0;
	double v, conns = 0, rate = 0;
	while ((l = next_line(&cur))) {
		while (*l == ' ' || *l == '\t')
			l++;
		const char *tc = strstr(l, " threads and ");
		if (tc && sscanf(tc + 13, "%lf connections", &v) == 1) {
			conns = v;
		} else if (strstr(l, " requests in ") && sscanf(l, "%lf", &v) == 1) {
			out->ops = v;
		} else if (num_after(l, "Requests/sec:", &v) == 0) {
			ab_add(out, "requests/s", v, 1);
			rate = v;
		} else if (!strncmp(l, "Transfer/sec:", 13)) {
			char *e;
			const char *p = l + 13;
			while (*p == ' ')
				p++;
			v = strtod(p, &e);
			double scale = *e == 'G' ? 1e3 : *e == 'M' ? 1 : *e == 'K' ? 1e-3 : 1e-6;
			if (e != p)
				ab_add(out, "transfer (MB/s)", v * scale, 1);
		} else if (!strncmp(l, "Latency Distribution", 20)) {
			dist = 1;
		} else if (!strncmp(l, "Latency ", 8) && !dist) {
			const char *p = l + 8;
			while (*p == ' ')
				p++;
			ab_add(out, "latency avg (us)", wrk_time_us(p), 0);
		} else if (dist && (!strncmp(l, "50%", 3) || !strncmp(l, "99%", 3))) {
			const char *p = l + 3;
			while (*p == ' ')
				p++;
			ab_add(out, l[0] == '5' ? "latency p50 (us)" : "latency p99 (us)",
			       wrk_time_us(p), 0);
		}
	}
	if (conns > 0 && rate > 0)
		ab_add(out, "latency mean, conns/rate (us)", conns / rate * 1e6, 0);
	return out->n > n0 ? 0 : -1;
}

/* ---- dispatch ----------------------------------------------------------- */

const char *ab_parse(const char *format, const char *text, struct ab_figs *out)
{
	static int (*const parsers[])(char *, struct ab_figs *) = { sockperf, redis, iperf3, wrk };
	int auto_ = !format || !strcmp(format, "auto");
	for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
		if (!auto_ && strcmp(format, ab_formats[i]))
			continue;
		char *t = clean(text);
		if (!t)
			return NULL;
		struct ab_figs tmp = *out;
		int rc = parsers[i](t, &tmp);
		free(t);
		if (rc == 0) {
			*out = tmp;
			return ab_formats[i];
		}
	}
	return NULL;
}
