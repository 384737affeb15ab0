/* The one clock of the library: CLOCK_MONOTONIC (vDSO, no system call),
 * in nanoseconds or milliseconds.  Deadlines are absolute times on it. */
#ifndef SHUNT_CLOCK_H
#define SHUNT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t shunt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t shunt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Milliseconds to a deadline in ns (0 = none: -1; past: 0), rounded up, for
 * a kernel wait. */
static inline int shunt_remaining_ms(uint64_t deadline_ns)
{
	if (!deadline_ns)
		return -1;
	uint64_t now = shunt_now_ns();
	if (now >= deadline_ns)
		return 0;
	uint64_t ms = (deadline_ns - now + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

#endif
