/* Process events: fork keeps every connection (rings are MAP_SHARED); exec
 * and spawn first demote what the new program would inherit, because it may
 * run without shunt and must find plain sockets. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/shunt_conn.h"
#include "core/shunt_real.h"
#include "core/shunt_spill.h"

SHUNT_EXPORT pid_t fork(void)
{
	shunt_before_fork();
	pid_t pid = REAL(fork)();
	int err = errno;
	if (pid == 0)
		shunt_after_fork_child();
	else
		shunt_after_fork_parent();
	errno = err;
	return pid;
}

/* A vfork child shares the parent's memory and stack until it execs: any
 * shunt bookkeeping there (exec demotion) would corrupt the parent.  So
 * vfork is a fork; the only visible difference is speed. */
SHUNT_EXPORT pid_t vfork(void)
{
	return fork();
}

/* Each exec demotes what the new program inherits; bytes with nowhere
 * else to go (shunt_spill.h) travel in SHUNT_SPILL of the environment it
 * gets.  The variants without an environment use environ's, passed
 * explicitly so it can carry them. */
#define EXEC_WITH_SPILLS(env, call)                                             \
	do {                                                                    \
		shunt_conn_before_exec();                                       \
		char *const *orig_ = (env);                                     \
		char *const *e_ = shunt_spill_exec_env(orig_);                  \
		int rc_ = (call);                                               \
		int err_ = errno;                                               \
		shunt_spill_exec_done(e_, orig_);                             \
		errno = err_;                                                   \
		return rc_;                                                     \
	} while (0)

SHUNT_EXPORT int execve(const char *p, char *const a[], char *const e[])
{
	EXEC_WITH_SPILLS(e, REAL(execve)(p, a, e_));
}

SHUNT_EXPORT int execv(const char *p, char *const a[])
{
	EXEC_WITH_SPILLS(environ, REAL(execve)(p, a, e_));
}

SHUNT_EXPORT int execvp(const char *f, char *const a[])
{
	EXEC_WITH_SPILLS(environ, REAL(execvpe)(f, a, e_));
}

SHUNT_EXPORT int execvpe(const char *f, char *const a[], char *const e[])
{
	EXEC_WITH_SPILLS(e, REAL(execvpe)(f, a, e_));
}

SHUNT_EXPORT int fexecve(int fd, char *const a[], char *const e[])
{
	EXEC_WITH_SPILLS(e, REAL(fexecve)(fd, a, e_));
}

SHUNT_EXPORT int execveat(int dfd, const char *p, char *const a[], char *const e[],
			  int fl)
{
	EXEC_WITH_SPILLS(e, REAL(execveat)(dfd, p, a, e_, fl));
}

/* The execl family: the variadic list after first, into an argv on the
 * caller's stack (ap left after the list's NULL, where execle's envp is). */
#define EXECL_ARGV(first, ap, argv)                                              \
	size_t n_ = 1;                                                          \
	va_list cnt_;                                                           \
	va_start(ap, first);                                                    \
	va_copy(cnt_, ap);                                                      \
	while (va_arg(cnt_, char *))                                            \
		n_++;                                                           \
	va_end(cnt_);                                                           \
	char *argv[n_ + 1];                                                     \
	argv[0] = (char *)(first);                                              \
	for (size_t i_ = 1; i_ <= n_; i_++)                                     \
		argv[i_] = va_arg(ap, char *)

SHUNT_EXPORT int execl(const char *p, const char *arg, ...)
{
	va_list ap;
	EXECL_ARGV(arg, ap, argv);
	va_end(ap);
	return execv(p, argv);
}

SHUNT_EXPORT int execlp(const char *f, const char *arg, ...)
{
	va_list ap;
	EXECL_ARGV(arg, ap, argv);
	va_end(ap);
	return execvp(f, argv);
}

SHUNT_EXPORT int execle(const char *p, const char *arg, ...)
{
	va_list ap;
	EXECL_ARGV(arg, ap, argv);
	char **envp = va_arg(ap, char **);
	va_end(ap);
	return execve(p, argv, envp);
}

SHUNT_EXPORT int posix_spawn(pid_t *pid, const char *p,
			     const posix_spawn_file_actions_t *fa,
			     const posix_spawnattr_t *at, char *const a[],
			     char *const e[])
{
	EXEC_WITH_SPILLS(e, REAL(posix_spawn)(pid, p, fa, at, a, e_));
}

SHUNT_EXPORT int posix_spawnp(pid_t *pid, const char *f,
			      const posix_spawn_file_actions_t *fa,
			      const posix_spawnattr_t *at, char *const a[],
			      char *const e[])
{
	EXEC_WITH_SPILLS(e, REAL(posix_spawnp)(pid, f, fa, at, a, e_));
}

SHUNT_EXPORT int system(const char *cmd)
{
	shunt_conn_before_exec();
	return REAL(system)(cmd);
}

SHUNT_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	shunt_conn_before_exec();
	return REAL(popen)(cmd, mode);
}
