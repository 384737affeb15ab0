/* Reading the per-process counters libshunt.so keeps in <rundir>/s/<pid>
 * (layout in shunt_stats.h), for `shunt stat` and shuntd's /metrics.
 *
 * Reading needs no ptrace and sends no signal: the files are mapped
 * read-only.  A file whose owner is gone (its flock is free) is stale: it is
 * skipped and, when asked, removed.
 *
 * Typical use:
 *
 *     char dir[SHUNT_STATS_DIR_MAX], err[256];
 *     if (shunt_stats_rundir(NULL, dir, sizeof dir, err, sizeof err) < 0) ...
 *     shunt_stats_scan(dir, SHUNT_SCAN_CLEAN, each_process, ctx);
 *
 * each_process() gets a private copy (struct shunt_proc_snap) of one live
 * process: its header and its open connections.  Every counter in the copy
 * was read atomically; a connection that was being opened, demoted or
 * closed while it was copied is read again, so its identity (addresses,
 * transport, reason) and counters belong together. */
#ifndef SHUNT_STATS_READ_H
#define SHUNT_STATS_READ_H

#include <stddef.h>
#include <stdint.h>

#include "shunt_stats.h"

#define SHUNT_STATS_DIR_MAX 256

/* The rundir libshunt.so uses from this environment: override when not NULL
 * (as `--rundir`), else the configured `rundir` (SHUNT_CONFIG file,
 * SHUNT_RUNDIR, SHUNT_OPTIONS), else the first existing default, with the
 * library's own rules (config/shunt_rundir_path.h).  Never creates anything.
 * 0, or -1 with a one-line message in err. */
int shunt_stats_rundir(const char *override, char *out, size_t outlen, char *err,
		       size_t errlen);
/* The same, with why the library would choose that directory in why (the
 * rundir setting, or which defaults were tried and found absent or not
 * this user's; that none exists yet). */
int shunt_stats_rundir_why(const char *override, char *out, size_t outlen, char *why,
			   size_t whylen, char *err, size_t errlen);

/* One open connection: the slot's index in its file and a copy of it. */
struct shunt_conn_snap {
	unsigned slot;
	struct shunt_stat_slot s;
};

/* One live process. */
struct shunt_proc_snap {
	unsigned nconns;
	struct shunt_conn_snap *conns; /* nconns of them, by slot index */
	uint64_t mono_ns;              /* CLOCK_MONOTONIC when copied, for rates */
	/* Header copy; hdr.slots is not part of it.  Last: the header ends
	 * in a flexible array. */
	struct shunt_stats_file hdr;
};

/* Flags of shunt_stats_scan(). */
#define SHUNT_SCAN_CLEAN 0x1 /* remove stale files */
#define SHUNT_SCAN_ENDED 0x2 /* pass stale files too (the processes of a
				finished measurement), not removing them */

/* Calls fn for every live process file in <rundir>/s, in pid order.  fn's
 * snapshot is valid only during the call.  fn returning non-zero stops the
 * scan.  Files of a layout version this reader does not know are skipped
 * (and removed when stale and SHUNT_SCAN_CLEAN); hdr.version says which
 * one a file has (a version-2 file has no ring memory figures:
 * shunt_stats_has_rings).  Returns the number of processes passed to fn, or
 * -1 with errno when the directory cannot be read. *removed (may be NULL)
 * gets the number of stale files removed. */
int shunt_stats_scan(const char *rundir, int flags,
		     int (*fn)(const struct shunt_proc_snap *p, void *arg), void *arg,
		     unsigned *removed);

/* 1 when p's file says how much ring memory the process holds
 * (hdr.ring_reserved, hdr.ring_mapped); 0 for a library too old to. */
static inline int shunt_stats_has_rings(const struct shunt_proc_snap *p)
{
	return p->hdr.version >= SHUNT_STATS_VERSION_RINGS;
}

/* Totals of a process: its closed connections plus its open ones, by the
 * transport they are on now. */
void shunt_stats_totals(const struct shunt_proc_snap *p,
			struct shunt_stat_sum out[SHUNT_STATS_TRANSPORTS]);

/* Names as the library logs them: "shm", "fabric", "kernel"; "no-peer-shim"...
 * ("?" for a code this build does not know, "" for none). */
const char *shunt_stats_transport_name(unsigned transport);
const char *shunt_stats_reason_name(unsigned reason);
const char *shunt_stats_role_name(unsigned role);

/* "1.2.3.4:80" or "[::1]:80" from a slot's mapped address and port. */
void shunt_stats_format_addr(const uint8_t a[16], uint16_t port, char *buf, size_t len);

#endif
