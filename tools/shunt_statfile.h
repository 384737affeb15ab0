/* What the library's per-process counters (<rundir>/s/<pid>, read with
 * core/shunt_stats_read.h) say about the connections of a measurement: how
 * many took each transport and why the others stayed on the kernel path.
 * shunt bench and shunt ab use them to show that the shunt side really was
 * accelerated. */
#ifndef SHUNT_STATFILE_H
#define SHUNT_STATFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/shunt_stats.h"

struct shunt_stat_totals {
	unsigned procs;                              /* live processes counted */
	uint64_t conns[SHUNT_STATS_TRANSPORTS];      /* decided, by enum shunt_transport */
	uint64_t fallbacks[SHUNT_STATS_REASONS];     /* kernel path, by reason */
};

/* The decisions of the live process pid (0: of every live process using
 * rundir).  The number of processes counted. */
unsigned shunt_statfile_sum(const char *rundir, pid_t pid, struct shunt_stat_totals *t);

/* The decisions of every process that used rundir, those that have
 * ended included (a finished measurement's private rundir).  The number
 * of processes counted. */
unsigned shunt_statfile_sum_ended(const char *rundir, struct shunt_stat_totals *t);

/* after - before, counter by counter. */
void shunt_statfile_delta(const struct shunt_stat_totals *after,
			  const struct shunt_stat_totals *before, struct shunt_stat_totals *out);

/* "shm 3, fabric 0, kernel 1 (no-peer-shim 1)" into buf. */
void shunt_statfile_describe(const struct shunt_stat_totals *t, char *buf, size_t len);

#endif
