/* How busy the machine is, for the wait policy: the runnable tasks of
 * /proc/loadavg, sampled at most every SHUNT_CROWD_SAMPLE_NS and shared by
 * every wait of the process. */
#ifndef SHUNT_WAITLOAD_H
#define SHUNT_WAITLOAD_H

#include <stdint.h>

/* How often the machine's runnable count is read: a pread of a small
 * /proc file (a couple of microseconds). */
#define SHUNT_CROWD_SAMPLE_NS 10000000ull

/* The runnable count (-1 unknown) and, in *ncpus, the CPUs online; now is
 * the monotonic clock when the caller has read it, else 0.  (Racy statics:
 * a stale answer costs a spin, a yield or a sleep, never a byte.) */
int shunt_runnable_sample(unsigned *ncpus, uint64_t now);

/* 1 when the machine has no CPU to spare for a spin while the peer (running
 * or about to be woken: peer_running) needs one too (shunt_spin_crowded,
 * from a sample at most 10 ms old). */
int shunt_spin_crowded_now(int peer_running);
/* 1 when more tasks are runnable than CPUs, the pair's two aside
 * (shunt_spin_oversubscribed, same sample); now: the monotonic clock. */
int shunt_spin_oversubscribed_now(uint64_t now);

#endif
