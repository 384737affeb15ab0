/* shunt ab: A/B of any server/client pair, plain and under shunt.
 *
 *   shunt ab --server 'CMD' --client 'CMD' [--runs N] [--port P]
 *            [--format auto|sockperf|redis-benchmark|iperf3|wrk|time]
 *            [--transport T] [--options 'k=v,...'] [--ready-timeout SEC]
 *            [--timeout SEC] [--keep DIR] [-v]
 *
 * Each run starts the server (through /bin/sh, in a process group of its
 * own), waits until it listens, runs the client, then stops the server.
 * The plain and the shunt run alternate, and which goes first alternates
 * too, so drift on a busy machine hurts both alike.  The shunt side runs
 * under `shunt run` with a private runtime directory, which also tells,
 * from the library's counters, which transport its connections took.
 *
 * Readiness: with --port, a socket listening on that port (read from
 * /proc/net/tcp and tcp6; no probe connection, which some servers would
 * take for a client); without, any listening TCP socket of the server's
 * processes.  Under shunt, also the listener's entry in the registry, so
 * the client cannot connect before shm can be offered. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "config/shunt_config.h"
#include "shunt_ab.h"
#include "shunt_child.h"
#include "shunt_machine.h"
#include "shunt_statfile.h"
#include "shunt_tool.h"

#define MAX_RUNS 100
#define MAX_NAMES 64

struct ab {
	const char *server, *client, *format, *transport, *options, *keep;
	int runs, port, verbose;
	double ready_timeout, timeout;
	const char *format_seen;
	/* figures: names in order of first appearance; values per side, run */
	int nnames;
	char names[MAX_NAMES][64];
	int higher_better[MAX_NAMES];
	double v[2][MAX_NAMES][MAX_RUNS];
	struct shunt_stat_totals stats;   /* the shunt side's, all runs */
	unsigned stats_runs;
};

static const char *const side_name[2] = { "plain", "shunt" };

/* The children run in process groups of their own, out of the terminal's
 * reach: an interrupted shunt ab stops them itself. */
static volatile pid_t current_server, current_client;

static void on_signal(int sig)
{
	if (current_server > 0)
		kill(-current_server, SIGKILL);
	if (current_client > 0)
		kill(-current_client, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shunt ab --server 'CMD' --client 'CMD' [options]\n"
		"  --server CMD        the server command (a shell command line); optional\n"
		"  --client CMD        the client command, whose output is compared\n"
		"  --runs N            runs each way, alternating (default 3)\n"
		"  --port P            the server is ready when port P listens\n"
		"                      (default: when it listens on any TCP port)\n"
		"  --format F          auto (default), sockperf, redis-benchmark, iperf3, wrk,\n"
		"                      or time (wall time only)\n"
		"  --transport T       the shunt side's transport (shunt run --transport)\n"
		"  --options 'k=v,..'  the shunt side's extra settings (shunt run --options)\n"
		"  --ready-timeout SEC how long the server may take to listen (default 30)\n"
		"  --timeout SEC       how long a client may run (default 600)\n"
		"  --keep DIR          keep every run's client and server output in DIR\n"
		"  -v, --verbose       show every client output\n");
}

#define usage_error(...) shunt_usage_error("ab", __VA_ARGS__)

static double mono_s(void)
{
	return (double)now_ns() / 1e9;
}

/* ---- readiness ---------------------------------------------------------- */

/* Is a socket in LISTEN state on port (0: any) among the inodes given
 * (NULL: any socket)? */
static int listening(unsigned port, const unsigned long *inodes, int ninodes,
		     unsigned *found_port)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	char line[512];
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char local[128];
			unsigned st, lport;
			unsigned long inode;
			/* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode */
			if (sscanf(line, " %*s %127s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
				   &inode) != 3 || st != 0x0A)
				continue;
			char *colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
				continue;
			if (port && lport != port)
				continue;
			int mine = !inodes;
			for (int k = 0; k < ninodes && !mine; k++)
				mine = inodes[k] == inode;
			if (mine) {
				*found_port = lport;
				fclose(f);
				return 1;
			}
		}
		fclose(f);
	}
	return 0;
}

