/* shunt bench: the benchmark programs as child processes.
 *
 * Every column runs the same two programs the bench/ scripts use, so the
 * figures are comparable with theirs: shunt-ringbench for the raw ring,
 * shunt-tcpbench for the rest (over a Unix socket with --unix, plain over
 * TCP, and under `shunt run` for the shunt columns).  A server per column
 * lives for the whole run; each measurement is one client process.  After a
 * client under shunt exits, its stats file says which transport its
 * connections took: a run that did not take the column's transport is
 * discarded and reported, never shown as that transport's figure. */
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

#include "config/shunt_config.h"
#include "shunt_bench.h"
#include "shunt_child.h"
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
	if (!is_shunt(tp))
		return;
	add(v, "%s", child_self_exe());
	add(v, "run");
	add(v, "--transport");
	add(v, "%s", tp == BT_SHM ? "shm" : "fabric");
	add(v, "--options");
	/* across hosts, libfabric's tcp provider: it needs no RDMA device */
	add(v, "rundir=%s%s", rundir_of(b, tp, side),
	    BENCH_CROSS(b, tp) ? ",fabric_provider=tcp" : "");
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

static int start_server(struct bench *b, enum bench_tp tp)
{
	struct argv v;
	int pfd[2];
	prefix(b, tp, &v, 1);
	add(&v, "%s", b->tcpbench);
	add(&v, "server");
	if (tp == BT_UNIX) {
		add(&v, "--unix");
		add(&v, "%s/bench.sock", b->rundir);
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
	o.cpu = b->o.cpus[1];
	o.out_fd = pfd[1];
	o.new_group = 1;
	o.plain = !is_shunt(tp);
	b->server[tp] = child_start(v.a, &o);
	close(pfd[1]);
	int rc = b->server[tp] > 0 ? read_ready(pfd[0], b->addr[tp], sizeof(b->addr[tp])) : -1;
	close(pfd[0]);
	if (rc != 0) {
		fprintf(stderr, "shunt bench: the %s server did not start\n", bench_tp_name[tp]);
		if (b->server[tp] > 0)
			child_stop(b->server[tp], 1, 2000);
		b->server[tp] = 0;
	}
	return rc;
}

int bench_start_servers(struct bench *b)
{
	for (int tp = BT_UNIX; tp < BT_COUNT; tp++) {
		if (!b->avail[tp] || tp == BT_FABRIC) /* fabric: bench_probe_fabric */
			continue;
		if (start_server(b, tp) != 0)
			return -1;
	}
	return 0;
}

void bench_stop_servers(struct bench *b)
{
	for (int tp = 0; tp < BT_COUNT; tp++)
		if (b->server[tp] > 0) {
			child_stop(b->server[tp], 1, 2000);
			b->server[tp] = 0;
		}
}

/* ---- one client run ----------------------------------------------------- */

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
static int check_transport(struct bench *b, enum bench_tp tp,
			   const struct shunt_stat_totals *before, const char *what)
{
	struct shunt_stat_totals after, t;
	unsigned want = tp == BT_SHM ? SHUNT_TP_SHM : SHUNT_TP_FABRIC;
	char desc[512];
	unsigned found = shunt_statfile_sum(rundir_of(b, tp, 1), b->server[tp], &after);
	shunt_statfile_delta(&after, before, &t);
	if (found == 1 && t.conns[want] > 0 && t.conns[SHUNT_TP_KERNEL] == 0) {
		b->verified[tp]++;
		return 0;
	}
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

/* Run argv as the client, pinned; its output into *text (malloc'ed). */
static int run_client(struct bench *b, char *const argv[], int plain, char **text, pid_t *pidp)
{
	int fd = child_tmpfile();
	if (fd < 0)
		return -1;
	struct child_opts o = CHILD_OPTS_INIT;
	o.cpu = b->o.cpus[0];
	o.out_fd = fd;
	o.new_group = 1;
	o.plain = plain;
	pid_t pid = child_start(argv, &o);
	if (pid < 0) {
		close(fd);
		return -1;
	}
	*pidp = pid;
	b->client = pid;
	int st, timeout_ms = (int)(b->o.duration * 4000) + 60000;
	int rc = child_wait(pid, timeout_ms, &st);
	if (rc == 1) {
		fprintf(stderr, "shunt bench: %s did not finish in %d s; stopped\n", argv[0],
			timeout_ms / 1000);
		child_stop(pid, 1, 1000);
		b->client = 0;
		close(fd);
		return -1;
	}
	b->client = 0;
	*text = child_slurp(fd, NULL);
	close(fd);
	if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !*text) {
		fprintf(stderr, "shunt bench: a %s client failed (%s %d)\n", argv[0],
			WIFEXITED(st) ? "exit status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		free(*text);
		*text = NULL;
		return -1;
	}
	if (b->o.verbose)
		fprintf(stderr, "%s", *text);
	return 0;
}

int bench_run(struct bench *b, enum bench_tp tp, enum bench_test test, int s, int r)
{
	struct argv v;
	unsigned size = test == BTEST_STREAM ? b->o.stream_size : b->o.sizes[s];
	static const char *const mode[] = { "pingpong", "stream", "stream", "connect" };
	char *text = NULL;
	pid_t pid = 0;

	if (tp == BT_RING && test == BTEST_CONNECT)
		return 0; /* a ring has no connection to set up */
	prefix(b, tp, &v, 0);
	if (tp == BT_RING) {
		add(&v, "%s", b->ringbench);
		add(&v, "%s", mode[test]);
		if (b->o.cpus[0] >= 0) {
			add(&v, "--cpu");
			add(&v, "%d,%d", b->o.cpus[0], b->o.cpus[1]);
		}
	} else {
		add(&v, "%s", b->tcpbench);
		add(&v, "client");
		if (tp == BT_UNIX) {
			add(&v, "--unix");
			add(&v, "%s", b->addr[tp]);
		} else {
			add(&v, "--host");
			add(&v, "%s", host_of(b, tp));
			add(&v, "--port");
			add(&v, "%s", b->addr[tp]);
		}
		add(&v, "--mode");
		add(&v, "%s", mode[test]);
	}
	add(&v, "--duration");
	add(&v, "%g", b->o.duration);
	if (test == BTEST_CONNECT) {
		add(&v, "--iters");
		add(&v, "%u", b->o.connects);
	} else {
		add(&v, "--size");
		add(&v, "%u", size);
	}
	if (test == BTEST_PINGPONG) {
		add(&v, "--warmup");
		add(&v, "%u", b->o.warmup);
		add(&v, "--cdf");
	}

	/* the ring client pins itself (and its child); the others are pinned here */
	struct shunt_stat_totals before;
	if (is_shunt(tp))
		shunt_statfile_sum(rundir_of(b, tp, 1), b->server[tp], &before);
	int saved = b->o.cpus[0];
	if (tp == BT_RING)
		b->o.cpus[0] = -1;
	int rc = run_client(b, v.a, !is_shunt(tp), &text, &pid);
	b->o.cpus[0] = saved;
	if (rc != 0)
		return -1;
	static const char *const what[] = { "ping-pong", "stream", "message-rate", "connect" };
	char label[64];
	snprintf(label, sizeof(label), "round %d %s", r + 1, what[test]);
	if (is_shunt(tp) && check_transport(b, tp, &before, label) != 0) {
		free(text);
		return -1;
	}

	double x;
	switch (test) {
	case BTEST_PINGPONG: {
		static const char *const keys[] = { "p50_us", "p90_us", "p99_us", "p999_us", "max_us" };
		for (int m = BM_P50; m <= BM_MAX; m++)
			if (field(text, "pingpong", keys[m], &x) == 0)
				BV(b, tp, m, s, r) = x;
		parse_cdf(text, &BCDF(b, tp, s, r));
		break;
	}
	case BTEST_STREAM:
		if (field(text, "stream", "gbps", &x) == 0)
			BV(b, tp, BM_GBPS, 0, r) = x;
		break;
	case BTEST_MSGS: {
		double bytes, secs;
		if (field(text, "stream", "bytes", &bytes) == 0 &&
		    field(text, "stream", "seconds", &secs) == 0 && secs > 0)
			BV(b, tp, BM_MSGS, 0, r) = bytes / size / secs;
		break;
	}
	case BTEST_CONNECT:
		if (field(text, "connect", "rate", &x) == 0)
			BV(b, tp, BM_CONNS, 0, r) = x;
		if (field(text, "connect", "p50_us", &x) == 0)
			BV(b, tp, BM_CONN_P50, 0, r) = x;
		break;
	}
	free(text);
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
	if (start_server(b, BT_FABRIC) != 0) {
		snprintf(b->why[BT_FABRIC], sizeof(b->why[BT_FABRIC]), "its server did not start");
		return;
	}
	struct argv v;
	char *text = NULL;
	pid_t pid = 0;
	struct shunt_stat_totals before;
	shunt_statfile_sum(rundir_of(b, BT_FABRIC, 1), b->server[BT_FABRIC], &before);
	prefix(b, BT_FABRIC, &v, 0);
	add(&v, "%s", b->tcpbench);
	add(&v, "client");
	add(&v, "--host");
	add(&v, "%s", host_of(b, BT_FABRIC));
	add(&v, "--port");
	add(&v, "%s", b->addr[BT_FABRIC]);
	add(&v, "--mode");
	add(&v, "pingpong");
	add(&v, "--iters");
	add(&v, "200");
	add(&v, "--warmup");
	add(&v, "10");
	int rc = run_client(b, v.a, 0, &text, &pid);
	if (rc != 0)
		snprintf(b->why[BT_FABRIC], sizeof(b->why[BT_FABRIC]), "its probe client failed");
	if (rc == 0 && check_transport(b, BT_FABRIC, &before, "probe") == 0) {
		b->avail[BT_FABRIC] = 1;
		b->verified[BT_FABRIC] = 0;
	} else {
		child_stop(b->server[BT_FABRIC], 1, 2000);
		b->server[BT_FABRIC] = 0;
	}
	free(text);
}
