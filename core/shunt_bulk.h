/* Which copy a bulk writer uses into a ring: cached stores or streaming
 * stores (core/shunt_copy.h), chosen per connection by measuring both.
 *
 * Neither wins everywhere, and where the two ends run decides: streaming
 * stores doubled a 64 KiB stream between two CPUs that reach each other's
 * caches slowly, and halved it between two that share one.  A writer
 * cannot see which it is (a VM's CPU numbers say nothing of where the host
 * runs them, and that changes while it runs), but it can time its own
 * calls: the time a bulk send spends in the call (its copies, and its
 * waits for the reader to free space) per byte is the stream's pace.  So
 * it keeps the copy that went faster, and tries the other for two
 * windows in every SHUNT_BULK_PERIOD.  Except where the ends take
 * turns on the CPUs (one CPU for both, more work than CPUs): the calls
 * then give the CPU away, their time is the scheduler's, and the reader
 * finds the bytes in a cache it shares, so cached stores it is; and where
 * the writer spent a quarter of the window outside its sends (it writes in
 * bursts, or was taken off its CPU), the time says nothing of the copies,
 * and cached stores it is too.  Racy by
 * design when threads share an end: a lost update costs a window's
 * choice, never a byte. */
#ifndef SHUNT_BULK_H
#define SHUNT_BULK_H

#include <stdint.h>

/* A send of at least this many bytes is bulk: smaller ones always copy
 * with cached stores (a reader of small messages reads them at once, from
 * the writer's cache). */
#define SHUNT_BULK_MIN (16u * 1024u)
/* Bytes a choice is timed over. */
#define SHUNT_BULK_WINDOW (8u << 20)
/* Windows between two tries of the other copy (about 3% of the bytes go
 * the slower way while the choice is right). */
#define SHUNT_BULK_PERIOD 64u

/* 1 where there is a choice to make (streaming stores are x86-64 only). */
#if defined(__x86_64__)
#define SHUNT_BULK_CHOOSES 1
#else
#define SHUNT_BULK_CHOOSES 0
#endif

/* Windows a try of the other copy lasts. */
#define SHUNT_BULK_TRY 2u

struct shunt_bulk {
	uint64_t bytes;     /* in this window */
	uint64_t ns;        /* spent in this window's bulk calls */
	uint64_t start;     /* the window's first call began (monotonic ns) */
	uint32_t calls;     /* this window's bulk calls */
	uint32_t turns;     /* of which took turns */
	uint64_t rate;      /* bytes per 1024 ns: the faster of the last two
			       windows of the copy in use (0: none yet) */
	uint64_t last;      /* the last window of the copy in use */
	uint64_t tried;     /* the slower window of the try so far */
	uint32_t left;      /* windows before the next try of the other copy */
	uint8_t streaming;  /* the copy in use: 1 streaming stores */
	uint8_t trying;     /* windows of the try left (0: not trying) */
	uint8_t warm;       /* the connection's first window is over */
};

/* 1 when a bulk call should copy with streaming stores now. */
static inline int shunt_bulk_streaming(const struct shunt_bulk *b)
{
	return SHUNT_BULK_CHOOSES && (b->streaming ^ (b->trying != 0));
}

/* Account a bulk call that moved n bytes in ns nanoseconds, ending at now
 * (the monotonic clock); turn: the ends took turns on a CPU (it gave the CPU
 * away, the peer last ran on its CPU, or more tasks were runnable than
 * CPUs).  At the
 * end of a window, keep or change the copy. */
void shunt_bulk_note(struct shunt_bulk *b, uint64_t n, uint64_t ns, uint64_t now, int turn);

#endif
