/* Descriptors over a Unix socket (shunt_fdpass.h). */
#include "shunt_fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shunt_real.h"

ssize_t shunt_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds,
		       int flags)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(SHUNT_FDPASS_MAX * sizeof(int))];
	} u;
	if (nfds < 0 || nfds > SHUNT_FDPASS_MAX) {
		errno = EINVAL; /* not the bytes without the descriptors */
		return -1;
	}
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(&u, 0, sizeof u);
		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	return REAL(sendmsg)(sock, &m, flags);
}

ssize_t shunt_recv_fds(int sock, void *buf, size_t len, int flags, int *fds, int max,
		       int *nfds, int *cut)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(SHUNT_FDPASS_MAX * sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			   .msg_controllen = sizeof u.b};
	*nfds = 0;
	ssize_t r = REAL(recvmsg)(sock, &m, flags | MSG_CMSG_CLOEXEC);
	if (r < 0)
		return r;
	/* Every descriptor that came is the caller's or closed: a peer can
	 * send any, as many as fit. */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				REAL(close)(fd);
		}
	}
	if (cut)
		*cut = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	return r;
}
