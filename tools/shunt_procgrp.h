/* Process groups seen through /proc, for the measuring subcommands: each
 * starts its servers and clients in process groups of their own
 * (child_start) and reads their sockets and CPU time, or moves them, from
 * outside, without signalling or tracing them. */
#ifndef SHUNT_PROCGRP_H
#define SHUNT_PROCGRP_H

#include <stdint.h>
#include <sys/types.h>

/* The process group of process pid; -1 if it is gone. */
pid_t procgrp_of(pid_t pid);

/* fn(pid, i, arg) for every process whose group is pgid[i], i < n: one
 * pass over /proc. */
void procgrp_each(const pid_t *pgid, int n, void (*fn)(pid_t pid, int i, void *arg), void *arg);

/* The socket inodes of group pgid's processes (at most max); how many. */
int procgrp_sockets(pid_t pgid, unsigned long *inodes, int max);

/* CPU time (user + system) the processes of each group pgid[i] have used
 * so far, in ns, into out[i]: every thread's, live or exited, from each
 * process's CPU-time clock (ns precision), and that of the children each
 * reaped (from /proc/PID/stat, in clock ticks: a fork-per-connection
 * server's).  A process that left the group, or was reaped by someone
 * outside it, takes its share with it. */
void procgrp_cpu_ns(const pid_t *pgid, int n, int64_t *out);

#endif
