/* demote_both_full: both ends move the connection to TCP at once, each with
 * more unread bytes for the other than the socket can hold.
 *
 *   demote_both_full [--sockbuf B] [--fork] [--peek | --waitall] [--one]
 *                    [--host H]
 *
 * A server and a client process each write a known stream, non-blocking,
 * until the connection takes no more (EAGAIN: the ring, or the socket's
 * buffers, full), tell each other so through a pipe, then both attach a
 * socket filter (a kernel-only feature: the connection leaves the rings,
 * each end replaying over TCP what the other had not read), shut down
 * their writing side and read the other's stream to EOF, checking every
 * byte.  Under shunt the two replays meet on a socket that holds less
 * than either (a small SO_SNDBUF/SO_RCVBUF, --sockbuf, or rings larger
 * than the socket's buffers): an end whose replay only waited for room
 * waited for the other for ever.  The watchdog fails the test then.
 *
 * --peek: each read is a MSG_PEEK of up to 1000 bytes, then a read of what
 * it showed, which must be the same bytes.  --waitall: reads of 50,000
 * bytes with MSG_WAITALL.
 * --one: only the server attaches the filter; the client writes on,
 * blocking, and finds the connection leaving in that send, replaying from
 * there (its data path, not its own move).
 * --fork: each end reads in a child it forks after the move; the parent
 * then finds nothing more to read (EOF), so no byte comes twice.
 * Prints "PASS demote_both_full server|client sent=A got=B" per end. */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int sockbuf, use_fork, read_mode; /* 0 recv, 1 peek first, 2 waitall */
static int one_moves; /* only the server attaches the filter */

/* Each end's stream. */
static uint64_t seed_of(int server)
{
	return server ? 7101 : 7202;
}

static void read_all(int fd, int server, uint64_t *got)
{
	static char buf[65536], peeked[65536];
	int short_seen = 0;
	for (;;) {
		ssize_t r;
		if (read_mode == 1) {
			/* What a peek shows comes next, byte for byte. */
			ssize_t p = recv(fd, peeked, 1000, MSG_PEEK);
			if (p < 0 && errno == EINTR)
				continue;
			if (p < 0)
				fail_errno("recv(MSG_PEEK) at %llu", (unsigned long long)*got);
			r = p ? recv(fd, buf, (size_t)p, 0) : 0;
			if (r != p || memcmp(buf, peeked, (size_t)p) != 0)
				fail("at %llu: peeked %zd bytes, then read %zd others",
				     (unsigned long long)*got, p, r);
		} else if (read_mode == 2) {
			/* Whole pieces, short only at EOF. */
			r = recv(fd, buf, 50000, MSG_WAITALL);
			if (r > 0 && short_seen)
				fail("at %llu: MSG_WAITALL came short before EOF",
				     (unsigned long long)*got);
			short_seen = r >= 0 && r < 50000;
		} else {
			r = recv(fd, buf, sizeof buf, 0);
		}
		if (r == 0)
			return;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_errno("recv at %llu", (unsigned long long)*got);
		long long bad = gen_check(seed_of(!server), *got, buf, (size_t)r);
		if (bad >= 0)
			fail("the other end's stream differs at offset %lld", bad);
		*got += (uint64_t)r;
	}
}

static void run(int fd, int server, int go_rd, int go_wr)
{
	prog_name = server ? "demote_both_full server" : "demote_both_full client";
	if (sockbuf && (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf) < 0 ||
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf) < 0))
		fail_errno("SO_SNDBUF/SO_RCVBUF");
	if (set_nonblock(fd, 1) < 0)
		fail_errno("O_NONBLOCK");
	static char buf[65536];
	uint64_t sent = 0;
	for (;;) {
		gen_bytes(seed_of(server), sent, buf, sizeof buf);
		ssize_t r = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0)
			fail_errno("send at %llu", (unsigned long long)sent);
		sent += (uint64_t)r;
	}
	/* Both full before either moves. */
	char c = 1;
	if (write(go_wr, &c, 1) != 1 || read(go_rd, &c, 1) != 1)
		fail_errno("pipe");
	if (one_moves && !server) {
		/* Write on, blocking, reading nothing: this end finds the move
		 * in its send, with its ring and the server's both full. */
		if (set_nonblock(fd, 0) < 0)
			fail_errno("blocking");
		gen_bytes(seed_of(server), sent, buf, sizeof buf);
		if (write_full(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			fail_errno("send at %llu", (unsigned long long)sent);
		sent += sizeof buf;
	}
	struct sock_filter accept_all[] = {{BPF_RET | BPF_K, 0, 0, 0xffffffff}};
	struct sock_fprog prog = {1, accept_all};
	if ((server || !one_moves) &&
	    setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
		fail_errno("SO_ATTACH_FILTER");
	if (shutdown(fd, SHUT_WR) < 0)
		fail_errno("shutdown");
	if (set_nonblock(fd, 0) < 0)
		fail_errno("blocking");
	uint64_t got = 0;
	if (!use_fork) {
		read_all(fd, server, &got);
	} else {
		pid_t k = fork();
		if (k < 0)
			fail_errno("fork");
		if (k == 0) {
			read_all(fd, server, &got);
			printf("PASS demote_both_full %s sent=%llu got=%llu\n",
			       server ? "server" : "client", (unsigned long long)sent,
			       (unsigned long long)got);
			fflush(stdout);
			_exit(0);
		}
		int st;
		if (waitpid(k, &st, 0) != k || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("the reading child failed");
		/* Everything was the child's: here only the EOF is left. */
		ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (r != 0)
			fail("after the child read it all, the parent's recv gave %zd (errno %d)", r,
			     r < 0 ? errno : 0);
		close(fd);
		return;
	}
	printf("PASS demote_both_full %s sent=%llu got=%llu\n", server ? "server" : "client",
	       (unsigned long long)sent, (unsigned long long)got);
	fflush(stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"sockbuf", 1, 0, 'b'}, {"fork", 0, 0, 'f'}, {"host", 1, 0, 'h'},
		{"peek", 0, 0, 'p'}, {"waitall", 0, 0, 'w'}, {"one", 0, 0, 'o'}, {0, 0, 0, 0},
	};
	const char *host = "127.0.0.1";
	int o;
	prog_name = "demote_both_full";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'b': sockbuf = atoi(optarg); break;
		case 'f': use_fork = 1; break;
		case 'h': host = optarg; break;
		case 'p': read_mode = 1; break;
		case 'w': read_mode = 2; break;
		case 'o': one_moves = 1; break;
		default:
			fprintf(stderr, "usage: demote_both_full [--sockbuf B] [--fork] [--peek | "
					"--waitall] [--one] [--host H]\n");
			return 2;
		}
	}
	watchdog(60);
	int port = 0;
	int lfd = tcp_listen(host, 0, 1, &port);
	int c2s[2], s2c[2];
	if (pipe(c2s) < 0 || pipe(s2c) < 0)
		fail_errno("pipe");
	pid_t k = fork();
	if (k < 0)
		fail_errno("fork");
	if (k == 0) {
		close(lfd);
		run(tcp_connect(host, port), 0, s2c[0], c2s[1]);
		_exit(0);
	}
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fail_errno("accept");
	close(lfd);
	run(fd, 1, c2s[0], s2c[1]);
	int st;
	if (waitpid(k, &st, 0) != k || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the client process failed");
	return 0;
}
