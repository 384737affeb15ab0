/* shunt_bulk: a bulk writer keeps the faster copy, tries the other for
 * SHUNT_BULK_TRY windows in every SHUNT_BULK_PERIOD and changes only for a
 * clear gain; ends that take turns on a CPU, and windows mostly spent
 * outside the sends, get cached stores. */
#include <criterion/criterion.h>

#include "core/shunt_bulk.h"

/* The clock the calls end at: back to back unless a test leaves a gap. */
static uint64_t clock_ns = 1000000;

/* One bulk call of n bytes at per_us bytes per microsecond, gap ns after
 * the previous one; turn as shunt_bulk_note's. */
static void call(struct shunt_bulk *b, uint64_t n, uint64_t per_us, uint64_t gap, int turn)
{
	uint64_t ns = n * 1000 / per_us;
	clock_ns += gap + ns;
	shunt_bulk_note(b, n, ns, clock_ns, turn);
}

/* One window of 64 KiB calls at per_us, every k-th taking turns (k 0:
 * none), gap ns between calls. */
static void window_of(struct shunt_bulk *b, uint64_t per_us, unsigned k, uint64_t gap)
{
	const uint64_t n = 64 * 1024;
	for (uint64_t i = 0; i < SHUNT_BULK_WINDOW / n; i++)
		call(b, n, per_us, gap, k && i % k == 0);
}

static void window(struct shunt_bulk *b, uint64_t per_us)
{
	window_of(b, per_us, 0, 0);
}

/* Windows until the next try; the copy in use meanwhile is asserted. */
static unsigned until_try(struct shunt_bulk *b, int streaming, uint64_t per_us)
{
	unsigned w = 0;
	while (!b->trying) {
		cr_assert_eq(shunt_bulk_streaming(b), streaming, "window %u", w);
		window(b, per_us);
		cr_assert_leq(++w, SHUNT_BULK_PERIOD + 3);
	}
	return w;
}

/* The try's windows, each at per_us; the other copy is asserted. */
static void try_at(struct shunt_bulk *b, uint64_t per_us)
{
	int other = !b->streaming;
	for (unsigned w = 0; w < SHUNT_BULK_TRY; w++) {
		cr_assert_neq(b->trying, 0, "the try lasts %u windows", SHUNT_BULK_TRY);
		cr_assert_eq(shunt_bulk_streaming(b), other, "the try uses the other copy");
		window(b, per_us);
	}
	cr_assert_eq(b->trying, 0);
}

#if SHUNT_BULK_CHOOSES
Test(bulk, tries_streaming_after_warming_up_and_keeps_the_faster)
{
	struct shunt_bulk b = {0};
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "a connection starts with cached stores");
	/* a first window (cold) that does not count, then two */
	cr_assert_eq(until_try(&b, 0, 6000), 3);
	try_at(&b, 12000); /* streaming twice as fast */
	cr_assert_eq(shunt_bulk_streaming(&b), 1, "the faster copy is kept");
	/* Later cached stores win again (the ends moved): found at the next
	 * try, after SHUNT_BULK_PERIOD windows. */
	cr_assert_eq(until_try(&b, 1, 6000), SHUNT_BULK_PERIOD + 1);
	try_at(&b, 12000);
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "back to cached stores");
}

Test(bulk, the_cold_first_window_does_not_count)
{
	struct shunt_bulk b = {0};
	window(&b, 1000); /* faulting pages in: slow */
	window(&b, 10000);
	window(&b, 10000);
	try_at(&b, 9000); /* far above the first window, below the rest */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
}

Test(bulk, a_slower_barely_faster_or_once_faster_try_changes_nothing)
{
	struct shunt_bulk b = {0};
	until_try(&b, 0, 10000);
	try_at(&b, 5000); /* streaming slower */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	until_try(&b, 0, 10000);
	try_at(&b, 10500); /* 5% faster: within the noise of two windows */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	until_try(&b, 0, 10000);
	window(&b, 12000); /* fast once, */
	window(&b, 10000); /* then not */
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "a try is judged by its slower window");
	until_try(&b, 0, 10000);
	try_at(&b, 12000); /* 20% faster, both windows */
	cr_assert_eq(shunt_bulk_streaming(&b), 1);
}

Test(bulk, one_disturbed_window_of_the_copy_in_use_does_not_decide)
{
	struct shunt_bulk b = {0};
	until_try(&b, 0, 10000);
	try_at(&b, 5000);
	/* windows at 10000, then the last before the try disturbed */
	while (b.left > 0)
		window(&b, 10000);
	window(&b, 6000);
	cr_assert_neq(b.trying, 0);
	try_at(&b, 9000); /* beats the disturbed window, not the one before */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
}

/* Ends that take turns on the CPU get cached stores, however fast the
 * streaming try or the window looked, and no try for a period; a few
 * calls that took turns change nothing. */
Test(bulk, ends_taking_turns_get_cached_stores)
{
	struct shunt_bulk b = {0};
	until_try(&b, 0, 6000);
	window_of(&b, 12000, 2, 0); /* a fast try, but half its calls took turns */
	cr_assert_eq(shunt_bulk_streaming(&b), 0);
	cr_assert_eq(b.trying, 0);
	cr_assert_eq(until_try(&b, 0, 6000), SHUNT_BULK_PERIOD + 1);
	try_at(&b, 12000);
	cr_assert_eq(shunt_bulk_streaming(&b), 1, "a clean try wins");
	window_of(&b, 12000, 10, 0); /* one call in ten: noise */
	cr_assert_eq(shunt_bulk_streaming(&b), 1);
	window_of(&b, 12000, 3, 0); /* one in three: taking turns */
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "back to cached stores");
}

/* A writer that spends a quarter of the time or more between its sends:
 * the time says nothing of the copies, so cached stores. */
Test(bulk, a_window_mostly_outside_the_sends_says_nothing)
{
	struct shunt_bulk b = {0};
	until_try(&b, 0, 6000);
	try_at(&b, 12000);
	cr_assert_eq(shunt_bulk_streaming(&b), 1);
	/* each call ~5.5 us, then 1.6 us elsewhere: under a quarter */
	window_of(&b, 12000, 0, 1600);
	cr_assert_eq(shunt_bulk_streaming(&b), 1, "a little time between sends is fine");
	/* then 3 us elsewhere before each: over a quarter */
	window_of(&b, 12000, 0, 3000);
	cr_assert_eq(shunt_bulk_streaming(&b), 0, "back to cached stores");
	cr_assert_eq(b.trying, 0);
}
#endif

Test(bulk, small_calls_accumulate_to_a_window)
{
	struct shunt_bulk b = {0};
	for (int i = 0; i < 100; i++)
		call(&b, 1000, 10000, 0, 0);
	cr_assert_eq(b.bytes, 100000);
	cr_assert_eq(b.ns, 10000);
	cr_assert_eq(b.calls, 100);
	cr_assert_eq(b.trying, 0, "no window ended yet");
}
