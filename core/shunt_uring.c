/* io_uring in the process (shunt_uring.h). */
#include "shunt_uring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shunt_conn.h"
#include "shunt_core.h"
#include "shunt_fdtab.h"
#include "shunt_listen.h"
#include "shunt_log.h"
#include "shunt_real.h"

enum { URING_UNKNOWN, URING_NONE, URING_SEEN };
static int state;

static const char uring_link[] = "anon_inode:[io_uring]";

static int is_uring_link(int dfd, const char *name)
{
	char t[sizeof uring_link + 8];
	ssize_t n = readlinkat(dfd, name, t, sizeof t);
	return n == (ssize_t)sizeof uring_link - 1 && !memcmp(t, uring_link, (size_t)n);
}

int shunt_uring_fd(int fd)
{
	char name[16];
	snprintf(name, sizeof name, "%d", fd);
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	int r = is_uring_link(dfd, name);
	REAL(close)(dfd);
	return r;
}

/* Only numbers shunt knows nothing of can be a ring: its own, sockets and
 * epoll sets are known.  getdents64 into the stack, not opendir: no
 * allocation inside connect() or accept(). */
static int scan(void)
{
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	char buf[4096] __attribute__((aligned(8)));
	int found = 0;
	long n;
	while (!found && (n = REAL(syscall)(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
		for (long off = 0; off < n && !found;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			int fd = atoi(d->d_name);
			struct shunt_fd *e = shunt_fd_peek(fd);
			if (fd == dfd || (e && shunt_fd_kind(e) != SHUNT_FD_UNKNOWN))
				continue;
			found = is_uring_link(dfd, d->d_name);
		}
	}
	REAL(close)(dfd);
	return found;
}

int shunt_uring_in_use(void)
{
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (likely(s == URING_NONE))
		return 0;
	if (s == URING_SEEN)
		return 1;
	int saved = errno;
	SHUNT_GUARD_ENTER();
	int found = scan();
	SHUNT_GUARD_LEAVE();
	errno = saved;
	if (found)
		shunt_uring_seen("an io_uring descriptor is open");
	else
		__atomic_compare_exchange_n(&state, &s, URING_NONE, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == URING_SEEN;
}

static void demote_one(int fd, struct shunt_fd *e, void *arg)
{
	(void)arg;
	if (shunt_fd_kind(e) == SHUNT_FD_ACCEL)
		shunt_conn_demote(fd, e, SHUNT_R_IO_URING);
}

void shunt_uring_seen(const char *how)
{
	/* A ring's every submission may come through here: one load. */
	if (likely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) == URING_SEEN) ||
	    __atomic_exchange_n(&state, URING_SEEN, __ATOMIC_ACQ_REL) == URING_SEEN)
		return;
	int saved = errno;
	if (shunt_config()->enabled)
		SHUNT_INFO("%s: io_uring reads and writes sockets past shunt, so this "
			   "process's connections stay on TCP (io-uring)",
			   how);
	if (shunt_any_accel())
		shunt_fd_foreach(SHUNT_FD_ACCEL, demote_one, NULL);
	shunt_listen_withdraw();
	errno = saved;
}
