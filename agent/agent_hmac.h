/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the agent's
 * challenge-response: small enough to read, no library dependency. */
#ifndef AGENT_HMAC_H
#define AGENT_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_BLOCK 64

struct sha256 {
	uint32_t h[8];
	uint64_t len;              /* bytes hashed so far */
	uint8_t buf[SHA256_BLOCK];
	size_t nbuf;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t n);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);
void sha256(const void *data, size_t n, uint8_t out[SHA256_LEN]);

/* HMAC-SHA256 over the concatenation of nparts parts. */
void hmac_sha256(const void *key, size_t keylen, const void *const parts[],
		 const size_t lens[], int nparts, uint8_t out[SHA256_LEN]);

/* Constant-time comparison: 0 when equal. */
int hmac_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif
