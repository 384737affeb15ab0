/* The bulk writer's choice of copy (shunt_bulk.h). */
#include "shunt_bulk.h"

void shunt_bulk_note(struct shunt_bulk *b, uint64_t n, uint64_t ns)
{
	b->bytes += n;
	b->ns += ns;
	if (b->bytes < SHUNT_BULK_WINDOW)
		return;
	uint64_t rate = (b->bytes << 10) / (b->ns + 1);
	b->bytes = 0;
	b->ns = 0;
	if (b->trying) {
		/* The other copy must beat the one in use by an eighth: two
		 * windows of one copy differ by a few percent. */
		b->trying = 0;
		b->left = SHUNT_BULK_PERIOD;
		if (rate > b->rate + b->rate / 8) {
			b->streaming ^= 1;
			b->rate = rate;
		}
		return;
	}
	b->rate = rate;
	/* The first window of a connection is followed by a try at once. */
	if (b->left)
		b->left--;
	else
		b->trying = 1;
}
