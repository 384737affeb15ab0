/* Rendezvous steps every transport takes the same way: naming the
 * connection before the SYN, and the client's wait for its offer's answer.
 * The offer itself is each transport's (shm: a ring slot named in the
 * rundir; fabric: through the agent). */
#ifndef SHUNT_RENDEZVOUS_H
#define SHUNT_RENDEZVOUS_H

#include <sys/socket.h>

struct shunt_conn;

/* Bind client socket fd now so its 4-tuple is known before the SYN (the
 * offer is named by it); *local gets the address the connection will have.
 * A socket the application bound keeps its address; one bound to a port on
 * the wildcard is not bound again (connect() fills the address in from the
 * route).  0, or -1 (the connection falls back: bind-failed). */
int shunt_bind_local(int fd, const struct sockaddr *dst, socklen_t dlen,
		     struct sockaddr_storage *local, socklen_t *llen);

/* The offer is out: the client waits offer_timeout_ms at most. */
void shunt_offer_start(struct shunt_conn *c);
/* Client, offered: the offer is over when the server answered on TCP (it
 * runs without shunt, or took the kernel path without a word) or the
 * deadline passed.  1 then: demote, replaying what was written meanwhile. */
int shunt_offer_over(struct shunt_conn *c);
/* Milliseconds left before the offer's deadline (0: past), for a wait. */
int shunt_offer_ms_left(const struct shunt_conn *c);

#endif
