/* The libc functions shunt interposes, resolved with dlsym(RTLD_NEXT).
 *
 * Each pointer starts out aimed at a resolver that fills the whole table and
 * then forwards the call, so a call that arrives before the library constructor
 * (another library's constructor, say) still works, and the hot path needs no
 * "ready" test: REAL(read) is always callable. */
#ifndef SHUNT_REAL_H
#define SHUNT_REAL_H

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef SHUNT_NO_INTERPOSE
/* core built into a program of its own (shuntd): nothing is interposed,
 * libc's functions are the real ones. */
#define REAL(name) (name)
#else

/* X(return type, name, (parameters), (arguments)) for every non-variadic call. */
#define SHUNT_REAL_FUNCS(X)                                                          \
	X(int, socket, (int domain, int type, int proto), (domain, type, proto))        \
	X(int, socketpair, (int d, int t, int p, int sv[2]), (d, t, p, sv))             \
	X(int, bind, (int fd, const struct sockaddr *sa, socklen_t len), (fd, sa, len)) \
	X(int, listen, (int fd, int backlog), (fd, backlog))                             \
	X(int, accept, (int fd, struct sockaddr *sa, socklen_t *len), (fd, sa, len))    \
	X(int, accept4, (int fd, struct sockaddr *sa, socklen_t *len, int fl),          \
	  (fd, sa, len, fl))                                                             \
	X(int, connect, (int fd, const struct sockaddr *sa, socklen_t len),             \
	  (fd, sa, len))                                                                 \
	X(int, shutdown, (int fd, int how), (fd, how))                                   \
	X(int, close, (int fd), (fd))                                                    \
	X(int, close_range, (unsigned lo, unsigned hi, int fl), (lo, hi, fl))           \
	X(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))                        \
	X(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n))           \
	X(ssize_t, recv, (int fd, void *b, size_t n, int fl), (fd, b, n, fl))           \
	X(ssize_t, recvfrom,                                                             \
	  (int fd, void *b, size_t n, int fl, struct sockaddr *sa, socklen_t *len),     \
	  (fd, b, n, fl, sa, len))                                                       \
	X(ssize_t, recvmsg, (int fd, struct msghdr *m, int fl), (fd, m, fl))            \
	X(int, recvmmsg,                                                                 \
	  (int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *t),          \
	  (fd, v, n, fl, t))                                                             \
	X(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))                 \
	X(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n))          \
	X(ssize_t, preadv2, (int fd, const struct iovec *v, int n, off_t o, int fl),    \
	  (fd, v, n, o, fl))                                                             \
	X(ssize_t, pwritev2, (int fd, const struct iovec *v, int n, off_t o, int fl),   \
	  (fd, v, n, o, fl))                                                             \
	X(ssize_t, send, (int fd, const void *b, size_t n, int fl), (fd, b, n, fl))     \
	X(ssize_t, sendto,                                                               \
	  (int fd, const void *b, size_t n, int fl, const struct sockaddr *sa,          \
	   socklen_t len),                                                               \
	  (fd, b, n, fl, sa, len))                                                       \
	X(ssize_t, sendmsg, (int fd, const struct msghdr *m, int fl), (fd, m, fl))      \
	X(int, sendmmsg, (int fd, struct mmsghdr *v, unsigned n, int fl),               \
	  (fd, v, n, fl))                                                                \
	X(ssize_t, sendfile, (int out, int in, off_t *off, size_t n),                   \
	  (out, in, off, n))                                                             \
	X(ssize_t, sendfile64, (int out, int in, off64_t *off, size_t n),               \
	  (out, in, off, n))                                                             \
	X(ssize_t, splice,                                                               \
	  (int in, loff_t *oin, int out, loff_t *oout, size_t n, unsigned fl),          \
	  (in, oin, out, oout, n, fl))                                                   \
	X(int, dup, (int fd), (fd))                                                      \
	X(int, dup2, (int fd, int nfd), (fd, nfd))                                       \
	X(int, dup3, (int fd, int nfd, int fl), (fd, nfd, fl))                           \
	X(int, setsockopt, (int fd, int l, int o, const void *v, socklen_t len),        \
	  (fd, l, o, v, len))                                                            \
	X(int, getsockopt, (int fd, int l, int o, void *v, socklen_t *len),             \
	  (fd, l, o, v, len))                                                            \
	X(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t))                     \
	X(int, ppoll,                                                                    \
	  (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s),    \
	  (p, n, t, s))                                                                  \
	X(int, select,                                                                   \
	  (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t)) \
	X(int, pselect,                                                                  \
	  (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,            \
	   const sigset_t *s),                                                           \
	  (n, r, w, e, t, s))                                                            \
	X(int, epoll_create, (int size), (size))                                         \
	X(int, epoll_create1, (int fl), (fl))                                            \
	X(int, epoll_ctl, (int ep, int op, int fd, struct epoll_event *ev),             \
	  (ep, op, fd, ev))                                                              \
	X(int, epoll_wait, (int ep, struct epoll_event *ev, int n, int t),              \
	  (ep, ev, n, t))                                                                \
	X(int, epoll_pwait,                                                              \
	  (int ep, struct epoll_event *ev, int n, int t, const sigset_t *s),            \
	  (ep, ev, n, t, s))                                                             \
	X(int, epoll_pwait2,                                                             \
	  (int ep, struct epoll_event *ev, int n, const struct timespec *t,             \
	   const sigset_t *s),                                                           \
	  (ep, ev, n, t, s))                                                             \
	X(pid_t, fork, (void), ())                                                       \
	X(int, system, (const char *cmd), (cmd))                                         \
	X(int, execve, (const char *p, char *const a[], char *const e[]), (p, a, e))    \
	X(int, execv, (const char *p, char *const a[]), (p, a))                          \
	X(int, execvp, (const char *f, char *const a[]), (f, a))                         \
	X(int, execvpe, (const char *f, char *const a[], char *const e[]), (f, a, e))   \
	X(int, fexecve, (int fd, char *const a[], char *const e[]), (fd, a, e))         \
	X(int, execveat,                                                                 \
	  (int dfd, const char *p, char *const a[], char *const e[], int fl),           \
	  (dfd, p, a, e, fl))                                                            \
	X(int, posix_spawn,                                                              \
	  (pid_t *pid, const char *p, const posix_spawn_file_actions_t *fa,             \
	   const posix_spawnattr_t *at, char *const a[], char *const e[]),              \
	  (pid, p, fa, at, a, e))                                                        \
	X(int, posix_spawnp,                                                             \
	  (pid_t *pid, const char *f, const posix_spawn_file_actions_t *fa,             \
	   const posix_spawnattr_t *at, char *const a[], char *const e[]),              \
	  (pid, f, fa, at, a, e))                                                        \
	X(int, setuid, (uid_t u), (u))                                                   \
	X(int, seteuid, (uid_t u), (u))                                                  \
	X(int, setreuid, (uid_t r, uid_t e), (r, e))                                     \
	X(int, setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))                        \
	X(int, setgid, (gid_t g), (g))                                                   \
	X(int, setegid, (gid_t g), (g))                                                  \
	X(int, setregid, (gid_t r, gid_t e), (r, e))                                     \
	X(int, setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))                        \
	X(int, setgroups, (size_t n, const gid_t *g), (n, g))                            \
	X(int, initgroups, (const char *user, gid_t g), (user, g))                       \
	X(int, sigaction, (int sig, const struct sigaction *a, struct sigaction *o),    \
	  (sig, a, o))

struct shunt_real {
#define SHUNT_REAL_PTR(ret, name, params, args) ret(*name) params;
	SHUNT_REAL_FUNCS(SHUNT_REAL_PTR)
#undef SHUNT_REAL_PTR
	/* Not error-returning in the usual way, so resolved by hand. */
	void (*closefrom)(int lo);
	int (*fclose)(FILE *fp);
	FILE *(*fdopen)(int fd, const char *mode);
	FILE *(*popen)(const char *cmd, const char *mode);
	/* Variadic in libc; shunt always passes the one optional argument. */
	int (*fcntl)(int fd, int cmd, ...);
	int (*fcntl64)(int fd, int cmd, ...);
	int (*ioctl)(int fd, unsigned long req, ...);
	/* Always called with the six arguments a system call can take. */
	long (*syscall)(long n, ...);
};

extern struct shunt_real shunt_real;

/* Relaxed atomic load: the resolver may store concurrently; any value seen is
 * a working function (resolver or libc's). */
#define REAL(name) (__atomic_load_n(&shunt_real.name, __ATOMIC_RELAXED))

/* Resolve every symbol.  Idempotent and thread-safe; does no I/O. */
void shunt_real_init(void);

#endif /* SHUNT_NO_INTERPOSE */

#endif
