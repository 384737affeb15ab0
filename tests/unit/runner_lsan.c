/* Leak checking in Criterion's runner process is off; in the workers, where
 * the tests run, it stays on.  Linked into every unit test.
 *
 * The runner executes no project code: each test runs in a new image of the
 * test program (a worker), and only the runner calls report hooks.  But
 * Criterion 2.4 itself now and then leaves one of its own 48-byte records
 * unfreed in the runner (a calloc inside libcriterion, about one run in
 * sixty), and LeakSanitizer then failed a run whose tests had all passed. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>

static int in_runner;

/* Report hooks are named after their line: this line must differ from every
 * other hook's in the program (scratch_rundir.c), or the link fails. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	(void)set;
	in_runner = 1;
}

/* Read by LeakSanitizer at exit. */
__attribute__((visibility("default"))) int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return in_runner;
}
