/* libc's syscall(): a program that names a system call by number reaches
 * the kernel past every other wrapper.  The calls that matter to an
 * accelerated connection (its data, its waits, its fd number's life, the
 * decisions, exec, io_uring) go to shunt's wrapper of the same call; every
 * other number, and those calls on fds shunt has nothing to say about, go
 * to libc's syscall() unchanged, kernel semantics and errno included.  Both
 * return -1 with errno set on failure, as syscall() does. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/shunt_conn.h"
#include "core/shunt_real.h"
#include "core/shunt_uring.h"

/* An fd shunt serves in user space: its data calls must not reach the
 * kernel socket. */
static inline int accel(long fd)
{
	return shunt_fd_accel((int)fd) != NULL;
}

/* An fd shunt knows (a TCP socket, a listener, a connection): its option
 * and flag calls keep shunt's copy of the socket's state right. */
static inline int known(long fd)
{
	struct shunt_fd *e = shunt_fd_peek((int)fd);
	return e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN;
}

#define P(x) ((void *)(x))

/* syscall() is variadic, but every Linux ABI shunt builds for (x86-64,
 * arm64) passes a variadic call's integer arguments exactly as a fixed
 * one's, so the export takes the number and six longs as parameters, as
 * libc's own syscall() reads them: no va_list to build on every call.
 * (A different C name for the symbol: <unistd.h> declares syscall
 * variadic.) */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "syscall() is read as seven longs: check this ABI's variadic calls"
#endif
SHUNT_EXPORT long shunt_syscall(long n, long a, long b, long c, long d, long e,
				long f) __asm__("syscall");

/* The numbers the switch below serves (tests/check_syscall_table.sh keeps
 * the two lists equal).  Every other number costs a table load and goes on
 * to libc's syscall() as a tail call. */
#define SHUNT_SYSCALL_MAX 512
static const unsigned char served[SHUNT_SYSCALL_MAX] = {
	[SYS_read] = 1, [SYS_write] = 1, [SYS_readv] = 1, [SYS_writev] = 1,
	[SYS_recvfrom] = 1, [SYS_sendto] = 1, [SYS_recvmsg] = 1, [SYS_sendmsg] = 1,
	[SYS_recvmmsg] = 1, [SYS_sendmmsg] = 1, [SYS_preadv2] = 1, [SYS_pwritev2] = 1,
	[SYS_sendfile] = 1, [SYS_splice] = 1, [SYS_shutdown] = 1, [SYS_ioctl] = 1,
	[SYS_fcntl] = 1, [SYS_setsockopt] = 1, [SYS_getsockopt] = 1, [SYS_close] = 1,
	[SYS_close_range] = 1, [SYS_dup] = 1,
#ifdef SYS_dup2
	[SYS_dup2] = 1,
#endif
	[SYS_dup3] = 1, [SYS_socket] = 1, [SYS_listen] = 1, [SYS_connect] = 1,
	[SYS_accept] = 1, [SYS_accept4] = 1, [SYS_epoll_create1] = 1,
#ifdef SYS_epoll_create
	[SYS_epoll_create] = 1,
#endif
	[SYS_epoll_ctl] = 1,
#ifdef SYS_poll
	[SYS_poll] = 1,
#endif
	[SYS_ppoll] = 1,
#ifdef SYS_select
	[SYS_select] = 1,
#endif
	[SYS_pselect6] = 1,
#ifdef SYS_epoll_wait
	[SYS_epoll_wait] = 1,
#endif
	[SYS_epoll_pwait] = 1, [SYS_epoll_pwait2] = 1, [SYS_execve] = 1, [SYS_execveat] = 1,
	[SYS_io_uring_setup] = 1, [SYS_io_uring_enter] = 1, [SYS_io_uring_register] = 1,
};

static long serve(long n, long a, long b, long c, long d, long e, long f);

SHUNT_EXPORT long shunt_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	if (likely((unsigned long)n >= SHUNT_SYSCALL_MAX || !served[n]))
		return REAL(syscall)(n, a, b, c, d, e, f);
	return serve(n, a, b, c, d, e, f);
}

