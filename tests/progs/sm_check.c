/* One end of a scenario for the sockmap path (tests/e2e/sockmap_e2e.sh),
 * with the same assertions whether the connection is redirected or not.
 *
 *   sm_check server SCENARIO PORTFILE [FIFO]   listen on 127.0.0.1, write
 *                                              the port, serve one client
 *   sm_check client SCENARIO PORT [FIFO]
 *
 * Scenarios:
 *   echo    the client sends 24 MiB in writes of 1 B to 1 MiB and half-closes;
 *           the server echoes it and closes; both check every byte, the
 *           client the EOF after the echo (also served by sm_echo.go)
 *   peek    MSG_PEEK, FIONREAD and poll() on the server; epoll (EPOLLIN,
 *           then EPOLLRDHUP after the server's shutdown) on the client
 *   rst     the server resets (SO_LINGER 0): the client's blocked recv
 *           gets ECONNRESET
 *   rcvbuf  the server's SO_RCVBUF is 4 KiB and it reads nothing until the
 *           client, writing without blocking, has seen EAGAIN (told through
 *           FIFO); then 32 MiB arrive intact
 *   splice  the echo scenario's client; the server echoes with splice(2)
 *           through a pipe, as Go's io.Copy between two TCPConns does
 *           (on a redirected socket splice does not see the redirected
 *           bytes: sockmap_e2e runs it only with SM_SPLICE=1)
 *   hold    the client sends 64 KiB and prints "sent"; both ends then wait
 *           for a line on stdin (the sockets leave the sockmap meanwhile),
 *           the server checks the 64 KiB and answers 64 KiB, checked too
 * Prints "ok SCENARIO ROLE" at the end, or FAIL. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define SEED_C 0x5eed01
#define SEED_S 0x5eed02
#define ECHO_TOTAL (24u << 20)
#define RCVBUF_TOTAL (32u << 20)
#define HOLD_BYTES (64u << 10)

static char buf[1 << 20];

/* A redirected socket's blocking read (or write) can return EAGAIN: Linux's
 * tcp_bpf_recvmsg() sleeps once and gives up when woken by anything but
 * data (a reset, a FIN, write space).  With SM_EAGAIN_OK the call is made
 * again and counted (printed at the end); without it EAGAIN is an error as
 * on any blocking socket. */
static unsigned long spurious;

static int eagain_ok(int fd)
{
	static int ok = -1;
	if (ok < 0)
		ok = getenv("SM_EAGAIN_OK") != NULL;
	return ok && errno == EAGAIN && !(fcntl(fd, F_GETFL) & O_NONBLOCK);
}

static ssize_t sread(int fd, void *b, size_t len, int flags)
{
	for (;;) {
		ssize_t n = recv(fd, b, len, flags);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (!eagain_ok(fd))
			return -1;
		spurious++;
	}
}

