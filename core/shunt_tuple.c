/* The 4-tuple and its key (shunt_tuple.h). */
#include "shunt_tuple.h"

#include <netinet/in.h>
#include <string.h>

int shunt_addr16(const struct sockaddr *sa, uint8_t out[16], uint16_t *port)
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

int shunt_addr16_any(const uint8_t a[16])
{
	static const uint8_t any6[16], any4[16] = {[10] = 0xff, [11] = 0xff};
	return !memcmp(a, any6, 16) || !memcmp(a, any4, 16);
}

int shunt_addr16_loopback(const uint8_t a[16])
{
	static const uint8_t lo6[16] = {[15] = 1};
	return !memcmp(a, lo6, 16) ||
	       (a[10] == 0xff && a[11] == 0xff && a[12] == 127 &&
		!memcmp(a, (const uint8_t[10]){0}, 10));
}

int shunt_sa_loopback(const struct sockaddr *sa)
{
	uint8_t a[16];
	uint16_t port;
	return shunt_addr16(sa, a, &port) == 0 && shunt_addr16_loopback(a);
}

int shunt_tuple_make(struct shunt_tuple *t, const struct sockaddr *client,
		     const struct sockaddr *server)
{
	memset(t, 0, sizeof *t);
	return shunt_addr16(client, t->caddr, &t->cport) ||
			       shunt_addr16(server, t->saddr, &t->sport)
		       ? -1
		       : 0;
}

int shunt_tuple_accepted(struct shunt_tuple *t, int fd, const struct sockaddr *peer)
{
	struct sockaddr_storage local;
	socklen_t ll = sizeof local;
	if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0)
		return -1;
	return shunt_tuple_make(t, peer, (struct sockaddr *)&local);
}

void shunt_tuple_key(const struct shunt_tuple *t, char *buf, size_t len)
{
	/* The shm header and every filed frame hold the whole tuple, which
	 * the taker checks, so a collision (two live connections, 2^-64)
	 * declines an offer and never mixes streams. */
	const uint8_t *p = (const uint8_t *)t;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < sizeof *t; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 29;
	/* By hand: snprintf's format machinery was a visible part of a
	 * connection's user time, and this runs at both ends of each. */
	static const char hex[] = "0123456789abcdef";
	char k[16];
	for (int i = 15; i >= 0; i--, h >>= 4)
		k[i] = hex[h & 15];
	if (!len)
		return;
	size_t n = len - 1 < sizeof k ? len - 1 : sizeof k; /* cut as snprintf would */
	memcpy(buf, k, n);
	buf[n] = 0;
}
