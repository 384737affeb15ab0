/* Where one end of a connection is, published in memory both ends map
 * (the shm header holds one per end): the peer's wait policy reads it
 * (shunt_waitpolicy.h) to decide whether a spin can pay. */
#ifndef SHUNT_PRESENCE_H
#define SHUNT_PRESENCE_H

#include <stdint.h>

/* Where one end of a connection is.  Written by that end only. */
enum shunt_where {
	SHUNT_AT_APP = 0,   /* in the application (or between calls) */
	SHUNT_AT_SPIN = 1,  /* in a wait, spinning */
	SHUNT_AT_SLEEP = 2, /* in a wait, asleep in the kernel */
};

/* One end's published presence: a cache line of its own in the shared
 * header.  The peer treats every field as a hint (and as hostile): a wrong
 * value costs a spin or a sleep, never a lost byte. */
struct shunt_presence {
	uint32_t where; /* enum shunt_where */
	int32_t cpu;    /* the CPU it was on when it last changed where; -1 unknown */
	uint32_t beat;  /* advances while it spins: a spinner whose beat stops
			   has been taken off its CPU */
	uint32_t pad0;
	uint64_t woke_ns; /* when it last woke its sleeping peer (the monotonic
			     clock, one per host): the answer's time, for a
			     peer that slept through it */
	uint32_t pad[10];
} __attribute__((aligned(64)));

/* Publish where this end is now (a relaxed store each: the peer reads
 * hints; the CPU is asked only when it matters). */
static inline void shunt_presence_set(struct shunt_presence *p, enum shunt_where w, int cpu)
{
	__atomic_store_n(&p->cpu, cpu, __ATOMIC_RELAXED);
	__atomic_store_n(&p->where, (uint32_t)w, __ATOMIC_RELEASE);
}

/* shunt_presence_set, storing only what changed.  The peer reads the line
 * whenever it waits, so a store must first take the line back from it (a
 * cross-CPU round trip), and the next locked instruction waits for that:
 * on the data path, a round trip per call before the data could move. */
static inline void shunt_presence_note(struct shunt_presence *p, enum shunt_where w, int cpu)
{
	if (__atomic_load_n(&p->cpu, __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(&p->cpu, cpu, __ATOMIC_RELAXED);
	if (__atomic_load_n(&p->where, __ATOMIC_RELAXED) != (uint32_t)w)
		__atomic_store_n(&p->where, (uint32_t)w, __ATOMIC_RELEASE);
}

#endif
