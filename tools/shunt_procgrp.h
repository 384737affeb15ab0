/* The processes of a process group, read from /proc: what shunt ab needs
 * to know of the server it started (its sockets, its CPU time) without
 * signalling or tracing it. */
#ifndef SHUNT_PROCGRP_H
#define SHUNT_PROCGRP_H

#include <sys/types.h>

/* fn(pid, arg) for every process in process group pgrp; how many. */
int procgrp_each(pid_t pgrp, void (*fn)(pid_t pid, void *arg), void *arg);

/* The socket inodes of the group's processes (at most max); how many. */
int procgrp_sockets(pid_t pgrp, unsigned long *inodes, int max);

/* CPU time, user and system, of the group's processes in seconds: their
 * own and that of the children they reaped.  A process that left the
 * group between two readings takes its share with it: compare readings of
 * a group whose members stay (a server) or that reap their own. */
double procgrp_cpu_s(pid_t pgrp);

#endif
