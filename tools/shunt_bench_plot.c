/* shunt bench --plot: one SVG a person can paste into a ticket.
 *
 * One placement: the first of the run that was not skipped (free by
 * default, as users run it first), named in the title; the table and the
 * CSV have the others.
 *
 * Top: the title, the machine and a legend.  Then one panel per ping-pong
 * size: the round-trip latency CDF of every column (median over the rounds,
 * quantile by quantile), x logarithmic in microseconds.  Bottom: bars for
 * stream throughput, message rate and connection rate, each bar labelled
 * with its value and its ratio to kernel TCP.  Plain SVG 1.1, no script, no
 * external font or stylesheet, so every viewer and converter draws it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shunt_bench.h"

static const char *const color[BT_COUNT] = {
	"#7f7f7f", /* raw ring: grey, the limit */
	"#9467bd", /* unix socket: purple */
	"#d62728", /* kernel TCP: red, the reference */
	"#1f77b4", /* shunt-shm: blue */
	"#2ca02c", /* shunt-fabric: green */
	"#ff7f0e", /* sockmap: orange */
};

#define W 1000
#define HEAD 90
#define CDF_H 340
#define BAR_H 300
#define FONT "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\""

static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

/* text at x,y; anchor start|middle|end; size in px; rotate: degrees */
static void text(FILE *f, double x, double y, const char *anchor, int size, int bold,
		 double rotate, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\"%s", x, y,
		anchor, size, bold ? " font-weight=\"bold\"" : "");
	if (rotate)
		fprintf(f, " transform=\"rotate(%.0f %.1f %.1f)\"", rotate, x, y);
	fputs(">", f);
	esc(f, s);
	fputs("</text>\n", f);
}

static void line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke,
		 double width)
{
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
		"stroke-width=\"%.1f\"/>\n", x1, y1, x2, y2, stroke, width);
}

/* 1234567 -> "1.23M"; small values with enough digits */
static void human(double v, char *buf, size_t len)
{
	if (v >= 1e9)
		snprintf(buf, len, "%.3gG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.3gM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.3gk", v / 1e3);
	else
		snprintf(buf, len, "%.3g", v);
}

/* ---- latency CDF panel -------------------------------------------------- */

static void cdf_panel(FILE *f, const struct bench *b, enum bench_place pl, int s, double x0,
		      double y0, double w, double h)
{
	struct bench_cdf c[BT_COUNT];
	double lo = INFINITY, hi = 0;
	for (int tp = 0; tp < BT_COUNT; tp++) {
		c[tp].n = 0;
		if (!b->avail[tp])
			continue;
		bench_median_cdf(b, pl, tp, s, &c[tp]);
		for (int i = 0; i < c[tp].n; i++) {
			if (c[tp].us[i] > 0 && c[tp].us[i] < lo)
				lo = c[tp].us[i];
			if (c[tp].us[i] > hi)
				hi = c[tp].us[i];
		}
	}
	/* plot area inside the panel: room for the axis labels */
	double px = x0 + 62, py = y0 + 30, pw = w - 100, ph = h - 85;
	char buf[128];
	snprintf(buf, sizeof(buf), "ping-pong %u B: round-trip latency CDF (dot: median)",
		 b->o.sizes[s]);
	text(f, x0 + w / 2, y0 + 18, "middle", 14, 1, 0, buf);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
		"stroke=\"#333333\" stroke-width=\"1\"/>\n", px, py, pw, ph);
	if (!(hi > 0) || isinf(lo)) {
		text(f, px + pw / 2, py + ph / 2, "middle", 13, 0, 0, "no data");
		return;
	}
	int d0 = (int)floor(log10(lo)), d1 = (int)ceil(log10(hi));
	if (d1 <= d0)
		d1 = d0 + 1;
	double span = d1 - d0;
