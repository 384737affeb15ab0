/* demote_blocked: the reader moves the connection to TCP while the writer is
 * blocked because the reader has not read yet.
 *
 *   demote_blocked [--bytes N] [--full F] [--host H]
 *
 * The client process writes N bytes of a known stream and then reads the
 * server's answer; the server waits until F bytes wait unread for it
 * (FIONREAD: the client's ring, or the socket's buffer, is full enough that
 * the client is blocked or about to be), then wraps the socket in a FILE —
 * fdopen makes an accelerated connection leave for TCP (reason=stdio) and
 * sends nothing, so the client learns it mid-write, inside its wait, with
 * nothing on the socket to wake it.  The server reads and checks all N bytes
 * with fread, then answers with sendfile and the client checks the answer.  A writer whose wait misses the move sleeps for ever: the watchdog
 * fails the test.
 *
 * Synchronised on the data itself (FIONREAD), never on time. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEED 5151
#define ANSWER_SEED 5252
#define ANSWER_LEN 1000

static void client(const char *host, int port, uint64_t n)
{
	prog_name = "demote_blocked client";
	int fd = tcp_connect(host, port);
	char buf[65536];
	for (uint64_t off = 0; off < n;) {
		size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		gen_bytes(SEED, off, buf, k);
		if (write_full(fd, buf, k) != (ssize_t)k)
			fail_errno("write at %llu", (unsigned long long)off);
		off += k;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		fail_errno("shutdown");
	ssize_t r = read_full(fd, buf, ANSWER_LEN + 1);
	if (r != ANSWER_LEN)
		fail("answer: %zd bytes, expected %d then EOF", r, ANSWER_LEN);
	long long bad = gen_check(ANSWER_SEED, 0, buf, ANSWER_LEN);
	if (bad >= 0)
		fail("answer differs at offset %lld", bad);
	close(fd);
	_exit(0);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bytes", 1, 0, 'b' }, { "full", 1, 0, 'f' }, { "host", 1, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	uint64_t n = 4 << 20, full = 32768;
	int o;
	prog_name = "demote_blocked";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'b': n = strtoull(optarg, NULL, 0); break;
		case 'f': full = strtoull(optarg, NULL, 0); break;
		case 'h': host = optarg; break;
		default:
			fprintf(stderr, "usage: demote_blocked [--bytes N] [--full F] [--host H]\n");
			return 2;
		}
	}
	if (full == 0 || full > n) {
		fprintf(stderr, "demote_blocked: --full must be 1..--bytes\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(30);

	/* The answer, in a file for sendfile. */
	char path[] = "/tmp/demote_blocked.XXXXXX";
	int file = mkstemp(path);
	if (file < 0)
		fail_errno("mkstemp");
	unlink(path);
	char ans[ANSWER_LEN];
	gen_bytes(ANSWER_SEED, 0, ans, sizeof ans);
	if (write(file, ans, sizeof ans) != (ssize_t)sizeof ans)
		fail_errno("write answer file");

	int port;
	int l = tcp_listen(host, 0, 4, &port);
	fflush(stdout);
	pid_t p = fork();
	if (p < 0)
		fail_errno("fork");
	if (p == 0) {
		close(l);
		client(host, port, n);
	}
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail_errno("accept");
	close(l);

	/* The writer is blocked (or about to be) once this much waits. */
	for (;;) {
		int q = 0;
		if (ioctl(s, FIONREAD, &q) < 0)
			fail_errno("FIONREAD");
		if ((uint64_t)q >= full)
			break;
		sched_yield(); /* to the writer, on a shared CPU */
	}
	/* stdio reads inside libc, where shunt cannot serve a ring: fdopen
	 * moves the connection to TCP, and nothing is sent to the writer. */
	FILE *f = fdopen(s, "r");
	if (!f)
		fail_errno("fdopen");
	char buf[65536];
	uint64_t got = 0;
	size_t r;
	while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
		long long bad = gen_check(SEED, got, buf, r);
		if (bad >= 0)
			fail("server: data differs at offset %llu", (unsigned long long)got + bad);
		got += r;
	}
	if (ferror(f))
		fail_errno("server: fread at %llu", (unsigned long long)got);
	if (got != n)
		fail("server: %llu of %llu bytes before EOF", (unsigned long long)got,
		     (unsigned long long)n);
	off_t off = 0;
	ssize_t w = sendfile(s, file, &off, ANSWER_LEN);
	if (w != ANSWER_LEN)
		fail_errno("sendfile: %zd", w);
	if (shutdown(s, SHUT_WR) < 0)
		fail_errno("server shutdown");
	int st;
	if (waitpid(p, &st, 0) < 0)
		fail_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("client: %s %d", WIFEXITED(st) ? "exit status" : "signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	fclose(f);
	printf("PASS demote_blocked bytes=%llu answer=%d\n", (unsigned long long)n, ANSWER_LEN);
	return 0;
}
