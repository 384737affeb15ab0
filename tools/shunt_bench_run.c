/* shunt bench: the benchmark programs as child processes.
 *
 * Every column runs the same two programs the bench/ scripts use, so the
 * figures are comparable with theirs: shunt-ringbench for the raw ring,
 * shunt-tcpbench for the rest (over a Unix socket with --unix, plain over
 * TCP, and under `shunt run` for the shunt columns).  A server per column
 * (one per pair, for the oversubscribed placement) lives for the whole run;
 * each measurement is one client process per pair, the pairs started
 * together and told when to begin (--start-at), so that they really run at
 * once.  After the clients of a shunt column exit, their servers' stats
 * files say which transport the connections took: a run that did not take
 * the column's transport is discarded and reported, never shown as that
 * transport's figure.
 *
 * CPU time: the clients' from getrusage(RUSAGE_CHILDREN) around the run
 * (whole processes, start-up included: a one-second run amortises it), the
 * servers' from their process groups (shunt_bench_proc.c) over the same
 * span, divided by the operations of the run (warm-up round trips
 * included, as they were paid for too).  The idle test measures itself:
 * its client reads both processes' CPU clocks around the idle wait. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "config/shunt_config.h"
#include "shunt_bench.h"
#include "shunt_child.h"
#include "shunt_procgrp.h"
#include "shunt_statfile.h"

static int exists_x(const char *p)
{
	return access(p, X_OK) == 0;
}

/* $SHUNT_BENCH_DIR, else next to this executable (installed: both in
 * bindir), else, for the build-tree shunt only, the build tree's bench/. */