static ssize_t swrite(int fd, const void *b, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = send(fd, (const char *)b + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && eagain_ok(fd)) {
			spurious++;
			continue;
		}
		if (n < 0)
			return -1;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void send_stream(int fd, uint64_t seed, uint64_t total, int varied)
{
	uint64_t off = 0, k = 1;
	while (off < total) {
		size_t n = varied ? (size_t)(splitmix64(&k) % sizeof buf) + 1 : sizeof buf;
		if (n > total - off)
			n = (size_t)(total - off);
		gen_bytes(seed, off, buf, n);
		if (swrite(fd, buf, n) != (ssize_t)n)
			fail_errno("write at %llu", (unsigned long long)off);
		off += n;
	}
}

/* Reads total bytes of the stream, then (eof) expects EOF. */
static void recv_stream(int fd, uint64_t seed, uint64_t total, int eof)
{
	uint64_t off = 0;
	while (off < total) {
		size_t want = sizeof buf < total - off ? sizeof buf : (size_t)(total - off);
		ssize_t n = sread(fd, buf, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail_errno("read at %llu", (unsigned long long)off);
		if (n == 0)
			fail("EOF at %llu of %llu", (unsigned long long)off, (unsigned long long)total);
		long long bad = gen_check(seed, off, buf, (size_t)n);
		if (bad >= 0)
			fail("byte %llu differs", (unsigned long long)(off + (uint64_t)bad));
		off += (uint64_t)n;
	}
	if (eof) {
		ssize_t n = sread(fd, buf, 1, 0);
		if (n != 0)
			fail("expected EOF after %llu bytes, read returned %zd (%s)", (unsigned long long)total,
			     n, n < 0 ? strerror(errno) : "data");
	}
}

static void wait_line(void)
{
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		fail("stdin closed");
}

static void fifo_signal(const char *fifo)
{
	int f = open(fifo, O_WRONLY | O_CLOEXEC);
	if (f < 0 || write(f, "x", 1) != 1)
		fail_errno("fifo %s", fifo);
	close(f);
}

static void fifo_wait(const char *fifo)
{
	int f = open(fifo, O_RDONLY | O_CLOEXEC);
	char c;
	if (f < 0 || read(f, &c, 1) != 1)
		fail_errno("fifo %s", fifo);
	close(f);
}

static void server(const char *sc, int fd, const char *fifo)
{
	if (!strcmp(sc, "echo")) {
		for (;;) {
			ssize_t n = sread(fd, buf, sizeof buf, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				fail_errno("read");
			if (n == 0)
				break;
			if (swrite(fd, buf, (size_t)n) != n)
				fail_errno("write");
		}
	} else if (!strcmp(sc, "splice")) {
		int pp[2];
		if (pipe(pp) < 0)
			fail_errno("pipe");
		for (;;) {
			ssize_t n = splice(fd, NULL, pp[1], NULL, 1 << 20, SPLICE_F_MOVE);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				fail_errno("splice from the socket");
			if (n == 0)
				break;
			while (n > 0) {
				ssize_t m = splice(pp[0], NULL, fd, NULL, (size_t)n, SPLICE_F_MOVE);
				if (m < 0 && errno == EINTR)
					continue;
				if (m <= 0)
					fail_errno("splice to the socket");
				n -= m;
			}
		}
	} else if (!strcmp(sc, "peek")) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 30000) != 1 || !(p.revents & POLLIN))
			fail("poll: no POLLIN (revents %#x)", p.revents);
		char a[16], b[16];
		int avail = 0;
		/* The 10 bytes may come in parts: peek until all are there. */
		ssize_t n;
		do {
			n = sread(fd, a, 10, MSG_PEEK);
		} while (n > 0 && n < 10 && poll(&p, 1, 30000) == 1);
		if (n != 10 || memcmp(a, "0123456789", 10))
			fail("MSG_PEEK: %zd bytes", n);
		if (ioctl(fd, FIONREAD, &avail) < 0 || avail != 10)
			fail("FIONREAD: %d, expected 10", avail);
		if (sread(fd, b, sizeof b, 0) != 10 || memcmp(b, "0123456789", 10))
			fail("recv after MSG_PEEK");
		if (swrite(fd, "ok", 2) != 2)
			fail_errno("write");
		if (shutdown(fd, SHUT_WR) < 0)
			fail_errno("shutdown");
		if (sread(fd, b, 1, 0) != 0)
			fail_errno("expected EOF");
	} else if (!strcmp(sc, "rst")) {
		char c;
		if (sread(fd, &c, 1, 0) != 1)
			fail_errno("read");
		struct linger lg = {1, 0};
		if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
			fail_errno("SO_LINGER");
	} else if (!strcmp(sc, "rcvbuf")) {
		fifo_wait(fifo);
		recv_stream(fd, SEED_C, RCVBUF_TOTAL, 1);
	} else if (!strcmp(sc, "hold")) {
		wait_line();
		recv_stream(fd, SEED_C, HOLD_BYTES, 0);
		send_stream(fd, SEED_S, HOLD_BYTES, 0);
		if (shutdown(fd, SHUT_WR) < 0)
			fail_errno("shutdown");
		recv_stream(fd, SEED_C, 0, 1);
	} else {
		fail("unknown scenario %s", sc);
	}
	close(fd);
}

