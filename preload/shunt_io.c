/* Data calls.  An fd that is not accelerated costs one table lookup and goes
 * straight to libc; an accelerated one funnels into its transport's recvmsg /
 * sendmsg, so each transport implements two data calls, not one per entry
 * point (docs/ARCHITECTURE.md, "Two interfaces", counts them). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>

#include "core/shunt_conn.h"
#include "core/shunt_decide.h"
#include "core/shunt_kernel_only.h"
#include "core/shunt_real.h"

extern void __chk_fail(void) __attribute__((noreturn));

/* The transport sees one flag for "do not block": O_NONBLOCK on the open
 * file (cached in the connection, shared by all its numbers) or
 * MSG_DONTWAIT on the call. */
static inline int nb(const struct shunt_conn *c, int flags)
{
	return __atomic_load_n(&c->nonblock, __ATOMIC_RELAXED) ? flags | MSG_DONTWAIT : flags;
}

/* The kernel path counts for `shunt stat` too: into the slot of the number
 * the connection was decided on (a dup's number is not counted), after the
 * call, with plain stores to this process's own slot.  Other fds (files,
 * pipes, undecided sockets) have no slot: one more load. */
static inline ssize_t kernel_count(struct shunt_fd *e, ssize_t r, int out)
{
	struct shunt_stat_slot *s;
	if (e && r > 0 && (s = __atomic_load_n(&e->stat, __ATOMIC_RELAXED))) {
		shunt_stat_add(out ? &s->bytes_out : &s->bytes_in, (uint64_t)r);
		shunt_stat_add(out ? &s->calls_out : &s->calls_in, 1);
	}
	return r;
}

#define kernel_in(e, r) kernel_count(e, r, 0)
#define kernel_out(e, r) kernel_count(e, r, 1)
/* recv* (flags in scope): peeked bytes are read again, and counted then. */
static inline ssize_t kernel_recv_flags(struct shunt_fd *e, ssize_t r, int flags)
{
	if (!(flags & MSG_PEEK))
		kernel_count(e, r, 0);
	return r;
}

#define kernel_recv(e, r) kernel_recv_flags(e, r, flags)

/* recvmmsg/sendmmsg return messages; the bytes are in v[i].msg_len. */
static inline int kernel_mmsg(struct shunt_fd *e, int r, const struct mmsghdr *v, int out)
{
	for (int i = 0; e && e->stat && i < r; i++)
		kernel_count(e, v[i].msg_len, out);
	return r;
}

#define kernel_mmsg_in(e, r) ((flags) & MSG_PEEK ? (r) : kernel_mmsg(e, r, v, 0))
#define kernel_mmsg_out(e, r) kernel_mmsg(e, r, v, 1)

/* The fast path, and the reference a call on an accelerated fd holds for
 * its whole length (close() from another thread must not free what this
 * call is using).  Declares e and c, or returns libc's answer, counted by
 * count(e, r). */
#define ACCEL_OR_REAL(count, call, ...)                                         \
	struct shunt_fd *e = shunt_fd_peek(fd);                                 \
	struct shunt_conn *c;                                                   \
	if (likely(!e) || shunt_fd_kind(e) != SHUNT_FD_ACCEL ||                 \
	    !(c = shunt_conn_get(e)))                                           \
		return count(e, REAL(call)(__VA_ARGS__))

/* After ACCEL_OR_REAL in a receive call: flags that read the socket's own
 * state, not the stream (urgent data, the error queue), go to it as they
 * are. */
#define KERNEL_RECV_FLAGS(count, call, ...)                                     \
	if (unlikely(flags & SHUNT_KERNEL_RECV_FLAGS)) {                        \
		shunt_conn_put(c);                                              \
		return count(e, REAL(call)(__VA_ARGS__));                       \
	}

/* After ACCEL_OR_REAL in a send call: flags only the kernel's socket
 * honours (urgent data, zero-copy) move the connection there first. */
#define KERNEL_SEND_FLAGS(count, call, ...)                                     \
	if (unlikely(flags & (MSG_OOB | MSG_ZEROCOPY))) {                       \
		shunt_conn_put(c);                                              \
		shunt_kernel_only(fd, shunt_kernel_only_send(flags));           \
		return count(e, REAL(call)(__VA_ARGS__));                       \
	}

static ssize_t done(struct shunt_conn *c, ssize_t r)
{
	if (r >= 0) {
		shunt_conn_put(c);
		return r;
	}
	int saved = errno;
	shunt_conn_put(c);
	errno = saved;
	return r;
}

static ssize_t accel_recv(struct shunt_conn *c, void *b, size_t n, int flags)
{
	if (c->ops->data->recv)
		return done(c, c->ops->data->recv(c, b, n, nb(c, flags)));
	struct iovec v = {b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	return done(c, c->ops->data->recvmsg(c, &m, nb(c, flags)));
}

static ssize_t accel_send(struct shunt_conn *c, const void *b, size_t n, int flags)
{
	if (c->ops->data->send)
		return done(c, c->ops->data->send(c, b, n, nb(c, flags)));
	struct iovec v = {(void *)b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	return done(c, c->ops->data->sendmsg(c, &m, nb(c, flags)));
}

SHUNT_EXPORT ssize_t read(int fd, void *b, size_t n)
{
	ACCEL_OR_REAL(kernel_in, read, fd, b, n);
	return accel_recv(c, b, n, 0);
}

SHUNT_EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t size)
{
	if (n > size)
		__chk_fail();
	return read(fd, b, n);
}

SHUNT_EXPORT ssize_t readv(int fd, const struct iovec *v, int n)
{
	ACCEL_OR_REAL(kernel_in, readv, fd, v, n);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return done(c, c->ops->data->recvmsg(c, &m, nb(c, 0)));
}

SHUNT_EXPORT ssize_t recv(int fd, void *b, size_t n, int flags)
{
	ACCEL_OR_REAL(kernel_recv, recv, fd, b, n, flags);
	KERNEL_RECV_FLAGS(kernel_recv, recv, fd, b, n, flags);
	return accel_recv(c, b, n, flags);
}

SHUNT_EXPORT ssize_t __recv_chk(int fd, void *b, size_t n, size_t size, int flags)
{
	if (n > size)
		__chk_fail();
	return recv(fd, b, n, flags);
}

SHUNT_EXPORT ssize_t recvfrom(int fd, void *b, size_t n, int flags,
			      struct sockaddr *sa, socklen_t *len)
{
	ACCEL_OR_REAL(kernel_recv, recvfrom, fd, b, n, flags, sa, len);
	KERNEL_RECV_FLAGS(kernel_recv, recvfrom, fd, b, n, flags, sa, len);
	struct iovec v = {b, n};
	struct msghdr m = {.msg_name = sa, .msg_namelen = len ? *len : 0,
			   .msg_iov = &v, .msg_iovlen = 1};
	ssize_t r = c->ops->data->recvmsg(c, &m, nb(c, flags));
	if (r >= 0 && sa && len)
		*len = m.msg_namelen;
	return done(c, r);
}

SHUNT_EXPORT ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t size, int flags,
				    struct sockaddr *sa, socklen_t *len)
{
	if (n > size)
		__chk_fail();
	return recvfrom(fd, b, n, flags, sa, len);
}

SHUNT_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	ACCEL_OR_REAL(kernel_recv, recvmsg, fd, m, flags);
	KERNEL_RECV_FLAGS(kernel_recv, recvmsg, fd, m, flags);
	return done(c, c->ops->data->recvmsg(c, m, nb(c, flags)));
}

