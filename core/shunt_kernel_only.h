/* Socket features only the kernel's TCP socket can serve: kernel TLS,
 * zero-copy completions, urgent data, Fast Open, socket filters, TCP
 * repair.  A connection that uses one moves to the kernel path before the
 * call reaches the kernel (its unread bytes replayed first, in order); a
 * socket not decided yet (or a listener) is marked, so that the
 * connections it makes or accepts stay on the kernel path.  Each with its
 * reason code (shunt_reason.h; docs/TROUBLESHOOTING.md has the table of
 * every feature and what shunt does with it). */
#ifndef SHUNT_KERNEL_ONLY_H
#define SHUNT_KERNEL_ONLY_H

#include <sys/socket.h>

#include "shunt_fdtab.h"
#include "shunt_reason.h"

/* The reason setsockopt(level, opt, v) makes a connection kernel-only, or
 * SHUNT_R_NONE (an option that works the same on every path). */
enum shunt_reason shunt_kernel_only_sockopt(int level, int opt, const void *v, socklen_t len);

/* The reason send flags make a connection kernel-only, or SHUNT_R_NONE. */
static inline enum shunt_reason shunt_kernel_only_send(int flags)
{
	if (flags & MSG_OOB)
		return SHUNT_R_OOB;
	if (flags & MSG_ZEROCOPY)
		return SHUNT_R_ZEROCOPY;
	return SHUNT_R_NONE;
}

/* Receive flags that read kernel-only state, not the stream (urgent data,
 * the error queue): the call goes to the socket as it is. */
#define SHUNT_KERNEL_RECV_FLAGS (MSG_OOB | MSG_ERRQUEUE)

/* fd is about to use a kernel-only feature: an accelerated connection moves
 * to the kernel path now; an undecided socket or a listener is marked. */
void shunt_kernel_only(int fd, enum shunt_reason why);

/* The reason a mark left on e (a socket not decided yet, or the listener
 * of a connection being accepted) keeps its connection on the kernel path,
 * or SHUNT_R_NONE. */
static inline enum shunt_reason shunt_kernel_only_mark(const struct shunt_fd *e)
{
	return e && (e->flags & SHUNT_FDF_KERNEL_ONLY) ? (enum shunt_reason)e->reason
						      : SHUNT_R_NONE;
}

#endif
