#include "shm_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shm_hdr_check(const struct shm_hdr *h, uint64_t file_size,
		  const struct shunt_tuple *tuple, uint64_t *ring)
{
	if (file_size < SHM_HDR_SIZE)
		return -1;
	/* Read once: the peer can change the header at any moment, and a size
	 * checked here but read again later would let it choose where this
	 * side reads and writes.  Only the copy is used from here on. */
	uint64_t rs = __atomic_load_n(&h->ring_size, __ATOMIC_RELAXED);
	if (h->magic != SHM_MAGIC || h->version != SHM_VERSION)
		return -1;
	if (rs < SHM_MIN_RING || rs > SHM_MAX_RING || (rs & (rs - 1)))
		return -1;
	if (h->file_size != file_size || file_size != SHM_HDR_SIZE + 2 * rs)
		return -1;
	if (memcmp(&h->tuple, tuple, sizeof *tuple))
		return -1;
	*ring = rs;
	return 0;
}

int shm_target_parse(const char *t, char *name, size_t nlen, unsigned *slot, uint64_t *ring,
		     uint64_t *ino)
{
	const char *c1 = strchr(t, ':');
	if (!c1 || (size_t)(c1 - t) >= nlen || c1 - t < 3 || strncmp(t, "a-", 2))
		return -1;
	for (const char *p = t; p < c1; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == 'a'))
			return -1;
	memcpy(name, t, (size_t)(c1 - t));
	name[c1 - t] = 0;
	char *end;
	errno = 0;
	unsigned long k = strtoul(c1 + 1, &end, 10);
	if (errno || end == c1 + 1 || *end != ':' || k >= SHM_ARENA_SLOTS)
		return -1;
	const char *r = end + 1;
	unsigned long long rs = strtoull(r, &end, 10);
	if (errno || end == r || (*end && *end != ':') || rs < SHM_MIN_RING ||
	    rs > SHM_MAX_RING || (rs & (rs - 1)))
		return -1;
	*ino = 0;
	if (*end == ':') {
		const char *i = end + 1;
		unsigned long long in = strtoull(i, &end, 10);
		if (errno || end == i || *end || !in)
			return -1;
		*ino = in;
	}
	*slot = (unsigned)k;
	*ring = rs;
	return 0;
}
