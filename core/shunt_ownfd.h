/* shunt's own fds (wake sockets, registry and stats locks, the log file).
 *
 * They live in the application's fd table, so they are kept out of its way:
 * moved above the numbers it uses, marked SHUNT_FD_INTERNAL, and protected
 * from it.  close() of one of them by the application (closing "every fd")
 * is a no-op; dup2()/dup3() onto one first moves ours elsewhere and updates
 * *owner; close_range()/closefrom() skip them.  All are O_CLOEXEC, so an exec
 * closes them for real.
 *
 * The fds a dependency creates while shunt's guard is held (libfabric's
 * sockets, socketpairs, epoll fds, its accepted sockets) are "borrowed":
 * moved up and protected the same way as they are made, but the dependency
 * keeps their numbers, so they cannot move later.  Its own close() (under
 * the guard) closes them for real; the application's close() is a no-op and
 * close_range()/closefrom() skip them; the application's dup2()/dup3() onto
 * one fails with EBUSY (replacing the file under libfabric would hand it the
 * application's file).  A forked child does not use its parent's libfabric
 * objects: there they are the application's again. */
#ifndef SHUNT_OWNFD_H
#define SHUNT_OWNFD_H

#include <sys/types.h>

#ifdef SHUNT_NO_INTERPOSE
#include <unistd.h>

/* In a program of its own (shuntd) shunt's fds are its program's. */
static inline int shunt_fd_own(int fd, int *owner)
{
	if (owner && fd >= 0)
		*owner = fd;
	return fd;
}

static inline void shunt_fd_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
#else

/* Take fd as shunt's own; returns its (possibly new) number, also stored in
 * *owner if owner is not NULL.  -1 if fd < 0. */
int shunt_fd_own(int fd, int *owner);

/* Close one of shunt's own fds. */
void shunt_fd_release(int fd);

/* The application is about to dup2/dup3 onto nfd: if it is ours, move it.
 * -1 (errno EBUSY) if it is borrowed and cannot move. */
int shunt_fd_make_room(int nfd);

/* A new fd made by a dependency under the guard (fd < 0 is returned as
 * is): moves it up, makes it close-on-exec and marks it borrowed.  Returns
 * the number to hand the dependency; errno is kept. */
int shunt_fd_borrow(int fd);

/* After fork, in the child: borrowed fds become ordinary ones. */
void shunt_fd_borrowed_after_fork(void);

/* close_range(lo, hi) without the numbers that are shunt's own. */
int shunt_fd_close_range(unsigned lo, unsigned hi, int flags);

/* One fd of shunt's own per process (the log file, the wakeup sender),
 * made on first use by make(arg): the number and the process it belongs
 * to.  A forked child makes its own and closes the copy it inherited (the
 * parent's file).  Returns the fd, or -1 when make() fails. */
struct shunt_proc_fd {
	int fd;
	pid_t pid;
};
#define SHUNT_PROC_FD_INIT {-1, 0}
int shunt_proc_fd(struct shunt_proc_fd *p, pid_t self, int (*make)(void *), void *arg);

#endif /* SHUNT_NO_INTERPOSE */

/* Fds an accelerated connection may still take without crowding the
 * application out of its limit: below this headroom, new connections stay
 * on TCP (fd-limit). */
#define SHUNT_FD_MARGIN 64

/* How many fds are left under RLIMIT_NOFILE with fd, a new socket of the
 * application, open: its number stands for the application's fds (the
 * kernel hands out the lowest free one), and each accelerated connection
 * counts for the wake sockets it may bind. */
int shunt_fd_headroom(int fd);

#endif
