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
	int spun;     /* a spin ran in this wait */
	int rc;
	uint64_t deadline_ns; /* 0: none */
};

/* Run the wait: look; spin once while spinning pays; then sleep and look
 * again until a step ends it.  Returns w->rc. */
int shunt_waitset_run(struct shunt_waitset *w);

/* A wait in poll, select or epoll: spin until ready(arg), within this
 * thread's adaptive budget (at most spin_us, SHUNT_SPIN_LOOP_X times that
 * when many: the wait covers several connections or inner sets), while
 * worth(arg, cpu) says SHUNT_WORTH_SPIN for some connection; yield once
 * when it says SHUNT_WORTH_YIELD.  1 if ready(arg) said so. */
int shunt_spin_accel(int (*ready)(void *), int (*worth)(void *, int), void *arg, int many);

/* SHUNT_WORTH_* for a wait on c, from its peer's presence (a remote peer,
 * of which nothing is known: SHUNT_WORTH_SPIN, the budget decides). */
int shunt_conn_worth_spin(struct shunt_conn *c, int cpu);

#endif