/* The socket inodes of the processes of group pgrp. */
static int group_sockets(pid_t pgrp, unsigned long *inodes, int max)
{
	int n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	for (struct dirent *de; (de = readdir(d)) && n < max;) {
		char path[300], buf[512];
		int pid = atoi(de->d_name);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t got = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[got] = '\0';
		char *rp = strrchr(buf, ')');
		int pg;
		if (!rp || sscanf(rp + 2, "%*c %*d %d", &pg) != 1 || pg != pgrp)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		DIR *fd = opendir(path);
		if (!fd)
			continue;
		for (struct dirent *fe; (fe = readdir(fd)) && n < max;) {
			char link[300], target[64];
			snprintf(link, sizeof(link), "/proc/%d/fd/%s", pid, fe->d_name);
			ssize_t l = readlink(link, target, sizeof(target) - 1);
			if (l <= 0)
				continue;
			target[l] = '\0';
			unsigned long ino;
			if (sscanf(target, "socket:[%lu]", &ino) == 1)
				inodes[n++] = ino;
		}
		closedir(fd);
	}
	closedir(d);
	return n;
}

/* Has the shunt listener registered port in rundir (l/<...>-<port>)? */
static int registered(const char *rundir, unsigned port)
{
	char path[300], suffix[16];
	snprintf(path, sizeof(path), "%s/l", rundir);
	snprintf(suffix, sizeof(suffix), "-%u", port);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int found = 0;
	size_t sl = strlen(suffix);
	for (struct dirent *de; !found && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		found = l > sl && !strcmp(de->d_name + l - sl, suffix);
	}
	closedir(d);
	return found;
}

/* Wait until the server listens (and, under shunt, is registered).
 * 0 ready, -1 it exited or the time ran out (message printed). */
static int wait_ready(const struct ab *a, pid_t pid, const char *rundir, int shunt)
{
	double end = mono_s() + a->ready_timeout, reg_end = 0;
	unsigned long inodes[256];
	unsigned port = 0;
	for (;;) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "shunt ab: the server exited before it listened (%s %d)\n",
				WIFEXITED(st) ? "exit status" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return -1;
		}
		if (!port) {
			if (a->port)
				listening((unsigned)a->port, NULL, 0, &port);
			else
				listening(0, inodes, group_sockets(pid, inodes, 256), &port);
			if (port)
				reg_end = mono_s() + 2;
		}
		/* a listener shunt did not register (a rule kept it on the
		 * kernel path) is ready after a grace period */
		if (port && (!shunt || registered(rundir, port) || mono_s() > reg_end))
			return 0;
		if (mono_s() > end) {
			fprintf(stderr, "shunt ab: the server did not listen%s%.0d within %g s\n",
				a->port ? " on port " : "", a->port, a->ready_timeout);
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000000L }; /* polling a state, with a bound */
		nanosleep(&ts, NULL);
	}
}

/* ---- one run ------------------------------------------------------------ */

static void keep_output(const struct ab *a, int fd, const char *what, int side, int run)
{
	if (!a->keep || fd < 0)
		return;
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s-%s-%d.txt", a->keep, what, side_name[side], run + 1);
	char *text = child_slurp(fd, NULL);
	FILE *f = text ? fopen(path, "w") : NULL;
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	free(text);
}

static void show_tail(const char *what, int fd)
{
	char *text = fd >= 0 ? child_slurp(fd, NULL) : NULL;
	if (!text)
		return;
	size_t n = strlen(text);
	const char *p = n > 2000 ? text + n - 2000 : text;
	fprintf(stderr, "---- %s output (end) ----\n%s%s---- end ----\n", what, p,
		n && text[n - 1] != '\n' ? "\n" : "");
	free(text);
}

