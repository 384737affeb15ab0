#include "shunt_statfile.h"

#include <stdio.h>
#include <string.h>

#include "config/shunt_config.h"
#include "core/shunt_stats_read.h"

struct sum_arg {
	pid_t pid;
	struct shunt_stat_totals *t;
};

static int add_proc(const struct shunt_proc_snap *p, void *arg)
{
	struct sum_arg *a = arg;
	if (a->pid > 0 && p->hdr.pid != a->pid)
		return 0;
	for (unsigned i = 0; i < SHUNT_STATS_TRANSPORTS; i++)
		a->t->conns[i] += p->hdr.conns[i];
	for (unsigned i = 0; i < SHUNT_STATS_REASONS; i++)
		a->t->fallbacks[i] += p->hdr.fallbacks[i];
	a->t->procs++;
	return 0;
}

static unsigned sum(const char *rundir, pid_t pid, int flags, struct shunt_stat_totals *t)
{
	struct sum_arg a = { pid, t };
	memset(t, 0, sizeof(*t));
	if (shunt_stats_scan(rundir, flags, add_proc, &a, NULL) < 0)
		return 0;
	return t->procs;
}

unsigned shunt_statfile_sum(const char *rundir, pid_t pid, struct shunt_stat_totals *t)
{
	return sum(rundir, pid, 0, t);
}

unsigned shunt_statfile_sum_ended(const char *rundir, struct shunt_stat_totals *t)
{
	return sum(rundir, 0, SHUNT_SCAN_ENDED, t);
}

void shunt_statfile_delta(const struct shunt_stat_totals *after,
			  const struct shunt_stat_totals *before, struct shunt_stat_totals *out)
{
	out->procs = after->procs;
	for (unsigned i = 0; i < SHUNT_STATS_TRANSPORTS; i++)
		out->conns[i] = after->conns[i] - before->conns[i];
	for (unsigned i = 0; i < SHUNT_STATS_REASONS; i++)
		out->fallbacks[i] = after->fallbacks[i] - before->fallbacks[i];
}

void shunt_statfile_describe(const struct shunt_stat_totals *t, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "shm %llu, fabric %llu, kernel %llu",
				    (unsigned long long)t->conns[SHUNT_TP_SHM],
				    (unsigned long long)t->conns[SHUNT_TP_FABRIC],
				    (unsigned long long)t->conns[SHUNT_TP_KERNEL]);
	int first = 1;
	for (unsigned i = 1; i < SHUNT_STATS_REASONS && n < len; i++) {
		if (!t->fallbacks[i])
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s %llu", first ? " (" : ", ",
				      shunt_stats_reason_name(i),
				      (unsigned long long)t->fallbacks[i]);
		first = 0;
	}
	if (!first && n < len)
		snprintf(buf + n, len - n, ")");
}
