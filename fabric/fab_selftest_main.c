/* shunt-fabtest: the fabric self-test (fab_selftest.h) as a program, for
 * `shunt doctor --fabric-selftest` (which runs it in a child) and the
 * tests.
 *
 *   shunt-fabtest check PROVIDER
 *       exit 0 when the transport can run on PROVIDER here; else 3, with
 *       why on stdout ("unfit: ...")
 *   shunt-fabtest run PROVIDER ADDRESS [BYTES [RING]]
 *       one connection between two endpoints on ADDRESS (an IPv4 or IPv6
 *       address of this host), BYTES each way (default 8 MiB) with rings
 *       of RING bytes (default 64 KiB: many wraps); the report on stdout;
 *       exit 0 when it passed, 1 when it failed, 2 on a usage error
 *
 * SHUNT_FABRIC_EMULATE=verbs enforces the verbs provider's rules on
 * another provider (docs/CONFIG.md, test only). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shunt_transport.h"
#include "fab_internal.h"
#include "fab_selftest.h"

/* The program drives the fabric code directly: no transport takes
 * connections through the preload table here. */
const struct shunt_transport_ops *const shunt_transports[] = {NULL};

static int usage(void)
{
	fprintf(stderr, "usage: shunt-fabtest check PROVIDER\n"
			"       shunt-fabtest run PROVIDER ADDRESS [BYTES [RING]]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "check")) {
		char why[512];
		if (fab_provider_fit(argv[2], why, sizeof why) == 0) {
			printf("fit: %s\n", argv[2]);
			return 0;
		}
		printf("unfit: %s\n", why);
		return 3;
	}
	if (argc < 4 || argc > 6 || strcmp(argv[1], "run"))
		return usage();
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t len;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, argv[3], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		len = sizeof *s4;
	} else if (inet_pton(AF_INET6, argv[3], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		len = sizeof *s6;
	} else {
		fprintf(stderr, "shunt-fabtest: %s: not an IP address\n", argv[3]);
		return 2;
	}
	char *end;
	unsigned long long bytes = argc > 4 ? strtoull(argv[4], &end, 0) : 8ull << 20;
	unsigned long long ring = argc > 5 ? strtoull(argv[5], &end, 0) : 64ull << 10;
	if (!bytes || ring < FAB_MIN_RING || ring > FAB_MAX_RING || (ring & (ring - 1)))
		return usage();
	char report[4096];
	int rc = fab_selftest(argv[2], (struct sockaddr *)&ss, len, bytes, ring, report,
			      sizeof report);
	fputs(report, stdout);
	fflush(stdout);
	/* Straight out: the watcher and passive threads hold nothing of ours. */
	_exit(rc == 0 ? 0 : 1);
}
