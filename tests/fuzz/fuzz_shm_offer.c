/* libFuzzer target for what an shm client hands the accepting end: the
 * offer's target ("a-<pid>-<n>:<slot>:<ring>:<inode>", read from a name
 * anyone with the rundir can write) and the ring header in shared memory
 * (shm/shm_proto.c).
 *
 * Input: the target up to the first NUL (at most 95 bytes), then a header
 * page, then the 8-byte file size; whatever is missing is zero.  A target
 * that parses has a name of the safe alphabet that fits, a slot and ring
 * size in bounds, and prints back to a target that parses to the same
 * fields.  A header that checks has a ring in bounds and a file size that
 * holds exactly its two rings; nothing past the page is read (ASan). */
#include "shm/shm_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static void target(const char *t)
{
	char name[48], name2[48];
	unsigned slot, slot2;
	uint64_t ring, ring2, ino, ino2;
	if (shm_target_parse(t, name, sizeof name, &slot, &ring, &ino) < 0)
		return;
	size_t n = strlen(name);
	CHECK(n >= 3 && n < sizeof name && !strncmp(name, "a-", 2));
	for (size_t i = 0; i < n; i++)
		CHECK((name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == 'a');
	CHECK(slot < SHM_ARENA_SLOTS);
	CHECK(ring >= SHM_MIN_RING && ring <= SHM_MAX_RING && !(ring & (ring - 1)));
	char again[128];
	if (ino)
		snprintf(again, sizeof again, "%s:%u:%llu:%llu", name, slot, (unsigned long long)ring,
			 (unsigned long long)ino);
	else
		snprintf(again, sizeof again, "%s:%u:%llu", name, slot, (unsigned long long)ring);
	CHECK(shm_target_parse(again, name2, sizeof name2, &slot2, &ring2, &ino2) == 0);
	CHECK(!strcmp(name, name2) && slot == slot2 && ring == ring2 && ino == ino2);
	/* Too small a buffer for the name: refused, never cut. */
	CHECK(shm_target_parse(t, name2, n, &slot2, &ring2, &ino2) < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char t[96];
	size_t tl = 0;
	while (tl < size && tl < sizeof t - 1 && data[tl])
		tl++;
	memcpy(t, data, tl);
	t[tl] = 0;
	target(t);
	size_t off = tl < size ? tl + 1 : size;
	/* The page exactly, on the heap: a read past it is reported. */
	struct shm_hdr *h = calloc(1, SHM_HDR_SIZE);
	if (!h)
		return 0;
	size_t hl = size - off < SHM_HDR_SIZE ? size - off : SHM_HDR_SIZE;
	memcpy(h, data + off, hl);
	off += hl;
	uint64_t fsize = 0;
	if (size - off >= sizeof fsize)
		memcpy(&fsize, data + off, sizeof fsize);
	struct shunt_tuple tu = h->tuple; /* the tuple the header claims: the one case that can pass */
	uint64_t ring = 0;
	if (shm_hdr_check(h, fsize, &tu, &ring) == 0) {
		CHECK(h->magic == SHM_MAGIC && h->version == SHM_VERSION);
		CHECK(ring >= SHM_MIN_RING && ring <= SHM_MAX_RING && !(ring & (ring - 1)));
		CHECK(fsize == SHM_HDR_SIZE + 2 * ring);
	}
	/* Any other tuple is refused. */
	tu.cport ^= 1;
	CHECK(shm_hdr_check(h, fsize, &tu, &ring) < 0);
	free(h);
	return 0;
}
