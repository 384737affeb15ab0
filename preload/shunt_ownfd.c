#include "shunt_ownfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shunt_fdtab.h"
#include "shunt_real.h"

/* Lowest number for shunt's own fds: half the soft limit, at least 100.
 * Programs that place fds at fixed numbers use low ones. */
static int floor_fd(void)
{
	/* Asked once per internal fd, and getrlimit is a system call: the
	 * answer is kept while the limit it came from is unchanged.  A
	 * program that raises its limit later (redis, nginx do at start)
	 * is seen within a few fds: placement is only a courtesy. */
	static int cached = -2;
	static unsigned asked;
	int f = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (f != -2 && (__atomic_add_fetch(&asked, 1, __ATOMIC_RELAXED) & 15))
		return f;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur <= 200)
		f = -1;
	else if (rl.rlim_cur / 2 < 100)
		f = 100;
	else
		f = rl.rlim_cur / 2 > 1 << 20 ? 1 << 20 : (int)(rl.rlim_cur / 2);
	__atomic_store_n(&cached, f, __ATOMIC_RELAXED);
	return f;
}

static int move_up(int fd)
{
	int f = floor_fd();
	if (f < 0 || fd >= f)
		return fd;
	int nfd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, (void *)(long)f);
	if (nfd < 0)
		return fd; /* no room up there: stay, still protected */
	REAL(close)(fd);
	return nfd;
}

static void mark(int fd, int *owner)
{
	struct shunt_fd *e = shunt_fd_get(fd);
	if (!e)
		return;
	e->owner = owner;
	__atomic_store_n(&e->kind, SHUNT_FD_INTERNAL, __ATOMIC_RELEASE);
}

int shunt_fd_own(int fd, int *owner)
{
	if (fd < 0)
		return -1;
	fd = move_up(fd);
	mark(fd, owner);
	if (owner)
		__atomic_store_n(owner, fd, __ATOMIC_RELEASE);
	return fd;
}

void shunt_fd_release(int fd)
{
	if (fd < 0)
		return;
	shunt_fd_reset(fd);
	REAL(close)(fd);
}

void shunt_fd_make_room(int nfd)
{
	struct shunt_fd *e = shunt_fd_peek(nfd);
	if (!e || shunt_fd_kind(e) != SHUNT_FD_INTERNAL)
		return;
	int f = floor_fd();
	int moved = REAL(fcntl)(nfd, F_DUPFD_CLOEXEC, (void *)(long)(f > nfd ? f : nfd + 1));
	int *owner = e->owner;
	shunt_fd_reset(nfd);
	if (moved < 0)
		return; /* out of fds: ours is lost to the application's dup2 */
	mark(moved, owner);
	if (owner)
		__atomic_store_n(owner, moved, __ATOMIC_RELEASE);
}

int shunt_fd_close_range(unsigned lo, unsigned hi, int flags)
{
	unsigned lim = shunt_fdtab_limit();
	unsigned start = lo;
	for (unsigned fd = lo; fd <= hi && fd < lim; fd++) {
		struct shunt_fd *e = shunt_fd_peek((int)fd);
		if (!e) {
			fd |= SHUNT_FDTAB_CHUNK - 1;
			continue;
		}
		if (shunt_fd_kind(e) != SHUNT_FD_INTERNAL)
			continue;
		if (fd > start && REAL(close_range)(start, fd - 1, flags) < 0)
			return -1;
		start = fd + 1;
	}
	if (start > hi && hi != ~0u)
		return 0;
	return REAL(close_range)(start, hi, flags);
}