SHUNT_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags,
			  struct timespec *t)
{
	ACCEL_OR_REAL(kernel_mmsg_in, recvmmsg, fd, v, n, flags, t);
	KERNEL_RECV_FLAGS(kernel_mmsg_in, recvmmsg, fd, v, n, flags, t);
	/* On a stream each message is one recvmsg; only the first may block,
	 * as with MSG_WAITFORONE. */
	unsigned i;
	for (i = 0; i < n; i++) {
		ssize_t r = c->ops->data->recvmsg(c, &v[i].msg_hdr,
					    i ? flags | MSG_DONTWAIT : nb(c, flags));
		if (r < 0)
			return (int)done(c, i ? (int)i : -1);
		v[i].msg_len = (unsigned)r;
		if (r == 0)
			return (int)done(c, (int)i + 1);
	}
	return (int)done(c, (int)i);
}

SHUNT_EXPORT ssize_t write(int fd, const void *b, size_t n)
{
	ACCEL_OR_REAL(kernel_out, write, fd, b, n);
	return accel_send(c, b, n, 0);
}

SHUNT_EXPORT ssize_t writev(int fd, const struct iovec *v, int n)
{
	ACCEL_OR_REAL(kernel_out, writev, fd, v, n);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return done(c, c->ops->data->sendmsg(c, &m, nb(c, 0)));
}

SHUNT_EXPORT ssize_t send(int fd, const void *b, size_t n, int flags)
{
	ACCEL_OR_REAL(kernel_out, send, fd, b, n, flags);
	KERNEL_SEND_FLAGS(kernel_out, send, fd, b, n, flags);
	return accel_send(c, b, n, flags);
}

/* sendto/sendmsg with MSG_FASTOPEN on a socket not connected yet: the
 * kernel connects inside the call, with the data in its SYN.  That
 * connection stays on the kernel path (fastopen), decided and logged as a
 * connect() would be.  Returns the call's result. */
static ssize_t fastopen(int fd, const struct sockaddr *sa, socklen_t len, ssize_t (*call)(int, const void *, int), const void *arg)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (shunt_active() && sa && len >= sizeof(sa_family_t) &&
	    (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
		if (!e || shunt_fd_kind(e) == SHUNT_FD_UNKNOWN)
			e = shunt_conn_classify(fd);
	} else {
		e = NULL;
	}
	if (!e || shunt_fd_kind(e) != SHUNT_FD_TCP)
		return call(fd, arg, MSG_FASTOPEN);
	shunt_kernel_only(fd, SHUNT_R_FASTOPEN);
	shunt_conn_on_connect(fd, e, sa, len);
	ssize_t r = call(fd, arg, MSG_FASTOPEN);
	int saved = errno;
	if (r >= 0 || errno == EINPROGRESS || errno == EALREADY) {
		shunt_conn_decided(fd, e, sa, len);
		kernel_out(e, r);
	} else {
		/* Not connected: it may be tried again. */
		int keep = e->flags & (SHUNT_FDF_TIMEO | SHUNT_FDF_KERNEL_ONLY);
		shunt_conn_new_tcp(fd, e->flags & SHUNT_FDF_NONBLOCK);
		e->flags |= (uint8_t)keep;
		e->reason = SHUNT_R_FASTOPEN;
	}
	errno = saved;
	return r;
}

struct sendto_args {
	const void *b;
	size_t n;
	int flags;
	const struct sockaddr *sa;
	socklen_t len;
};

static ssize_t sendto_call(int fd, const void *p, int fl)
{
	const struct sendto_args *a = p;
	return REAL(sendto)(fd, a->b, a->n, a->flags | fl, a->sa, a->len);
}

struct sendmsg_args {
	const struct msghdr *m;
	int flags;
};

static ssize_t sendmsg_call(int fd, const void *p, int fl)
{
	const struct sendmsg_args *a = p;
	return REAL(sendmsg)(fd, a->m, a->flags | fl);
}

