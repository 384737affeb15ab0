/* The shared wait: how a call on an accelerated connection, and a poll,
 * select or epoll wait over several, spends the time until something is
 * ready.  Spin while spinning pays (spin_us), then sleep in the kernel on
 * the fds the transports arm. */
#ifndef SHUNT_WAIT_H
#define SHUNT_WAIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* What a wait could do while its peer answers (shunt_conn_worth_spin). */
enum {
	SHUNT_WORTH_NOT = 0,   /* nothing: the peer sleeps; sleep too */
	SHUNT_WORTH_SPIN = 1,  /* spin: it runs on another CPU, or is unknown */
	SHUNT_WORTH_YIELD = 2, /* give it our CPU: it runs (or waits) there */
};

/* A wait in poll, select or epoll: spin until ready(arg), within this
 * thread's adaptive budget (at most spin_us, SHUNT_SPIN_LOOP_X times that
 * when many: the wait covers several connections or inner sets), while
 * worth(arg, cpu) says SHUNT_WORTH_SPIN for some connection; yield once
 * when it says SHUNT_WORTH_YIELD.  1 if ready(arg) said so. */
int shunt_spin_accel(int (*ready)(void *), int (*worth)(void *, int), void *arg, int many);

/* SHUNT_WORTH_* for a wait on c, from its peer's presence (a remote peer,
 * of which nothing is known: SHUNT_WORTH_SPIN, the budget decides). */
int shunt_conn_worth_spin(struct shunt_conn *c, int cpu);
/* 1 when the machine has no CPU to spare for a spin while the peer (running
 * or about to be woken: peer_running) needs one too (shunt_spin_crowded,
 * from a sample of /proc/loadavg at most 10 ms old). */
int shunt_spin_crowded_now(int peer_running);
/* 1 when more tasks are runnable than CPUs, the pair's two aside
 * (shunt_spin_oversubscribed, same sample); now: the monotonic clock. */
int shunt_spin_oversubscribed_now(uint64_t now);

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
