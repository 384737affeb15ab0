/* shunt's own fds (wake sockets, registry and stats locks, the log file).
 *
 * They live in the application's fd table, so they are kept out of its way:
 * moved above the numbers it uses, marked SHUNT_FD_INTERNAL, and protected
 * from it.  close() of one of them by the application (closing "every fd")
 * is a no-op; dup2()/dup3() onto one first moves ours elsewhere and updates
 * *owner; close_range()/closefrom() skip them.  All are O_CLOEXEC, so an exec
 * closes them for real. */
#ifndef SHUNT_OWNFD_H
#define SHUNT_OWNFD_H

/* Take fd as shunt's own; returns its (possibly new) number, also stored in
 * *owner if owner is not NULL.  -1 if fd < 0. */
int shunt_fd_own(int fd, int *owner);

/* Close one of shunt's own fds. */
void shunt_fd_release(int fd);

/* The application is about to dup2/dup3 onto nfd: if it is ours, move it. */
void shunt_fd_make_room(int nfd);

/* close_range(lo, hi) without the numbers that are shunt's own. */
int shunt_fd_close_range(unsigned lo, unsigned hi, int flags);

#endif
