#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *prog_name = "prog";

/* ------------------------------------------------------------------ sha256 */

static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3];
	e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t S1 = ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = hh + S1 + ch + K256[i] + w[i];
		uint32_t S0 = ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22);
		uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + mj;
		hh = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d;
	h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void sha256_init(struct sha256 *s)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};
	memcpy(s->h, iv, sizeof iv);
	s->len = 0;
	s->nbuf = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const unsigned char *p = data;
	s->len += len;
	if (s->nbuf) {
		size_t n = 64 - s->nbuf;
		if (n > len)
			n = len;
		memcpy(s->buf + s->nbuf, p, n);
		s->nbuf += n;
		p += n;
		len -= n;
		if (s->nbuf < 64)
			return;
		sha256_block(s->h, s->buf);
		s->nbuf = 0;
	}
	while (len >= 64) {
		sha256_block(s->h, p);
		p += 64;
		len -= 64;
	}
	memcpy(s->buf, p, len);
	s->nbuf = len;
}

void sha256_final(struct sha256 *s, unsigned char out[32])
{
	uint64_t bits = s->len * 8;
	unsigned char pad[72];
	size_t padlen = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
	memset(pad, 0, sizeof pad);
	pad[0] = 0x80;
	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha256_update(s, pad, padlen + 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(s->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)s->h[i];
	}
}

void sha256_hex(const struct sha256 *s, char out[65])
{
	struct sha256 c = *s;
	unsigned char d[32];
	sha256_final(&c, d);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* ------------------------------------------------------------------ stream */

uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t word_at(uint64_t seed, uint64_t idx)
{
	uint64_t st = seed * 0x2545f4914f6cdd1dULL + idx * 0x9e3779b97f4a7c15ULL;
	return splitmix64(&st);
}

void gen_bytes(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len) {
		uint64_t w = word_at(seed, off / 8);
		unsigned i = (unsigned)(off % 8);
		for (; i < 8 && len; i++, len--, off++)
			*p++ = (unsigned char)(w >> (8 * i));
	}
}

long long gen_check(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	unsigned char tmp[4096];
	size_t done = 0;
	while (done < len) {
		size_t n = len - done < sizeof tmp ? len - done : sizeof tmp;
		gen_bytes(seed, off + done, tmp, n);
		if (memcmp(tmp, p + done, n) != 0) {
			for (size_t i = 0; i < n; i++)
				if (tmp[i] != p[done + i])
					return (long long)(off + done + i);
		}
		done += n;
	}
	return -1;
}

/* ------------------------------------------------------------------ errors */

void fail(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stdout, "FAIL: %s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	_exit(1);
}

void fail_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	char msg[512];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fail("%s: %s", msg, strerror(e));
}

static void on_alarm(int sig)
{
	static const char m[] = "FAIL: watchdog: program did not finish in time\n";
	(void)sig;
	if (write(1, m, sizeof m - 1) < 0) {
		/* nothing more to do */
	}
	_exit(3);
}

void watchdog(unsigned secs)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(secs);
}

/* ------------------------------------------------------------------ sockets */

static socklen_t make_addr(const char *host, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return sizeof *a4;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return sizeof *a6;
	}
	fail("bad address %s", host);
}

