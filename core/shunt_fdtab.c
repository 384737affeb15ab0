#include "shunt_fdtab.h"

#include <string.h>
#include <sys/mman.h>

struct shunt_fd *shunt_fdtab_top[SHUNT_FDTAB_TOP];
static unsigned nchunks;
static unsigned top_used; /* 1 + highest chunk index ever mapped */

#define CHUNK_BYTES (SHUNT_FDTAB_CHUNK * sizeof(struct shunt_fd))

struct shunt_fd *shunt_fd_get(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e || (unsigned)fd >= SHUNT_FDTAB_MAX_FD)
		return e;
	/* mmap, not malloc: this runs inside accept()/socket() that a signal
	 * handler may have called, and the chunk must never be freed. */
	struct shunt_fd *chunk = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (chunk == MAP_FAILED)
		return NULL;
	struct shunt_fd *expected = NULL;
	struct shunt_fd **slot = &shunt_fdtab_top[(unsigned)fd >> SHUNT_FDTAB_SHIFT];
	if (__atomic_compare_exchange_n(slot, &expected, chunk, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&nchunks, 1, __ATOMIC_RELAXED);
		unsigned used = __atomic_load_n(&top_used, __ATOMIC_RELAXED);
		unsigned mine = ((unsigned)fd >> SHUNT_FDTAB_SHIFT) + 1;
		while (used < mine && !__atomic_compare_exchange_n(
					      &top_used, &used, mine, 1,
					      __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	} else
		munmap(chunk, CHUNK_BYTES);
	return shunt_fd_peek(fd);
}

static void clear(struct shunt_fd *e)
{
	/* kind first: a concurrent reader that still sees the old kind reads
	 * the rest of a stale, never-freed entry. */
	__atomic_store_n(&e->kind, SHUNT_FD_UNKNOWN, __ATOMIC_RELEASE);
	e->role = 0;
	e->reason = 0;
	e->flags = 0;
	e->conn = NULL; /* and listener */
	e->stat = NULL;
	e->owner = NULL;
}

void shunt_fd_reset(int fd)
{
	struct shunt_fd *e = shunt_fd_peek(fd);
	if (e && (shunt_fd_kind(e) != SHUNT_FD_UNKNOWN || e->flags))
		clear(e);
}

void shunt_fd_reset_range(unsigned lo, unsigned hi)
{
	unsigned used = __atomic_load_n(&top_used, __ATOMIC_ACQUIRE);
	if (used == 0 || lo >= used << SHUNT_FDTAB_SHIFT)
		return;
	if (hi >= used << SHUNT_FDTAB_SHIFT)
		hi = (used << SHUNT_FDTAB_SHIFT) - 1;
	for (unsigned fd = lo; fd <= hi;) {
		struct shunt_fd *chunk = __atomic_load_n(
			&shunt_fdtab_top[fd >> SHUNT_FDTAB_SHIFT], __ATOMIC_ACQUIRE);
		unsigned end = (fd | (SHUNT_FDTAB_CHUNK - 1));
		if (end > hi)
			end = hi;
		if (chunk)
			for (unsigned i = fd; i <= end; i++)
				if (shunt_fd_kind(&chunk[i & (SHUNT_FDTAB_CHUNK - 1)]) !=
				    SHUNT_FD_INTERNAL)
					clear(&chunk[i & (SHUNT_FDTAB_CHUNK - 1)]);
		if (end == hi)
			break;
		fd = end + 1;
	}
}

void shunt_fd_foreach(enum shunt_fd_kind min_kind,
		      void (*fn)(int fd, struct shunt_fd *e, void *arg), void *arg)
{
	unsigned used = __atomic_load_n(&top_used, __ATOMIC_ACQUIRE);
	for (unsigned c = 0; c < used; c++) {
		struct shunt_fd *chunk =
			__atomic_load_n(&shunt_fdtab_top[c], __ATOMIC_ACQUIRE);
		if (!chunk)
			continue;
		for (unsigned i = 0; i < SHUNT_FDTAB_CHUNK; i++)
			if (shunt_fd_kind(&chunk[i]) >= min_kind)
				fn((int)(c << SHUNT_FDTAB_SHIFT | i), &chunk[i], arg);
	}
}

unsigned shunt_fdtab_chunks(void)
{
	return __atomic_load_n(&nchunks, __ATOMIC_RELAXED);
}

unsigned shunt_fdtab_limit(void)
{
	return __atomic_load_n(&top_used, __ATOMIC_ACQUIRE) << SHUNT_FDTAB_SHIFT;
}
