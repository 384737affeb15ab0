/* Sockets for shuntd, in the manner of Redis's anet.c: every function
 * returns a non-blocking, close-on-exec fd or -1 with a message in err. */
#ifndef SHUNTD_NET_H
#define SHUNTD_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* TCP listener on addr (NULL: every address, IPv6 and IPv4 where the host
 * has IPv6, else IPv4) and port. */
int net_tcp_listen(const char *addr, uint16_t port, char *err, size_t errlen);

/* Unix stream listener at path (a stale socket file there is replaced). */
int net_unix_listen(const char *path, char *err, size_t errlen);

/* Accept one connection; the peer's address in *ss when not NULL.
 * -1 with errno (EAGAIN: none waiting). */
int net_accept(int lfd, struct sockaddr_storage *ss);

#endif
