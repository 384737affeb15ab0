#include "shm_proto.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int shm_hdr_check(const struct shm_hdr *h, uint64_t file_size,
		  const struct shm_tuple *tuple)
{
	if (file_size < SHM_HDR_SIZE)
		return -1;
	uint64_t rs = h->ring_size;
	if (h->magic != SHM_MAGIC || h->version != SHM_VERSION)
		return -1;
	if (rs < SHM_MIN_RING || rs > SHM_MAX_RING || (rs & (rs - 1)))
		return -1;
	if (h->file_size != file_size || file_size != SHM_HDR_SIZE + 2 * rs)
		return -1;
	if (memcmp(&h->tuple, tuple, sizeof *tuple))
		return -1;
	return 0;
}

int shm_addr16(const struct sockaddr *sa, uint8_t out[16], uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		memcpy(out, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	return -1;
}

int shm_tuple_make(struct shm_tuple *t, const struct sockaddr *client,
		   const struct sockaddr *server)
{
	memset(t, 0, sizeof *t);
	return shm_addr16(client, t->caddr, &t->cport) || shm_addr16(server, t->saddr, &t->sport)
		       ? -1
		       : 0;
}

void shm_tuple_key(const struct shm_tuple *t, char *buf, size_t len)
{
	/* Short enough for a Unix socket path inside the rundir.  The header
	 * holds the whole tuple, which the server checks, so a collision (two
	 * live connections, 2^-64) declines an offer and never mixes streams. */
	const uint8_t *p = (const uint8_t *)t;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < sizeof *t; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 29;
	snprintf(buf, len, "%016llx", (unsigned long long)h);
}
