#include "shunt_child.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* LD_PRELOAD without any libshunt.so entry (the plain side of an A/B must
 * not inherit the library from a shell that runs under it). */
static void drop_shunt_preload(void)
{
	const char *old = getenv("LD_PRELOAD");
	if (!old || !strstr(old, "libshunt"))
		return;
	char *copy = strdup(old), *save = NULL, out[4096] = "";
	if (!copy) {
		unsetenv("LD_PRELOAD");
		return;
	}
	for (char *t = strtok_r(copy, ": \t", &save); t; t = strtok_r(NULL, ": \t", &save)) {
		if (strstr(t, "libshunt"))
			continue;
		size_t l = strlen(out);
		snprintf(out + l, sizeof(out) - l, "%s%s", l ? ":" : "", t);
	}
	free(copy);
	if (out[0])
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

pid_t child_start(char *const argv[], const struct child_opts *o)
{
	/* Orphans of what we start (a shell's children) come to us, so
	 * child_stop can reap them and know they are gone. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "shunt: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		if (o->new_group)
			setpgid(pid, pid); /* also here: no race with a kill */
		return pid;
	}
	if (o->new_group)
		setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL);
	if (o->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(o->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0) {
			fprintf(stderr, "shunt: pin to CPU %d: %s\n", o->cpu, strerror(errno));
			_exit(127);
		}
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(null, 0);
	dup2(o->out_fd >= 0 ? o->out_fd : null, 1);
	if (o->err_fd != -2)
		dup2(o->err_fd >= 0 ? o->err_fd : null, 2);
	if (o->plain)
		drop_shunt_preload();
	execvp(argv[0], argv);
	fprintf(stderr, "shunt: %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int child_wait_rusage(pid_t pid, int timeout_ms, int *status, struct rusage *ru)
{
	int st;
	if (timeout_ms < 0) {
		while (wait4(pid, &st, 0, ru) < 0)
			if (errno != EINTR)
				return -1;
		*status = st;
		return 0;
	}
	/* a pidfd says when the child exits; without one, look every 10 ms */
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t end = mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		pid_t r = wait4(pid, &st, WNOHANG, ru);
		if (r == pid) {
			if (pfd >= 0)
				close(pfd);
			*status = st;
			return 0;
		}
		if (r < 0 && errno != EINTR) {
			if (pfd >= 0)
				close(pfd);
			return -1;
		}
		uint64_t now = mono_ms();
		if (now >= end) {
			if (pfd >= 0)
				close(pfd);
			return 1;
		}
		int left = (int)(end - now);
		if (pfd >= 0) {
			struct pollfd p = { .fd = pfd, .events = POLLIN };
			poll(&p, 1, left);
		} else {
			struct timespec ts = { 0, (left < 10 ? left : 10) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
}

int child_wait(pid_t pid, int timeout_ms, int *status)
{
	return child_wait_rusage(pid, timeout_ms, status, NULL);
}

int child_stop(pid_t pid, int group, int grace_ms)
{
	int st = 0;
	kill(group ? -pid : pid, SIGTERM);
	if (child_wait(pid, grace_ms, &st) != 0) {
		kill(group ? -pid : pid, SIGKILL);
		child_wait(pid, -1, &st);
	}
	if (group) {
		/* Whatever the group leader left behind (a shell's child): it
		 * must be gone, its sockets closed, before the caller starts
		 * the next server on the same port. */
		kill(-pid, SIGKILL);
		uint64_t end = mono_ms() + 5000;
		while (kill(-pid, 0) == 0 && mono_ms() < end) {
			/* We are their subreaper (child_start): reap them. */
			while (waitpid(-pid, NULL, WNOHANG) > 0)
				;
			struct timespec ts = { 0, 5 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return st;
}

int child_in_path(const char *name)
{
	const char *path = getenv("PATH");
	if (!path || !path[0])
		path = "/usr/local/bin:/usr/bin:/bin"; /* execvp's default, near enough */
	for (const char *p = path;;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char file[PATH_MAX];
		if (snprintf(file, sizeof(file), "%.*s/%s", (int)n, n ? p : ".", name) <
			    (int)sizeof(file) &&
		    access(file, X_OK) == 0)
			return 1;
		if (!colon)
			return 0;
		p = colon + 1;
	}
}

int child_parse_cpus(const char *arg, int cpus[2], char *err, size_t errlen)
{
	char *e;
	errno = 0;
	long a = strtol(arg, &e, 10), b = -1;
	if (e != arg && *e == ',' && e[1] >= '0' && e[1] <= '9')
		b = strtol(e + 1, &e, 10);
	if (errno || *e || a < 0 || b < 0 || a >= CPU_SETSIZE || b >= CPU_SETSIZE) {
		snprintf(err, errlen, "expected two CPU numbers A,B, got '%s'", arg);
		return -1;
	}
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < 2; i++)
			if (!CPU_ISSET(i ? b : a, &set)) {
				snprintf(err, errlen, "CPU %ld is not one this process may run on "
					 "(%d usable)", i ? b : a, CPU_COUNT(&set));
				return -1;
			}
	cpus[0] = (int)a;
	cpus[1] = (int)b;
	return 0;
}

const char *child_self_exe(void)
{
	static char path[PATH_MAX];
	if (!path[0]) {
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
		if (n <= 0)
			return NULL;
		path[n] = '\0';
	}
	return path;
}

int child_rundir(char *out, size_t len, const char *tag)
{
	static unsigned seq;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	for (int tries = 0; tries < 100; tries++) {
		if (snprintf(out, len, "%s/shunt-%s-%d-%u", base, tag, (int)getpid(), seq++) >=
		    (int)len) {
			fprintf(stderr, "shunt: runtime directory name too long\n");
			return -1;
		}
		if (mkdir(out, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	fprintf(stderr, "shunt: mkdir %s: %s\n", out, strerror(errno));
	return -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

void child_rmtree(const char *dir)
{
	if (dir && dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int child_tmpfile(void)
{
	const char *dir = getenv("TMPDIR");
	int fd = open(dir && dir[0] ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		char path[] = "/tmp/shunt-out-XXXXXX";
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		fprintf(stderr, "shunt: temporary file: %s\n", strerror(errno));
	return fd;
}

char *child_slurp(int fd, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	off_t off = 0;
	for (;;) {
		if (cap - n < 2) {
			char *b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return NULL;
			}
			buf = b;
			cap *= 2;
		}
		ssize_t r = pread(fd, buf + n, cap - n - 1, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		off += r;
	}
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}