static void client(const char *sc, int fd, const char *fifo)
{
	if (!strcmp(sc, "echo") || !strcmp(sc, "splice")) {
		pid_t pid = fork();
		if (pid < 0)
			fail_errno("fork");
		if (pid == 0) {
			send_stream(fd, SEED_C, ECHO_TOTAL, 1);
			if (shutdown(fd, SHUT_WR) < 0)
				fail_errno("shutdown");
			_exit(0);
		}
		recv_stream(fd, SEED_C, ECHO_TOTAL, 1);
		int st;
		if (waitpid(pid, &st, 0) != pid || st != 0)
			fail("writer failed");
	} else if (!strcmp(sc, "peek")) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			fail_errno("epoll");
		if (swrite(fd, "0123456789", 10) != 10)
			fail_errno("write");
		char a[8];
		size_t got = 0;
		int rdhup = 0;
		while (got < 2 || !rdhup) {
			struct epoll_event out;
			int n = epoll_wait(ep, &out, 1, 30000);
			if (n != 1)
				fail("epoll_wait: %d (got %zu, rdhup %d)", n, got, rdhup);
			if (out.events & EPOLLRDHUP)
				rdhup = 1;
			for (;;) {
				ssize_t r = recv(fd, a + got, sizeof a - got, MSG_DONTWAIT);
				if (r <= 0)
					break;
				got += (size_t)r;
			}
		}
		if (got != 2 || memcmp(a, "ok", 2))
			fail("reply: %zu bytes", got);
		shutdown(fd, SHUT_WR);
		close(ep);
	} else if (!strcmp(sc, "rst")) {
		if (swrite(fd, "x", 1) != 1)
			fail_errno("write");
		char c;
		ssize_t n = read(fd, &c, 1);
		/* A reader blocked in a socket of the sockmap when the reset
		 * comes is woken with EAGAIN by tcp_bpf_recvmsg() (Linux up to
		 * 6.18 at least), the reset then on the next call: allowed only
		 * when the caller says the connection is redirected. */
		if (n == -1 && errno == EAGAIN && getenv("SM_RST_EAGAIN_OK")) {
			printf("note: EAGAIN before the reset\n");
			n = read(fd, &c, 1);
		}
		if (n != -1 || errno != ECONNRESET)
			fail("read after the peer's reset: %zd (%s), expected ECONNRESET", n,
			     n < 0 ? strerror(errno) : "no error");
	} else if (!strcmp(sc, "rcvbuf")) {
		set_nonblock(fd, 1);
		uint64_t off = 0;
		int eagain = 0;
		while (off < RCVBUF_TOTAL) {
			gen_bytes(SEED_C, off, buf, 65536);
			ssize_t n = write(fd, buf, 65536);
			if (n < 0 && errno == EAGAIN) {
				eagain = 1;
				break;
			}
			if (n < 0)
				fail_errno("write");
			off += (uint64_t)n;
		}
		/* Plain TCP stops the writer at the reader's buffer; a
		 * redirected connection only at the TCP memory limits: the
		 * script tells which it expects. */
		if (!eagain && !getenv("SM_RCVBUF_UNBOUNDED_OK"))
			fail("%llu bytes written without EAGAIN: the reader's buffer is not bounded",
			     (unsigned long long)off);
		printf("%s after %llu\n", eagain ? "eagain" : "no eagain", (unsigned long long)off);
		fflush(stdout);
		set_nonblock(fd, 0);
		fifo_signal(fifo);
		while (off < RCVBUF_TOTAL) {
			size_t n = RCVBUF_TOTAL - off < 65536 ? (size_t)(RCVBUF_TOTAL - off) : 65536;
			gen_bytes(SEED_C, off, buf, n);
			if (swrite(fd, buf, n) != (ssize_t)n)
				fail_errno("write");
			off += n;
		}
		shutdown(fd, SHUT_WR);
	} else if (!strcmp(sc, "hold")) {
		send_stream(fd, SEED_C, HOLD_BYTES, 0);
		printf("sent\n");
		fflush(stdout);
		wait_line();
		recv_stream(fd, SEED_S, HOLD_BYTES, 1);
		shutdown(fd, SHUT_WR);
	} else {
		fail("unknown scenario %s", sc);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	prog_name = "sm_check";
	if (argc < 4)
		fail("usage: sm_check server|client SCENARIO PORTFILE|PORT [FIFO]");
	watchdog(120);
	const char *fifo = argc > 4 ? argv[4] : NULL;
	if (!strcmp(argv[2], "rcvbuf") && !fifo)
		fail("rcvbuf needs a FIFO");
	if (!strcmp(argv[1], "server")) {
		int port;
		int l = tcp_listen("127.0.0.1", 0, 8, &port);
		if (!strcmp(argv[2], "rcvbuf")) {
			int sz = 4096;
			if (setsockopt(l, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz) < 0)
				fail_errno("SO_RCVBUF");
		}
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, argv[3]) < 0)
			fail_errno("port file");
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			fail_errno("accept");
		close(l);
		server(argv[2], fd, fifo);
	} else {
		int fd = tcp_connect("127.0.0.1", atoi(argv[3]));
		client(argv[2], fd, fifo);
	}
	if (spurious)
		printf("note: %lu spurious EAGAIN on a blocking socket, retried\n", spurious);
	printf("ok %s %s\n", argv[2], argv[1]);
	return 0;
}