__attribute__((noinline)) static long serve(long n, long a, long b, long c, long d, long e,
					    long f)
{
	switch (n) {
	case SYS_read:
		if (accel(a))
			return read((int)a, P(b), (size_t)c);
		break;
	case SYS_write:
		if (accel(a))
			return write((int)a, P(b), (size_t)c);
		break;
	case SYS_readv:
		if (accel(a))
			return readv((int)a, P(b), (int)c);
		break;
	case SYS_writev:
		if (accel(a))
			return writev((int)a, P(b), (int)c);
		break;
	case SYS_recvfrom:
		if (accel(a))
			return recvfrom((int)a, P(b), (size_t)c, (int)d, P(e), P(f));
		break;
	case SYS_sendto:
		if (accel(a))
			return sendto((int)a, P(b), (size_t)c, (int)d, P(e), (socklen_t)f);
		break;
	case SYS_recvmsg:
		if (accel(a))
			return recvmsg((int)a, P(b), (int)c);
		break;
	case SYS_sendmsg:
		if (accel(a))
			return sendmsg((int)a, P(b), (int)c);
		break;
	case SYS_recvmmsg:
		if (accel(a))
			return recvmmsg((int)a, P(b), (unsigned)c, (int)d, P(e));
		break;
	case SYS_sendmmsg:
		if (accel(a))
			return sendmmsg((int)a, P(b), (unsigned)c, (int)d);
		break;
	/* (fd, iov, cnt, pos_l, pos_h, flags): on 64 bits pos_l is the
	 * offset. */
	case SYS_preadv2:
		if (accel(a) && sizeof(long) == 8)
			return preadv2((int)a, P(b), (int)c, (off_t)d, (int)f);
		break;
	case SYS_pwritev2:
		if (accel(a) && sizeof(long) == 8)
			return pwritev2((int)a, P(b), (int)c, (off_t)d, (int)f);
		break;
	case SYS_sendfile:
		if (accel(a) || accel(b))
			return sendfile((int)a, (int)b, P(c), (size_t)d);
		break;
	case SYS_splice:
		if (accel(a) || accel(c))
			return splice((int)a, P(b), (int)c, P(d), (size_t)e, (unsigned)f);
		break;
	case SYS_shutdown:
		if (accel(a))
			return shutdown((int)a, (int)b);
		break;
	case SYS_ioctl:
		if (known(a))
			return ioctl((int)a, (unsigned long)b, P(c));
		break;
	case SYS_fcntl:
		if (known(a))
			return fcntl((int)a, (int)b, P(c));
		break;
	case SYS_setsockopt:
		if (known(a))
			return setsockopt((int)a, (int)b, (int)c, P(d), (socklen_t)e);
		break;
	case SYS_getsockopt:
		if (known(a))
			return getsockopt((int)a, (int)b, (int)c, P(d), P(e));
		break;
	/* The fd table follows every number's life. */
	case SYS_close:
		return close((int)a);
	case SYS_close_range:
		return close_range((unsigned)a, (unsigned)b, (int)c);
	case SYS_dup:
		return dup((int)a);
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2((int)a, (int)b);
#endif
	case SYS_dup3:
		return dup3((int)a, (int)b, (int)c);
	/* Decisions: a connection accepted or connected here is decided as
	 * through libc, so a client's offer is answered, not left to time
	 * out. */
	case SYS_socket:
		return socket((int)a, (int)b, (int)c);
	case SYS_listen:
		return listen((int)a, (int)b);
	case SYS_connect:
		return connect((int)a, P(b), (socklen_t)c);
	case SYS_accept:
		return accept((int)a, P(b), P(c));
	case SYS_accept4:
		return accept4((int)a, P(b), P(c), (int)d);
	case SYS_epoll_create1:
		return epoll_create1((int)a);
#ifdef SYS_epoll_create
	case SYS_epoll_create:
		return epoll_create((int)a);
#endif
	case SYS_epoll_ctl:
		return epoll_ctl((int)a, (int)b, (int)c, P(d));
	/* Waits see ring readiness only through shunt's; with nothing
	 * accelerated in the process the kernel's own answer is exact. */
#ifdef SYS_poll
	case SYS_poll:
		if (shunt_any_accel())
			return poll(P(a), (nfds_t)b, (int)c);
		break;
#endif
	case SYS_ppoll:
		if (shunt_any_accel() && (!d || e == _NSIG / 8))
			return ppoll(P(a), (nfds_t)b, P(c), P(d));
		break;
#ifdef SYS_select
	case SYS_select:
		if (shunt_any_accel())
			return select((int)a, P(b), P(c), P(d), P(e));
		break;
#endif
	case SYS_pselect6:
		if (shunt_any_accel()) {
			/* The sixth argument is {const sigset_t *, size_t}. */
			const struct {
				const sigset_t *ss;
				size_t len;
			} *m = P(f);
			if (!m || !m->ss || m->len == _NSIG / 8)
				return pselect((int)a, P(b), P(c), P(d), P(e), m ? m->ss : NULL);
		}
		break;
#ifdef SYS_epoll_wait
	case SYS_epoll_wait:
		if (shunt_any_accel())
			return epoll_wait((int)a, P(b), (int)c, (int)d);
		break;
#endif
	case SYS_epoll_pwait:
		if (shunt_any_accel() && (!e || f == _NSIG / 8))
			return epoll_pwait((int)a, P(b), (int)c, (int)d, P(e));
		break;
	case SYS_epoll_pwait2:
		if (shunt_any_accel() && (!e || f == _NSIG / 8))
			return epoll_pwait2((int)a, P(b), (int)c, P(d), P(e));
		break;
	/* exec demotes what the new program inherits. */
	case SYS_execve:
		return execve(P(a), P(b), P(c));
	case SYS_execveat:
		return execveat((int)a, P(b), P(c), P(d), (int)e);
	/* io_uring moves socket bytes inside the kernel. */
	case SYS_io_uring_setup:
		shunt_uring_seen("io_uring_setup through syscall()");
		break;
	case SYS_io_uring_enter:
	case SYS_io_uring_register:
		shunt_uring_seen("a ring driven through syscall()");
		break;
	default:
		break;
	}
	return REAL(syscall)(n, a, b, c, d, e, f);
}