int bench_find_programs(struct bench *b)
{
	char dirs[3][PATH_MAX];
	int n = 0;
	const char *env = getenv("SHUNT_BENCH_DIR");
	const char *self = child_self_exe();
	if (env && env[0]) {
		snprintf(dirs[n++], PATH_MAX, "%s", env);
	} else {
		if (self) {
			snprintf(dirs[n], PATH_MAX, "%s", self);
			char *slash = strrchr(dirs[n], '/');
			if (slash) {
				*slash = '\0';
				n++;
			}
		}
#if defined(SHUNT_BUILD_BENCHDIR) && defined(SHUNT_BUILD_BINDIR)
		char a[PATH_MAX], c[PATH_MAX];
		if (n && realpath(dirs[0], a) && realpath(SHUNT_BUILD_BINDIR, c) && !strcmp(a, c))
			snprintf(dirs[n++], PATH_MAX, "%s", SHUNT_BUILD_BENCHDIR);
#endif
	}
	for (int i = 0; i < n; i++) {
		if (snprintf(b->tcpbench, sizeof(b->tcpbench), "%s/shunt-tcpbench", dirs[i]) <
			    (int)sizeof(b->tcpbench) &&
		    snprintf(b->ringbench, sizeof(b->ringbench), "%s/shunt-ringbench", dirs[i]) <
			    (int)sizeof(b->ringbench) &&
		    exists_x(b->tcpbench) && exists_x(b->ringbench))
			return 0;
	}
	fprintf(stderr, "shunt bench: shunt-tcpbench and shunt-ringbench not found in:\n");
	for (int i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", dirs[i]);
	fprintf(stderr, "set SHUNT_BENCH_DIR to the directory that holds them\n");
	return -1;
}

/* ---- argv building ------------------------------------------------------ */

/* Room for every argument, paths included (each at most PATH_MAX). */
struct argv {
	char *a[48];
	char buf[8 * PATH_MAX];
	size_t used;
	int n;
};

__attribute__((format(printf, 2, 3)))
static void add(struct argv *v, const char *fmt, ...)
{
	va_list ap;
	if (!v->n)
		v->used = 0;
	va_start(ap, fmt);
	int len = vsnprintf(v->buf + v->used, sizeof(v->buf) - v->used, fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(v->buf) - v->used || v->n >= 46)
		abort(); /* the arguments are ours: bounded by construction */
	v->a[v->n++] = v->buf + v->used;
	v->a[v->n] = NULL;
	v->used += (size_t)len + 1;
}

static int is_shunt(enum bench_tp tp)
{
	return tp == BT_SHM || tp == BT_FABRIC;
}

/* The rundir of the server (side 1) or client (side 0) of column tp. */
static const char *rundir_of(const struct bench *b, enum bench_tp tp, int side)
{
	return BENCH_CROSS(b, tp) ? b->ns_rundir[side] : b->rundir;
}

/* The address a column's server binds and its clients connect to. */
static const char *host_of(const struct bench *b, enum bench_tp tp)
{
	return BENCH_CROSS(b, tp) ? BENCH_NETNS_SERVER : "127.0.0.1";
}

/* "[ip netns exec NS] shunt run --transport T --options rundir=R --" before
 * the program of side 1 (server) or 0 (client). */
static void prefix(const struct bench *b, enum bench_tp tp, struct argv *v, int side)
{
	v->n = 0;
	if (BENCH_CROSS(b, tp)) {
		add(v, "ip");
		add(v, "netns");
		add(v, "exec");
		add(v, "%s", b->ns[side]);
	}
	if (tp == BT_SOCKMAP) {
		/* into the column's cgroup before the program makes a socket */
		add(v, "sh");
		add(v, "-c");
		add(v, "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"");
		add(v, "%s", b->sm_cgroup);
		return;
	}
	if (!is_shunt(tp))
		return;
	add(v, "%s", child_self_exe());
	add(v, "run");
	add(v, "--transport");
	add(v, "%s", tp == BT_SHM ? "shm" : "fabric");
	add(v, "--options");
	/* across hosts, libfabric's tcp provider: it needs no RDMA device;
	 * a client's first connection waits for its start-up, since what is
	 * measured is the fabric path */
	add(v, "rundir=%s%s", rundir_of(b, tp, side),
	    BENCH_CROSS(b, tp) ? ",fabric_provider=tcp,fabric_load_wait_ms=30000" : "");
	add(v, "--");
}


/* ---- servers ------------------------------------------------------------ */

/* Read the server's "listening X" line (bounded wait).  0 or -1. */
static int read_ready(int fd, char *addr, size_t len)
{
	char line[256];
	size_t n = 0;
	while (n < sizeof(line) - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 10000) <= 0)
			return -1;
		ssize_t r = read(fd, line + n, 1);
		if (r <= 0)
			return -1;
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	if (strncmp(line, "listening ", 10))
		return -1;
	return snprintf(addr, len, "%s", line + 10) < (int)len ? 0 : -1;
}

/* The server of pair k of column tp, not pinned (bench_place_enter pins
 * it where a placement wants it). */
static int start_server(struct bench *b, enum bench_tp tp, int k)
{
	struct argv v;
	int pfd[2];
	prefix(b, tp, &v, 1);
	add(&v, "%s", b->tcpbench);
	add(&v, "server");
	if (tp == BT_UNIX) {
		add(&v, "--unix");
		add(&v, "%s/bench%d.sock", b->rundir, k);
	} else {
		add(&v, "--port");
		add(&v, "0");
		add(&v, "--bind");
		add(&v, "%s", host_of(b, tp));
	}
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		fprintf(stderr, "shunt bench: pipe: %s\n", strerror(errno));
		return -1;
	}
	struct child_opts o = CHILD_OPTS_INIT;
	o.out_fd = pfd[1];
	o.new_group = 1;
	o.plain = !is_shunt(tp);
	b->server[tp][k] = child_start(v.a, &o);
	close(pfd[1]);
	int rc = b->server[tp][k] > 0
			 ? read_ready(pfd[0], b->addr[tp][k], sizeof(b->addr[tp][k]))
			 : -1;
	close(pfd[0]);
	if (rc != 0) {
		fprintf(stderr, "shunt bench: the %s server did not start\n", bench_tp_name[tp]);
		if (b->server[tp][k] > 0)
			child_stop(b->server[tp][k], 1, 2000);
		b->server[tp][k] = 0;
	}
	return rc;
}

