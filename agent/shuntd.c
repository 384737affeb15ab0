/* shuntd: the per-host agent of shunt (see shuntd(8)).
 *
 *   shuntd [--listen ADDR] [--config FILE] [--daemon] [--pidfile FILE] [-v]
 *          [--sockmap | --sockmap-off]
 *
 * Reads the same shunt.conf as the shims (agent_port, rundir, agent_secret
 * or agent_secret_file, agent_timeout_ms, and its own countersign_key_file),
 * listens on agent_port (TCP) and
 * on <rundir>/agent.sock, and serves until SIGTERM or SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <shunt/version.h>

#include "shuntd.h"
#include "shuntd_net.h"
#include "core/shunt_rundir_layout.h"
#include "core/shunt_stats_read.h"
#include "shuntd_pending.h"
#include "shuntd_sockmap.h"

#define SWEEP_MS 5000
#define REAP_MS 100
#define PENDING_MS 1000

struct shuntd shuntd;

void shuntd_log(const char *fmt, ...)
{
	char line[512];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ", &tm);
	n += snprintf(line + n, sizeof line - (size_t)n, " shuntd[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	if (n < (int)sizeof line)
		n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof line - 1)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (write(2, line, (size_t)n) < 0) {
		/* nowhere else to say it */
	}
}

static const char *env(const char *name)
{
	return getenv(name);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shuntd [--listen ADDR] [--config FILE] [--daemon] [--pidfile FILE] [-v]\n"
		"              [--sockmap | --sockmap-off]\n"
		"  --listen ADDR   TCP address to listen on (default: every address)\n"
		"  --config FILE   configuration file (default $SHUNT_CONFIG or %s)\n"
		"  --daemon        detach (logs then go to /dev/null: prefer the foreground)\n"
		"  --pidfile FILE  write the pid there\n"
		"  -v, --verbose   log every request\n"
		"  --sockmap       also run the sockmap path (as sockmap = on; root)\n"
		"  --sockmap-off   detach and remove the sockmap path's pins, and exit\n"
		"  --version       print the version\n"
		"Keys read from shunt.conf: agent_port, rundir, agent_secret,\n"
		"agent_secret_file, agent_timeout_ms, countersign_key_file, sockmap,\n"
		"sockmap_cgroup, sockmap_pin. See shuntd(8).\n",
		SHUNT_DEFAULT_CONFIG);
}

static void on_signal(struct ev_loop *el, int fd, void *data, int mask)
{
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			shuntd_log("signal %u: shutting down", si.ssi_signo);
			ev_stop(el);
		}
	}
}

/* How many clients the fds allow: the soft RLIMIT_NOFILE raised to the hard
 * one (the event loop watches fds below EV_MAX_FDS), less what the agent
 * keeps for itself. */
static unsigned fd_budget(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return SHUNTD_MAX_CLIENTS;
	rlim_t want = rl.rlim_max < EV_MAX_FDS ? rl.rlim_max : EV_MAX_FDS;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	rlim_t room = rl.rlim_cur > 2 * SHUNTD_FD_RESERVE ? rl.rlim_cur - SHUNTD_FD_RESERVE
							  : rl.rlim_cur / 2;
	return room < SHUNTD_MAX_CLIENTS ? (unsigned)(room ? room : 1) : SHUNTD_MAX_CLIENTS;
}

