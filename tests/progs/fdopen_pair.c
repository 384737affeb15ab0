/* fdopen_pair: stdio (fdopen + fgets/fputs) on a TCP connection that already
 * carries data in both directions.
 *
 *   fdopen_pair [--host H] [--lines N] [--client-stdio server-first|client-first]
 *
 * The parent is the server, a forked child the client; pipes order the steps
 * (no sleeps):
 *   1. server: accept; write() N lines to the client; tell the client.
 *   2. client: write() N lines to the server; tell the server.  Now unread
 *      bytes wait in both directions.
 *   3. server: fdopen() the socket ("r", and a dup "w"); fgets the client's N
 *      lines; fputs N reply lines; fflush; then fgets more lines to EOF.
 *   4. client: without --client-stdio, read() the server's 2N lines and
 *      write() N more lines, shutdown(SHUT_WR).  With --client-stdio it
 *      fdopen()s too, before (client-first) or after (server-first) the
 *      server's fdopen, and does the same with fgets/fputs.
 * --shutdown-first instead: the server write()s N lines and shuts down its
 * writing side before the client, told over a pipe, fdopen()s the socket
 * and fgets them up to EOF.
 * Every line is checked.  Output (deterministic):
 *   server: read L lines sha256=X
 *   client: read L lines sha256=Y
 *   PASS fdopen_pair */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int nlines = 300;

static void line_of(char *out, size_t len, const char *kind, int i)
{
	uint64_t st = (uint64_t)i * 7919u + (uint64_t)kind[0];
	int pad = (int)(splitmix64(&st) % 300);
	int n = snprintf(out, len, "%s %d ", kind, i);
	for (int k = 0; k < pad && n < (int)len - 2; k++)
		out[n++] = (char)('a' + (splitmix64(&st) % 26));
	out[n++] = '\n';
	out[n] = 0;
}

static void signal_pipe(int fd)
{
	if (write(fd, "x", 1) != 1)
		fail_errno("pipe write");
}

static void wait_pipe(int fd)
{
	char b;
	ssize_t r;
	while ((r = read(fd, &b, 1)) < 0 && errno == EINTR)
		;
	if (r != 1)
		fail("the other process died");
}

static void write_lines(int fd, const char *kind, int from, int to)
{
	char line[512];
	for (int i = from; i < to; i++) {
		line_of(line, sizeof line, kind, i);
		if (write_full(fd, line, strlen(line)) != (ssize_t)strlen(line))
			fail_errno("write %s %d", kind, i);
	}
}

static void fputs_lines(FILE *f, const char *kind, int from, int to)
{
	char line[512];
	for (int i = from; i < to; i++) {
		line_of(line, sizeof line, kind, i);
		if (fputs(line, f) < 0)
			fail_errno("fputs %s %d", kind, i);
	}
	if (fflush(f) != 0)
		fail_errno("fflush");
}