/* Pairs first..nservers-1 of column tp. */
static int start_servers_of(struct bench *b, enum bench_tp tp, int first)
{
	for (int k = first; k < b->nservers; k++)
		if (start_server(b, tp, k) != 0)
			return -1;
	return 0;
}

int bench_start_servers(struct bench *b)
{
	/* a pair per server: as many as the oversubscribed placement runs */
	b->nservers = 1;
	for (int i = 0; i < b->o.nplace; i++)
		if (b->o.place[i] == BP_OVERSUB && b->place_ok[BP_OVERSUB])
			b->nservers = b->o.pairs;
	for (int tp = BT_UNIX; tp < BT_COUNT; tp++) {
		if (!b->avail[tp] || tp == BT_FABRIC) /* fabric: bench_probe_fabric */
			continue;
		if (start_servers_of(b, tp, 0) != 0)
			return -1;
	}
	return 0;
}

static void stop_servers_of(struct bench *b, enum bench_tp tp)
{
	for (int k = 0; k < BENCH_MAX_PAIRS; k++)
		if (b->server[tp][k] > 0) {
			child_stop(b->server[tp][k], 1, 2000);
			b->server[tp][k] = 0;
		}
}

void bench_stop_servers(struct bench *b)
{
	for (int tp = 0; tp < BT_COUNT; tp++)
		stop_servers_of(b, tp);
}

/* ---- clients ------------------------------------------------------------ */

/* The value of " key=" in the first line of text that starts with kind. */
static int field(const char *text, const char *kind, const char *key, double *out)
{
	size_t kl = strlen(kind), keyl = strlen(key);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, kind, kl) || l[kl] != ' ')
			continue;
		const char *end = strchr(l, '\n');
		for (const char *p = l + kl; p && (!end || p < end); p = strchr(p + 1, ' ')) {
			if (!strncmp(p + 1, key, keyl) && p[1 + keyl] == '=') {
				char *e;
				*out = strtod(p + 2 + keyl, &e);
				return e == p + 2 + keyl ? -1 : 0;
			}
		}
		return -1;
	}
	return -1;
}

static void parse_cdf(const char *text, struct bench_cdf *c)
{
	c->n = 0;
	const char *l = strstr(text, "\ncdf size=");
	l = l ? l + 1 : (!strncmp(text, "cdf size=", 9) ? text : NULL);
	const char *p = l ? strstr(l, "points=") : NULL;
	if (!p)
		return;
	p += 7;
	while (c->n < BENCH_CDF_MAX && *p && *p != '\n') {
		char *e;
		double q = strtod(p, &e);
		if (*e != ':')
			break;
		double us = strtod(e + 1, &e);
		c->q[c->n] = q;
		c->us[c->n++] = us;
		if (*e != ',')
			break;
		p = e + 1;
	}
}

/* Did the connections of a run take the column's transport?  The server
 * lives on, so its counters before and after the run say what the
 * connections it accepted in between took. */
static int check_transport(struct bench *b, enum bench_tp tp, int k,
			   const struct shunt_stat_totals *before, const char *what)
{
	struct shunt_stat_totals after, t;
	unsigned want = tp == BT_SHM ? SHUNT_TP_SHM : SHUNT_TP_FABRIC;
	char desc[512];
	unsigned found = shunt_statfile_sum(rundir_of(b, tp, 1), b->server[tp][k], &after);
	shunt_statfile_delta(&after, before, &t);
	if (found == 1 && t.conns[want] > 0 && t.conns[SHUNT_TP_KERNEL] == 0)
		return 0;
	shunt_statfile_describe(&t, desc, sizeof(desc));
	if (tp != BT_FABRIC || b->avail[tp])
		fprintf(stderr, "shunt bench: %s %s: discarded, its connections were not all on %s "
			"(%s)\n", bench_tp_name[tp], what, tp == BT_SHM ? "shm" : "fabric",
			found ? desc : "no stats from the server");
	if (snprintf(b->why[tp], sizeof(b->why[tp]), "connections took: %s",
		     found ? desc : "(no stats from the server)") >= (int)sizeof(b->why[tp]))
		b->why[tp][sizeof(b->why[tp]) - 1] = '\0';
	return -1;
}

