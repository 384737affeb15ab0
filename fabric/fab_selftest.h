/* The fabric self-test: one connection from this host to itself through
 * the transport's own code (rendezvous with its connection data, rings,
 * RMA writes with CQ data, credits, the goodbye), bytes checked at every
 * offset both ways.  What `shunt doctor --fabric-selftest` runs on a host
 * with an RDMA device (verbs), and the tests on every provider here. */
#ifndef FAB_SELFTEST_H
#define FAB_SELFTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Run it on provider prov between two endpoints on address addr (an
 * address of this host the provider serves: a verbs device's for verbs),
 * moving bytes each way with rings of ring bytes.  0 when every byte
 * arrived intact, -1 otherwise; report (len bytes) says what was done and
 * found, lines of "key: value" a user can send back. */
int fab_selftest(const char *prov, const struct sockaddr *addr, socklen_t alen, uint64_t bytes,
		 uint64_t ring, char *report, size_t len);

#endif
