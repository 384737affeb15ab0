/* Memory reserved before it is touched.
 *
 * A file in tmpfs sized with ftruncate() is a hole: its pages are taken
 * when first touched through a mapping, and when the filesystem is full
 * that touch raises SIGBUS in the application.  Docker's default /dev/shm
 * is 64 MiB: no attacker is needed.  So every mapped file of shunt (ring
 * arenas, counters, spills) reserves the range it is about to use first,
 * and a reservation that fails sends the connection to TCP (ring-alloc) or
 * skips the counters: the application never sees a signal it did not
 * cause. */
#ifndef SHUNT_RESERVE_H
#define SHUNT_RESERVE_H

#include <sys/types.h>

/* Reserve [off, off + len) of fd's file (allocating it, the size grown to
 * cover it): 0, or -1 with errno (ENOSPC, a filesystem that cannot say:
 * EOPNOTSUPP).  A range already reserved costs one system call. */
int shunt_reserve(int fd, off_t off, off_t len);

#endif
