/* The agent's bounded memory of offers and relays (shuntd_pending.h).
 *
 * Two hash tables (uthash): entries by (kind, tuple), and counts by (kind,
 * source).  Every entry has the same lifetime, so entries expire in the
 * order they were made: a list in that order lets expiry look at its head
 * only. */
#include "shuntd_pending.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <utlist.h>

struct entry {
	struct {
		uint8_t kind;
		uint8_t pad;
		struct agent_tuple tuple;
	} key;                        /* zeroed whole: hashed as bytes */
	struct pending p;
	struct entry *prev, *next;    /* expiry order (utlist) */
	UT_hash_handle hh;
};

struct source {
	struct {
		uint8_t kind;
		uint8_t addr[16];
	} key;
	unsigned n;
	UT_hash_handle hh;
};

static const struct pend_limits limits[PK_COUNT] = PEND_LIMITS;
static struct entry *table;
static struct source *sources;
static struct entry *oldest;  /* the list's head; its prev is the newest */
static unsigned count[PK_COUNT];

static void make_key(struct entry *k, enum pend_kind kind, const struct agent_tuple *t)
{
	memset(&k->key, 0, sizeof k->key);
	k->key.kind = (uint8_t)kind;
	k->key.tuple = *t;
}

/* An IPv6 source counts by its /64, what one host is commonly given. */
static void source_of(struct source *s, enum pend_kind kind, const uint8_t a[16])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(&s->key, 0, sizeof s->key);
	s->key.kind = (uint8_t)kind;
	memcpy(s->key.addr, a, memcmp(a, v4mapped, 12) ? 8 : 16);
}

static struct source *source_find(enum pend_kind kind, const uint8_t a[16])
{
	struct source k, *s;
	source_of(&k, kind, a);
	HASH_FIND(hh, sources, &k.key, sizeof k.key, s);
	return s;
}

static void unlink_entry(struct entry *e)
{
	HASH_DEL(table, e);
	DL_DELETE(oldest, e);
	count[e->p.kind]--;
	struct source *s = source_find(e->p.kind, e->p.src);
	if (s && --s->n == 0) {
		HASH_DEL(sources, s);
		free(s);
	}
	free(e);
}

static struct entry *entry_of(struct pending *p)
{
	return (struct entry *)((char *)p - offsetof(struct entry, p));
}

struct pending *pending_find(enum pend_kind kind, const struct agent_tuple *t)
{
	struct entry k, *e;
	make_key(&k, kind, t);
	HASH_FIND(hh, table, &k.key, sizeof k.key, e);
	return e ? &e->p : NULL;
}

void pending_del(struct pending *p)
{
	unlink_entry(entry_of(p));
}

enum pend_result pending_add(enum pend_kind kind, const struct agent_tuple *t,
			     const uint8_t src[16], uint64_t now_ms, struct pending **out)
{
	struct pending *old = pending_find(kind, t);
	if (old && kind == PK_OFFER) {
		if (!old->contested) {
			old->contested = 1;
			memset(&old->offer, 0, sizeof old->offer);
		}
		return PEND_CONTESTED;
	}
	/* A relay for the same connection again: the new one. */
	if (old)
		pending_del(old);
	/* (A source at its cap is told so first, full table or not.) */
	struct source *s = source_find(kind, src);
	if (s && s->n >= limits[kind].per_source)
		return PEND_SOURCE_FULL;
	if (count[kind] >= limits[kind].total)
		return PEND_TABLE_FULL;
	struct entry *e = calloc(1, sizeof *e);
	if (!e)
		return PEND_TABLE_FULL;
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s) {
			free(e);
			return PEND_TABLE_FULL;
		}
		source_of(s, kind, src);
		HASH_ADD(hh, sources, key, sizeof s->key, s);
	}
	s->n++;
	make_key(e, kind, t);
	e->p.kind = (uint8_t)kind;
	e->p.tuple = *t;
	memcpy(e->p.src, src, 16);
	e->p.expires_ms = now_ms + (uint64_t)PEND_TTL_S * 1000;
	HASH_ADD(hh, table, key, sizeof e->key, e);
	DL_APPEND(oldest, e);
	count[kind]++;
	*out = &e->p;
	return PEND_HELD;
}

unsigned pending_expire(uint64_t now_ms, void (*gone)(const struct pending *p))
{
	unsigned n = 0;
	struct entry *e, *next;
	DL_FOREACH_SAFE(oldest, e, next) {
		if (e->p.expires_ms > now_ms)
			break;
		if (gone)
			gone(&e->p);
		unlink_entry(e);
		n++;
	}
	return n;
}

unsigned pending_count(enum pend_kind kind)
{
	return count[kind];
}

void pending_clear(void)
{
	while (oldest)
		unlink_entry(oldest);
}
