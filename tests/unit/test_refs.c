/* shunt_refs: a count taken and dropped without a locked instruction while
 * the process has one thread, with the atomic builtins once it has more;
 * either way the same numbers, and a dead object (0) stays dead. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "core/shunt_refs.h"

#define ROUNDS 2000000

Test(refs, get_and_drop_count_and_a_dead_count_stays_dead)
{
	unsigned refs = 1;
	cr_assert_eq(shunt_refs_get(&refs), 1);
	cr_assert_eq(refs, 2);
	cr_assert_eq(shunt_refs_drop(&refs), 1);
	cr_assert_eq(shunt_refs_drop(&refs), 0);
	cr_assert_eq(shunt_refs_get(&refs), 0, "a dead object is not revived");
	cr_assert_eq(refs, 0);
}

static unsigned shared = 1;

static void *churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		shunt_refs_get(&shared);
		shunt_refs_drop(&shared);
	}
	return NULL;
}

/* With a second thread the counts are atomic: two threads taking and
 * dropping at once leave the count where it was. */
Test(refs, a_second_thread_makes_the_count_atomic)
{
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, churn, NULL), 0);
	cr_assert_eq(shunt_refs_local(), 0, "a process with two threads is not local");
	churn(NULL);
	pthread_join(t, NULL);
	cr_assert_eq(shared, 1, "count lost updates: %u", shared);
}
