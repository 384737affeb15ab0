/* Test hooks for fork safety (issue 14), compiled only into
 * libshunt-testhooks.so, a copy of libshunt.so for tests/hostile: never
 * into the library that ships.
 *
 *   shunt_test_lock_count(), shunt_test_lock_name(i)   the registered locks
 *   shunt_test_lock_hold(i)   a thread of ours takes lock i and holds it
 *                             until a fork's prepare handler wants it
 *   shunt_test_locks_free()   in a child: -1 when every lock can be taken
 *                             (each is taken and given back), else the
 *                             first held one */
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "core/shunt_core.h"
#include "core/shunt_forklock.h"

SHUNT_EXPORT int shunt_test_lock_count(void);
SHUNT_EXPORT const char *shunt_test_lock_name(int i);
SHUNT_EXPORT int shunt_test_lock_hold(int i);
SHUNT_EXPORT int shunt_test_locks_free(void);

int shunt_test_lock_count(void)
{
	return shunt_fork_lock_count();
}

const char *shunt_test_lock_name(int i)
{
	return i >= 0 && i < shunt_fork_lock_count() ? shunt_fork_lock_name(i) : NULL;
}

struct hold {
	int i;
	sem_t held;
};

static void *holder(void *arg)
{
	struct hold *h = arg;
	shunt_fork_lock_take(h->i);
	sem_post(&h->held);
	/* Until a fork wants it: a library without fork handlers never
	 * does, and its child finds the lock held. */
	while (!shunt_fork_preparing()) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	shunt_fork_lock_give(h->i);
	return NULL;
}

int shunt_test_lock_hold(int i)
{
	static struct hold h;
	pthread_t t;
	if (i < 0 || i >= shunt_fork_lock_count())
		return -1;
	h.i = i;
	sem_init(&h.held, 0, 0);
	if (pthread_create(&t, NULL, holder, &h) != 0)
		return -1;
	pthread_detach(t);
	while (sem_wait(&h.held) < 0)
		;
	sem_destroy(&h.held);
	return 0;
}

int shunt_test_locks_free(void)
{
	for (int i = 0; i < shunt_fork_lock_count(); i++) {
		if (!shunt_fork_lock_try(i))
			return i;
		shunt_fork_lock_give(i);
	}
	return -1;
}