/* argv for a command line: plain, or under shunt run. */
static int build_argv(const struct ab *a, const char *cmd, int shunt, const char *rundir,
		      char **argv, char *opts, size_t optslen)
{
	int n = 0;
	if (shunt) {
		argv[n++] = (char *)child_self_exe();
		argv[n++] = "run";
		if (a->transport) {
			argv[n++] = "--transport";
			argv[n++] = (char *)a->transport;
		}
		if (snprintf(opts, optslen, "rundir=%s%s%s", rundir, a->options ? "," : "",
			     a->options ? a->options : "") >= (int)optslen)
			return -1;
		argv[n++] = "--options";
		argv[n++] = opts;
		argv[n++] = "--";
	}
	argv[n++] = "/bin/sh";
	argv[n++] = "-c";
	argv[n++] = (char *)cmd;
	argv[n] = NULL;
	return n;
}

static void add_fig(struct ab *a, int side, int run, const char *name, double v, int hb)
{
	int i;
	for (i = 0; i < a->nnames && strcmp(a->names[i], name); i++)
		;
	if (i == a->nnames) {
		if (a->nnames == MAX_NAMES)
			return;
		snprintf(a->names[i], sizeof(a->names[i]), "%s", name);
		a->higher_better[i] = hb;
		for (int s = 0; s < 2; s++)
			for (int r = 0; r < MAX_RUNS; r++)
				a->v[s][i][r] = NAN;
		a->nnames++;
	}
	a->v[side][i][run] = v;
}

