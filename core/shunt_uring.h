/* io_uring in the process.
 *
 * io_uring reads and writes sockets inside the kernel, from submissions in
 * shared memory that shunt never sees: a recv handed to a ring would read
 * the empty kernel socket while the bytes wait in an shm ring (a hang), a
 * send would put bytes on TCP behind the ring's (reordered).  So once a
 * process is known to use io_uring, its connections stay on TCP (reason
 * io-uring): those accelerated before are demoted, nothing is decided onto
 * a transport after, and its listeners leave the registry so clients on
 * this host take TCP at once.
 *
 * Known by: the interposed entry points that create or drive a ring
 * (liburing's, whose system calls are inline `syscall` instructions libc
 * never sees, and libc's syscall()), and, at the process's first decision,
 * an io_uring descriptor already open (inherited, or made by a raw system
 * call before it). */
#ifndef SHUNT_URING_H
#define SHUNT_URING_H

/* Non-zero when the process uses io_uring.  The first call scans the
 * process's descriptors; later ones are one load. */
int shunt_uring_in_use(void);

/* The process is about to use io_uring (how: what was seen, for the log):
 * demote its accelerated connections and withdraw its listeners.  Called
 * before the ring exists, so no submission can name an accelerated fd. */
void shunt_uring_seen(const char *how);

/* Non-zero when the descriptor fd is an io_uring instance. */
int shunt_uring_fd(int fd);

#endif
