/* Kernel-only socket features on a connection, one per run:
 *
 *   kernel_features ROW [HOST]
 *
 * ROW: ktls zerocopy oob fastopen filter repair queues info linger.
 * Both ends are in this process (under shunt: on shm until a feature moves
 * the connection).  Every row sends bytes before the feature (left unread,
 * so a move must replay them) and after it, and checks them in order at
 * the other end; then what the feature itself does (its errors included).
 * Every line printed is the same plainly and under shunt: the test compares
 * the two runs and reads from shunt's log which path the connection took
 * (docs/TROUBLESHOOTING.md, "Kernel-only socket features").  A feature this
 * kernel lacks prints "unavailable" both times.  Waits for events (bytes,
 * poll, the kernel's TCP state), bounded by the watchdog. */
#include <errno.h>
#include <time.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "common.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif

static const char *host = "127.0.0.1";
static uint64_t wpos, rpos; /* the checked stream, seed 1: s writes, c reads */

static void pause_ms(void)
{
	struct timespec ts = {0, 1000000};
	nanosleep(&ts, NULL);
}

/* n bytes of the stream from s, left for c to read later. */
static void put(int s, size_t n)
{
	char b[4096];
	while (n) {
		size_t k = n < sizeof b ? n : sizeof b;
		gen_bytes(1, wpos, b, k);
		if (write_full(s, b, k) != (ssize_t)k)
			fail_errno("write at %llu", (unsigned long long)wpos);
		wpos += k;
		n -= k;
	}
}

/* Everything s has written, read and checked at c. */
static void take(int c)
{
	char b[4096];
	while (rpos < wpos) {
		size_t k = wpos - rpos < sizeof b ? wpos - rpos : sizeof b;
		ssize_t r = read(c, b, k);
		if (r <= 0)
			fail_errno("read at %llu: %zd", (unsigned long long)rpos, r);
		long long bad = gen_check(1, rpos, b, (size_t)r);
		if (bad >= 0)
			fail("byte %llu differs", (unsigned long long)(rpos + (uint64_t)bad));
		rpos += (uint64_t)r;
	}
	printf("%llu bytes checked\n", (unsigned long long)rpos);
}

/* A pair with 3000 unread bytes from s to c (in the ring, under shunt). */
static void pair(int *c, int *s)
{
	tcp_pair(host, c, s);
	put(*s, 3000);
}

static int row_ktls(void)
{
	int c, s;
	pair(&c, &s);
	if (setsockopt(s, IPPROTO_TCP, TCP_ULP, "tls", 3) < 0) {
		/* No kernel TLS here (CONFIG_TLS): the connection stays. */
		printf("ktls: unavailable: %s\n", strerror(errno));
		put(s, 5000);
		take(c);
		return 0;
	}
	char name[16] = "";
	socklen_t l = sizeof name;
	if (getsockopt(s, IPPROTO_TCP, TCP_ULP, name, &l) < 0)
		fail_errno("getsockopt TCP_ULP");
	printf("ktls: ulp %s\n", name);
	/* The ULP ciphers nothing before TLS_TX: the bytes pass as written. */
	put(s, 5000);
	take(c);
	return 0;
}

static int row_zerocopy(void)
{
	int c, s, one = 1;
	pair(&c, &s);
	if (setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) < 0) {
		printf("zerocopy: unavailable: %s\n", strerror(errno));
		return 0;
	}
	static char b[65536];
	gen_bytes(1, wpos, b, sizeof b);
	ssize_t r = send(s, b, sizeof b, MSG_ZEROCOPY);
	if (r != (ssize_t)sizeof b)
		fail_errno("send MSG_ZEROCOPY: %zd", r);
	wpos += sizeof b;
	take(c);
	/* Its completion, from the error queue. */
	struct pollfd p = {s, 0, 0};
	if (poll(&p, 1, 20000) != 1 || !(p.revents & POLLERR))
		fail("no completion on the error queue (revents %#x)", p.revents);
	char ctl[128];
	struct msghdr m = {.msg_control = ctl, .msg_controllen = sizeof ctl};
	if (recvmsg(s, &m, MSG_ERRQUEUE) < 0)
		fail_errno("recvmsg MSG_ERRQUEUE");
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm)
		fail("no cmsg in the completion");
	struct sock_extended_err ee;
	memcpy(&ee, CMSG_DATA(cm), sizeof ee);
	printf("zerocopy: completion errno=%u origin=%s range=%u..%u\n", ee.ee_errno,
	       ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY ? "zerocopy" : "other", ee.ee_info,
	       ee.ee_data);
	put(s, 1000);
	take(c);
	return 0;
}

