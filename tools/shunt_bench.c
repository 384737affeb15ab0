/* shunt bench: kernel TCP, a Unix socket, shunt's transports and the raw
 * shared-memory ring, measured in one run, in four placements.
 *
 *   shunt bench [--rounds N] [--confirm N] [--duration SEC] [--warmup N] [--sizes LIST]
 *               [--stream-size BYTES] [--connects N]
 *               [--placement LIST] [--cpus A,B] [--pairs N] [--think US]
 *               [--fabric auto|yes|no] [--only LIST] [--csv FILE]
 *               [--plot FILE.svg] [--netns] [-v]
 *
 * A round runs every placement (shunt_bench_place.c), and in each every
 * test once on every column; within a test the columns take turns, in an
 * order that rotates from round to round, so a noisy neighbour or a
 * frequency change hurts all of them alike.  The table shows the medians
 * over the rounds, their ratios to kernel TCP and the rows where shunt is
 * worse than kernel TCP (shunt_bench_verdict.c).  A test whose rounds
 * make a row suspect (worse, every round apart) is run again for
 * --confirm rounds of the two columns, in that placement, after the
 * rounds: the verdict is theirs.
 *
 * Exit status: 0 ok, 1 a measurement failed, 2 usage, 3 a row regressed. */
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"
#include "shunt_child.h"
#include "shunt_machine.h"
#include "shunt_tool.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shunt bench [options]\n"
		"  --rounds N          rounds, columns interleaved in each (default 3)\n"
		"  --confirm N         a row worse than kernel TCP in every round is measured\n"
		"                      N more rounds, which decide (default 6, at least 3;\n"
		"                      0: the rounds alone decide)\n"
		"  --duration SEC      seconds per measurement (default 1)\n"
		"  --warmup N          ping-pong round trips not counted (default 1000)\n"
		"  --sizes LIST        ping-pong message sizes (default 64,4096,65536);\n"
		"                      the smallest is also the message-rate size\n"
		"  --stream-size BYTES write size of the throughput stream (default 64k)\n"
		"  --connects N        most connections per connection-rate run and pair\n"
		"                      (default 1000)\n"
		"  --placement LIST    of free,pinned,neighbour,oversub (default: all, in this\n"
		"                      order): not pinned on an idle machine; client and\n"
		"                      server pinned to two CPUs; with a CPU-bound busy loop\n"
		"                      running; N pairs at once\n"
		"  --cpus A,B          pinned: the client on CPU A, the server on CPU B\n"
		"                      (default: the first two usable CPUs)\n"
		"  --pairs N           oversub: pairs at once (default 2 x usable CPUs)\n"
		"  --think US          ping-pong: the server computes US microseconds per\n"
		"                      message before it answers (default 0); the targets\n"
		"                      then judge p50 against US + 2 us (US < 100), or p50\n"
		"                      and the client's CPU per round trip against kernel\n"
		"                      TCP's (US >= 100)\n"
		"  --fabric auto|yes|no  the shunt-fabric column: when the library has it\n"
		"                      (default), required, or left out\n"
		"  --only LIST         columns to run, of ring,unix,tcp,shm,fabric,sockmap\n"
		"                      (default: all but sockmap, which needs root and runs\n"
		"                      its own cgroup, bpffs and shuntd --sockmap)\n"
		"  --csv FILE          every run's figures and the medians, as CSV\n"
		"  --plot FILE.svg     latency CDFs and throughput bars, as SVG (FILE.png:\n"
		"                      drawn from the SVG by rsvg-convert, if installed)\n"
		"  --netns             (root) kernel TCP and shunt-fabric across two network\n"
		"                      namespaces joined by veth, each with its own shuntd\n"
		"                      (set up and removed by the run)\n"
		"  --large             instead: streams of 256 KiB, 1 MiB and 8 MiB writes (raw\n"
		"                      ring, kernel TCP, shunt-shm as configured and with\n"
		"                      single copy from 256 KiB) with memcpy's and process_vm_readv's rates, CPU\n"
		"                      per MB and the large-transfer targets (--rounds,\n"
		"                      --duration apply)\n"
		"  -v, --verbose       show each benchmark program's output\n"
		"exit status: 0 ok, 1 a measurement failed, 2 usage error, 3 a row of a shunt\n"
		"column is worse than kernel TCP (REGRESSION in the table)\n");
}

