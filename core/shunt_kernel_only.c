/* Kernel-only socket features (shunt_kernel_only.h). */
#include "shunt_kernel_only.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "shunt_conn.h"
#include "shunt_decide.h"
#include "shunt_log.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef TCP_REPAIR
#define TCP_REPAIR 19
#endif
#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif
#ifndef SO_ATTACH_BPF
#define SO_ATTACH_BPF 50
#endif

static int turned_on(const void *v, socklen_t len)
{
	return v && len >= sizeof(int) && *(const int *)v != 0;
}

enum shunt_reason shunt_kernel_only_sockopt(int level, int opt, const void *v, socklen_t len)
{
	if (level == IPPROTO_TCP) {
		switch (opt) {
		case TCP_ULP:
			/* Records framed and ciphered by the kernel: the
			 * bytes must pass through it. */
			return SHUNT_R_KTLS;
		case TCP_REPAIR:
			/* Its queues are read and rebuilt by a checkpointer. */
			return v && len >= sizeof(int) && *(const int *)v == 1 ? SHUNT_R_TCP_REPAIR
										: SHUNT_R_NONE;
		case TCP_FASTOPEN_CONNECT:
			/* connect() sends no SYN before the first write. */
			return turned_on(v, len) ? SHUNT_R_FASTOPEN : SHUNT_R_NONE;
		}
		return SHUNT_R_NONE;
	}
	if (level == SOL_SOCKET && (opt == SO_ATTACH_FILTER || opt == SO_ATTACH_BPF))
		/* A filter judges the packets the kernel receives; bytes
		 * on another path would pass it by. */
		return SHUNT_R_SOCK_FILTER;
	return SHUNT_R_NONE;
}

void shunt_kernel_only(int fd, enum shunt_reason why)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (!e || shunt_fd_kind(e) == SHUNT_FD_UNKNOWN)
		e = shunt_conn_classify(fd);
	if (!e)
		return;
	switch (shunt_fd_kind(e)) {
	case SHUNT_FD_ACCEL:
		SHUNT_DEBUG("fd=%d uses a kernel-only feature (%s)", fd, shunt_reason_name(why));
		shunt_conn_demote(fd, e, why);
		break;
	case SHUNT_FD_TCP:
	case SHUNT_FD_LISTEN:
		/* The first feature's reason stands. */
		if (!(e->flags & SHUNT_FDF_KERNEL_ONLY)) {
			e->reason = (uint8_t)why;
			__atomic_or_fetch(&e->flags, SHUNT_FDF_KERNEL_ONLY, __ATOMIC_RELAXED);
		}
		break;
	default:
		break;
	}
}
