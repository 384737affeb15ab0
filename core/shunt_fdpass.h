/* Descriptors passed over a Unix socket (SCM_RIGHTS): one message, its
 * bytes and up to SHUNT_FDPASS_MAX descriptors.  Shared by the shm broker,
 * the fabric shim's countersign request and shuntd. */
#ifndef SHUNT_FDPASS_H
#define SHUNT_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#define SHUNT_FDPASS_MAX 8

/* sendmsg(sock, buf[len], flags) carrying fds[0..nfds) (nfds 0 to
 * SHUNT_FDPASS_MAX; otherwise -1, EINVAL, nothing sent).  As sendmsg: the
 * bytes sent, or -1 with errno. */
ssize_t shunt_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds,
		       int flags);
/* recvmsg(sock, buf[len], flags | MSG_CMSG_CLOEXEC): the descriptors that
 * came, close-on-exec, in fds[0..*nfds); any beyond max are closed.  *cut
 * (may be NULL) is set when the bytes or the descriptors did not all fit.
 * As recvmsg: the bytes read, or -1 with errno (then no descriptor). */
ssize_t shunt_recv_fds(int sock, void *buf, size_t len, int flags, int *fds, int max,
		       int *nfds, int *cut);

#endif
