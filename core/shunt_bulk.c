/* The bulk writer's choice of copy (shunt_bulk.h). */
#include "shunt_bulk.h"

void shunt_bulk_note(struct shunt_bulk *b, uint64_t n, uint64_t ns, uint64_t now, int turn)
{
	if (!b->calls)
		b->start = now - ns;
	b->bytes += n;
	b->ns += ns;
	b->calls++;
	b->turns += turn != 0;
	if (b->bytes < SHUNT_BULK_WINDOW)
		return;
	uint64_t rate = (b->bytes << 10) / (b->ns + 1);
	int taking_turns = b->turns > b->calls / 4 || b->ns < (now - b->start) / 4 * 3;
	b->bytes = 0;
	b->ns = 0;
	b->calls = 0;
	b->turns = 0;
	if (taking_turns) {
		/* A quarter of the calls took turns, or a quarter of the
		 * time went outside the sends: cached stores, and no try for
		 * a period. */
		b->streaming = 0;
		b->trying = 0;
		b->tried = 0;
		b->rate = 0;
		b->last = 0;
		b->left = SHUNT_BULK_PERIOD;
		return;
	}
	if (!b->warm) {
		/* A connection's first window faults the ring's pages in and
		 * finds the caches cold: it would make any try look good. */
		b->warm = 1;
		b->left = 1;
		return;
	}
	if (b->trying) {
		/* A try is two windows, judged by the slower, against the
		 * faster of the last two of the copy in use: one disturbed
		 * window must not decide.  And it must win by an eighth. */
		b->tried = b->tried && b->tried < rate ? b->tried : rate;
		if (--b->trying)
			return;
		uint64_t tried = b->tried;
		b->tried = 0;
		b->left = SHUNT_BULK_PERIOD;
		if (tried > b->rate + b->rate / 8) {
			b->streaming ^= 1;
			b->rate = tried;
			b->last = 0;
		}
		return;
	}
	b->rate = rate > b->last ? rate : b->last;
	b->last = rate;
	if (b->left)
		b->left--;
	else
		b->trying = SHUNT_BULK_TRY;
}
