#include "shm_proto.h"

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
