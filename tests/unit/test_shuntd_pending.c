/* Unit tests for agent/shuntd_pending.c: what shuntd holds for remote
 * peers stays within its caps (per source, an IPv6 source by its /64; in
 * all), expires in order, and a key is held once. */
#include "agent/shuntd_pending.h"

#include <criterion/criterion.h>
#include <string.h>

static struct agent_tuple tuple(uint8_t src_last, uint16_t cport)
{
	struct agent_tuple t;
	memset(&t, 0, sizeof t);
	t.caddr[10] = t.caddr[11] = 0xff;
	t.caddr[12] = 198, t.caddr[13] = 18, t.caddr[15] = src_last;
	t.saddr[10] = t.saddr[11] = 0xff;
	t.saddr[12] = 198, t.saddr[13] = 19, t.saddr[15] = 1;
	t.cport = cport;
	t.sport = 6379;
	return t;
}

static const struct pend_limits limits[PK_COUNT] = PEND_LIMITS;

Test(pending, caps_per_source_then_in_all, .fini = pending_clear)
{
	struct pending *p;
	unsigned per = limits[PK_OFFER].per_source, total = limits[PK_OFFER].total;
	unsigned sources = total / per, held = 0;
	for (unsigned s = 0; s <= sources; s++)
		for (unsigned i = 0; i <= per; i++) {
			struct agent_tuple t = tuple((uint8_t)(s + 1), (uint16_t)(1 + i));
			enum pend_result r = pending_add(PK_OFFER, &t, t.caddr, 0, &p);
			if (s < sources)
				cr_assert_eq(r, i < per ? PEND_HELD : PEND_SOURCE_FULL, "s=%u i=%u", s, i);
			else
				cr_assert_eq(r, PEND_TABLE_FULL, "i=%u", i);
			held += r == PEND_HELD;
		}
	cr_assert_eq(held, total);
	cr_assert_eq(pending_count(PK_OFFER), total);
	/* Another kind has caps of its own. */
	struct agent_tuple t = tuple(1, 1);
	cr_assert_eq(pending_add(PK_RELAY_C, &t, t.caddr, 0, &p), PEND_HELD);
	/* Taking one makes room for its source. */
	struct pending *q = pending_find(PK_OFFER, &t);
	cr_assert(q);
	pending_del(q);
	cr_assert_null(pending_find(PK_OFFER, &t));
	t = tuple(1, 60000);
	cr_assert_eq(pending_add(PK_OFFER, &t, t.caddr, 0, &p), PEND_HELD);
}

Test(pending, an_ipv6_source_counts_by_its_64, .fini = pending_clear)
{
	struct pending *p;
	uint8_t src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1};
	unsigned per = limits[PK_OFFER].per_source;
	for (unsigned i = 0; i < per; i++) {
		struct agent_tuple t = tuple(1, (uint16_t)(1 + i));
		src[15] = (uint8_t)i; /* a new address of the same /64 each time */
		src[14] = (uint8_t)(i >> 8);
		cr_assert_eq(pending_add(PK_OFFER, &t, src, 0, &p), PEND_HELD);
	}
	struct agent_tuple t = tuple(1, 65000);
	src[9] = 0x77;
	cr_assert_eq(pending_add(PK_OFFER, &t, src, 0, &p), PEND_SOURCE_FULL);
	src[7] = 2; /* another /64 */
	cr_assert_eq(pending_add(PK_OFFER, &t, src, 0, &p), PEND_HELD);
}

static unsigned gone_n;
static void gone(const struct pending *p)
{
	(void)p;
	gone_n++;
}

Test(pending, entries_expire_in_order, .fini = pending_clear)
{
	struct pending *p;
	struct agent_tuple a = tuple(1, 1), b = tuple(1, 2);
	cr_assert_eq(pending_add(PK_OFFER, &a, a.caddr, 1000, &p), PEND_HELD);
	p->uid = 7;
	cr_assert_eq(pending_add(PK_OFFER, &b, b.caddr, 2000, &p), PEND_HELD);
	cr_assert_eq(pending_count(PK_OFFER), 2);
	uint64_t ttl = (uint64_t)PEND_TTL_S * 1000;
	cr_assert_eq(pending_expire(1000 + ttl - 1, gone), 0);
	cr_assert_eq(pending_expire(1000 + ttl, gone), 1);
	cr_assert_null(pending_find(PK_OFFER, &a));
	cr_assert_not_null(pending_find(PK_OFFER, &b));
	cr_assert_eq(pending_expire(2000 + ttl, gone), 1);
	cr_assert_eq(gone_n, 2);
	cr_assert_eq(pending_count(PK_OFFER), 0);
	/* The source's count went with them: a full cap's worth again. */
	for (unsigned i = 0; i < limits[PK_OFFER].per_source; i++) {
		struct agent_tuple t = tuple(1, (uint16_t)(1 + i));
		cr_assert_eq(pending_add(PK_OFFER, &t, t.caddr, 0, &p), PEND_HELD);
	}
}

/* Issue 14 item 3: a second offer for one connection (someone sharing the
 * client's address filed one before or after the client) leaves none to
 * take, whichever came first, until the key's lifetime ends. */
Test(pending, a_second_offer_contests_the_connection, .fini = pending_clear)
{
	struct pending *p;
	struct agent_tuple a = tuple(1, 1);
	cr_assert_eq(pending_add(PK_OFFER, &a, a.caddr, 1000, &p), PEND_HELD);
	p->uid = 7;
	p->offer.ring_size = 65536;
	p->offer.addrlen = 16;
	cr_assert_eq(pending_add(PK_OFFER, &a, a.caddr, 2000, &p), PEND_CONTESTED);
	cr_assert_eq(pending_add(PK_OFFER, &a, a.caddr, 3000, &p), PEND_CONTESTED);
	struct pending *q = pending_find(PK_OFFER, &a);
	cr_assert_not_null(q, "the key stays held");
	cr_assert(q->contested);
	cr_assert_eq(q->offer.ring_size, 0, "the first offer is forgotten");
	cr_assert_eq(q->offer.addrlen, 0);
	cr_assert_eq(pending_count(PK_OFFER), 1);
	/* A relay for one connection again is the newer one. */
	cr_assert_eq(pending_add(PK_RELAY_C, &a, a.caddr, 1000, &p), PEND_HELD);
	cr_assert_eq(pending_add(PK_RELAY_C, &a, a.caddr, 1000, &p), PEND_HELD);
	cr_assert_eq(pending_count(PK_RELAY_C), 1);
	/* Its lifetime is the first offer's; then the key is free again. */
	uint64_t ttl = (uint64_t)PEND_TTL_S * 1000;
	cr_assert_eq(pending_expire(1000 + ttl, NULL), 2);
	cr_assert_null(pending_find(PK_OFFER, &a));
	cr_assert_eq(pending_add(PK_OFFER, &a, a.caddr, 5000, &p), PEND_HELD);
	cr_assert_not(p->contested);
}