static int row_oob(void)
{
	int c, s;
	pair(&c, &s);
	if (send(s, "!", 1, MSG_OOB) != 1)
		fail_errno("send MSG_OOB");
	/* The urgent byte is out of the stream; what follows is in it. */
	put(s, 2000);
	struct pollfd p = {c, POLLPRI, 0};
	if (poll(&p, 1, 20000) != 1 || !(p.revents & POLLPRI))
		fail("no POLLPRI for urgent data (revents %#x)", p.revents);
	char u = 0;
	ssize_t r = recv(c, &u, 1, MSG_OOB);
	printf("oob: urgent %zd '%c'\n", r, r == 1 ? u : '?');
	take(c);
	int mark = -1;
	if (ioctl(c, SIOCATMARK, &mark) < 0)
		fail_errno("SIOCATMARK");
	r = recv(c, &u, 1, MSG_OOB | MSG_DONTWAIT);
	printf("oob: at mark %d, urgent again %zd %s\n", mark, r, r < 0 ? strerror(errno) : "");
	return 0;
}

static int row_fastopen(void)
{
	int port, qlen = 5;
	int l = tcp_listen(host, 0, 8, &port);
	if (setsockopt(l, IPPROTO_TCP, TCP_FASTOPEN, &qlen, sizeof qlen) < 0)
		fail_errno("TCP_FASTOPEN");
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	getsockname(l, (struct sockaddr *)&ss, &sl);
	/* 1. sendto(MSG_FASTOPEN): connect and data in one call. */
	int c = socket(ss.ss_family, SOCK_STREAM, 0);
	char b[64];
	ssize_t r = sendto(c, "fastopen", 8, MSG_FASTOPEN, (struct sockaddr *)&ss, sl);
	if (r < 0 && errno == EOPNOTSUPP) {
		printf("fastopen: unavailable: %s\n", strerror(errno));
		return 0;
	}
	if (r != 8)
		fail_errno("sendto MSG_FASTOPEN: %zd", r);
	int s = accept(l, NULL, NULL);
	if (s < 0 || read_full(s, b, 8) != 8)
		fail_errno("accept/read");
	printf("fastopen: sendto got '%.8s'\n", b);
	if (write_full(s, "answer", 6) != 6 || read_full(c, b, 6) != 6)
		fail_errno("answer");
	printf("fastopen: answer '%.6s'\n", b);
	close(c);
	close(s);
	/* 2. TCP_FASTOPEN_CONNECT: connect() sends no SYN before the write. */
	int one = 1;
	c = socket(ss.ss_family, SOCK_STREAM, 0);
	if (setsockopt(c, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof one) < 0)
		fail_errno("TCP_FASTOPEN_CONNECT");
	if (connect(c, (struct sockaddr *)&ss, sl) < 0)
		fail_errno("connect");
	if (write_full(c, "deferred", 8) != 8)
		fail_errno("write");
	s = accept(l, NULL, NULL);
	if (s < 0 || read_full(s, b, 8) != 8)
		fail_errno("accept/read");
	printf("fastopen: connect got '%.8s'\n", b);
	close(c);
	close(s);
	/* 3. A plain connect to the Fast Open listener. */
	c = tcp_connect(host, port);
	s = accept(l, NULL, NULL);
	put(s, 4000);
	take(c);
	return 0;
}