int tcp_listen(const char *host, int port, int backlog, int *bound)
{
	struct sockaddr_storage ss;
	socklen_t len = make_addr(host, port, &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		fail_errno("socket");
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		fail_errno("bind %s:%d", host, port);
	if (listen(fd, backlog) < 0)
		fail_errno("listen");
	if (bound) {
		len = sizeof ss;
		if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
			fail_errno("getsockname");
		*bound = ntohs(ss.ss_family == AF_INET ?
			       ((struct sockaddr_in *)&ss)->sin_port :
			       ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

int tcp_connect(const char *host, int port)
{
	struct sockaddr_storage ss;
	socklen_t len = make_addr(host, port, &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		fail_errno("socket");
	while (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINTR)
			fail_errno("connect %s:%d", host, port);
	}
	return fd;
}

void tcp_pair(const char *host, int *c, int *s)
{
	int port;
	int l = tcp_listen(host, 0, 8, &port);
	*c = tcp_connect(host, port);
	*s = accept(l, NULL, NULL);
	if (*s < 0)
		fail_errno("accept");
	close(l);
}

ssize_t write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sock_name(int fd, int peer, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char host[INET6_ADDRSTRLEN];
	int r = peer ? getpeername(fd, (struct sockaddr *)&ss, &len) :
		       getsockname(fd, (struct sockaddr *)&ss, &len);
	if (r < 0) {
		snprintf(out, outlen, "error:%s", strerror(errno));
		return;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		snprintf(out, outlen, "%s:%u", host, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
		snprintf(out, outlen, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		snprintf(out, outlen, "family%d", ss.ss_family);
	}
}

/* ------------------------------------------------------------------ API mix */

#include <sys/uio.h>

#include <sys/syscall.h>

/* The first NAPI are libc's socket calls ("mix" picks among them); then the
 * same calls made by number through syscall(), and preadv2/pwritev2 at
 * offset -1 through libc and by number. */
static const char *const send_names[] = { "write", "send", "sendto", "sendmsg", "writev",
					  "sys-write", "sys-sendto", "sys-sendmsg", "sys-writev",
					  "pwritev2", "sys-pwritev2" };
static const char *const recv_names[] = { "read", "recv", "recvfrom", "recvmsg", "readv",
					  "sys-read", "sys-recvfrom", "sys-recvmsg", "sys-readv",
					  "preadv2", "sys-preadv2" };
#define NAPI 5
#define NAPI_ALL 11

static int api_parse(const char *const *names, const char *name)
{
	if (strcmp(name, "mix") == 0)
		return API_MIX;
	for (int i = 0; i < NAPI_ALL; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -2;
}

int api_send_parse(const char *name) { return api_parse(send_names, name); }
int api_recv_parse(const char *name) { return api_parse(recv_names, name); }
const char *api_send_name(int api) { return api < 0 ? "mix" : send_names[api]; }
const char *api_recv_name(int api) { return api < 0 ? "mix" : recv_names[api]; }

static int api_pick(int api, uint64_t k)
{
	if (api >= 0)
		return api;
	uint64_t st = k;
	return (int)(splitmix64(&st) % NAPI);
}

ssize_t api_send(int api, uint64_t k, int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t h = len / 2, t = len / 3;
	switch (api_pick(api, k)) {
	case 0:
		return write(fd, buf, len);
	case 1:
		return send(fd, buf, len, MSG_NOSIGNAL);
	case 2:
		return sendto(fd, buf, len, MSG_NOSIGNAL, NULL, 0);
	case 3:
	case 7: {
		struct iovec iov[2] = { { (void *)p, h }, { (void *)(p + h), len - h } };
		struct msghdr m;
		memset(&m, 0, sizeof m);
		m.msg_iov = iov;
		m.msg_iovlen = 2;
		return api == 7 ? syscall(SYS_sendmsg, fd, &m, MSG_NOSIGNAL)
				: sendmsg(fd, &m, MSG_NOSIGNAL);
	}
	case 5:
		return syscall(SYS_write, fd, buf, len);
	case 6:
		return syscall(SYS_sendto, fd, buf, len, MSG_NOSIGNAL, NULL, 0);
	default: {
		struct iovec iov[3] = { { (void *)p, t }, { (void *)(p + t), 0 },
					{ (void *)(p + t), len - t } };
		if (api == 8)
			return syscall(SYS_writev, fd, iov, 3);
		if (api == 9)
			return pwritev2(fd, iov, 3, -1, 0);
		if (api == 10)
			return syscall(SYS_pwritev2, fd, iov, 3, -1L, 0L, 0);
		return writev(fd, iov, 3);
	}
	}
}

ssize_t api_recv(int api, uint64_t k, int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t h = len / 2;
	switch (api_pick(api, k)) {
	case 0:
		return read(fd, buf, len);
	case 1:
		return recv(fd, buf, len, 0);
	case 2:
	case 6: {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		if (api == 6)
			return syscall(SYS_recvfrom, fd, buf, len, 0, (struct sockaddr *)&ss, &sl);
		return recvfrom(fd, buf, len, 0, (struct sockaddr *)&ss, &sl);
	}
	case 3:
	case 7: {
		struct iovec iov[2] = { { p, h }, { p + h, len - h } };
		struct msghdr m;
		memset(&m, 0, sizeof m);
		m.msg_iov = iov;
		m.msg_iovlen = 2;
		return api == 7 ? syscall(SYS_recvmsg, fd, &m, 0) : recvmsg(fd, &m, 0);
	}
	case 5:
		return syscall(SYS_read, fd, buf, len);
	default: {
		struct iovec iov[2] = { { p, 1 }, { p + 1, len - 1 } };
		int n = len > 1 ? 2 : 1;
		if (api == 8)
			return syscall(SYS_readv, fd, iov, n);
		if (api == 9)
			return preadv2(fd, iov, n, -1, 0);
		if (api == 10)
			return syscall(SYS_preadv2, fd, iov, n, -1L, 0L, 0);
		return readv(fd, iov, n);
	}
	}
}
