/* late_reader: the peer writes, closes and exits; only then does this end
 * fork or exec, with most of what it sent still unread.  Every byte must
 * still reach whoever reads the socket next, once.
 *
 *   late_reader server --port-file F [--host H] --bytes N [--seed S]
 *       accept one connection, write N bytes of stream S, close, exit
 *   late_reader client --host H --port P --bytes N [--seed S] --first K
 *                      --gate FIFO --then fork|exec
 *       read exactly K bytes, then wait for one byte on FIFO (the test
 *       writes it once the server has exited), then
 *         fork: the child reads to EOF and checks bytes [K, N); the parent
 *               waits for it and then must read EOF itself (nothing twice)
 *         exec: exec "late_reader drain" on the same fd
 *   late_reader drain --fd FD --from K --bytes N [--seed S]
 *       read FD to EOF, check it is bytes [K, N) of stream S
 * Prints "PASS late_reader <mode> ..." and exits 0, or a FAIL line and 1. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t seed = 5;

/* Read to EOF, checking against the stream from offset off; returns the
 * count. */
static uint64_t drain(int fd, uint64_t off)
{
	static char buf[65536];
	uint64_t got = 0;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_errno("read after %llu bytes", (unsigned long long)got);
		if (r == 0)
			return got;
		long long bad = gen_check(seed, off + got, buf, (size_t)r);
		if (bad >= 0)
			fail("byte %llu is wrong", (unsigned long long)(off + got + (uint64_t)bad));
		got += (uint64_t)r;
	}
}

static int server(const char *host, const char *port_file, uint64_t n)
{
	int port, lfd = tcp_listen(host, 0, 1, &port);
	FILE *f = fopen(port_file, "w");
	if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0)
		fail_errno("port file");
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fail_errno("accept");
	static char buf[65536];
	for (uint64_t off = 0; off < n;) {
		size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		gen_bytes(seed, off, buf, k);
		if (write_full(fd, buf, k) < 0)
			fail_errno("write");
		off += k;
	}
	close(fd);
	printf("PASS late_reader server bytes=%llu\n", (unsigned long long)n);
	return 0;
}

static int client(const char *host, int port, uint64_t n, uint64_t first, const char *gate,
		  const char *then, const char *self)
{
	int fd = tcp_connect(host, port);
	static char buf[65536];
	for (uint64_t got = 0; got < first;) {
		size_t k = first - got < sizeof buf ? (size_t)(first - got) : sizeof buf;
		ssize_t r = read_full(fd, buf, k);
		if (r <= 0)
			fail("stream ended after %llu of the first %llu bytes", (unsigned long long)got,
			     (unsigned long long)first);
		if (gen_check(seed, got, buf, (size_t)r) >= 0)
			fail("wrong bytes before the gate");
		got += (uint64_t)r;
	}
	/* The test opens the gate once the server has exited. */
	int g = open(gate, O_RDONLY);
	char b;
	if (g < 0 || read(g, &b, 1) != 1)
		fail_errno("gate");
	close(g);
	if (!strcmp(then, "exec")) {
		char sfd[16], sfrom[24], sn[24], ss[24];
		snprintf(sfd, sizeof sfd, "%d", fd);
		snprintf(sfrom, sizeof sfrom, "%llu", (unsigned long long)first);
		snprintf(sn, sizeof sn, "%llu", (unsigned long long)n);
		snprintf(ss, sizeof ss, "%llu", (unsigned long long)seed);
		fflush(stdout);
		execl(self, "late_reader", "drain", "--fd", sfd, "--from", sfrom, "--bytes", sn,
		      "--seed", ss, (char *)NULL);
		fail_errno("exec %s", self);
	}
	pid_t pid = fork();
	if (pid < 0)
		fail_errno("fork");
	if (pid == 0) {
		uint64_t got = drain(fd, first);
		if (got != n - first)
			fail("child read %llu bytes after the gate, expected %llu",
			     (unsigned long long)got, (unsigned long long)(n - first));
		printf("PASS late_reader child bytes=%llu\n", (unsigned long long)got);
		return 0;
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the child failed");
	ssize_t r = read(fd, buf, sizeof buf);
	if (r != 0)
		fail("the parent read %zd after the child drained the stream (expected EOF)", r);
	close(fd);
	printf("PASS late_reader fork first=%llu rest=%llu\n", (unsigned long long)first,
	       (unsigned long long)(n - first));
	return 0;
}

int main(int argc, char **argv)
{
	prog_name = "late_reader";
	watchdog(60);
	if (argc < 2)
		fail("usage: late_reader server|client|drain ...");
	const char *mode = argv[1], *host = "127.0.0.1", *port_file = NULL, *gate = NULL,
		   *then = "fork";
	int port = -1, fd = -1;
	uint64_t n = 0, first = 0;
	static const struct option opts[] = {
		{"host", 1, 0, 'h'}, {"port", 1, 0, 'p'},  {"port-file", 1, 0, 'f'},
		{"bytes", 1, 0, 'n'}, {"seed", 1, 0, 's'}, {"first", 1, 0, 'k'},
		{"from", 1, 0, 'k'}, {"gate", 1, 0, 'g'}, {"then", 1, 0, 't'},
		{"fd", 1, 0, 'd'},   {0, 0, 0, 0}};
	optind = 2;
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': port_file = optarg; break;
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'k': first = strtoull(optarg, NULL, 0); break;
		case 'g': gate = optarg; break;
		case 't': then = optarg; break;
		case 'd': fd = atoi(optarg); break;
		default: fail("bad option");
		}
	}
	if (!strcmp(mode, "server") && port_file && n)
		return server(host, port_file, n);
	if (!strcmp(mode, "client") && port > 0 && n && first < n && gate &&
	    (!strcmp(then, "fork") || !strcmp(then, "exec")))
		return client(host, port, n, first, gate, then, "/proc/self/exe");
	if (!strcmp(mode, "drain") && fd >= 0 && n) {
		uint64_t got = drain(fd, first);
		if (got != n - first)
			fail("read %llu bytes after exec, expected %llu", (unsigned long long)got,
			     (unsigned long long)(n - first));
		printf("PASS late_reader exec bytes=%llu\n", (unsigned long long)got);
		return 0;
	}
	fail("bad arguments for %s", mode);
}