#define XOF(us) (px + (log10(us) - d0) / span * pw)
#define YOF(q) (py + ph - (q) * ph)
	/* grid: decades labelled, 2..9 faint; quarters of y */
	for (int d = d0; d <= d1; d++) {
		double x = XOF(pow(10, d));
		line(f, x, py, x, py + ph, "#bbbbbb", 1);
		snprintf(buf, sizeof(buf), "%g", pow(10, d));
		text(f, x, py + ph + 16, "middle", 12, 0, 0, buf);
		for (int k = 2; k <= 9 && d < d1; k++) {
			double xm = XOF(k * pow(10, d));
			line(f, xm, py, xm, py + ph, "#eeeeee", 1);
		}
	}
	static const double qs[] = { 0, 0.25, 0.5, 0.75, 0.9, 1 };
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		double y = YOF(qs[i]);
		line(f, px, y, px + pw, y, qs[i] == 0.5 ? "#bbbbbb" : "#e4e4e4", 1);
		snprintf(buf, sizeof(buf), "%g%%", qs[i] * 100);
		text(f, px - 6, y + 4, "end", 12, 0, 0, buf);
	}
	text(f, px + pw / 2, py + ph + 36, "middle", 13, 0, 0,
	     "round-trip latency (\xc2\xb5s, log scale)");
	text(f, x0 + 14, py + ph / 2, "middle", 13, 0, -90, "fraction of round trips \xe2\x89\xa4 x");
	for (int tp = 0; tp < BT_COUNT; tp++) {
		if (c[tp].n < 2)
			continue;
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" "
			"stroke-linejoin=\"round\" points=\"", color[tp]);
		for (int i = 0; i < c[tp].n; i++)
			if (c[tp].us[i] > 0)
				fprintf(f, "%.1f,%.1f ", XOF(c[tp].us[i]), YOF(c[tp].q[i]));
		fputs("\"/>\n", f);
		/* the median, marked and labelled */
		double p50 = bench_median(b, pl, tp, BM_P50, s);
		if (p50 > 0) {
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
				XOF(p50), YOF(0.5), color[tp]);
		}
	}
#undef XOF
#undef YOF
}

/* ---- bar chart ---------------------------------------------------------- */

static double nice_ceil(double v)
{
	if (!(v > 0))
		return 1;
	double p = pow(10, floor(log10(v)));
	static const double steps[] = { 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10 };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (steps[i] * p >= v)
			return steps[i] * p;
	return 10 * p;
}

static void bar_panel(FILE *f, const struct bench *b, enum bench_place pl, enum bench_metric m,
		      const char *title, const char *ylabel, double x0, double y0, double w,
		      double h)
{
	double px = x0 + 62, py = y0 + 30, pw = w - 72, ph = h - 90;
	double v[BT_COUNT], vmax = 0;
	int n = 0;
	for (int tp = 0; tp < BT_COUNT; tp++) {
		v[tp] = b->avail[tp] ? bench_median(b, pl, tp, m, 0) : NAN;
		if (!isnan(v[tp])) {
			n++;
			if (v[tp] > vmax)
				vmax = v[tp];
		}
	}
	text(f, x0 + w / 2, y0 + 18, "middle", 14, 1, 0, title);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
		"stroke=\"#333333\" stroke-width=\"1\"/>\n", px, py, pw, ph);
	text(f, x0 + 14, py + ph / 2, "middle", 13, 0, -90, ylabel);
	if (!n) {
		text(f, px + pw / 2, py + ph / 2, "middle", 13, 0, 0, "no data");
		return;
	}
	double top = nice_ceil(vmax * 1.18); /* room for the labels above the bars */
	char buf[64];
	for (int i = 0; i <= 4; i++) {
		double val = top * i / 4, y = py + ph - ph * i / 4;
		line(f, px, y, px + pw, y, "#e4e4e4", 1);
		human(val, buf, sizeof(buf));
		text(f, px - 6, y + 4, "end", 12, 0, 0, buf);
	}
	double ref = b->avail[BT_TCP] ? bench_median(b, pl, BT_TCP, m, 0) : NAN;
	double slot = pw / n, bw = slot * 0.62;
	int k = 0;
	for (int tp = 0; tp < BT_COUNT; tp++) {
		if (isnan(v[tp]))
			continue;
		double cx = px + slot * (k++ + 0.5), bh = ph * v[tp] / top;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"%s\"/>\n", cx - bw / 2, py + ph - bh, bw, bh, color[tp]);
		human(v[tp], buf, sizeof(buf));
		text(f, cx, py + ph - bh - (ref > 0 ? 19 : 5), "middle", 12, 1, 0, buf);
		if (ref > 0) {
			snprintf(buf, sizeof(buf), "%.2f\xc3\x97 TCP", v[tp] / ref);
			text(f, cx, py + ph - bh - 5, "middle", 11, 0, 0, buf);
		}
		/* short column names under the bars */
		static const char *const shortname[BT_COUNT] = { "ring", "unix", "TCP", "shm",
								 "fabric", "sockmap" };
		text(f, cx, py + ph + 16, "middle", 12, 0, 0, shortname[tp]);
	}
}