static int daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return chdir("/");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, 0, 'l'}, {"config", required_argument, 0, 'c'},
		{"daemon", no_argument, 0, 'd'},       {"pidfile", required_argument, 0, 'p'},
		{"verbose", no_argument, 0, 'v'},      {"version", no_argument, 0, 'V'},
		{"help", no_argument, 0, 'h'},	       {"sockmap", no_argument, 0, 'S'},
		{"sockmap-off", no_argument, 0, 'O'},  {0, 0, 0, 0},
	};
	const char *listen_addr = NULL, *pidfile = NULL;
	int daemon = 0, c, sockmap = 0, sockmap_off = 0;
	while ((c = getopt_long(argc, argv, "l:c:dp:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_addr = optarg;
			break;
		case 'c':
			setenv("SHUNT_CONFIG", optarg, 1);
			break;
		case 'd':
			daemon = 1;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'v':
			shuntd.log_debug = 1;
			break;
		case 'V':
			printf("shuntd %s\n", SHUNT_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case 'S':
			sockmap = 1;
			break;
		case 'O':
			sockmap_off = 1;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (pidfile && pidfile[0] != '/') {
		fprintf(stderr, "shuntd: --pidfile must be an absolute path\n");
		return 2;
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	char err[SHUNT_ERR_MAX];
	if (shunt_config_load(&shuntd.cfg, env, err, sizeof err) < 0) {
		fprintf(stderr, "shuntd: %s\n", err);
		return 1;
	}
	if (shuntd.cfg.log_level >= SHUNT_LOG_DEBUG)
		shuntd.log_debug = 1;
	if (sockmap_off) {
		if (sockmap_clean(&shuntd.cfg, err, sizeof err) < 0) {
			fprintf(stderr, "shuntd: %s\n", err);
			return 1;
		}
		return 0;
	}
	if (sockmap)
		shuntd.cfg.sockmap = 1;
	shuntd.secret_len = agent_secret_get(&shuntd.cfg, shuntd.secret, sizeof shuntd.secret,
					     err, sizeof err);
	if (shuntd.secret_len < 0) {
		fprintf(stderr, "shuntd: %s\n", err);
		return 1;
	}
	/* Before rundir_prepare: root's agent then reads files as the
	 * rundir's owner, who must not be able to read this key. */
	if (shuntd.cfg.countersign_key_file[0]) {
		shuntd.csign_len = agent_countersign_key_read(shuntd.cfg.countersign_key_file,
							      (char *)shuntd.csign_key,
							      sizeof shuntd.csign_key, err, sizeof err);
		if (shuntd.csign_len < 0) {
			fprintf(stderr, "shuntd: %s\n", err);
			return 1;
		}
	}
	shuntd.max_clients = fd_budget();
	/* A request is one frame; a peer gets a few times its own bound. */
	shuntd.client_timeout_ms = shuntd.cfg.agent_timeout_ms * 4;
	if (shuntd.client_timeout_ms < 1000)
		shuntd.client_timeout_ms = 1000;
	if (shunt_stats_rundir(NULL, shuntd.rundir, sizeof shuntd.rundir, err, sizeof err) < 0 ||
	    rundir_prepare(shuntd.rundir, err, sizeof err) < 0) {
		fprintf(stderr, "shuntd: %s\n", err);
		return 1;
	}

	/* Signals arrive as events; SIGPIPE never (every send is MSG_NOSIGNAL,
	 * but be sure). */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	/* Blocked from here on (a daemon's child inherits the mask): one that
	 * arrives during startup is read from the signalfd and still ends in
	 * a clean exit. */
	sigprocmask(SIG_BLOCK, &set, NULL);

	int tfd = net_tcp_listen(listen_addr, shuntd.cfg.agent_port, err, sizeof err);
	if (tfd < 0) {
		fprintf(stderr, "shuntd: %s\n", err);
		return 1;
	}
	char upath[300];
	snprintf(upath, sizeof upath, "%s/%s", shuntd.rundir, SHUNT_AGENT_SOCK);
	/* The rundir owner's (root's agent acts as the owner there), and its
	 * group's in a shared rundir: connecting needs write permission.  Set
	 * by the umask at bind, never by a chmod of a path someone could
	 * have swapped since. */
	struct stat rst;
	shuntd.rundir_shared = stat(shuntd.rundir, &rst) == 0 && (rst.st_mode & 02070) == 02070;
	mode_t um = umask(shuntd.rundir_shared ? 0117 : 0177);
	int ufd = net_unix_listen(upath, err, sizeof err);
	umask(um);
	if (ufd < 0) {
		fprintf(stderr, "shuntd: %s\n", err);
		return 1;
	}
	/* Before detaching, so that what stops it is said where it is run;
	 * the agent serves without it. */
	if (shuntd.cfg.sockmap) {
		if (sockmap_start(&shuntd.cfg, err, sizeof err) < 0)
			shuntd_log("%s; serving without it", err);
		else
			atexit(sockmap_stop); /* every way out but a signal's */
	}
	if (daemon && daemonize() < 0) {
		fprintf(stderr, "shuntd: --daemon: %s\n", strerror(errno));
		return 1;
	}
	if (pidfile) {
		shuntd_outside_rundir(1);
		FILE *pf = fopen(pidfile, "we");
		if (!pf || fprintf(pf, "%d\n", (int)getpid()) < 0 || fclose(pf) != 0) {
			fprintf(stderr, "shuntd: --pidfile %s: %s\n", pidfile, strerror(errno));
			return 1;
		}
		if (shuntd_outside_rundir(0) < 0) {
			fprintf(stderr, "shuntd: cannot act as the rundir's owner again\n");
			return 1;
		}
	}
	int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	shuntd.el = ev_create();
	if (sfd < 0 || !shuntd.el ||
	    ev_watch(shuntd.el, sfd, EV_READ, on_signal, NULL) < 0 ||
	    ev_watch(shuntd.el, tfd, EV_READ, client_accept, NULL) < 0 ||
	    ev_watch(shuntd.el, ufd, EV_READ, client_accept, (void *)1) < 0 ||
	    ev_every(shuntd.el, REAP_MS, client_reap, NULL) < 0 ||
	    ev_every(shuntd.el, PENDING_MS, pending_tick, NULL) < 0 ||
	    ev_every(shuntd.el, SWEEP_MS, rundir_sweep, NULL) < 0) {
		fprintf(stderr, "shuntd: event loop: %s\n", strerror(errno));
		return 1;
	}
	shuntd_log("serving on %s port %u and %s, rundir %s, up to %u clients%s%s",
		   listen_addr ? listen_addr : "*", (unsigned)shuntd.cfg.agent_port, upath,
		   shuntd.rundir, shuntd.max_clients, shuntd.secret_len ? ", secret required" : "",
		   shuntd.csign_len ? ", offers countersigned" : "");
	rundir_sweep(shuntd.el, NULL);
	int rc = ev_run(shuntd.el);
	sockmap_stop();
	client_close_all();
	pending_clear();
	close(tfd);
	close(ufd);
	unlink(upath);
	if (pidfile && shuntd_outside_rundir(1) == 0)
		unlink(pidfile);
	ev_free(shuntd.el);
	memset(shuntd.secret, 0, sizeof shuntd.secret);
	memset(shuntd.csign_key, 0, sizeof shuntd.csign_key);
	shuntd_log("stopped");
	return rc < 0 ? 1 : 0;
}