/* A client started: its pid and the file its output goes to. */
struct client {
	pid_t pid;
	int fd;
};

/* Start argv as a client, pinned to cpu (-1: not), output to a file. */
static int client_start(char *const argv[], int plain, int cpu, struct client *c)
{
	c->pid = 0;
	c->fd = child_tmpfile();
	if (c->fd < 0)
		return -1;
	struct child_opts o = CHILD_OPTS_INIT;
	o.cpu = cpu;
	o.out_fd = c->fd;
	o.new_group = 1;
	o.plain = plain;
	c->pid = child_start(argv, &o);
	if (c->pid < 0) {
		close(c->fd);
		c->fd = -1;
		c->pid = 0;
		return -1;
	}
	return 0;
}

/* Wait for a client until the CLOCK_MONOTONIC deadline (ns): its output,
 * malloc'ed, or NULL when it failed or had to be stopped. */
static char *client_finish(struct bench *b, struct client *c, const char *prog,
			   uint64_t deadline)
{
	if (c->pid <= 0)
		return NULL;
	uint64_t now = now_ns();
	int st = 0, timeout_ms = now < deadline ? (int)((deadline - now) / 1000000) : 0;
	int rc = child_wait(c->pid, timeout_ms, &st);
	char *text = NULL;
	if (rc == 1) {
		fprintf(stderr, "shunt bench: %s did not finish in time; stopped\n", prog);
		child_stop(c->pid, 1, 1000);
	} else {
		text = child_slurp(c->fd, NULL);
		if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !text) {
			fprintf(stderr, "shunt bench: a %s client failed (%s %d)\n", prog,
				WIFEXITED(st) ? "exit status" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			free(text);
			text = NULL;
		} else if (b->o.verbose) {
			fprintf(stderr, "%s", text);
		}
	}
	close(c->fd);
	c->fd = -1;
	c->pid = 0;
	return text;
}

/* The client of pair k for one test; start_at: when the pairs begin
 * (0: at once). */
static void client_argv(const struct bench *b, enum bench_place pl, enum bench_tp tp,
			enum bench_test test, int s, int k, uint64_t start_at, struct argv *v)
{
	static const char *const mode[] = { "pingpong", "stream", "stream", "connect", "idle" };
	prefix(b, tp, v, 0);
	if (tp == BT_RING) {
		add(v, "%s", b->ringbench);
		add(v, "%s", mode[test]);
		if (pl == BP_PINNED) { /* it pins itself and its child */
			add(v, "--cpu");
			add(v, "%d,%d", b->o.cpus[0], b->o.cpus[1]);
		}
	} else {
		add(v, "%s", b->tcpbench);
		add(v, "client");
		if (tp == BT_UNIX) {
			add(v, "--unix");
			add(v, "%s", b->addr[tp][k]);
		} else {
			add(v, "--host");
			add(v, "%s", host_of(b, tp));
			add(v, "--port");
			add(v, "%s", b->addr[tp][k]);
		}
		add(v, "--mode");
		add(v, "%s", mode[test]);
		if (test == BTEST_IDLE) {
			add(v, "--peer-pid");
			add(v, "%d", (int)b->server[tp][k]);
		}
	}
	add(v, "--duration");
	add(v, "%g", b->o.duration);
	if (test == BTEST_CONNECT) {
		add(v, "--iters");
		add(v, "%u", b->o.connects);
	} else if (test != BTEST_IDLE) {
		add(v, "--size");
		add(v, "%u", test == BTEST_STREAM ? b->o.stream_size : b->o.sizes[s]);
	}
	if (test == BTEST_PINGPONG && b->o.think_us) {
		add(v, "--think");
		add(v, "%u", b->o.think_us);
	}
	if (test == BTEST_PINGPONG) {
		add(v, "--warmup");
		add(v, "%u", b->o.warmup);
		add(v, "--cdf");
	}
	if (start_at) {
		add(v, "--start-at");
		add(v, "%llu", (unsigned long long)start_at);
	}
}