int bench_write_svg(const struct bench *b, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	enum bench_place pl = BP_FREE;
	for (int i = b->o.nplace - 1; i >= 0; i--)
		if (b->place_ok[b->o.place[i]])
			pl = b->o.place[i];
	char desc[160];
	bench_place_describe(b, pl, desc, sizeof(desc));
	int per_row = b->o.nsizes == 1 ? 1 : 2;
	int cdf_rows = (b->o.nsizes + per_row - 1) / per_row;
	int height = HEAD + cdf_rows * CDF_H + BAR_H + 10;
	char buf[720];

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" %s fill=\"#222222\">\n", W, height, W, height,
		FONT);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n");
	snprintf(buf, sizeof(buf), "shunt bench, placement %s: medians of %d round(s), %g s "
		 "per measurement", bench_place_key[pl], b->o.rounds, b->o.duration);
	text(f, W / 2.0, 22, "middle", 17, 1, 0, buf);
	snprintf(buf, sizeof(buf), "%s; %s", desc, b->machine);
	text(f, W / 2.0, 42, "middle", 11, 0, 0, buf);

	/* legend: the columns measured */
	int nl = 0;
	for (int tp = 0; tp < BT_COUNT; tp++)
		nl += b->avail[tp];
	double lx = W / 2.0 - nl * 130 / 2.0;
	for (int tp = 0; tp < BT_COUNT; tp++) {
		if (!b->avail[tp])
			continue;
		fprintf(f, "<rect x=\"%.1f\" y=\"58\" width=\"22\" height=\"12\" fill=\"%s\"/>\n",
			lx, color[tp]);
		text(f, lx + 28, 69, "start", 13, 0, 0, bench_tp_name[tp]);
		lx += 130;
	}
	if (!b->avail[BT_FABRIC]) {
		snprintf(buf, sizeof(buf), "shunt-fabric not measured: %s",
			 b->why[BT_FABRIC][0] ? b->why[BT_FABRIC] : "not available");
		text(f, W / 2.0, 86, "middle", 11, 0, 0, buf);
	}

	double cw = (double)W / per_row;
	for (int s = 0; s < b->o.nsizes; s++)
		cdf_panel(f, b, pl, s, (s % per_row) * cw, HEAD + (s / per_row) * CDF_H, cw, CDF_H);

	double by = HEAD + cdf_rows * CDF_H, bw = W / 3.0;
	snprintf(buf, sizeof(buf), "stream, %u B writes", b->o.stream_size);
	bar_panel(f, b, pl, BM_GBPS, buf, "throughput (Gbit/s)", 0, by, bw, BAR_H);
	snprintf(buf, sizeof(buf), "message rate, %u B stream", b->o.sizes[bench_smallest(b)]);
	bar_panel(f, b, pl, BM_MSGS, buf, "messages per second", bw, by, bw, BAR_H);
	bar_panel(f, b, pl, BM_CONNS, "connect + round trip + close", "connections per second",
		  2 * bw, by, bw, BAR_H);
	fputs("</svg>\n", f);
	if (fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}