static int row_filter(void)
{
	/* Accept every packet whole. */
	struct sock_filter code[] = {BPF_STMT(BPF_RET | BPF_K, 0xffffffff)};
	struct sock_fprog prog = {1, code};
	int c, s;
	pair(&c, &s);
	if (setsockopt(c, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
		fail_errno("SO_ATTACH_FILTER");
	put(s, 5000);
	take(c);
	/* On a listener: its connections have the filter from the start. */
	int port;
	int l = tcp_listen(host, 0, 8, &port);
	if (setsockopt(l, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
		fail_errno("SO_ATTACH_FILTER on the listener");
	int c2 = tcp_connect(host, port);
	int s2 = accept(l, NULL, NULL);
	if (s2 < 0)
		fail_errno("accept");
	rpos = wpos = 0;
	put(c2, 3000);
	take(s2);
	printf("filter: attached\n");
	return 0;
}

static int row_repair(void)
{
	int c, s, one = 1, zero = 0;
	pair(&c, &s);
	if (setsockopt(s, IPPROTO_TCP, TCP_REPAIR, &one, sizeof one) < 0) {
		printf("repair: unavailable: %s\n", strerror(errno));
		put(s, 1000);
		take(c);
		return 0;
	}
	int q = TCP_SEND_QUEUE;
	if (setsockopt(s, IPPROTO_TCP, TCP_REPAIR_QUEUE, &q, sizeof q) < 0)
		fail_errno("TCP_REPAIR_QUEUE");
	unsigned seq = 0;
	socklen_t l = sizeof seq;
	if (getsockopt(s, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, &l) < 0)
		fail_errno("TCP_QUEUE_SEQ");
	if (setsockopt(s, IPPROTO_TCP, TCP_REPAIR, &zero, sizeof zero) < 0)
		fail_errno("TCP_REPAIR off");
	printf("repair: on, send queue seq read, off\n");
	put(s, 5000);
	take(c);
	return 0;
}

static int row_queues(void)
{
	int c, s, n = -1;
	pair(&c, &s);
	/* Once the bytes have arrived: SIOCINQ counts them, SIOCOUTQ is
	 * back to 0 when they are acknowledged. */
	for (;;) {
		if (ioctl(c, SIOCINQ, &n) < 0)
			fail_errno("SIOCINQ");
		if (n == 3000)
			break;
		pause_ms();
	}
	for (;;) {
		if (ioctl(s, SIOCOUTQ, &n) < 0)
			fail_errno("SIOCOUTQ");
		if (n == 0)
			break;
		pause_ms();
	}
	int nsd = -1;
	if (ioctl(s, SIOCOUTQNSD, &nsd) < 0)
		fail_errno("SIOCOUTQNSD");
	printf("queues: inq 3000 outq 0 outq-unsent %d\n", nsd);
	char b[1000];
	if (read_full(c, b, sizeof b) != (ssize_t)sizeof b)
		fail_errno("read");
	rpos += sizeof b;
	if (ioctl(c, SIOCINQ, &n) < 0 || ioctl(c, FIONREAD, &nsd) < 0)
		fail_errno("SIOCINQ");
	printf("queues: after 1000 read: inq %d fionread %d\n", n, nsd);
	take(c);
	return 0;
}

static const char *state(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		fail_errno("TCP_INFO");
	switch (ti.tcpi_state) {
	case TCP_ESTABLISHED: return "established";
	case TCP_CLOSE_WAIT: return "close-wait";
	case TCP_FIN_WAIT2: return "fin-wait2";
	case TCP_CLOSE: return "close";
	default: return "other";
	}
}

static int row_info(void)
{
	int c, s;
	pair(&c, &s);
	printf("info: %s %s\n", state(c), state(s));
	take(c);
	/* The close's FIN goes over TCP: the kernel's own states.  (A
	 * shutdown(SHUT_WR) on shm sends its FIN at the close, or when the
	 * connection moves to TCP: TCP_INFO says established until then.) */
	close(s);
	char b;
	if (read(c, &b, 1) != 0)
		fail("no EOF after the close");
	while (strcmp(state(c), "close-wait") != 0)
		pause_ms();
	printf("info: after the peer's close %s\n", state(c));
	return 0;
}

static int row_linger(void)
{
	int c, s;
	pair(&c, &s);
	struct linger lg = {1, 0};
	if (setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
		fail_errno("SO_LINGER");
	close(s); /* a reset */
	take(c);
	char b[16];
	ssize_t r = read(c, b, sizeof b);
	printf("linger: read after the reset %zd %s\n", r, r < 0 ? strerror(errno) : "");
	r = send(c, "x", 1, MSG_NOSIGNAL);
	printf("linger: send after the reset %zd %s\n", r, r < 0 ? strerror(errno) : "");
	return 0;
}

int main(int argc, char **argv)
{
	prog_name = "kernel_features";
	if (argc < 2)
		fail("usage: kernel_features ROW [HOST]");
	if (argc > 2)
		host = argv[2];
	watchdog(40);
	signal(SIGPIPE, SIG_IGN);
	const char *row = argv[1];
	static const struct {
		const char *name;
		int (*fn)(void);
	} rows[] = {{"ktls", row_ktls},       {"zerocopy", row_zerocopy}, {"oob", row_oob},
		    {"fastopen", row_fastopen}, {"filter", row_filter},     {"repair", row_repair},
		    {"queues", row_queues},   {"info", row_info},         {"linger", row_linger}};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (strcmp(row, rows[i].name) == 0)
			return rows[i].fn();
	fail("unknown row %s", row);
}
