/* Child processes for the measuring subcommands (shunt bench, shunt ab):
 * start one (pinned, in its own process group, with its output where the
 * caller wants it), wait for it with a bound, stop it and its children, and
 * the private runtime directory their shunt side uses. */
#ifndef SHUNT_CHILD_H
#define SHUNT_CHILD_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

struct child_opts {
	int cpu;             /* pin to this CPU; -1: no pinning */
	int out_fd;          /* the child's stdout; -1: /dev/null */
	int err_fd;          /* the child's stderr; -1: /dev/null, -2: inherited */
	int new_group;       /* a process group of its own, so stopping it
			      * stops what it started (a shell's children) */
	int plain;           /* drop a libshunt.so from LD_PRELOAD: the A side */
};
#define CHILD_OPTS_INIT { .cpu = -1, .out_fd = -1, .err_fd = -2 }

/* fork + execvp; the pid, or -1 with a message printed. */
pid_t child_start(char *const argv[], const struct child_opts *o);

/* Wait up to timeout_ms (-1: for ever) for pid to exit.  0 with *status
 * set, 1 on timeout (the child runs on), -1 on error. */
int child_wait(pid_t pid, int timeout_ms, int *status);
/* The same, with the child's resource usage (its own and that of the
 * children it reaped, as wait4 gives it) in *ru when it exited. */
int child_wait_rusage(pid_t pid, int timeout_ms, int *status, struct rusage *ru);

/* SIGTERM to the child (its group when group is set), SIGKILL if it is still
 * there after grace_ms; reaped.  The exit status, as waitpid's. */
int child_stop(pid_t pid, int group, int grace_ms);

/* 1 when name is an executable file in a directory of $PATH (as execvp
 * would find it), else 0. */
int child_in_path(const char *name);

/* "A,B": two CPU numbers, each one this process may run on (pinning a
 * child elsewhere would fail only once it starts).  0, or -1 with a
 * message in err. */
int child_parse_cpus(const char *arg, int cpus[2], char *err, size_t errlen);

/* This executable (/proc/self/exe), to run "shunt run" from it. */
const char *child_self_exe(void);

/* A fresh private runtime directory for the shunt side of a measurement:
 * memory-backed when /dev/shm is, mode 0700, short enough for the library
 * (80 bytes).  0, or -1 with a message. */
int child_rundir(char *out, size_t len, const char *tag);

/* Remove a directory tree made by child_rundir (or any temporary one). */
void child_rmtree(const char *dir);

/* A temporary file for a child's output, already unlinked: its fd. */
int child_tmpfile(void);

/* The whole content of fd (from offset 0), NUL-terminated, malloc'ed;
 * NULL on error. */
char *child_slurp(int fd, size_t *len);

#endif
