/* Where a client names its offer for the accepting end: a table in a file
 * of the rundir every process maps once, <rundir>/o/.names, instead of a
 * symlink per connection.  A symlink cost three system calls per
 * connection (symlink by the client, readlink and unlink by the server),
 * each making or dropping an inode; an entry costs two compare-and-swaps.
 * The symlink stays the fallback (a table with no free entry where the
 * tuple hashes), counted in the table's header while it lives: a server
 * looks for a name after the table only while the count says some client
 * made one, so a miss (a client without shunt, or one that has not named
 * its offer yet) costs no system call.  A client that cannot map the table
 * does not offer at all.
 *
 * An entry is FREE, WRITING (a client fills it), READY (named), or TAKING
 * (a server copies it out).  A client takes a FREE entry, one READY for
 * its own 4-tuple (a connection with the same tuple that died left it, as
 * a symlink would be replaced), or one claimed longer ago than any offer
 * can wait (its client died, or its server never took it).  Everything in
 * it is checked by the reader as a symlink's target is: the target is
 * parsed, the arena's owner and the header's tuple checked. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/shunt_clock.h"
#include "core/shunt_rundir_open.h"
#include "shm_internal.h"

#define NAMES_FILE ".names"
#define NAMES_ENTRIES 1024u /* a power of two */
#define NAMES_PROBE 8u      /* entries looked at from the tuple's hash */
/* An entry claimed this long ago is free whatever it says: no offer is
 * waited for longer (offer_timeout_ms is far below it). */
#define NAMES_STALE_MS 10000u

enum { N_FREE = 0, N_WRITING, N_READY, N_TAKING };

struct name_entry {
	uint32_t state;
	uint32_t pad;
	uint64_t stamp_ms;        /* CLOCK_MONOTONIC, when claimed */
	struct shunt_tuple tuple;
	char target[76];          /* NUL-terminated */
};

_Static_assert(sizeof(struct name_entry) == 128, "two cache lines an entry");

/* The file: this header, then the entries. */
struct names_head {
	uint32_t links; /* offers named by a symlink in o/, not taken or
			   removed yet (one left by a killed client stays
			   counted: servers then look for names, as before) */
	uint8_t pad[124];
};

_Static_assert(sizeof(struct names_head) == sizeof(struct name_entry), "entries stay aligned");

static struct shunt_map_once names_once;

static struct names_head *names_map(void)
{
	return shm_map_once(&names_once, NAMES_FILE, (NAMES_ENTRIES + 1) * sizeof(struct name_entry));
}

static struct name_entry *names_get(void)
{
	struct names_head *h = names_map();
	return h ? (struct name_entry *)(h + 1) : NULL;
}

int shm_names_ready(void)
{
	return names_map() != NULL;
}

void shm_names_link(int delta)
{
	struct names_head *h = names_map();
	if (!h)
		return;
	if (delta > 0) {
		__atomic_add_fetch(&h->links, 1, __ATOMIC_SEQ_CST);
		return;
	}
	uint32_t n = __atomic_load_n(&h->links, __ATOMIC_RELAXED);
	while (n && !__atomic_compare_exchange_n(&h->links, &n, n - 1, 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
		;
}

int shm_names_links(void)
{
	struct names_head *h = names_map();
	return !h || __atomic_load_n(&h->links, __ATOMIC_SEQ_CST) != 0;
}

static unsigned hash_of(const struct shunt_tuple *t)
{
	uint64_t h = 1469598103934665603ull;
	const uint8_t *p = (const uint8_t *)t;
	for (size_t i = 0; i < sizeof *t; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (unsigned)(h ^ (h >> 32));
}

static int same(const struct name_entry *e, const struct shunt_tuple *t)
{
	return memcmp(&e->tuple, t, sizeof *t) == 0;
}

static int claim(struct name_entry *e, uint32_t st, uint64_t now)
{
	if (!__atomic_compare_exchange_n(&e->state, &st, N_WRITING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	e->stamp_ms = now;
	return 1;
}

int shm_names_put(const struct shunt_tuple *t, const char *target)
{
	struct name_entry *tab = names_get();
	size_t len = strlen(target);
	if (!tab || len >= sizeof tab->target)
		return -1;
	unsigned h = hash_of(t);
	uint64_t now = shunt_now_ms();
	struct name_entry *got = NULL;
	/* The tuple's own old entry first: two READY for one tuple would let
	 * the server take the dead one. */
	for (unsigned i = 0; i < NAMES_PROBE && !got; i++) {
		struct name_entry *e = &tab[(h + i) & (NAMES_ENTRIES - 1)];
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == N_READY && same(e, t) &&
		    claim(e, N_READY, now))
			got = e;
	}
	for (unsigned i = 0; i < NAMES_PROBE && !got; i++) {
		struct name_entry *e = &tab[(h + i) & (NAMES_ENTRIES - 1)];
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		uint64_t stamp = __atomic_load_n(&e->stamp_ms, __ATOMIC_RELAXED);
		if ((st == N_FREE || now - stamp > NAMES_STALE_MS) && claim(e, st, now))
			got = e;
	}
	if (!got)
		return -1;
	got->tuple = *t;
	memcpy(got->target, target, len + 1);
	__atomic_store_n(&got->state, N_READY, __ATOMIC_RELEASE);
	return 0;
}

/* The READY entry named for t with target (NULL: any), claimed TAKING. */
static struct name_entry *find_claim(const struct shunt_tuple *t, const char *target)
{
	struct name_entry *tab = names_get();
	if (!tab)
		return NULL;
	unsigned h = hash_of(t);
	for (unsigned i = 0; i < NAMES_PROBE; i++) {
		struct name_entry *e = &tab[(h + i) & (NAMES_ENTRIES - 1)];
		uint32_t st = N_READY;
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != N_READY || !same(e, t) ||
		    (target && strncmp(e->target, target, sizeof e->target)))
			continue;
		if (!__atomic_compare_exchange_n(&e->state, &st, N_TAKING, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		/* Ours now; it was READY for t when claimed. */
		if (same(e, t))
			return e;
		__atomic_store_n(&e->state, N_READY, __ATOMIC_RELEASE);
	}
	return NULL;
}

int shm_names_take(const struct shunt_tuple *t, char *target, size_t len)
{
	struct name_entry *e = find_claim(t, NULL);
	if (!e)
		return 0;
	size_t n = strnlen(e->target, sizeof e->target);
	if (n >= len || n == sizeof e->target)
		n = 0; /* unterminated or too long: no target (refused when parsed) */
	memcpy(target, e->target, n);
	target[n] = 0;
	__atomic_store_n(&e->state, N_FREE, __ATOMIC_RELEASE);
	return 1;
}

void shm_names_drop(const struct shunt_tuple *t, const char *target)
{
	struct name_entry *e = find_claim(t, target);
	if (e)
		__atomic_store_n(&e->state, N_FREE, __ATOMIC_RELEASE);
}

int shm_names_unlink(const char *path)
{
	if (unlink(path) < 0)
		return -1;
	shm_names_link(-1);
	return 0;
}
