/* shunt_bulk: a bulk writer keeps the copy whose window went faster, tries
 * the other one window in SHUNT_BULK_PERIOD, and changes only for a clear
 * gain. */
#include <criterion/criterion.h>

#include "core/shunt_bulk.h"

/* One window of bulk calls at rate bytes per microsecond (64 KiB each). */
static void window(struct shunt_bulk *b, uint64_t per_us)
{
	const uint64_t n = 64 * 1024;
	for (uint64_t i = 0; i < SHUNT_BULK_WINDOW / n; i++)
		shunt_bulk_note(b, n, n * 1000 / per_us);
}

/* Windows until the next try; the copy in use meanwhile is asserted. */
static unsigned until_try(struct shunt_bulk *b, int streaming, uint64_t per_us)
{
	unsigned w = 0;
	while (!b->trying) {
		cr_assert_eq(shunt_bulk_streaming(b), streaming, "window %u", w);
		window(b, per_us);
		cr_assert_leq(++w, SHUNT_BULK_PERIOD + 1);
	}
	return w;
}

#if SHUNT_BULK_CHOOSES
Test(bulk, tries_streaming_after_the_first_window_and_keeps_the_faster)
{
	struct shunt_bulk b = {0};
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "a connection starts with cached stores");
	cr_assert_eq(until_try(&b, 0, 6000), 1, "the first window is followed by a try");
	cr_assert_eq(shunt_bulk_streaming(&b), 1, "the try uses the other copy");
	window(&b, 12000); /* streaming twice as fast */
	cr_assert_eq(b.trying, 0);
	cr_assert_eq(shunt_bulk_streaming(&b), 1, "the faster copy is kept");
	/* Later cached stores win again (the ends moved): found at the next
	 * try, which comes after SHUNT_BULK_PERIOD windows. */
	cr_assert_eq(until_try(&b, 1, 6000), SHUNT_BULK_PERIOD + 1);
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	window(&b, 12000);
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "back to cached stores");
}

Test(bulk, a_slower_or_barely_faster_try_changes_nothing)
{
	struct shunt_bulk b = {0};
	until_try(&b, 0, 10000);
	window(&b, 5000); /* streaming slower */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	until_try(&b, 0, 10000);
	window(&b, 10500); /* 5% faster: within the noise of two windows */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	until_try(&b, 0, 10000);
	window(&b, 12000); /* 20% faster */
	cr_assert_eq(shunt_bulk_streaming(&b), 1);
}
#endif

Test(bulk, small_calls_accumulate_to_a_window)
{
	struct shunt_bulk b = {0};
	for (int i = 0; i < 100; i++)
		shunt_bulk_note(&b, 1000, 100);
	cr_assert_eq(b.bytes, 100000);
	cr_assert_eq(b.ns, 10000);
	cr_assert_eq(b.trying, 0, "no window ended yet");
}
