/* shunt bench: process groups seen through /proc.
 *
 * A server lives across the runs of a column, in a process group of its own
 * (child_start), so what it spent on one run is the difference of its CPU
 * time before and after.  Its CPU time is that of every process of its
 * group, each read from its CPU-time clock (clock_getcpuclockid: every
 * thread, live or exited, in ns; /proc/PID/stat would give 10 ms ticks, too
 * coarse for an idle connection).  A process of the group that exits during
 * a run is not counted: the benchmark servers start none.
 *
 * Clients are not read here: each is a child the tool reaps, so the
 * difference of getrusage(RUSAGE_CHILDREN) around a run is what its clients
 * used, whole, with what they waited for (shunt-ringbench's echoing child).
 *
 * The pinned placement moves the servers, already running, onto its CPU:
 * every thread of every process of the group, as sched_setaffinity sets one
 * thread at a time. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"

/* The process group of process pid, from /proc/PID/stat; -1 if gone.  The
 * name in parentheses may hold anything: the fields follow the last ')'. */
static pid_t pgrp_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	char state;
	int ppid, pgrp;
	if (!p || sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
		return -1;
	return (pid_t)pgrp;
}

/* Call fn(pid, arg) for every process whose group is one of pgid[0..n);
 * the index of that group is passed too. */
static void each_member(const pid_t *pgid, int n, void (*fn)(pid_t, int, void *), void *arg)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		pid_t g = pgrp_of(pid);
		for (int i = 0; g > 0 && i < n; i++)
			if (pgid[i] == g)
				fn(pid, i, arg);
	}
	closedir(d);
}

static void add_cpu(pid_t pid, int i, void *arg)
{
	int64_t *out = arg, ns = proc_cpu_ns(pid);
	if (ns > 0)
		out[i] += ns;
}

void bench_group_cpu_ns(const pid_t *pgid, int n, int64_t *out)
{
	for (int i = 0; i < n; i++)
		out[i] = 0;
	each_member(pgid, n, add_cpu, out);
}

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
	each_member(&pgid, 1, pin_process, &st);
	if (st.err || !st.threads) {
		errno = st.err ? st.err : ESRCH;
		return -1;
	}
	return 0;
}