SHUNT_EXPORT ssize_t sendto(int fd, const void *b, size_t n, int flags,
			    const struct sockaddr *sa, socklen_t len)
{
	if (unlikely(flags & MSG_FASTOPEN)) {
		struct sendto_args a = {b, n, flags, sa, len};
		return fastopen(fd, sa, len, sendto_call, &a);
	}
	ACCEL_OR_REAL(kernel_out, sendto, fd, b, n, flags, sa, len);
	KERNEL_SEND_FLAGS(kernel_out, sendto, fd, b, n, flags, sa, len);
	/* A connected TCP socket ignores the address, as the kernel does. */
	return accel_send(c, b, n, flags);
}

SHUNT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	if (unlikely(flags & MSG_FASTOPEN) && m) {
		struct sendmsg_args a = {m, flags};
		return fastopen(fd, m->msg_name, m->msg_namelen, sendmsg_call, &a);
	}
	ACCEL_OR_REAL(kernel_out, sendmsg, fd, m, flags);
	KERNEL_SEND_FLAGS(kernel_out, sendmsg, fd, m, flags);
	return done(c, c->ops->data->sendmsg(c, m, nb(c, flags)));
}

SHUNT_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	ACCEL_OR_REAL(kernel_mmsg_out, sendmmsg, fd, v, n, flags);
	KERNEL_SEND_FLAGS(kernel_mmsg_out, sendmmsg, fd, v, n, flags);
	unsigned i;
	for (i = 0; i < n; i++) {
		ssize_t r = c->ops->data->sendmsg(c, &v[i].msg_hdr, nb(c, flags));
		if (r < 0)
			return (int)done(c, i ? (int)i : -1);
		v[i].msg_len = (unsigned)r;
	}
	return (int)done(c, (int)i);
}

/* preadv2/pwritev2 with offset -1 are readv/writev at the file position,
 * which a socket has none of: the stream.  Any other offset fails ESPIPE in
 * the kernel before a byte moves, and flags (RWF_NOWAIT, RWF_HIPRI...) are
 * the kernel's to judge, so those calls demote the connection first. */
static void kernel_only(int fd);

SHUNT_EXPORT ssize_t preadv2(int fd, const struct iovec *v, int n, off_t off, int flags)
{
	if (off != -1)
		return REAL(preadv2)(fd, v, n, off, flags);
	if (unlikely(flags))
		kernel_only(fd);
	ACCEL_OR_REAL(kernel_in, preadv2, fd, v, n, off, flags);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return done(c, c->ops->data->recvmsg(c, &m, nb(c, 0)));
}

SHUNT_EXPORT ssize_t preadv64v2(int fd, const struct iovec *v, int n, off64_t off, int flags)
{
	return preadv2(fd, v, n, (off_t)off, flags);
}

SHUNT_EXPORT ssize_t pwritev2(int fd, const struct iovec *v, int n, off_t off, int flags)
{
	if (off != -1)
		return REAL(pwritev2)(fd, v, n, off, flags);
	if (unlikely(flags))
		kernel_only(fd);
	ACCEL_OR_REAL(kernel_out, pwritev2, fd, v, n, off, flags);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return done(c, c->ops->data->sendmsg(c, &m, nb(c, 0)));
}

SHUNT_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *v, int n, off64_t off, int flags)
{
	return pwritev2(fd, v, n, (off_t)off, flags);
}

/* sendfile and splice move bytes inside the kernel; an accelerated
 * connection hands itself back to TCP first so they keep working. */
static void kernel_only(int fd)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (unlikely(e != NULL))
		shunt_conn_demote(fd, e, SHUNT_R_UNSUPPORTED);
}

/* Bytes a copying sendfile moves per step (on the stack). */
#define SENDFILE_STEP 16384

/* sendfile to a non-blocking accelerated socket, by copying: moving the
 * connection to TCP first would replay the bytes its peer has not read yet
 * to the socket, and a socket buffer smaller than them would make the
 * replay wait for a reader that may be this very thread (an event loop).
 * Copied, the call takes what the transport has room for now, as the
 * kernel's takes what the socket buffer has room for, and says EAGAIN when
 * there is none.  The file's offset moves by what was sent.  -2: the file
 * cannot be read at an offset (a pipe): the caller moves the connection to
 * TCP instead. */
static ssize_t sendfile_copy(struct shunt_conn *c, int in, off64_t *off, size_t n)
{
	off64_t pos;
	if (off)
		pos = *off;
	else if ((pos = lseek64(in, 0, SEEK_CUR)) < 0)
		return -2;
	if (n > 0x7ffff000)
		n = 0x7ffff000; /* the kernel's limit per call */
	char buf[SENDFILE_STEP];
	size_t done = 0;
	while (done < n) {
		size_t want = n - done < sizeof buf ? n - done : sizeof buf;
		ssize_t r = pread64(in, buf, want, pos + (off64_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == ESPIPE && !done && !off)
			return -2;
		if (r < 0)
			return done ? (ssize_t)done : -1;
		if (r == 0)
			break;
		struct iovec v = {buf, (size_t)r};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
		ssize_t w = c->ops->data->sendmsg(c, &m, MSG_DONTWAIT);
		if (w < 0) {
			if (!done)
				return -1;
			break;
		}
		done += (size_t)w;
		if (w < r)
			break; /* no more room now */
	}
	if (off)
		*off = pos + (off64_t)done;
	else if (done)
		lseek64(in, pos + (off64_t)done, SEEK_SET);
	return (ssize_t)done;
}

/* A copying sendfile when out is a non-blocking accelerated socket with
 * bytes either end has not consumed yet, and in is not a socket of ours; -2
 * otherwise (or when in cannot be read at an offset): the caller moves the
 * connection to TCP. */
static ssize_t sendfile_accel(int out, int in, off64_t *off, size_t n)
{
	struct shunt_fd *e = shunt_fd_peek(out);
	struct shunt_conn *c;
	if (likely(!e) || shunt_fd_kind(e) != SHUNT_FD_ACCEL || shunt_fd_accel(in) ||
	    !(c = shunt_conn_get(e)))
		return -2;
	/* Moving to TCP keeps the kernel's semantics from then on (its
	 * buffer sizes, a reset from a peer that closes with bytes unread),
	 * and costs no wait when neither end has anything to replay: the
	 * peer has consumed all we sent, and we all it sent (its replay,
	 * made in its next call, could wait for us: in an event loop, this
	 * thread). */
	int unconsumed = 0, unread = 0;
	if (!__atomic_load_n(&c->nonblock, __ATOMIC_RELAXED) ||
	    c->ops->data->ioctl(c, SHUNT_IOC_UNCONSUMED, &unconsumed) < 0 ||
	    c->ops->data->ioctl(c, FIONREAD, &unread) < 0 || (unconsumed == 0 && unread == 0)) {
		shunt_conn_put(c);
		return -2;
	}
	ssize_t r = sendfile_copy(c, in, off, n);
	if (r == -2) {
		shunt_conn_put(c);
		return -2;
	}
	return done(c, r);
}

SHUNT_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	off64_t o = off ? *off : 0;
	ssize_t r = sendfile_accel(out, in, off ? &o : NULL, n);
	if (r != -2) {
		if (off)
			*off = (off_t)o;
		return r;
	}
	kernel_only(out);
	kernel_only(in);
	r = REAL(sendfile)(out, in, off, n);
	return kernel_out(shunt_fd_peek(out), r);
}

SHUNT_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	ssize_t r = sendfile_accel(out, in, off, n);
	if (r != -2)
		return r;
	kernel_only(out);
	kernel_only(in);
	r = REAL(sendfile64)(out, in, off, n);
	return kernel_out(shunt_fd_peek(out), r);
}

SHUNT_EXPORT ssize_t splice(int in, loff_t *oin, int out, loff_t *oout, size_t n,
			    unsigned fl)
{
	kernel_only(out);
	kernel_only(in);
	ssize_t r = REAL(splice)(in, oin, out, oout, n, fl);
	kernel_in(shunt_fd_peek(in), r);
	return kernel_out(shunt_fd_peek(out), r);
}
