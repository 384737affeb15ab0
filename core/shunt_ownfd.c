#include "shunt_ownfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shunt_core.h"
#include "shunt_fdtab.h"
#include "shunt_log.h"
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

/* The soft RLIMIT_NOFILE, asked again now and then (programs raise it at
 * start), and always when FRESH: before an answer that refuses. */
static long nofile_limit(int fresh)
{
	static long cached = -1;
	static unsigned asked;
	long l = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (!fresh && l >= 0 && (__atomic_add_fetch(&asked, 1, __ATOMIC_RELAXED) & 63))
		return l;
	struct rlimit rl;
	l = getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1 << 30)
		    ? 1 << 30
		    : (long)rl.rlim_cur;
	__atomic_store_n(&cached, l, __ATOMIC_RELAXED);
	return l;
}

int shunt_fd_headroom(int fd)
{
	long used = fd + 1 + 2 * (long)__atomic_load_n(&shunt_naccel, __ATOMIC_RELAXED);
	long left = nofile_limit(0) - used;
	if (left < SHUNT_FD_MARGIN)
		left = nofile_limit(1) - used; /* a limit raised since we asked */
	return left > 1 << 30 ? 1 << 30 : (int)left;
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

/* Set once a borrowed fd exists: fork looks for them only then. */
static int any_borrowed;

int shunt_fd_borrow(int fd)
{
	if (fd < 0)
		return fd;
	int saved = errno;
	/* Moved now, before the dependency has seen the number: later it
	 * cannot move.  Up there it is out of the way of the numbers the
	 * application reuses (closing 0..2 and opening /dev/null, dup2 to a
	 * fixed low number), as shunt's own are. */
	int f = floor_fd();
	if (f >= 0 && fd < f) {
		int nfd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, (void *)(long)f);
		if (nfd >= 0) {
			shunt_fd_reset(fd);
			REAL(close)(fd);
			fd = nfd;
		}
	}
	if (f < 0 || fd < f) {
		/* Not moved (low limit, or no room): still close-on-exec, as
		 * an exec'd program has no use for libfabric's sockets. */
		REAL(fcntl)(fd, F_SETFD, (void *)(long)FD_CLOEXEC);
	}
	shunt_fd_reset(fd);
	struct shunt_fd *e = shunt_fd_get(fd);
	if (e) {
		e->owner = NULL;
		e->flags = SHUNT_FDF_BORROWED;
		__atomic_store_n(&e->kind, SHUNT_FD_INTERNAL, __ATOMIC_RELEASE);
		if (!__atomic_load_n(&any_borrowed, __ATOMIC_RELAXED))
			__atomic_store_n(&any_borrowed, 1, __ATOMIC_RELAXED);
	}
	errno = saved;
	return fd;
}

static void unborrow(int fd, struct shunt_fd *e, void *arg)
{
	(void)arg;
	if (shunt_fd_kind(e) == SHUNT_FD_INTERNAL && (e->flags & SHUNT_FDF_BORROWED))
		shunt_fd_reset(fd);
}

void shunt_fd_borrowed_after_fork(void)
{
	/* The child forgets its parent's libfabric objects without closing
	 * them (closing would tear down the parent's): their fds are of no
	 * use to it, and a child that closes every fd must be able to. */
	if (__atomic_load_n(&any_borrowed, __ATOMIC_RELAXED))
		shunt_fd_foreach(SHUNT_FD_INTERNAL, unborrow, NULL);
}

int shunt_fd_make_room(int nfd)
{
	struct shunt_fd *e = shunt_fd_peek(nfd);
	if (!e || shunt_fd_kind(e) != SHUNT_FD_INTERNAL)
		return 0;
	if (e->flags & SHUNT_FDF_BORROWED) {
		if (shunt_guard) {
			/* The dependency replacing its own fd: its business. */
			shunt_fd_reset(nfd);
			return 0;
		}
		/* libfabric keeps this number: the application's file put
		 * there would receive libfabric's traffic and lose its own. */
		SHUNT_INFO("dup2 onto fd %d refused (EBUSY): libfabric uses it", nfd);
		errno = EBUSY;
		return -1;
	}
	int f = floor_fd();
	int moved = REAL(fcntl)(nfd, F_DUPFD_CLOEXEC, (void *)(long)(f > nfd ? f : nfd + 1));
	int *owner = e->owner;
	shunt_fd_reset(nfd);
	if (moved < 0)
		return 0; /* out of fds: ours is lost to the application's dup2 */
	mark(moved, owner);
	if (owner)
		__atomic_store_n(owner, moved, __ATOMIC_RELEASE);
	return 0;
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

int shunt_proc_fd(struct shunt_proc_fd *p, pid_t self, int (*make)(void *), void *arg)
{
	int fd = __atomic_load_n(&p->fd, __ATOMIC_ACQUIRE);
	if (fd >= 0 && __atomic_load_n(&p->pid, __ATOMIC_RELAXED) == self)
		return fd;
	int nfd = shunt_fd_own(make(arg), NULL);
	if (nfd < 0)
		return -1;
	if (!__atomic_compare_exchange_n(&p->fd, &fd, nfd, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		shunt_fd_release(nfd); /* another thread made it first */
		return fd;
	}
	/* Should the application dup2 onto it, shunt moves it and says here. */
	struct shunt_fd *e = shunt_fd_peek(nfd);
	if (e)
		e->owner = &p->fd;
	if (fd >= 0)
		shunt_fd_release(fd);
	__atomic_store_n(&p->pid, self, __ATOMIC_RELAXED);
	return nfd;
}
