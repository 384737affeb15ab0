/* Both ends of a TCP connection in one test process, decided by core as
 * the interposed calls would (socket, listen, connect, accept), and data
 * calls funnelled as preload/shunt_io.c does: into the connection's ops
 * while its fd is accelerated, into libc after.  For the transport unit
 * tests, which link a transport and core without the interposers. */
#ifndef CONN_PAIR_H
#define CONN_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/shunt_fdtab.h"

struct conn_pair {
	int lfd, cfd, sfd;
	struct sockaddr_storage dst;
	socklen_t dlen;
};

/* A listening socket on 127.0.0.1, registered (shunt_listen.h) when
 * registered is 1. */
void pair_listen(struct conn_pair *p, int registered);
/* The client's socket decided and connected (the offer made before the
 * SYN, as connect() does). */
void pair_connect(struct conn_pair *p);
/* The server's accept(): decided by core when shunt is 1, plain otherwise. */
void pair_accept(struct conn_pair *p, int shunt);
/* pair_listen + pair_connect + pair_accept, both ends under shunt. */
void pair_open(struct conn_pair *p);
/* close() as the interposer does it: core first, then the kernel. */
void pair_close_fd(int fd);
void pair_close(struct conn_pair *p);

/* The fd's kind and reason (enum shunt_fd_kind, enum shunt_reason). */
int fd_kind(int fd);
const char *fd_reason(int fd);
/* The transport name of an accelerated fd ("kernel" otherwise). */
const char *fd_transport(int fd);

/* send/recv through the connection while the fd is accelerated, through
 * libc after; flags as for send(2)/recv(2). */
ssize_t t_send(int fd, const void *b, size_t n, int flags);
ssize_t t_recv(int fd, void *b, size_t n, int flags);
/* Exactly n bytes, blocking (the peer's bytes must be on their way). */
void t_send_all(int fd, const void *b, size_t n);
void t_recv_all(int fd, void *b, size_t n);

/* A byte stream nobody could mistake for another: byte i of stream seed. */
void pattern(uint8_t *b, size_t n, uint64_t from, unsigned seed);
/* 1 when b holds bytes [from, from + n) of stream seed. */
int pattern_ok(const uint8_t *b, size_t n, uint64_t from, unsigned seed);

#endif