/* One pair's figures from its client's output (NAN where none), and the
 * operations its CPU time is divided by. */
struct pair_figs {
	double v[BM_COUNT];
	double ops;  /* round trips (warm-up included), MB, messages, connections */
	struct bench_cdf cdf;
};

static void parse_pair(const struct bench *b, enum bench_test test, int s, const char *text,
		       struct pair_figs *f)
{
	double x, y, z;
	for (int m = 0; m < BM_COUNT; m++)
		f->v[m] = NAN;
	f->ops = NAN;
	f->cdf.n = 0;
	switch (test) {
	case BTEST_PINGPONG: {
		static const char *const keys[] = { "p50_us", "p90_us", "p99_us", "p999_us", "max_us" };
		for (int m = BM_P50; m <= BM_MAX; m++)
			if (field(text, "pingpong", keys[m], &x) == 0)
				f->v[m] = x;
		if (field(text, "pingpong", "mean_us", &x) == 0 && x > 0)
			f->v[BM_RTTS] = 1e6 / x;
		if (field(text, "pingpong", "iters", &x) == 0)
			f->ops = x + b->o.warmup;
		parse_cdf(text, &f->cdf);
		break;
	}
	case BTEST_STREAM:
		if (field(text, "stream", "gbps", &x) == 0)
			f->v[BM_GBPS] = x;
		if (field(text, "stream", "bytes", &x) == 0)
			f->ops = x / 1e6;
		break;
	case BTEST_MSGS:
		if (field(text, "stream", "bytes", &x) == 0 &&
		    field(text, "stream", "seconds", &y) == 0 && y > 0) {
			f->v[BM_MSGS] = x / b->o.sizes[s] / y;
			f->ops = x / b->o.sizes[s];
		}
		break;
	case BTEST_CONNECT:
		if (field(text, "connect", "rate", &x) == 0)
			f->v[BM_CONNS] = x;
		if (field(text, "connect", "p50_us", &x) == 0)
			f->v[BM_CONN_P50] = x;
		if (field(text, "connect", "iters", &x) == 0)
			f->ops = x;
		break;
	case BTEST_IDLE:
		if (field(text, "idle", "seconds", &x) == 0 && x > 0 &&
		    field(text, "idle", "self_cpu_us", &y) == 0 &&
		    field(text, "idle", "peer_cpu_us", &z) == 0) {
			f->v[BM_IDLE_C] = y / x;
			f->v[BM_IDLE_S] = z / x;
			f->v[BM_IDLE] = (y + z) / x;
		}
		break;
	}
}

/* The metrics each test measures; its CPU-per-operation triple (both,
 * client, server) and that triple's scale from us per operation. */
static const struct {
	enum bench_metric first, last;
	enum bench_metric cpu; /* BM_COUNT: none */
	double scale;
} test_metrics[] = {
	[BTEST_PINGPONG] = { BM_P50, BM_RTTS, BM_CPU_RTT, 1 },
	[BTEST_STREAM] = { BM_GBPS, BM_GBPS, BM_CPU_MB, 1 },
	[BTEST_MSGS] = { BM_MSGS, BM_MSGS, BM_CPU_MSG, 1000 },
	[BTEST_CONNECT] = { BM_CONNS, BM_CONN_P50, BM_CPU_CONN, 1 },
	[BTEST_IDLE] = { BM_IDLE, BM_IDLE_S, BM_COUNT, 1 },
};

