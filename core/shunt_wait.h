/* The shared wait: how a blocking call on one accelerated connection
 * spends the time until it may go on.  The policy (shunt_waitpolicy.h,
 * pure logic) says spin, yield or sleep; this runs it: the spin, then the
 * sleep on what the transport gives (a futex, or fds it arms).  An event
 * loop's wait over several connections is shunt_waitset.h. */
#ifndef SHUNT_WAIT_H
#define SHUNT_WAIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shunt_waitpolicy.h"
#include "shunt_waitload.h"
#include "shunt_waitset.h"

struct shunt_conn;

/* How long a sleep lasts before it looks again by itself.  A futex sleep
 * looks at the socket: a peer killed outright (SIGKILL, a crash) closes its
 * socket without a word in the rings, and only the socket says so; it
 * doubles from the first to the last, so an idle connection costs a wakeup
 * a second at most.  An shm poll/select/epoll sleep lasts the last at most
 * (shm_arm): its wakeup goes to a wake socket by name, and is lost once
 * anyone unlinks the name. */
#define SHUNT_RECHECK_FIRST_MS 10
#define SHUNT_RECHECK_MAX_MS 1000

/* The limits of a spin (shunt_spin_limits): spin_us and spin_max_us;
 * for an event loop's wait over many, SHUNT_SPIN_LOOP_X times spin_us, and
 * the larger of that and spin_max_us. */
void shunt_wait_limits(struct shunt_spin_limits *l, int many);

/* A wait that will not spin (why: SHUNT_SPIN_SAME_CPU, or the peer has
 * not said where it runs: unknown) gives its CPU to the peer with one
 * sched_yield() where shunt_spin_yield_ok says so (oneway: the wait
 * continues a one-way stream); c (may be NULL) counts it.  Returns 1. */
int shunt_wait_handoff(struct shunt_conn *c, enum shunt_spin_verdict why, int unknown,
		       int oneway);

/* A blocking call on accelerated connection c waits here until the
 * transport's poll() may say ev: spin (spin_us), then sleep on the fds its
 * arm() gives.  opt is SO_RCVTIMEO or SO_SNDTIMEO, asked only before the
 * first sleep (*deadline: 0 = not asked yet).  0 = look again; -1 with
 * errno EAGAIN (the timeout passed) or EINTR (a handler without
 * SA_RESTART ran). */
int shunt_conn_wait(struct shunt_conn *c, short ev, int opt, uint64_t *deadline);

/* A data call on c that found nothing to move (done bytes moved so far):
 * 1 with *ret when it returns now (MSG_DONTWAIT or O_NONBLOCK, the socket's
 * timeout, a signal), 0 when it waited and must look again.  ev is POLLIN
 * for a read, POLLOUT for a write. */
int shunt_conn_block(struct shunt_conn *c, short ev, int flags, size_t done, uint64_t *deadline,
		     ssize_t *ret);

#endif