static int one_run(struct ab *a, int side, int run)
{
	char rundir[128] = "", opts[4200];
	char *argv[16];
	pid_t server = 0;
	int srv_fd = -1, cli_fd = -1, rc = -1;
	if (side && child_rundir(rundir, sizeof(rundir), "ab") != 0)
		return -1;

	if (a->server) {
		srv_fd = child_tmpfile();
		if (srv_fd < 0)
			goto out;
		if (build_argv(a, a->server, side, rundir, argv, opts, sizeof(opts)) < 0)
			goto out;
		struct child_opts o = CHILD_OPTS_INIT;
		o.out_fd = o.err_fd = srv_fd;
		o.new_group = 1;
		o.plain = !side;
		server = child_start(argv, &o);
		current_server = server;
		if (server < 0 || wait_ready(a, server, rundir, side) != 0) {
			show_tail("server", srv_fd);
			goto out;
		}
	}

	cli_fd = child_tmpfile();
	if (cli_fd < 0)
		goto out;
	if (build_argv(a, a->client, side, rundir, argv, opts, sizeof(opts)) < 0)
		goto out;
	struct child_opts o = CHILD_OPTS_INIT;
	o.out_fd = o.err_fd = cli_fd;
	o.new_group = 1;
	o.plain = !side;
	double t0 = mono_s();
	pid_t client = child_start(argv, &o);
	current_client = client;
	int st = 0, w = client > 0 ? child_wait(client, (int)(a->timeout * 1000), &st) : -1;
	double wall = mono_s() - t0;
	if (w == 1) {
		fprintf(stderr, "shunt ab: the %s client ran longer than %g s; stopped\n",
			side_name[side], a->timeout);
		child_stop(client, 1, 2000);
		show_tail("client", cli_fd);
		goto out;
	}
	if (w != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "shunt ab: the %s client failed (%s %d)\n", side_name[side],
			WIFEXITED(st) ? "exit status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		show_tail("client", cli_fd);
		goto out;
	}
	/* what the shunt side's live processes (the server) decided */
	if (side && a->server) {
		struct shunt_stat_totals t;
		if (shunt_statfile_sum(rundir, 0, &t)) {
			for (unsigned i = 0; i < SHUNT_STATS_TRANSPORTS; i++)
				a->stats.conns[i] += t.conns[i];
			for (unsigned i = 0; i < SHUNT_STATS_REASONS; i++)
				a->stats.fallbacks[i] += t.fallbacks[i];
			a->stats_runs++;
		}
	}

	char *text = child_slurp(cli_fd, NULL);
	if (!text)
		goto out;
	if (a->verbose)
		fprintf(stderr, "---- %s run %d: client output ----\n%s", side_name[side], run + 1,
			text);
	struct ab_figs figs = { 0 };
	const char *fmt = strcmp(a->format, "time") ? ab_parse(a->format, text, &figs) : NULL;
	free(text);
	if (strcmp(a->format, "auto") && strcmp(a->format, "time") && !fmt) {
		fprintf(stderr, "shunt ab: the %s client's output is not %s output\n",
			side_name[side], a->format);
		show_tail("client", cli_fd);
		goto out;
	}
	if (fmt && !a->format_seen)
		a->format_seen = fmt;
	for (int i = 0; i < figs.n; i++)
		add_fig(a, side, run, figs.f[i].name, figs.f[i].value, figs.f[i].higher_better);
	add_fig(a, side, run, "client wall time (s)", wall, 0);
	rc = 0;
out:
	current_client = 0;
	if (server > 0)
		child_stop(server, 1, 5000);
	current_server = 0;
	keep_output(a, srv_fd, "server", side, run);
	keep_output(a, cli_fd, "client", side, run);
	if (srv_fd >= 0)
		close(srv_fd);
	if (cli_fd >= 0)
		close(cli_fd);
	if (rundir[0])
		child_rmtree(rundir);
	return rc;
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

static void print_table(struct ab *a)
{
	char machine[512], cell[32];
	shunt_machine_describe(machine, sizeof(machine));
	printf("shunt ab: %d run(s) each way, plain and under shunt alternately\n", a->runs);
	if (a->server)
		printf("server:  %s\n", a->server);
	printf("client:  %s\n", a->client);
	printf("machine: %s\n", machine);
	printf("output:  %s\n\n", a->format_seen ? a->format_seen
			      : "no known format: compared by wall time");
	printf("%-32s %14s %14s %16s   %s\n", "figure", "plain (median)", "shunt (median)",
	       "ratio shunt/plain", "runs: plain | shunt");
	for (int i = 0; i < a->nnames; i++) {
		double med[2];
		for (int s = 0; s < 2; s++) {
			double v[MAX_RUNS];
			size_t n = 0;
			for (int r = 0; r < a->runs; r++)
				if (!isnan(a->v[s][i][r]))
					v[n++] = a->v[s][i][r];
			med[s] = median_d(v, n);
		}
		printf("%-32s", a->names[i]);
		for (int s = 0; s < 2; s++) {
			fmt(med[s], cell, sizeof(cell));
			printf(" %14s", cell);
		}
		if (!isnan(med[0]) && !isnan(med[1]) && med[0] > 0) {
			double x = med[1] / med[0];
			int better = a->higher_better[i] ? x > 1 : x < 1;
			snprintf(cell, sizeof(cell), "%.2fx %s", x,
				 fabs(x - 1) < 0.005 ? "(same)" : better ? "(better)" : "(worse)");
		} else {
			snprintf(cell, sizeof(cell), "-");
		}
		printf(" %17s  ", cell);
		for (int s = 0; s < 2; s++) {
			printf("%s", s ? " |" : "");
			for (int r = 0; r < a->runs; r++) {
				fmt(a->v[s][i][r], cell, sizeof(cell));
				printf(" %s", cell);
			}
		}
		printf("\n");
	}
	if (a->server) {
		char desc[512];
		shunt_statfile_describe(&a->stats, desc, sizeof(desc));
		printf("\nshunt side, the server's connections (library stats, %u run(s)): %s\n",
		       a->stats_runs, a->stats_runs ? desc : "none recorded");
	}
}

int shunt_cmd_ab(int argc, char **argv)
{
	enum { O_SERVER = 1, O_CLIENT, O_RUNS, O_PORT, O_FORMAT, O_TRANSPORT, O_OPTIONS,
	       O_READY, O_TIMEOUT, O_KEEP, O_HELP };
	static const struct option opts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "client", required_argument, NULL, O_CLIENT },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "port", required_argument, NULL, O_PORT },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "options", required_argument, NULL, O_OPTIONS },
		{ "ready-timeout", required_argument, NULL, O_READY },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "keep", required_argument, NULL, O_KEEP },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static struct ab ab;
	struct ab *a = &ab;
	memset(a, 0, sizeof(*a));
	a->runs = 3;
	a->format = "auto";
	a->ready_timeout = 30;
	a->timeout = 600;
	uint64_t u;
	char *e;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":vh", opts, NULL)) != -1) {
		switch (c) {
		case O_SERVER: a->server = optarg; break;
		case O_CLIENT: a->client = optarg; break;
		case O_RUNS:
			if (parse_u64(optarg, &u, 0) || !u || u > MAX_RUNS)
				return usage_error("--runs: expected 1..%d", MAX_RUNS);
			a->runs = (int)u;
			break;
		case O_PORT:
			if (parse_u64(optarg, &u, 0) || !u || u > 65535)
				return usage_error("--port: expected 1..65535");
			a->port = (int)u;
			break;
		case O_FORMAT: {
			int ok = !strcmp(optarg, "auto");
			for (int i = 0; ab_formats[i] && !ok; i++)
				ok = !strcmp(optarg, ab_formats[i]);
			if (!ok)
				return usage_error("--format: expected auto, sockperf, redis-benchmark, "
						   "iperf3, wrk or time");
			a->format = optarg;
			break;
		}
		case O_TRANSPORT: a->transport = optarg; break;
		case O_OPTIONS: a->options = optarg; break;
		case O_READY:
			a->ready_timeout = strtod(optarg, &e);
			if (e == optarg || *e || !(a->ready_timeout > 0 && a->ready_timeout <= 3600))
				return usage_error("--ready-timeout: expected seconds in (0, 3600]");
			break;
		case O_TIMEOUT:
			a->timeout = strtod(optarg, &e);
			if (e == optarg || *e || !(a->timeout > 0 && a->timeout <= 86400))
				return usage_error("--timeout: expected seconds in (0, 86400]");
			break;
		case O_KEEP: a->keep = optarg; break;
		case 'v': a->verbose = 1; break;
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
	if (!a->client || !a->client[0])
		return usage_error("--client is required");
	if (a->server && !a->server[0])
		return usage_error("--server: empty command");
	if (a->options && strlen(a->options) > 4000)
		return usage_error("--options: longer than 4000 bytes");
	if (a->transport) {
		static struct shunt_config scratch;
		char err[SHUNT_ERR_MAX];
		shunt_config_defaults(&scratch);
		if (shunt_config_set(&scratch, "default_transport", a->transport, "--transport",
				     err, sizeof(err)) != 0)
			return usage_error("%s", err);
	}
	if (a->keep && mkdir(a->keep, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "shunt ab: --keep %s: %s\n", a->keep, strerror(errno));
		return 1;
	}
	if (!child_self_exe())
		return 1;
	unsigned busy = 0;
	if (a->server && a->port && listening((unsigned)a->port, NULL, 0, &busy)) {
		fprintf(stderr, "shunt ab: port %d is already listening: stop what holds it, "
			"or choose another port\n", a->port);
		return 1;
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	for (int r = 0; r < a->runs; r++) {
		for (int k = 0; k < 2; k++) {
			int side = r % 2 ? !k : k; /* plain first in odd runs */
			fprintf(stderr, "shunt ab: run %d/%d, %s\n", r + 1, a->runs, side_name[side]);
			if (one_run(a, side, r) != 0)
				return 1;
		}
	}
	print_table(a);
	return 0;
}