/* Over the pairs: a latency is their median, a rate their sum, an idle
 * cost their mean (per connection); NAN if a pair lacks the figure. */
static double combine(const struct pair_figs *f, int n, enum bench_metric m)
{
	double v[BENCH_MAX_PAIRS], sum = 0;
	for (int i = 0; i < n; i++) {
		if (isnan(f[i].v[m]))
			return NAN;
		v[i] = f[i].v[m];
		sum += v[i];
	}
	if (m == BM_RTTS || m == BM_GBPS || m == BM_MSGS || m == BM_CONNS)
		return sum;
	if (m >= BM_IDLE)
		return sum / n;
	return median_d(v, (size_t)n);
}

/* Quantile by quantile, the median over the pairs (all have the same). */
static void combine_cdf(const struct pair_figs *f, int n, struct bench_cdf *out)
{
	*out = f[0].cdf;
	for (int i = 1; i < n; i++)
		if (f[i].cdf.n != out->n)
			return;
	for (int q = 0; q < out->n && n > 1; q++) {
		double v[BENCH_MAX_PAIRS];
		for (int i = 0; i < n; i++)
			v[i] = f[i].cdf.us[q];
		out->us[q] = median_d(v, (size_t)n);
	}
}

/* Clients of a run started together wait this long, so that the last one
 * is connected before the first begins. */
static uint64_t start_delay_ns(int pairs)
{
	return 200000000ull + 20000000ull * (uint64_t)pairs;
}

int bench_run(struct bench *b, enum bench_place pl, enum bench_tp tp, enum bench_test test,
	      int s, int r)
{
	static struct shunt_stat_totals before[BENCH_MAX_PAIRS];
	static struct pair_figs figs[BENCH_MAX_PAIRS];
	static const char *const what[] = { "ping-pong", "stream", "message-rate", "connect",
					    "idle" };
	if (tp == BT_RING && test == BTEST_CONNECT)
		return 0; /* a ring has no connection to set up */
	int n = bench_place_pairs(b, pl), ok = 1;
	int cpu = tp == BT_RING ? -1 : bench_place_client_cpu(b, pl);
	uint64_t delay = n > 1 ? start_delay_ns(n) : 0, start_at = delay ? now_ns() + delay : 0;
	uint64_t deadline = now_ns() + delay + (uint64_t)(b->o.duration * 4e9) + 60000000000ull;
	const char *prog = tp == BT_RING ? b->ringbench : b->tcpbench;
	struct client c[BENCH_MAX_PAIRS];
	int64_t srv0[BENCH_MAX_PAIRS] = { 0 }, srv1[BENCH_MAX_PAIRS] = { 0 };

	for (int k = 0; is_shunt(tp) && k < n; k++)
		shunt_statfile_sum(rundir_of(b, tp, 1), b->server[tp][k], &before[k]);
	int nsrv = tp == BT_RING ? 0 : n;
	procgrp_cpu_ns(b->server[tp], nsrv, srv0);
	int64_t cli0 = bench_children_cpu_ns();
	for (int k = 0; k < n; k++) {
		struct argv v;
		client_argv(b, pl, tp, test, s, k, start_at, &v);
		if (client_start(v.a, !is_shunt(tp), cpu, &c[k]) != 0)
			ok = 0;
		b->client[k] = c[k].pid;
	}
	char *text[BENCH_MAX_PAIRS];
	for (int k = 0; k < n; k++) {
		text[k] = client_finish(b, &c[k], prog, deadline);
		b->client[k] = 0;
		ok &= text[k] != NULL;
	}
	int64_t cli1 = bench_children_cpu_ns();
	procgrp_cpu_ns(b->server[tp], nsrv, srv1);

	char label[96];
	snprintf(label, sizeof(label), "%s round %d %s", bench_place_key[pl], r + 1, what[test]);
	for (int k = 0; ok && is_shunt(tp) && k < n; k++)
		if (check_transport(b, tp, k, &before[k], label) != 0)
			ok = 0;
	for (int k = 0; ok && k < n; k++)
		parse_pair(b, test, s, text[k], &figs[k]);
	for (int k = 0; k < n; k++)
		free(text[k]);
	if (!ok)
		return -1;
	if (is_shunt(tp))
		b->verified[tp]++;

	int sv = BM_PER_SIZE(test_metrics[test].first) ? s : 0;
	for (int m = test_metrics[test].first; m <= (int)test_metrics[test].last; m++)
		BV(b, pl, tp, m, sv, r) = combine(figs, n, m);
	if (test == BTEST_PINGPONG)
		combine_cdf(figs, n, &BCDF(b, pl, tp, s, r));
	enum bench_metric cm = test_metrics[test].cpu;
	if (cm != BM_COUNT) {
		double ops = 0, cli = (double)(cli1 - cli0) / 1e3, srv = 0;
		for (int k = 0; k < n; k++) {
			ops += figs[k].ops;
			srv += (double)(srv1[k] - srv0[k]) / 1e3;
		}
		if (!(ops > 0))
			return 0;
		double scale = test_metrics[test].scale / ops;
		if (tp == BT_RING) {
			/* both ends are the client and the child it waited for */
			BV(b, pl, tp, cm, sv, r) = cli * scale;
		} else {
			BV(b, pl, tp, cm, sv, r) = (cli + srv) * scale;
			BV(b, pl, tp, cm + 1, sv, r) = cli * scale;
			BV(b, pl, tp, cm + 2, sv, r) = srv * scale;
		}
	}
	return 0;
}

