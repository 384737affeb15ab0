/* uring_echo: one TCP connection whose bytes move through io_uring
 * (liburing), the socket made, accepted and connected through libc.
 *
 *   uring_echo server [--host H] --port-file F [--ring first|after]
 *       listen, accept one connection, echo it with IORING_OP_RECV /
 *       IORING_OP_SEND until EOF, close.
 *   uring_echo client [--host H] --port P [--bytes N] [--seed S]
 *                     [--ring first|after]
 *       connect, send a generated stream in chunks through the ring and
 *       read each chunk's echo back through it, checked at every offset.
 *
 * --ring first creates the ring before the socket exists, after (the
 * default for neither) once the connection is established: the second is a
 * connection an accelerating library has already taken when the ring
 * appears.  --ring raw (x86-64) first makes a ring with a bare `syscall`
 * instruction, which no library sees, and keeps it open; the echo's own
 * ring is made after the connection, as with after.
 * Output: PASS uring_echo server bytes=N / PASS uring_echo client bytes=N
 * sha256=X.  Exit 0 on PASS. */
#include "common.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct io_uring ring;

/* io_uring_setup by a `syscall` instruction of our own: only the
 * descriptor it leaves open can tell. */
static int raw_ring(void)
{
#if defined(__x86_64__)
	static struct io_uring_params p;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)__NR_io_uring_setup), "D"(4L), "S"(&p)
			 : "rcx", "r11", "memory");
	if (r < 0)
		fail("raw io_uring_setup: %s", strerror((int)-r));
	return (int)r;
#else
	fail("--ring raw needs x86-64");
#endif
}

static void ring_init(void)
{
	int r = io_uring_queue_init(8, &ring, 0);
	if (r < 0)
		fail("io_uring_queue_init: %s", strerror(-r));
}

/* One operation through the ring, waited for; its result (-errno on
 * failure). */
static int ring_op(int send, int fd, void *b, size_t n)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	if (!sqe)
		fail("io_uring_get_sqe: ring full");
	if (send)
		io_uring_prep_send(sqe, fd, b, n, MSG_NOSIGNAL);
	else
		io_uring_prep_recv(sqe, fd, b, n, 0);
	int r = io_uring_submit(&ring);
	if (r != 1)
		fail("io_uring_submit: %s", r < 0 ? strerror(-r) : "nothing submitted");
	struct io_uring_cqe *cqe;
	while ((r = io_uring_wait_cqe(&ring, &cqe)) == -EINTR)
		;
	if (r < 0)
		fail("io_uring_wait_cqe: %s", strerror(-r));
	r = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	return r;
}

static void send_all(int fd, const char *b, size_t n)
{
	while (n) {
		int r = ring_op(1, fd, (void *)b, n);
		if (r <= 0)
			fail("ring send: %s", r ? strerror(-r) : "0 bytes");
		b += r;
		n -= (size_t)r;
	}
}

int main(int argc, char **argv)
{
	prog_name = "uring_echo";
	if (argc < 2)
		fail("usage: uring_echo server|client [options]");
	int server = !strcmp(argv[1], "server");
	const char *host = "127.0.0.1", *port_file = NULL;
	int port = -1, first = 0, raw = 0;
	unsigned long long nbytes = 1 << 20, seed = 1;
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--host"))
			host = v;
		else if (!strcmp(k, "--port"))
			port = atoi(v);
		else if (!strcmp(k, "--port-file"))
			port_file = v;
		else if (!strcmp(k, "--bytes"))
			nbytes = strtoull(v, NULL, 0);
		else if (!strcmp(k, "--seed"))
			seed = strtoull(v, NULL, 0);
		else if (!strcmp(k, "--ring")) {
			first = !strcmp(v, "first");
			raw = !strcmp(v, "raw");
		}
		else
			fail("unknown option %s", k);
	}
	watchdog(120);
	if (first)
		ring_init();
	if (raw)
		raw_ring();
	static char buf[65536];
	if (server) {
		int bound;
		int l = tcp_listen(host, 0, 8, &bound);
		if (port_file) {
			FILE *f = fopen(port_file, "w");
			if (!f || fprintf(f, "%d\n", bound) < 0 || fclose(f))
				fail_errno("%s", port_file);
		}
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			fail_errno("accept");
		if (!first)
			ring_init();
		unsigned long long total = 0;
		for (;;) {
			int r = ring_op(0, fd, buf, sizeof buf);
			if (r < 0)
				fail("ring recv: %s", strerror(-r));
			if (r == 0)
				break;
			send_all(fd, buf, (size_t)r);
			total += (unsigned long long)r;
		}
		close(fd);
		close(l);
		printf("PASS uring_echo server bytes=%llu\n", total);
		return 0;
	}
	if (port < 0)
		fail("client needs --port");
	int fd = tcp_connect(host, port);
	if (!first)
		ring_init();
	struct sha256 s;
	sha256_init(&s);
	uint64_t st = seed, off = 0;
	static char in[65536];
	while (off < nbytes) {
		size_t n = 1 + (size_t)(splitmix64(&st) % sizeof buf);
		if (n > nbytes - off)
			n = (size_t)(nbytes - off);
		gen_bytes(seed, off, buf, n);
		send_all(fd, buf, n);
		for (size_t got = 0; got < n;) {
			int r = ring_op(0, fd, in + got, n - got);
			if (r <= 0)
				fail("ring recv at %llu: %s", (unsigned long long)(off + got),
				     r ? strerror(-r) : "EOF");
			got += (size_t)r;
		}
		long long bad = gen_check(seed, off, in, n);
		if (bad >= 0)
			fail("echo differs at offset %llu", (unsigned long long)(off + (uint64_t)bad));
		sha256_update(&s, in, n);
		off += n;
	}
	shutdown(fd, SHUT_WR);
	int r = ring_op(0, fd, in, sizeof in);
	if (r != 0)
		fail("expected EOF after the echo, got %d", r);
	close(fd);
	char hex[65];
	sha256_hex(&s, hex);
	printf("PASS uring_echo client bytes=%llu sha256=%s\n", nbytes, hex);
	io_uring_queue_exit(&ring);
	return 0;
}