#define usage_error(...) shunt_usage_error("bench", __VA_ARGS__)

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *e;
	double v = strtod(s, &e);
	if (e == s || *e || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

static int parse_sizes(const char *s, struct bench_opts *o)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", s);
	o->nsizes = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (o->nsizes == BENCH_MAX_SIZES || parse_u64(t, &v, 1) || !v || v > (16u << 20))
			return -1;
		o->sizes[o->nsizes++] = (unsigned)v;
	}
	return o->nsizes ? 0 : -1;
}

/* "a,b": names out of keys[0..n), each once, into order[] (as indexes);
 * the bit mask of those named, or -1 for an unknown or repeated name or an
 * empty list.  --only and --placement. */
static int parse_keys(const char *s, const char *const keys[], int n, int *order, int *count)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", s);
	int mask = 0;
	*count = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int i;
		for (i = 0; i < n && strcmp(t, keys[i]); i++)
			;
		if (i == n || (mask & (1 << i)))
			return -1;
		mask |= 1 << i;
		order[(*count)++] = i;
	}
	return mask ? mask : -1;
}

/* Servers and clients live in process groups of their own (the terminal's
 * ^C does not reach them): an interrupted run must not leave them behind. */
static struct bench *running;
static void on_signal(int sig)
{
	if (running) {
		for (int tp = 0; tp < BT_COUNT; tp++)
			for (int k = 0; k < BENCH_MAX_PAIRS; k++)
				if (running->server[tp][k] > 0)
					kill(-running->server[tp][k], SIGKILL);
		for (int k = 0; k < BENCH_MAX_PAIRS; k++)
			if (running->client[k] > 0)
				kill(-running->client[k], SIGKILL);
		if (running->hog > 0)
			kill(running->hog, SIGKILL);
		if (running->o.netns)
			bench_netns_down(running); /* namespaces outlive us otherwise */
		bench_sockmap_down(running);       /* and a cgroup, a bpffs, a shuntd */
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static int is_png(const char *path)
{
	size_t n = strlen(path);
	return n >= 4 && !strcasecmp(path + n - 4, ".png");
}

/* FILE.svg is written directly; FILE.png is that SVG drawn by rsvg-convert
 * (librsvg2-bin), checked for before the run. */
static int write_plot(const struct bench *b, const char *path)
{
	if (!is_png(path))
		return bench_write_svg(b, path);
	char svg[4200];
	if (snprintf(svg, sizeof(svg), "%s.tmp.svg", path) >= (int)sizeof(svg) ||
	    bench_write_svg(b, svg) != 0)
		return -1;
	char *argv[] = { "rsvg-convert", "-o", (char *)path, svg, NULL };
	struct child_opts co = CHILD_OPTS_INIT;
	co.err_fd = -2;
	pid_t pid = child_start(argv, &co);
	int st = 0;
	int ok = pid > 0 && child_wait(pid, 60000, &st) == 0 && WIFEXITED(st) &&
		 WEXITSTATUS(st) == 0;
	unlink(svg);
	if (!ok)
		fprintf(stderr, "shunt bench: --plot %s: drawing a PNG needs rsvg-convert "
			"(Debian: librsvg2-bin); or ask for .svg\n", path);
	return ok ? 0 : -1;
}

struct bench_test_at {
	enum bench_test t;
	int s; /* size index */
};

/* Does test t (at size index s) make a row of column tp suspect in
 * placement pl? */
static int test_suspect(const struct bench *b, enum bench_place pl, enum bench_tp tp,
			struct bench_test_at t)
{
	for (int m = 0; m < BM_COUNT; m++) {
		if (strcmp(bench_metric[m].test, bench_test_key[t.t]) != 0)
			continue;
		if (bench_suspect(b, pl, tp, (enum bench_metric)m, BM_PER_SIZE(m) ? t.s : 0) == 1)
			return 1;
	}
	return 0;
}

/* After the rounds: each test that made a row suspect runs again, o.confirm
 * rounds of kernel TCP and the suspect column, taking turns, in its
 * placement; their figures go to rounds o.rounds and up. */
static int confirm_suspects(struct bench *b, const struct bench_test_at *tests, int ntests)
{
	struct bench_opts *o = &b->o;
	int failed = 0;
	for (int i = 0; i < o->nplace && o->confirm; i++) {
		enum bench_place pl = o->place[i];
		int want[BENCH_MAX_SIZES + 4][BT_COUNT] = { { 0 } }, any = 0;
		if (!b->place_ok[pl])
			continue;
		for (int t = 0; t < ntests; t++)
			for (int tp = BT_SHM; tp <= BT_FABRIC; tp++)
				any |= want[t][tp] = test_suspect(b, pl, (enum bench_tp)tp, tests[t]);
		if (!any)
			continue;
		fprintf(stderr, "shunt bench: %s: a row worse than kernel TCP in every round; "
			"%d more rounds of its test decide\n", bench_place_key[pl], o->confirm);
		if (bench_place_enter(b, pl) != 0) {
			failed = 1;
			bench_place_leave(b, pl);
			continue;
		}
		for (int c = 0; c < o->confirm; c++)
			for (int t = 0; t < ntests; t++)
				for (int tp = BT_SHM; tp <= BT_FABRIC; tp++) {
					if (!want[t][tp])
						continue;
					enum bench_tp first = c % 2 ? tp : BT_TCP;
					enum bench_tp second = c % 2 ? BT_TCP : tp;
					int r = o->rounds + c;
					if (bench_run(b, pl, first, tests[t].t, tests[t].s, r) != 0 ||
					    bench_run(b, pl, second, tests[t].t, tests[t].s, r) != 0)
						failed = 1;
				}
		bench_place_leave(b, pl);
	}
	return failed ? -1 : 0;
}

int shunt_cmd_bench(int argc, char **argv)
{
	enum { O_ROUNDS = 1, O_DURATION, O_WARMUP, O_SIZES, O_STREAM, O_CONNECTS, O_CPUS,
	       O_FABRIC, O_ONLY, O_CSV, O_PLOT, O_NETNS, O_PLACEMENT, O_PAIRS, O_CONFIRM, O_LARGE, O_THINK,
	       O_HELP };
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "confirm", required_argument, NULL, O_CONFIRM },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "stream-size", required_argument, NULL, O_STREAM },
		{ "connects", required_argument, NULL, O_CONNECTS },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "placement", required_argument, NULL, O_PLACEMENT },
		{ "pairs", required_argument, NULL, O_PAIRS },
		{ "think", required_argument, NULL, O_THINK },
		{ "fabric", required_argument, NULL, O_FABRIC },
		{ "only", required_argument, NULL, O_ONLY },
		{ "csv", required_argument, NULL, O_CSV },
		{ "plot", required_argument, NULL, O_PLOT },
		{ "netns", no_argument, NULL, O_NETNS },
		{ "large", no_argument, NULL, O_LARGE },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static struct bench bench;
	struct bench *b = &bench;
	struct bench_opts *o = &b->o;
	*o = (struct bench_opts){ .rounds = 3, .confirm = 6, .duration = 1, .warmup = 1000,
				  .sizes = { 64, 4096, 65536 }, .nsizes = 3, .stream_size = 65536,
				  .connects = 1000, .cpus = { -1, -1 }, .fabric = -1,
				  /* sockmap only when asked for: it needs root
				   * and attaches BPF programs */
				  .only = ((1 << BT_COUNT) - 1) & ~(1 << BT_SOCKMAP),
				  .place = { BP_FREE, BP_PINNED, BP_NEIGHBOUR, BP_OVERSUB },
				  .nplace = BP_COUNT };
	double x;
	int order[(int)BT_COUNT > (int)BP_COUNT ? (int)BT_COUNT : (int)BP_COUNT], n;
	uint64_t u;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":vh", opts, NULL)) != -1) {
		switch (c) {
		case O_ROUNDS:
			if (parse_num(optarg, 1, BENCH_MAX_ROUNDS, &x) || x != (int)x)
				return usage_error("--rounds: expected 1..%d", BENCH_MAX_ROUNDS);
			o->rounds = (int)x;
			break;
		case O_CONFIRM:
			/* fewer than 3 rounds a side can never pass the rank test */
			if (parse_num(optarg, 0, BENCH_MAX_ROUNDS, &x) || x != (int)x ||
			    (x > 0 && x < 3))
				return usage_error("--confirm: expected 0, or 3..%d (fewer rounds "
						   "can never confirm a regression)", BENCH_MAX_ROUNDS);
			o->confirm = (int)x;
			break;
		case O_DURATION:
			if (parse_num(optarg, 0.01, 600, &x))
				return usage_error("--duration: expected seconds in 0.01..600");
			o->duration = x;
			break;
		case O_WARMUP:
			if (parse_u64(optarg, &u, 1) || u > 10000000)
				return usage_error("--warmup: expected 0..10000000 round trips");
			o->warmup = (unsigned)u;
			break;
		case O_SIZES:
			if (parse_sizes(optarg, o))
				return usage_error("--sizes: expected up to %d sizes of 1..16M bytes, "
						   "comma separated, got '%s'", BENCH_MAX_SIZES, optarg);
			break;
		case O_STREAM:
			if (parse_u64(optarg, &u, 1) || !u || u > (16u << 20))
				return usage_error("--stream-size: expected 1..16M bytes");
			o->stream_size = (unsigned)u;
			break;
		case O_CONNECTS:
			if (parse_u64(optarg, &u, 1) || !u || u > 20000)
				return usage_error("--connects: expected 1..20000 (each one leaves "
						   "a TIME_WAIT port behind)");
			o->connects = (unsigned)u;
			break;
		case O_CPUS: {
			char err[160];
			if (child_parse_cpus(optarg, o->cpus, err, sizeof(err)))
				return usage_error("--cpus: %s", err);
			if (o->cpus[0] == o->cpus[1]) /* one CPU for both is what neighbour shows */
				return usage_error("--cpus: expected two different CPUs, got '%s'",
						   optarg);
			break;
		}
		case O_FABRIC:
			if (!strcmp(optarg, "auto"))
				o->fabric = -1;
			else if (!strcmp(optarg, "yes"))
				o->fabric = 1;
			else if (!strcmp(optarg, "no"))
				o->fabric = 0;
			else
				return usage_error("--fabric: expected auto, yes or no");
			break;
		case O_ONLY:
			if ((o->only = parse_keys(optarg, bench_tp_key, BT_COUNT, order, &n)) < 0)
				return usage_error("--only: expected a list of ring,unix,tcp,shm,fabric");
			break;
		case O_PLACEMENT:
			if (parse_keys(optarg, bench_place_key, BP_COUNT, order, &n) < 0)
				return usage_error("--placement: expected a list of free,pinned,"
						   "neighbour,oversub, each once, got '%s'", optarg);
			for (o->nplace = 0; o->nplace < n; o->nplace++)
				o->place[o->nplace] = (enum bench_place)order[o->nplace];
			break;
		case O_PAIRS:
			if (parse_u64(optarg, &u, 0) || !u || u > BENCH_MAX_PAIRS)
				return usage_error("--pairs: expected 1..%d", BENCH_MAX_PAIRS);
			o->pairs = (int)u;
			break;
		case O_THINK:
			if (parse_u64(optarg, &u, 0) || u > 1000000)
				return usage_error("--think: expected 0..1000000 microseconds");
			o->think_us = (unsigned)u;
			break;
		case O_CSV: o->csv = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_NETNS: o->netns = 1; break;
		case O_LARGE: o->large = 1; break;
		case 'v': o->verbose = 1; break;
		case 'h':
		case O_HELP:
			usage(stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	/* Now, not after minutes of measuring. */
	if (o->plot && is_png(o->plot) && !child_in_path("rsvg-convert"))
		return usage_error("--plot %s: drawing a PNG needs rsvg-convert on PATH "
				   "(Debian: librsvg2-bin); or ask for .svg", o->plot);
	if (o->fabric == 0)
		o->only &= ~(1 << BT_FABRIC);
	if (o->fabric == 1)
		o->only |= 1 << BT_FABRIC;

	if (bench_find_programs(b) != 0 || !child_self_exe())
		return 1;
	if (o->large) {
		if (sched_getaffinity(0, sizeof(b->all), &b->all) != 0)
			CPU_ZERO(&b->all);
		b->ncpus = CPU_COUNT(&b->all);
		shunt_machine_describe(b->machine, sizeof(b->machine));
		return bench_large(b);
	}
	size_t nv = (size_t)BP_COUNT * BT_COUNT * BM_COUNT * BENCH_MAX_SIZES * BENCH_SLOTS(b);
	b->v = malloc(nv * sizeof(*b->v));
	b->cdf = calloc((size_t)BP_COUNT * BT_COUNT * BENCH_MAX_SIZES * BENCH_SLOTS(b),
			sizeof(*b->cdf));
	if (!b->v || !b->cdf) {
		fprintf(stderr, "shunt bench: out of memory\n");
		free(b->v);
		free(b->cdf);
		return 1;
	}
	for (size_t i = 0; i < nv; i++)
		b->v[i] = NAN;
	for (int tp = 0; tp < BT_COUNT; tp++)
		b->avail[tp] = !!(o->only & (1 << tp));
	if (!b->avail[BT_FABRIC])
		snprintf(b->why[BT_FABRIC], sizeof(b->why[0]), "left out (--fabric no / --only)");
	bench_place_check(b);
	/* before anything of ours runs: what the machine was doing anyway */
	b->load[0] = shunt_machine_loadavg();
	b->load[1] = -1;
	shunt_machine_describe(b->machine, sizeof(b->machine));
	if (child_rundir(b->rundir, sizeof(b->rundir), "bench") != 0) {
		free(b->v);
		free(b->cdf);
		return 1;
	}

	running = b;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN);

	int failed = 0, rc;
	if (o->netns && bench_netns_up(b) != 0) {
		failed = 1;
		goto out;
	}
	if (b->avail[BT_SOCKMAP] && bench_sockmap_up(b) != 0)
		b->avail[BT_SOCKMAP] = 0;
	if (bench_start_servers(b) != 0) {
		failed = 1;
		goto out;
	}
	bench_probe_fabric(b);
	if (o->fabric == 1 && !b->avail[BT_FABRIC]) {
		fprintf(stderr, "shunt bench: --fabric yes, but the fabric transport is not "
			"available: %s\n", b->why[BT_FABRIC]);
		failed = 1;
		goto out;
	}

	/* the tests of a round: a ping-pong per size, then the rates, then the
	 * idle connection */
	struct bench_test_at tests[BENCH_MAX_SIZES + 4];
	int ntests = 0;
	for (int s = 0; s < o->nsizes; s++) {
		tests[ntests].t = BTEST_PINGPONG;
		tests[ntests++].s = s;
	}
	static const enum bench_test rest[] = { BTEST_STREAM, BTEST_MSGS, BTEST_CONNECT,
						BTEST_IDLE };
	for (int i = 0; i < 4; i++) {
		tests[ntests].t = rest[i];
		tests[ntests++].s = rest[i] == BTEST_MSGS ? bench_smallest(b) : 0;
	}

	int cols[BT_COUNT], ncols = 0, nplaces = 0;
	for (int tp = 0; tp < BT_COUNT; tp++)
		if (b->avail[tp])
			cols[ncols++] = tp;
	for (int i = 0; i < o->nplace; i++) {
		enum bench_place pl = o->place[i];
		if (b->place_ok[pl])
			nplaces++;
		else
			fprintf(stderr, "shunt bench: placement %s skipped: %s\n",
				bench_place_key[pl], b->place_why[pl]);
	}
	if (!nplaces) {
		fprintf(stderr, "shunt bench: none of the placements asked for can be set up "
			"here\n");
		failed = 1;
	}
	fprintf(stderr, "shunt bench: %d round(s) of %d placement(s) x %d tests on %d columns, "
		"%g s each: about %.0f s\n", o->rounds, nplaces, ntests, ncols, o->duration,
		o->rounds * nplaces * ntests * ncols * (o->duration + 0.1));
	if (bench_quiet_warning(b, stderr))
		fprintf(stderr, "\n");
	for (int r = 0; r < o->rounds; r++) {
		for (int i = 0; i < o->nplace; i++) {
			enum bench_place pl = o->place[i];
			if (!b->place_ok[pl])
				continue;
			if (bench_place_enter(b, pl) != 0) {
				failed = 1;
				bench_place_leave(b, pl);
				continue;
			}
			for (int t = 0; t < ntests; t++) {
				for (int k = 0; k < ncols; k++) {
					/* rotate by round and test; every other round
					 * backwards */
					int col = (k + r + t) % ncols;
					if (r % 2)
						col = ncols - 1 - col;
					if (bench_run(b, pl, cols[col], tests[t].t, tests[t].s, r) != 0)
						failed = 1;
				}
			}
			bench_place_leave(b, pl);
			fprintf(stderr, "shunt bench: round %d/%d: %s done\n", r + 1, o->rounds,
				bench_place_key[pl]);
		}
	}
	if (!failed && confirm_suspects(b, tests, ntests) != 0)
		failed = 1;
	b->load[1] = shunt_machine_loadavg();
	bench_stop_servers(b);

	bench_print_table(b, stdout);
	if (o->csv && bench_write_csv(b, o->csv) != 0)
		failed = 1;
	if (o->plot && write_plot(b, o->plot) != 0)
		failed = 1;
out:
	rc = bench_exit_status(failed, bench_regressions(b));
	bench_stop_servers(b);
	if (o->netns)
		bench_netns_down(b);
	bench_sockmap_down(b);
	running = NULL;
	child_rmtree(b->rundir);
	free(b->v);
	free(b->cdf);
	return rc;
}