/* The fabric column is a hook: shunt's fabric transport is not in every
 * build.  A short ping-pong under --transport fabric shows whether its
 * connections take it; if not, the column says why (the reason codes). */
void bench_probe_fabric(struct bench *b)
{
	if (!b->avail[BT_FABRIC])
		return;
	b->avail[BT_FABRIC] = 0;
	if (start_server(b, BT_FABRIC, 0) != 0) {
		snprintf(b->why[BT_FABRIC], sizeof(b->why[BT_FABRIC]), "its server did not start");
		return;
	}
	struct argv v;
	struct client c;
	struct shunt_stat_totals before;
	shunt_statfile_sum(rundir_of(b, BT_FABRIC, 1), b->server[BT_FABRIC][0], &before);
	prefix(b, BT_FABRIC, &v, 0);
	add(&v, "%s", b->tcpbench);
	add(&v, "client");
	add(&v, "--host");
	add(&v, "%s", host_of(b, BT_FABRIC));
	add(&v, "--port");
	add(&v, "%s", b->addr[BT_FABRIC][0]);
	add(&v, "--mode");
	add(&v, "pingpong");
	add(&v, "--iters");
	add(&v, "200");
	add(&v, "--warmup");
	add(&v, "10");
	char *text = NULL;
	if (client_start(v.a, 0, -1, &c) == 0) {
		b->client[0] = c.pid;
		text = client_finish(b, &c, b->tcpbench, now_ns() + 60000000000ull);
		b->client[0] = 0;
	}
	if (!text)
		snprintf(b->why[BT_FABRIC], sizeof(b->why[BT_FABRIC]), "its probe client failed");
	if (text && check_transport(b, BT_FABRIC, 0, &before, "probe") == 0) {
		b->avail[BT_FABRIC] = 1;
		if (start_servers_of(b, BT_FABRIC, 1) != 0) {
			b->avail[BT_FABRIC] = 0;
			snprintf(b->why[BT_FABRIC], sizeof(b->why[BT_FABRIC]),
				 "the servers of its pairs did not start");
		}
	}
	if (!b->avail[BT_FABRIC])
		stop_servers_of(b, BT_FABRIC);
	free(text);
}
