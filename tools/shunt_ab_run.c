/* shunt ab: one run of one side.
 *
 * The server is started (through /bin/sh, in a process group of its own,
 * on its CPU with --cpus), the client runs once the server listens, then
 * the server is stopped: every run starts from a fresh server.  The shunt
 * side runs under `shunt run` with a private runtime directory, which also
 * tells, from the library's counters, which transport its connections
 * took.
 *
 * Readiness: with --port, a socket listening on that port (read from
 * /proc/net/tcp and tcp6; no probe connection, which some servers would
 * take for a client); without, any listening TCP socket of the server's
 * processes.  Under shunt, also the listener's entry in the registry, so
 * the client cannot connect before shm can be offered.
 *
 * CPU time: the client's from wait4 (itself and the children it reaped);
 * the server's as the difference of its process group's (procgrp_cpu_ns)
 * from just before the client starts to just after it ends, so its
 * start-up and shutdown are not counted. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "core/shunt_regname.h"
#include "shunt_ab.h"
#include "shunt_ab_sockperf.h"
#include "shunt_child.h"
#include "shunt_procgrp.h"

const char *const ab_side_name[2] = { "plain", "shunt" };

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

void ab_catch_signals(void)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}

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

int ab_port_listening(unsigned port)
{
	unsigned found;
	return listening(port, NULL, 0, &found);
}

/* Has a shunt listener registered port in rundir? */
static int registered(const char *rundir, unsigned port)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/l", rundir);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int found = 0;
	for (struct dirent *de; !found && (de = readdir(d));) {
		struct shunt_regname r;
		found = shunt_regname_parse(de->d_name, &r) == 0 && r.port == port;
	}
	closedir(d);
	return found;
}

/* Wait until the server listens (and, under shunt, is registered).
 * 0 ready, -1 it exited or the time ran out (why in run->error). */
static int wait_ready(const struct ab *a, pid_t pid, const char *rundir, int shunt,
		      struct ab_run *run)
{
	double end = mono_s() + a->ready_timeout, reg_end = 0;
	unsigned long inodes[256];
	unsigned port = 0;
	for (;;) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			snprintf(run->error, sizeof(run->error),
				 "the server exited before it listened (%s %d)",
				 WIFEXITED(st) ? "exit status" : "signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return -1;
		}
		if (!port) {
			if (a->port)
				listening((unsigned)a->port, NULL, 0, &port);
			else
				listening(0, inodes, procgrp_sockets(pid, inodes, 256), &port);
			if (port)
				reg_end = mono_s() + 2;
		}
		/* a listener shunt did not register (a rule kept it on the
		 * kernel path) is ready after a grace period */
		if (port && (!shunt || registered(rundir, port) || mono_s() > reg_end))
			return 0;
		if (mono_s() > end) {
			snprintf(run->error, sizeof(run->error),
				 "the server did not listen%s%.0d within %g s",
				 a->port ? " on port " : "", a->port, a->ready_timeout);
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000000L }; /* polling a state, with a bound */
		nanosleep(&ts, NULL);
	}
}

/* ---- output ------------------------------------------------------------- */

static void keep_output(const struct ab *a, int fd, const char *what, int side, int r,
			int warmup)
{
	if (!a->keep || fd < 0)
		return;
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s%s-%s-%d.txt", a->keep, warmup ? "warmup-" : "",
		 what, ab_side_name[side], r + 1);
	char *text = child_slurp(fd, NULL);
	FILE *f = text ? fopen(path, "w") : NULL;
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	free(text);
}

/* The last lines of fd's output (at most 8, and what fits) into run->tail,
 * and on stderr; sockperf's overflow is explained in run->error. */
