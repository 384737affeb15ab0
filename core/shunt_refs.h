/* A connection's reference count (struct shunt_conn's refs), taken and
 * dropped around every call on an accelerated fd.
 *
 * Why not always a locked instruction: one waits for every store before it
 * to leave the CPU.  On the data path those are the bytes and the head just
 * published, whose cache lines the peer's CPU holds: the reference a send
 * takes right after a receive, or the receive after a send, waited for a
 * cross-CPU round trip (about 10 ns of a 330 ns round trip, pinned).
 *
 * While the process has one thread (glibc's __libc_single_threaded, which
 * turns false for good before a second thread starts), only this thread
 * and its signal handlers touch a count.  A read-modify-write that is one
 * instruction, without the lock prefix, is atomic against a handler (a
 * signal arrives between instructions) and waits for nothing.  Elsewhere,
 * and with more threads, the atomic builtins. */
#ifndef SHUNT_REFS_H
#define SHUNT_REFS_H

/* Weak: a C library without it counts as threaded. */
extern char __libc_single_threaded __attribute__((weak));

/* 1 when only this thread (and its handlers) can touch a count now. */
static inline int shunt_refs_local(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return &__libc_single_threaded && __libc_single_threaded;
#else
	return 0;
#endif
}

/* Add one to *refs unless it is 0 (the object is dead); 1 when added. */
static inline int shunt_refs_get(unsigned *refs)
{
	unsigned r = __atomic_load_n(refs, __ATOMIC_RELAXED);
#if defined(__x86_64__) || defined(__i386__)
	if (shunt_refs_local()) {
		for (;;) {
			if (r == 0)
				return 0;
			unsigned seen = r;
			/* cmpxchg without lock: one instruction, so a
			 * handler's put cannot fall between the test and
			 * the add. */
			__asm__ __volatile__("cmpxchgl %2, %1"
					     : "+a"(seen), "+m"(*refs)
					     : "r"(r + 1)
					     : "memory", "cc");
			if (seen == r)
				return 1;
			r = seen;
		}
	}
#endif
	do {
		if (r == 0)
			return 0;
	} while (!__atomic_compare_exchange_n(refs, &r, r + 1, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return 1;
}

/* Take one from *refs; the count left. */
static inline unsigned shunt_refs_drop(unsigned *refs)
{
#if defined(__x86_64__) || defined(__i386__)
	if (shunt_refs_local()) {
		unsigned v = (unsigned)-1;
		__asm__ __volatile__("xaddl %0, %1" : "+r"(v), "+m"(*refs) : : "memory", "cc");
		return v - 1;
	}
#endif
	return __atomic_sub_fetch(refs, 1, __ATOMIC_ACQ_REL);
}

#endif
