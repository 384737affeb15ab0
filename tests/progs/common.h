/* Helpers shared by the end-to-end test programs.
 *
 * The programs use only libc, so they behave the same with and without
 * libshunt.so preloaded; every result they print is deterministic for a given
 * input so that a plain run and a run under shunt can be compared line by line.
 */
#ifndef TPROG_COMMON_H
#define TPROG_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- SHA-256 (FIPS 180-4) ---- */
struct sha256 {
	uint32_t h[8];
	uint64_t len;          /* bytes hashed so far */
	unsigned char buf[64];
	size_t nbuf;
};
void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, unsigned char out[32]);
/* Hex digest (65 bytes with the NUL) of the state so far; s is not changed. */
void sha256_hex(const struct sha256 *s, char out[65]);

/* ---- deterministic pseudo-random stream ----
 * Byte i of stream `seed` is a pure function of (seed, i), so any offset can
 * be regenerated to check received data without keeping a copy. */
void gen_bytes(uint64_t seed, uint64_t off, void *buf, size_t len);
/* Offset of the first byte of buf that differs from the stream, or -1. */
long long gen_check(uint64_t seed, uint64_t off, const void *buf, size_t len);
uint64_t splitmix64(uint64_t *state);

/* ---- errors ---- */
extern const char *prog_name;
void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void fail_errno(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Kills the process with a FAIL line if it is still running after secs. */
void watchdog(unsigned secs);

/* ---- sockets (IPv4 or IPv6 literal host) ---- */
/* Listening TCP socket on host:port (port 0 = any); *bound gets the port. */
int tcp_listen(const char *host, int port, int backlog, int *bound);
int tcp_connect(const char *host, int port);
/* A connected pair over loopback: *c is the connect() side, *s the accept() side. */
void tcp_pair(const char *host, int *c, int *s);
ssize_t write_full(int fd, const void *buf, size_t len);
/* Reads exactly len bytes unless EOF comes first; returns the count. */
ssize_t read_full(int fd, void *buf, size_t len);
int set_nonblock(int fd, int on);
uint64_t now_ns(void);
/* "127.0.0.1:port" / "[::1]:port" of a socket's local or peer address. */
void sock_name(int fd, int peer, char *out, size_t outlen);

#endif

/* ---- the socket data API, chosen by name ----
 * send: write send sendto sendmsg writev mix
 * recv: read recv recvfrom recvmsg readv mix
 * "mix" picks one per call from a deterministic sequence. */
enum { API_MIX = -1 };
int api_send_parse(const char *name);   /* -2 if unknown */
int api_recv_parse(const char *name);
const char *api_send_name(int api);
const char *api_recv_name(int api);
/* One call of the chosen API (k numbers the call, for "mix").  Same return
 * and errno as the libc call. */
ssize_t api_send(int api, uint64_t k, int fd, const void *buf, size_t len);
ssize_t api_recv(int api, uint64_t k, int fd, void *buf, size_t len);