static void failed_output(const char *what, int fd, struct ab_run *run)
{
	char *text = fd >= 0 ? child_slurp(fd, NULL) : NULL;
	if (!text)
		return;
	size_t n = strlen(text);
	while (n && text[n - 1] == '\n')
		text[--n] = '\0';
	const char *p = text + n;
	for (int lines = 0; p > text && lines < 8 && (size_t)(text + n - p) < sizeof(run->tail) - 1;)
		if (*--p == '\n')
			lines++;
	if (*p == '\n')
		p++;
	size_t keep = strlen(p);
	if (keep >= sizeof(run->tail))
		p += keep - (sizeof(run->tail) - 1);
	snprintf(run->tail, sizeof(run->tail), "%s", p);
	fprintf(stderr, "---- %s output (end) ----\n%s\n---- end ----\n", what, run->tail);
	if (ab_sockperf_overflowed(text)) {
		size_t l = strlen(run->error);
		snprintf(run->error + l, sizeof(run->error) - l,
			 ": sockperf's message-rate window overflowed (the run went faster than "
			 "--mps allows for); pass a larger --mps, e.g. %s", AB_SOCKPERF_MPS);
	}
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
		if (a->env.config) {
			argv[n++] = "--config";
			argv[n++] = (char *)a->env.config_abs;
		}
		if (a->env.transport) {
			argv[n++] = "--transport";
			argv[n++] = (char *)a->env.transport;
		}
		if (snprintf(opts, optslen, "rundir=%s%s%s", rundir, a->env.options ? "," : "",
			     a->env.options ? a->env.options : "") >= (int)optslen)
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

static void add_fig(struct ab *a, int side, int r, const char *name, double v, int hb)
{
	int i;
	for (i = 0; i < a->nnames && strcmp(a->names[i], name); i++)
		;
	if (i == a->nnames) {
		if (a->nnames == AB_MAX_NAMES)
			return;
		snprintf(a->names[i], sizeof(a->names[i]), "%s", name);
		a->higher_better[i] = hb;
		for (int s = 0; s < 2; s++)
			for (int k = 0; k < AB_MAX_RUNS; k++)
				a->v[s][i][k] = NAN;
		a->nnames++;
	}
	a->v[side][i][r] = v;
}

/* The figures of a successful run: the client's, its wall time, and the
 * CPU time of each end, per run and per operation when the client said
 * how many it made. */
static void record(struct ab *a, int side, int r, const struct ab_figs *figs,
		   const struct ab_run *run)
{
	for (int i = 0; i < figs->n; i++)
		add_fig(a, side, r, figs->f[i].name, figs->f[i].value, figs->f[i].higher_better);
	add_fig(a, side, r, "client wall time (s)", run->wall_s, 0);
	if (a->server)
		add_fig(a, side, r, "server CPU (s)", run->server_cpu_s, 0);
	add_fig(a, side, r, "client CPU (s)", run->client_cpu_s, 0);
	if (run->ops > 0) {
		if (a->server)
			add_fig(a, side, r, "server CPU per op (us)",
				run->server_cpu_s / run->ops * 1e6, 0);
		add_fig(a, side, r, "client CPU per op (us)", run->client_cpu_s / run->ops * 1e6, 0);
	}
}

/* ---- one run ------------------------------------------------------------ */

/* Start the server or the client ("server", "client") of side: in a
 * process group of its own, on its CPU with --cpus, its output into a new
 * temporary file (*fd).  The pid, or -1 with why in run->error. */
static pid_t start(const struct ab *a, const char *what, int side, const char *rundir, int *fd,
		   struct ab_run *run)
{
	int is_server = !strcmp(what, "server");
	char opts[4200], *argv[20];
	*fd = child_tmpfile();
	struct child_opts o = CHILD_OPTS_INIT;
	o.out_fd = o.err_fd = *fd;
	o.new_group = 1;
	o.plain = !side;
	o.cpu = a->cpus[is_server ? 1 : 0]; /* client first, as shunt bench */
	pid_t pid = *fd >= 0 && build_argv(a, is_server ? a->server : a->client, side, rundir,
					   argv, opts, sizeof(opts)) >= 0
			    ? child_start(argv, &o)
			    : -1;
	if (pid < 0)
		snprintf(run->error, sizeof(run->error), "cannot start the %s", what);
	return pid;
}

int ab_run_one(struct ab *a, int side, int r, int warmup)
{
	char rundir[128] = "";
	pid_t server = 0;
	int srv_fd = -1, cli_fd = -1, rc = -1;
	struct ab_run scratch, *run = warmup ? &scratch : &a->run[side][r];
	memset(run, 0, sizeof(*run));
	run->done = 1;
	if (side && child_rundir(rundir, sizeof(rundir), "ab") != 0) {
		snprintf(run->error, sizeof(run->error), "no private runtime directory");
		goto out;
	}

	if (a->server) {
		server = start(a, "server", side, rundir, &srv_fd, run);
		current_server = server;
		if (server < 0)
			goto out;
		if (wait_ready(a, server, rundir, side, run) != 0) {
			failed_output("server", srv_fd, run);
			goto out;
		}
	}

	int64_t srv_cpu[2] = { 0, 0 };
	if (server > 0)
		procgrp_cpu_ns(&server, 1, &srv_cpu[0]);
	double t0 = mono_s();
	pid_t client = start(a, "client", side, rundir, &cli_fd, run);
	current_client = client;
	if (client < 0)
		goto out;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	int st = 0, w = child_wait_rusage(client, (int)(a->timeout * 1000), &st, &ru);
	run->wall_s = mono_s() - t0;
	if (server > 0) {
		procgrp_cpu_ns(&server, 1, &srv_cpu[1]);
		run->server_cpu_s = (double)(srv_cpu[1] - srv_cpu[0]) / 1e9;
	}
	run->client_cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	if (w == 1) {
		snprintf(run->error, sizeof(run->error), "the client ran longer than %g s; stopped",
			 a->timeout);
		child_stop(client, 1, 2000);
		failed_output("client", cli_fd, run);
		goto out;
	}
	if (w != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(run->error, sizeof(run->error), "the client failed (%s %d)",
			 w != 0 ? "error" : WIFEXITED(st) ? "exit status" : "signal",
			 w != 0 ? w : WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		failed_output("client", cli_fd, run);
		goto out;
	}
	/* What the shunt side decided: the server's live processes, which
	 * saw every connection, or without a server the client's, ended. */
	if (side)
		run->have_stats = a->server ? shunt_statfile_sum(rundir, 0, &run->stats) > 0
					    : shunt_statfile_sum_ended(rundir, &run->stats) > 0;

	char *text = child_slurp(cli_fd, NULL);
	if (!text) {
		snprintf(run->error, sizeof(run->error), "cannot read the client's output");
		goto out;
	}
	if (a->verbose)
		fprintf(stderr, "---- %s run %d: client output ----\n%s", ab_side_name[side], r + 1,
			text);
	struct ab_figs figs = { 0 };
	const char *fmt = strcmp(a->format, "time") ? ab_parse(a->format, text, &figs) : NULL;
	free(text);
	if (strcmp(a->format, "auto") && strcmp(a->format, "time") && !fmt) {
		snprintf(run->error, sizeof(run->error), "the client's output is not %s output",
			 a->format);
		failed_output("client", cli_fd, run);
		goto out;
	}
	if (fmt && !a->format_seen)
		a->format_seen = fmt;
	run->ops = figs.ops;
	if (!warmup)
		record(a, side, r, &figs, run);
	run->ok = 1;
	rc = 0;
out:
	current_client = 0;
	if (server > 0)
		child_stop(server, 1, 5000);
	current_server = 0;
	if (!run->ok)
		fprintf(stderr, "shunt ab: %s%s run %d: %s\n", warmup ? "warm-up, " : "",
			ab_side_name[side], r + 1, run->error);
	keep_output(a, srv_fd, "server", side, r, warmup);
	keep_output(a, cli_fd, "client", side, r, warmup);
	if (srv_fd >= 0)
		close(srv_fd);
	if (cli_fd >= 0)
		close(cli_fd);
	if (rundir[0])
		child_rmtree(rundir);
	return rc;
}
