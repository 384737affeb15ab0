/* A TCP connection's 4-tuple, as both ends and the agent name it: the
 * offer files, wake sockets and relayed positions of a connection are
 * named by its key, and the shm header holds the whole tuple.  Addresses
 * are 16 bytes (IPv4 as IPv4-mapped IPv6) so both families compare the
 * same way; ports are in host order. */
#ifndef SHUNT_TUPLE_H
#define SHUNT_TUPLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct shunt_tuple {
	uint8_t caddr[16];
	uint8_t saddr[16];
	uint16_t cport, sport; /* host order */
};

/* An IP address as 16 bytes and its host-order port.  -1 if sa is not
 * AF_INET or AF_INET6. */
int shunt_addr16(const struct sockaddr *sa, uint8_t out[16], uint16_t *port);

/* 1 for a loopback address (127/8, ::1), 16-byte form. */
int shunt_addr16_loopback(const uint8_t a[16]);
/* 1 for the wildcard address (0.0.0.0, ::), 16-byte form. */
int shunt_addr16_any(const uint8_t a[16]);
/* 1 for a loopback socket address (127/8, ::1, ::ffff:127/104). */
int shunt_sa_loopback(const struct sockaddr *sa);

/* The tuple of a client and a server address.  -1 if either is not IP. */
int shunt_tuple_make(struct shunt_tuple *t, const struct sockaddr *client,
		     const struct sockaddr *server);

/* The tuple of a connection accept() returned on fd from peer. */
int shunt_tuple_accepted(struct shunt_tuple *t, int fd, const struct sockaddr *peer);

/* 16 hex digits hashed from the tuple, for file names: short enough for a
 * Unix socket path inside the rundir. */
void shunt_tuple_key(const struct shunt_tuple *t, char *buf, size_t len);

#endif
