/* An event loop's wait: poll, ppoll, select, pselect and the epoll family
 * over sets that hold accelerated connections.  The interposers translate
 * their call into the steps below (look, spin, sleep); core runs them, and
 * decides when to spin and when to sleep, as it does for a blocking call
 * on one connection (shunt_wait.h). */
#ifndef SHUNT_WAITSET_H
#define SHUNT_WAITSET_H

#include <pthread.h>
#include <stdint.h>

struct shunt_conn;

/* What a wait could do while its peer answers (shunt_conn_worth_spin). */
enum {
	SHUNT_WORTH_NOT = 0,   /* nothing: the peer sleeps; sleep too */
	SHUNT_WORTH_SPIN = 1,  /* spin: it runs on another CPU, or is unknown */
	SHUNT_WORTH_YIELD = 2, /* give it our CPU: it runs (or waits) there */
};

/* One wait over a set.  The interposer fills the steps and arg; look sets
 * what the spin needs each time it runs (the set may change). */
struct shunt_waitset {
	/* Look without blocking.  1 when the wait ends (its result in rc),
	 * 0 when nothing is ready.  kernel: ask the kernel too (0 right after
	 * a spin that saw nothing, or a sleep that told all it had: the next
	 * sleep asks it, and returns at once for a ready fd). */
	int (*look)(struct shunt_waitset *w, int kernel);
	/* Sleep until something may be ready, ms at most (-1: no limit): 1
	 * when the wait ends (rc), 0 to look again, with told set when the
	 * kernel told all it had. */
	int (*sleep)(struct shunt_waitset *w, int ms);
	/* The spin's tests (set by look): anything ready in user space, and
	 * SHUNT_WORTH_* for the set's peers. */
	int (*ready)(void *arg);
	int (*worth)(void *arg, int cpu);
	void *arg;
	pthread_mutex_t *lock; /* held across the spin, or NULL */
	int many;     /* (look) several connections or inner sets */
	int can_spin; /* (look) 0: nothing in user space to spin on */
	int told;     /* (sleep) see above */
	/* The earliest time a peer of the set stamped a wakeup (its
	 * presence's woke_ns) within t0..now, or 0 unknown: when the answer
	 * of a wait that slept came.  May be NULL. */
	uint64_t (*woke_at)(void *arg, uint64_t t0, uint64_t now);
	int spun;     /* a spin ran in this wait */
	int slept;    /* a sleep ran in this wait */
	int rc;
	uint64_t deadline_ns; /* 0: none */
};

/* Run the wait: look; spin once while spinning pays (within this
 * thread's budget, learnt as a blocking call's is from when its waits'
 * answers came: shunt_waitpolicy.h; at most shunt_wait_limits, many: the
 * wait covers several connections or inner sets), yield once where the
 * peers say SHUNT_WORTH_YIELD; then sleep and look again until a step ends
 * it.  Returns w->rc. */
int shunt_waitset_run(struct shunt_waitset *w);

/* The stamp of c's peer's last wakeup of this end (0: none known). */
uint64_t shunt_conn_woke_at(struct shunt_conn *c);

/* SHUNT_WORTH_* for a wait on c, from its peer's presence (a remote peer,
 * of which nothing is known: SHUNT_WORTH_SPIN, the budget decides). */
int shunt_conn_worth_spin(struct shunt_conn *c, int cpu);

#endif
