/* streamgen: writes bytes [0, N) of the deterministic stream of seed S (the
 * same stream echo_client sends) to stdout, and its sha256 to stderr, so a
 * test can check the programs' SHA-256 against sha256sum(1).
 *   streamgen SEED N */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[65536], hex[65];
	struct sha256 s;
	prog_name = "streamgen";
	if (argc != 3) {
		fprintf(stderr, "usage: streamgen SEED N\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], NULL, 0), n = strtoull(argv[2], NULL, 0), off = 0;
	sha256_init(&s);
	while (off < n) {
		size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		gen_bytes(seed, off, buf, k);
		sha256_update(&s, buf, k);
		if (write_full(1, buf, k) < 0)
			fail_errno("write");
		off += k;
	}
	sha256_hex(&s, hex);
	fprintf(stderr, "%s\n", hex);
	return 0;
}
