/* Data calls.  An fd that is not accelerated costs one table lookup and goes
 * straight to libc; an accelerated one funnels into its transport's recvmsg /
 * sendmsg, so each transport implements two data calls, not seventeen. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "shunt_conn.h"
#include "shunt_real.h"

extern void __chk_fail(void) __attribute__((noreturn));

/* The transport sees one flag for "do not block": O_NONBLOCK on the fd
 * (cached in the entry) or MSG_DONTWAIT on the call. */
static inline int nb(const struct shunt_fd *e, int flags)
{
	return e->flags & SHUNT_FDF_NONBLOCK ? flags | MSG_DONTWAIT : flags;
}

static ssize_t accel_recv(struct shunt_fd *e, void *b, size_t n, int flags)
{
	struct iovec v = {b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	return e->conn->ops->recvmsg(e->conn, &m, nb(e, flags));
}

static ssize_t accel_send(struct shunt_fd *e, const void *b, size_t n, int flags)
{
	struct iovec v = {(void *)b, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	return e->conn->ops->sendmsg(e->conn, &m, nb(e, flags));
}

SHUNT_EXPORT ssize_t read(int fd, void *b, size_t n)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(read)(fd, b, n);
	return accel_recv(e, b, n, 0);
}

SHUNT_EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t size)
{
	if (n > size)
		__chk_fail();
	return read(fd, b, n);
}

SHUNT_EXPORT ssize_t readv(int fd, const struct iovec *v, int n)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(readv)(fd, v, n);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return e->conn->ops->recvmsg(e->conn, &m, nb(e, 0));
}

SHUNT_EXPORT ssize_t recv(int fd, void *b, size_t n, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(recv)(fd, b, n, flags);
	return accel_recv(e, b, n, flags);
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
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(recvfrom)(fd, b, n, flags, sa, len);
	struct iovec v = {b, n};
	struct msghdr m = {.msg_name = sa, .msg_namelen = len ? *len : 0,
			   .msg_iov = &v, .msg_iovlen = 1};
	ssize_t r = e->conn->ops->recvmsg(e->conn, &m, nb(e, flags));
	if (r >= 0 && sa && len)
		*len = m.msg_namelen;
	return r;
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
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(recvmsg)(fd, m, flags);
	return e->conn->ops->recvmsg(e->conn, m, nb(e, flags));
}

SHUNT_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags,
			  struct timespec *t)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(recvmmsg)(fd, v, n, flags, t);
	/* On a stream each message is one recvmsg; only the first may block,
	 * as with MSG_WAITFORONE. */
	unsigned i;
	for (i = 0; i < n; i++) {
		ssize_t r = e->conn->ops->recvmsg(e->conn, &v[i].msg_hdr,
						  i ? flags | MSG_DONTWAIT : nb(e, flags));
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned)r;
		if (r == 0)
			return (int)i + 1;
	}
	return (int)i;
}

SHUNT_EXPORT ssize_t write(int fd, const void *b, size_t n)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(write)(fd, b, n);
	return accel_send(e, b, n, 0);
}

SHUNT_EXPORT ssize_t writev(int fd, const struct iovec *v, int n)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(writev)(fd, v, n);
	struct msghdr m = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
	return e->conn->ops->sendmsg(e->conn, &m, nb(e, 0));
}

SHUNT_EXPORT ssize_t send(int fd, const void *b, size_t n, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(send)(fd, b, n, flags);
	return accel_send(e, b, n, flags);
}

SHUNT_EXPORT ssize_t sendto(int fd, const void *b, size_t n, int flags,
			    const struct sockaddr *sa, socklen_t len)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(sendto)(fd, b, n, flags, sa, len);
	/* A connected TCP socket ignores the address, as the kernel does. */
	return accel_send(e, b, n, flags);
}

SHUNT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(sendmsg)(fd, m, flags);
	return e->conn->ops->sendmsg(e->conn, m, nb(e, flags));
}

SHUNT_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (likely(!e))
		return REAL(sendmmsg)(fd, v, n, flags);
	unsigned i;
	for (i = 0; i < n; i++) {
		ssize_t r = e->conn->ops->sendmsg(e->conn, &v[i].msg_hdr, nb(e, flags));
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned)r;
	}
	return (int)i;
}

/* sendfile and splice move bytes inside the kernel; an accelerated
 * connection hands itself back to TCP first so they keep working. */
static void kernel_only(int fd)
{
	struct shunt_fd *e = shunt_fd_accel(fd);
	if (unlikely(e != NULL))
		shunt_conn_demote(fd, e, SHUNT_R_UNSUPPORTED);
}

SHUNT_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	kernel_only(out);
	kernel_only(in);
	return REAL(sendfile)(out, in, off, n);
}

SHUNT_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	kernel_only(out);
	kernel_only(in);
	return REAL(sendfile64)(out, in, off, n);
}

SHUNT_EXPORT ssize_t splice(int in, loff_t *oin, int out, loff_t *oout, size_t n,
			    unsigned fl)
{
	kernel_only(out);
	kernel_only(in);
	return REAL(splice)(in, oin, out, oout, n, fl);
}
