/* The library's own locks across fork() (shunt_forklock.h). */
#include "shunt_forklock.h"

#include <sched.h>
#include <string.h>

#define MAX_LOCKS 32

static struct lock {
	enum shunt_lock_rank rank;
	const char *name;
	pthread_mutex_t *mu; /* or */
	uint8_t *byte;
} locks[MAX_LOCKS];
static int nlocks;
static int preparing;

static void take(struct lock *l)
{
	if (l->mu) {
		pthread_mutex_lock(l->mu);
		return;
	}
	/* Byte locks are held for a few loads. */
	while (__atomic_exchange_n(l->byte, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void give(struct lock *l)
{
	if (l->mu)
		pthread_mutex_unlock(l->mu);
	else
		__atomic_store_n(l->byte, 0, __ATOMIC_RELEASE);
}

static void prepare(void)
{
	__atomic_store_n(&preparing, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < nlocks; i++)
		take(&locks[i]);
}

static void parent(void)
{
	for (int i = nlocks - 1; i >= 0; i--)
		give(&locks[i]);
	__atomic_store_n(&preparing, 0, __ATOMIC_RELEASE);
}

/* The child's only thread took them all in prepare(); a mutex is made new
 * rather than unlocked, as its owner was another thread's id. */
static void child(void)
{
	for (int i = 0; i < nlocks; i++) {
		if (locks[i].mu)
			pthread_mutex_init(locks[i].mu, NULL);
		else
			__atomic_store_n(locks[i].byte, 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&preparing, 0, __ATOMIC_RELEASE);
}

/* Constructors run one at a time, before any thread of ours: no lock. */
static void add(struct lock l)
{
	if (nlocks == MAX_LOCKS)
		__builtin_trap(); /* a new lock: raise MAX_LOCKS */
	if (!nlocks)
		pthread_atfork(prepare, parent, child);
	int i = nlocks++;
	for (; i > 0 && locks[i - 1].rank > l.rank; i--)
		locks[i] = locks[i - 1];
	locks[i] = l;
}

void shunt_fork_mutex(pthread_mutex_t *mu, enum shunt_lock_rank rank, const char *name)
{
	add((struct lock){rank, name, mu, NULL});
}

void shunt_fork_bytelock(uint8_t *lock, enum shunt_lock_rank rank, const char *name)
{
	add((struct lock){rank, name, NULL, lock});
}

int shunt_fork_lock_count(void)
{
	return nlocks;
}

const char *shunt_fork_lock_name(int i)
{
	const char *slash = strrchr(locks[i].name, '/');
	return slash ? slash + 1 : locks[i].name;
}

void shunt_fork_lock_take(int i)
{
	take(&locks[i]);
}

int shunt_fork_lock_try(int i)
{
	if (locks[i].mu)
		return pthread_mutex_trylock(locks[i].mu) == 0;
	return !__atomic_exchange_n(locks[i].byte, 1, __ATOMIC_ACQUIRE);
}

void shunt_fork_lock_give(int i)
{
	give(&locks[i]);
}

int shunt_fork_preparing(void)
{
	return __atomic_load_n(&preparing, __ATOMIC_ACQUIRE);
}
