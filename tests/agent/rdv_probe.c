/* rdv_probe: drives the remote rendezvous API of libshunt (fab_rdv.h) from
 * the tests, linked with the library's objects.
 *
 *   rdv_probe offer DST_IP DST_PORT CLIENT_IP CLIENT_PORT [COUNT [AFTER_MS]]
 *       COUNT offers back to back in this process (one negative cache),
 *       for connections from CLIENT_PORT, CLIENT_PORT + 1, ... (a second
 *       offer for one connection contests it), then, with AFTER_MS, one
 *       more once AFTER_MS ms have passed since the first one ended.  One
 *       line each: "offer I result=R ms=T".
 *   rdv_probe take RUNDIR CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT
 *       "take ok token=HEX provider=P ring=N" (exit 0) or "take none" (1).
 *
 * The offer's token is the 16 bytes "rdv-probe-token!", its endpoint the
 * client address, so a test can check what was filed. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/shunt_transport.h"
#include "fabric/fab_rdv.h"

/* The probe drives the agent exchange only: no transport takes
 * connections in this program. */
const struct shunt_transport_ops *const shunt_transports[] = {NULL};

static int sockaddr_of(const char *ip, const char *port, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof *ss);
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)atoi(port));
		*len = sizeof *in;
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)atoi(port));
		*len = sizeof *in6;
		return 0;
	}
	fprintf(stderr, "rdv_probe: bad address %s\n", ip);
	return -1;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *result_name(enum fab_rdv_result r)
{
	switch (r) {
	case FAB_RDV_OK: return "ok";
	case FAB_RDV_NO_LISTENER: return "no-listener";
	case FAB_RDV_NO_AGENT: return "no-agent";
	case FAB_RDV_REFUSED: return "refused";
	}
	return "?";
}

static int offer(char **argv, int argc)
{
	struct sockaddr_storage dst, cli;
	socklen_t dl, cl;
	if (sockaddr_of(argv[0], argv[1], &dst, &dl) || sockaddr_of(argv[2], argv[3], &cli, &cl))
		return 2;
	int count = argc > 4 ? atoi(argv[4]) : 1;
	double after = argc > 5 ? atof(argv[5]) : -1;
	struct agent_offer o = {0};
	struct shunt_tuple t;
	if (shunt_tuple_make(&t, (struct sockaddr *)&cli, (struct sockaddr *)&dst))
		return 2;
	fab_tuple_to_wire(&o.tuple, &t);
	memcpy(o.token, "rdv-probe-token!", AGENT_TOKEN_LEN);
	strcpy(o.provider, "tcp");
	o.addr_format = 2; /* FI_SOCKADDR_IN */
	o.addrlen = cl;
	memcpy(o.addr, &cli, cl);
	o.ring_size = 65536;
	double first_end = 0;
	for (int i = 0; i <= count; i++) {
		if (i == count) {
			if (after < 0)
				break;
			/* What is under test here is the cache's expiry. */
			while (now_ms() - first_end < after) {
				struct timespec ts = {0, 5000000};
				nanosleep(&ts, NULL);
			}
		}
		o.tuple.cport = (uint16_t)(t.cport + i);
		double t0 = now_ms();
		enum fab_rdv_result r = fab_rdv_offer((struct sockaddr *)&dst, dl, &o, 0);
		double t1 = now_ms();
		if (i == 0)
			first_end = t1;
		printf("offer %d result=%s ms=%.1f\n", i, result_name(r), t1 - t0);
		fflush(stdout);
	}
	return 0;
}

static int take(char **argv)
{
	struct sockaddr_storage cli, srv;
	socklen_t cl, sl;
	if (sockaddr_of(argv[1], argv[2], &cli, &cl) || sockaddr_of(argv[3], argv[4], &srv, &sl))
		return 2;
	struct shunt_tuple t;
	struct agent_offer o;
	if (shunt_tuple_make(&t, (struct sockaddr *)&cli, (struct sockaddr *)&srv))
		return 2;
	if (fab_rdv_take(argv[0], &t, &o) < 0) {
		printf("take none\n");
		return 1;
	}
	printf("take ok token=");
	for (int i = 0; i < AGENT_TOKEN_LEN; i++)
		printf("%02x", o.token[i]);
	printf(" provider=%s ring=%llu addrlen=%u\n", o.provider,
	       (unsigned long long)o.ring_size, o.addrlen);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "offer"))
		return offer(argv + 2, argc - 2);
	if (argc == 7 && !strcmp(argv[1], "take"))
		return take(argv + 2);
	fprintf(stderr, "usage: rdv_probe offer DST_IP DST_PORT CLIENT_IP CLIENT_PORT [COUNT [AFTER_MS]]\n"
			"       rdv_probe take RUNDIR CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT\n");
	return 2;
}
