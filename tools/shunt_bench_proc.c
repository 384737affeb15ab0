/* shunt bench: what it reads and does to its process groups beyond
 * shunt_procgrp.c.
 *
 * A server lives across the runs of a column, in a process group of its own
 * (child_start), so what it spent on one run is the difference of its
 * group's CPU time (procgrp_cpu_ns) before and after.
 *
 * Clients are not read that way: each is a child the tool reaps, so the
 * difference of getrusage(RUSAGE_CHILDREN) around a run is what its clients
 * used, whole, with what they waited for (shunt-ringbench's echoing child).
 *
 * The pinned placement moves the servers, already running, onto its CPU:
 * every thread of every process of the group, as sched_setaffinity sets one
 * thread at a time. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"
#include "shunt_child.h"
#include "shunt_procgrp.h"

int64_t bench_children_cpu_ns(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return 0;
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

struct pin_state {
	const cpu_set_t *set;
	int err;        /* first errno */
	int threads;    /* threads moved */
};

static void pin_process(pid_t pid, int i, void *arg)
{
	(void)i;
	struct pin_state *st = arg;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return; /* gone meanwhile */
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t tid = (pid_t)atoi(e->d_name);
		if (sched_setaffinity(tid, sizeof(*st->set), st->set) == 0)
			st->threads++;
		else if (errno != ESRCH && !st->err)
			st->err = errno;
	}
	closedir(d);
}

int bench_group_pin(pid_t pgid, const cpu_set_t *set)
{
	struct pin_state st = { .set = set };
	procgrp_each(&pgid, 1, pin_process, &st);
	if (st.err || !st.threads) {
		errno = st.err ? st.err : ESRCH;
		return -1;
	}
	return 0;
}

int bench_shuntd_start(char *const prefix[], const char *conf, pid_t *pid, char *log,
		       size_t loglen, int *log_fd)
{
	char exe[4096];
	log[0] = '\0';
	*pid = -1;
	if (log_fd)
		*log_fd = -1;
	snprintf(exe, sizeof(exe), "%s", child_self_exe());
	char *slash = strrchr(exe, '/');
	if (!slash || snprintf(slash + 1, sizeof(exe) - (size_t)(slash + 1 - exe), "shuntd") >=
			      (int)(sizeof(exe) - (size_t)(slash + 1 - exe)) ||
	    access(exe, X_OK) != 0) {
		snprintf(log, loglen, "shuntd not found next to shunt (%s)", exe);
		return -1;
	}
	char *argv[16];
	int k = 0;
	while (prefix && prefix[k] && k < 12) {
		argv[k] = prefix[k];
		k++;
	}
	argv[k++] = exe;
	argv[k++] = "--config";
	argv[k++] = (char *)conf;
	argv[k] = NULL;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		snprintf(log, loglen, "pipe: %s", strerror(errno));
		return -1;
	}
	struct child_opts o = CHILD_OPTS_INIT;
	o.err_fd = pfd[1];
	o.new_group = 1;
	o.plain = 1;
	*pid = child_start(argv, &o);
	close(pfd[1]);
	/* Its log goes to the pipe; "serving on" once it listens.  Read until
	 * then, and let the rest go (the pipe closes with us). */
	size_t n = 0;
	int ok = 0;
	while (*pid > 0 && n < loglen - 1 && !ok) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		if (poll(&p, 1, 10000) <= 0)
			break;
		ssize_t r = read(pfd[0], log + n, loglen - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		log[n] = '\0';
		ok = strstr(log, "serving on") != NULL;
	}
	if (log_fd)
		*log_fd = pfd[0];
	else
		close(pfd[0]);
	if (!ok && !n)
		snprintf(log, loglen, "(no output)");
	return ok ? 0 : -1;
}