/* Reads one line with read() one byte at a time (no read-ahead to lose). */
static int read_line_fd(int fd, char *buf, size_t len)
{
	size_t n = 0;
	while (n < len - 1) {
		ssize_t r = read(fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_errno("read");
		if (r == 0)
			break;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return n > 0;
}

struct reader {
	FILE *f;
	int fd;
	struct sha256 s;
	int count;
	const char *who;
};

static void expect_lines(struct reader *r, const char *kind, int from, int to)
{
	char want[512], got[512];
	for (int i = from; i < to; i++) {
		line_of(want, sizeof want, kind, i);
		int ok = r->f ? fgets(got, sizeof got, r->f) != NULL
			      : read_line_fd(r->fd, got, sizeof got);
		if (!ok)
			fail("%s: EOF or error before %s line %d (%s)", r->who, kind, i,
			     r->f && ferror(r->f) ? strerror(errno) : "EOF");
		if (strcmp(got, want) != 0)
			fail("%s: %s line %d differs: got \"%.60s\"", r->who, kind, i, got);
		sha256_update(&r->s, got, strlen(got));
		r->count++;
	}
}

static void expect_eof(struct reader *r)
{
	char got[512];
	int more = r->f ? fgets(got, sizeof got, r->f) != NULL
			: read_line_fd(r->fd, got, sizeof got);
	if (more)
		fail("%s: data after the last line: \"%.60s\"", r->who, got);
}

static void report(struct reader *r)
{
	char hex[65];
	sha256_hex(&r->s, hex);
	printf("%s: read %d lines sha256=%s\n", r->who, r->count, hex);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "lines", 1, 0, 'n' }, { "client-stdio", 1, 0, 'c' },
		{ "shutdown-first", 0, 0, 'S' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	int client_stdio = 0, client_first = 0, shut_first = 0, o;
	prog_name = "fdopen_pair";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'n': nlines = atoi(optarg); break;
		case 'S': shut_first = 1; break;
		case 'c':
			client_stdio = 1;
			if (strcmp(optarg, "client-first") == 0)
				client_first = 1;
			else if (strcmp(optarg, "server-first") != 0)
				fail("--client-stdio server-first|client-first");
			break;
		default:
			fprintf(stderr, "usage: fdopen_pair [--host H] [--lines N] "
					"[--client-stdio server-first|client-first]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(15);
	int port, s2c[2], c2s[2];
	int l = tcp_listen(host, 0, 4, &port);
	if (pipe(s2c) < 0 || pipe(c2s) < 0)
		fail_errno("pipe");
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		prog_name = "fdopen_pair client";
		/* Die with the parent: nothing outlives a failed run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		/* The inherited listener stays open: closing it in a child is
		 * fork_server's scenario, not this one. */
		close(s2c[1]);
		close(c2s[0]);
		int c = tcp_connect(host, port);
		struct reader r = {NULL, c, {{0}, 0, {0}, 0}, 0, "client"};
		sha256_init(&r.s);
		FILE *w = NULL;
		wait_pipe(s2c[0]);             /* 1: the server's lines are out */
		if (shut_first) {
			r.f = fdopen(c, "r");
			if (!r.f)
				fail_errno("client: fdopen");
			expect_lines(&r, "s2c", 0, nlines);
			expect_eof(&r);
			report(&r);
			fclose(r.f);
			_exit(0);
		}
		write_lines(c, "c2s", 0, nlines);
		signal_pipe(c2s[1]);           /* 2 */
		if (client_stdio) {
			if (!client_first)
				wait_pipe(s2c[0]); /* the server fdopen()ed first */
			r.f = fdopen(c, "r");
			int d = dup(c);
			w = d >= 0 ? fdopen(d, "w") : NULL;
			if (!r.f || !w)
				fail_errno("client: fdopen");
			if (client_first)
				signal_pipe(c2s[1]);
		}
		expect_lines(&r, "s2c", 0, nlines);
		expect_lines(&r, "reply", 0, nlines);
		if (w) {
			fputs_lines(w, "more", 0, nlines);
			if (shutdown(fileno(w), SHUT_WR) < 0)
				fail_errno("client: shutdown");
			fclose(w);
		} else {
			write_lines(c, "more", 0, nlines);
			if (shutdown(c, SHUT_WR) < 0)
				fail_errno("client: shutdown");
		}
		expect_eof(&r);
		report(&r);
		if (r.f)
			fclose(r.f);
		else
			close(c);
		_exit(0);
	}
	close(s2c[0]);
	close(c2s[1]);
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail_errno("server: accept");
	close(l);
	write_lines(s, "s2c", 0, nlines);
	if (shut_first) {
		if (shutdown(s, SHUT_WR) < 0)
			fail_errno("server: shutdown");
		signal_pipe(s2c[1]);
		int st;
		if (waitpid(child, &st, 0) < 0)
			fail_errno("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail("client exited with %s %d", WIFEXITED(st) ? "status" : "signal",
			     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		close(s);
		printf("PASS fdopen_pair\n");
		return 0;
	}
	signal_pipe(s2c[1]);                   /* 1 */
	wait_pipe(c2s[0]);                     /* 2: the client's lines are out */
	if (client_stdio && client_first)
		wait_pipe(c2s[0]);             /* the client fdopen()ed first */
	struct reader r = {NULL, -1, {{0}, 0, {0}, 0}, 0, "server"};
	sha256_init(&r.s);
	r.f = fdopen(s, "r");
	int d = dup(s);
	FILE *w = d >= 0 ? fdopen(d, "w") : NULL;
	if (!r.f || !w)
		fail_errno("server: fdopen");
	if (client_stdio && !client_first)
		signal_pipe(s2c[1]);
	expect_lines(&r, "c2s", 0, nlines);
	fputs_lines(w, "reply", 0, nlines);
	if (shutdown(fileno(w), SHUT_WR) < 0)
		fail_errno("server: shutdown");
	expect_lines(&r, "more", 0, nlines);
	expect_eof(&r);
	fclose(w);
	int st;
	if (waitpid(child, &st, 0) < 0)
		fail_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("client exited with %s %d", WIFEXITED(st) ? "status" : "signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	report(&r);
	fclose(r.f);
	printf("PASS fdopen_pair\n");
	return 0;
}
