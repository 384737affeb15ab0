/* A connection shared by fork must keep its ring memory while any process
 * may still read it, even after the process that made it closed its copy
 * and went on making connections (which, under shunt, reuse ring memory),
 * and even after the peer closed its end.
 *
 *   arena_fork [--conns N] [--bytes B]
 *
 * A server process sends B bytes on the first connection and closes it at
 * once; it echoes 4 KiB on each later one.  The client reads a little of
 * the first connection and forks.  The parent closes its copy and makes N
 * connections of its own, each echoing and checking; only then does the
 * child read the rest of the first connection, checking every byte up to
 * EOF.  Prints "PASS arena_fork" and exits 0 when every byte was right. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define CHUNK 4096

static void serve(int l, int conns, size_t bytes, int done)
{
	static unsigned char buf[65536];
	for (int i = 0; i <= conns; i++) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			fail_errno("server: accept");
		if (i == 0) {
			for (size_t off = 0; off < bytes;) {
				size_t n = bytes - off < sizeof buf ? bytes - off : sizeof buf;
				gen_bytes(1, off, buf, n);
				if (write_full(fd, buf, n) != (ssize_t)n)
					fail_errno("server: write");
				off += n;
			}
			close(fd);
			if (write(done, "d", 1) != 1)
				fail_errno("server: done");
			continue;
		}
		if (read_full(fd, buf, CHUNK) != CHUNK || write_full(fd, buf, CHUNK) != CHUNK)
			fail("server: echo %d", i);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	prog_name = "arena_fork";
	int conns = 64, opt;
	size_t bytes = 512 * 1024;
	static const struct option lo[] = {
		{"conns", required_argument, 0, 'n'},
		{"bytes", required_argument, 0, 'b'},
		{0, 0, 0, 0},
	};
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (opt == 'n')
			conns = atoi(optarg);
		else if (opt == 'b')
			bytes = strtoul(optarg, NULL, 10);
		else
			fail("usage: arena_fork [--conns N] [--bytes B]");
	}
	if (conns <= 0 || bytes <= CHUNK)
		fail("usage: arena_fork [--conns N] [--bytes B > 4096]");
	watchdog(120);
	signal(SIGPIPE, SIG_IGN);

	int port, done[2], go[2];
	int l = tcp_listen("127.0.0.1", 0, 128, &port);
	if (l < 0 || pipe(done) || pipe(go))
		fail_errno("setup");
	pid_t srv = fork();
	if (srv < 0)
		fail_errno("fork");
	if (srv == 0) {
		prog_name = "arena_fork server";
		/* Up: from here the listener is registered as ours too. */
		if (write(done[1], "r", 1) != 1)
			fail_errno("server: ready");
		serve(l, conns, bytes, done[1]);
		_exit(0);
	}
	char b;
	close(done[1]);
	if (read(done[0], &b, 1) != 1)
		fail("the server did not start");
	close(l);

	static unsigned char in[CHUNK], out[CHUNK];
	int shared = tcp_connect("127.0.0.1", port);
	if (shared < 0)
		fail_errno("connect");
	if (read_full(shared, in, CHUNK) != CHUNK || gen_check(1, 0, in, CHUNK) >= 0)
		fail("first bytes differ");
	if (read(done[0], &b, 1) != 1)
		fail("the server did not finish sending");
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		prog_name = "arena_fork child";
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			fail("child: no go");
		size_t off = CHUNK;
		for (;;) {
			ssize_t n = read(shared, in, sizeof in);
			if (n < 0)
				fail_errno("child: read");
			if (n == 0)
				break;
			long long bad = gen_check(1, off, in, (size_t)n);
			if (bad >= 0)
				fail("child: byte %llu differs (its ring was reused?)",
				     (unsigned long long)off + (unsigned long long)bad);
			off += (size_t)n;
		}
		if (off != bytes)
			fail("child: EOF after %zu bytes of %zu", off, bytes);
		printf("child bytes=%zu\n", off);
		fflush(stdout);
		_exit(0);
	}
	close(go[0]);
	close(shared);
	for (int i = 0; i < conns; i++) {
		int fd = tcp_connect("127.0.0.1", port);
		if (fd < 0)
			fail_errno("connect %d", i);
		gen_bytes(2 + (uint64_t)i, 0, out, CHUNK);
		if (write_full(fd, out, CHUNK) != CHUNK || read_full(fd, in, CHUNK) != CHUNK ||
		    memcmp(in, out, CHUNK))
			fail("parent: echo on connection %d differs", i);
		close(fd);
	}
	if (write(go[1], "g", 1) != 1)
		fail_errno("go");
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("the child failed");
	if (waitpid(srv, &st, 0) != srv || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("the server failed");
	printf("PASS arena_fork conns=%d bytes=%zu\n", conns, bytes);
	return 0;
}
