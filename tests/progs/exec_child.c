/* exec_child: a child process that inherits a connected socket across
 * execve() and talks on it.
 *
 *   exec_child [--bytes N] [--host 127.0.0.1]
 *   exec_child --child FD N      (internal: the exec'd side)
 *
 * Part 1: the accept()-side socket is moved to fd 77 and the child execs this
 *   program with "--child 77 N".  The parent writes a first part of the data
 *   before the exec and the rest after, then shuts down writing.  The child
 *   reads everything until EOF (checking it), answers with the SHA-256 and a
 *   count, then echoes all of it back; the parent checks the echo.
 * Part 2: the connect()-side socket becomes stdin and stdout of /bin/cat
 *   (a Debian binary); the parent, on the accepted side, sends data, shuts
 *   down writing, and checks that cat echoed every byte before EOF.
 * Part 3: the exec'd program is run with the socket marked FD_CLOEXEC: it
 *   must not be there after exec (fcntl EBADF), and the parent's peer sees
 *   EOF once the child has exec'd and the parent closed its copy.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEED1 4242
#define SEED2 4343

static int child_main(int fd, uint64_t n, int expect_closed)
{
	prog_name = "exec_child --child";
	watchdog(30);
	if (expect_closed) {
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			fail("fd %d survived exec although FD_CLOEXEC was set", fd);
		printf("child: fd %d closed by exec as asked\n", fd);
		return 0;
	}
	int type;
	socklen_t len = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM)
		fail_errno("inherited fd %d is not a stream socket", fd);
	char *buf = malloc(n ? n : 1);
	ssize_t r = read_full(fd, buf, n);
	if (r != (ssize_t)n)
		fail("child: got %zd of %llu bytes", r, (unsigned long long)n);
	char extra;
	if (read(fd, &extra, 1) != 0)
		fail("child: no EOF after %llu bytes", (unsigned long long)n);
	long long bad = gen_check(SEED1, 0, buf, n);
	if (bad >= 0)
		fail("child: data differs at offset %lld", bad);
	struct sha256 s;
	char hex[65], line[128];
	sha256_init(&s);
	sha256_update(&s, buf, n);
	sha256_hex(&s, hex);
	int l = snprintf(line, sizeof line, "%s %llu\n", hex, (unsigned long long)n);
	if (write_full(fd, line, (size_t)l) != l || write_full(fd, buf, n) != (ssize_t)n)
		fail_errno("child: write");
	printf("child: received %llu bytes sha256=%s, echoed them\n", (unsigned long long)n, hex);
	fflush(stdout);
	close(fd);
	return 0;
}

static void reap(pid_t p, const char *what)
{
	int st;
	if (waitpid(p, &st, 0) < 0)
		fail_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("%s: %s %d", what, WIFEXITED(st) ? "exit status" : "signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static void send_stream(int fd, uint64_t seed, uint64_t from, uint64_t to)
{
	char buf[65536];
	while (from < to) {
		size_t k = to - from < sizeof buf ? (size_t)(to - from) : sizeof buf;
		gen_bytes(seed, from, buf, k);
		if (write_full(fd, buf, k) != (ssize_t)k)
			fail_errno("parent: write");
		from += k;
	}
}

static void recv_stream(int fd, uint64_t seed, uint64_t n, const char *what)
{
	char buf[65536];
	uint64_t off = 0;
	while (off < n) {
		size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		ssize_t r = read(fd, buf, k);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("%s: echo ended after %llu of %llu bytes", what,
			     (unsigned long long)off, (unsigned long long)n);
		long long bad = gen_check(seed, off, buf, (size_t)r);
		if (bad >= 0)
			fail("%s: echo differs at offset %lld", what, bad);
		off += (uint64_t)r;
	}
	char extra;
	if (read(fd, &extra, 1) != 0)
		fail("%s: no EOF after the echo", what);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "--child") == 0)
		return child_main(atoi(argv[2]), strtoull(argv[3], NULL, 0),
				  argc >= 5 && strcmp(argv[4], "--expect-closed") == 0);

	static const struct option opts[] = {
		{ "bytes", 1, 0, 'b' }, { "host", 1, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	uint64_t n = 4 << 20;
	int o;
	prog_name = "exec_child";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'b': n = strtoull(optarg, NULL, 0); break;
		case 'h': host = optarg; break;
		default:
			fprintf(stderr, "usage: exec_child [--bytes N] [--host H]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(60);
	char self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
	if (sl < 0)
		fail_errno("readlink /proc/self/exe");
	self[sl] = 0;
	char nbuf[32];
	snprintf(nbuf, sizeof nbuf, "%llu", (unsigned long long)n);

	/* Part 1 */
	int c, s;
	tcp_pair(host, &c, &s);
	uint64_t pre = n / 16;   /* small enough to sit in the socket buffer */
	send_stream(c, SEED1, 0, pre);
	fflush(stdout);
	pid_t p = fork();
	if (p < 0)
		fail_errno("fork");
	if (p == 0) {
		if (dup2(s, 77) != 77)
			fail_errno("dup2 77");
		close(s);
		close(c);
		execl(self, "exec_child", "--child", "77", nbuf, (char *)NULL);
		fail_errno("execl %s", self);
	}
	close(s);
	send_stream(c, SEED1, pre, n);
	if (shutdown(c, SHUT_WR) < 0)
		fail_errno("shutdown");
	char line[128];
	size_t ll = 0;
	while (ll < sizeof line - 1) {
		ssize_t r = read(c, line + ll, 1);
		if (r != 1)
			fail("part 1: no answer line from the child");
		if (line[ll++] == '\n')
			break;
	}
	line[ll] = 0;
	{
		struct sha256 sh;
		char hex[65], want[128], buf[65536];
		uint64_t off = 0;
		sha256_init(&sh);
		while (off < n) {
			size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
			gen_bytes(SEED1, off, buf, k);
			sha256_update(&sh, buf, k);
			off += k;
		}
		sha256_hex(&sh, hex);
		snprintf(want, sizeof want, "%s %llu\n", hex, (unsigned long long)n);
		if (strcmp(line, want) != 0)
			fail("part 1: child answered \"%.*s\", expected \"%.*s\"", (int)ll - 1, line,
			     (int)strlen(want) - 1, want);
	}
	recv_stream(c, SEED1, n, "part 1");
	reap(p, "part 1 child");
	close(c);
	printf("part 1: exec'd child read %llu bytes (some sent before its exec) and echoed them\n",
	       (unsigned long long)n);

	/* Part 2: /bin/cat on the connect() side */
	tcp_pair(host, &c, &s);
	fflush(stdout);
	p = fork();
	if (p < 0)
		fail_errno("fork");
	if (p == 0) {
		if (dup2(c, 0) != 0 || dup2(c, 1) != 1)
			fail_errno("dup2 stdio");
		close(c);
		close(s);
		execl("/bin/cat", "cat", (char *)NULL);
		fail_errno("execl /bin/cat");
	}
	close(c);
	/* Send and receive concurrently: cat writes back as it reads. */
	pid_t sender = fork();
	if (sender < 0)
		fail_errno("fork");
	if (sender == 0) {
		send_stream(s, SEED2, 0, n);
		if (shutdown(s, SHUT_WR) < 0)
			fail_errno("shutdown");
		_exit(0);
	}
	recv_stream(s, SEED2, n, "part 2 (cat)");
	reap(sender, "part 2 sender");
	reap(p, "part 2 cat");
	close(s);
	printf("part 2: /bin/cat on an inherited socket echoed %llu bytes\n", (unsigned long long)n);

	/* Part 3: FD_CLOEXEC is honoured */
	tcp_pair(host, &c, &s);
	fflush(stdout);
	p = fork();
	if (p < 0)
		fail_errno("fork");
	if (p == 0) {
		int fd = fcntl(c, F_DUPFD_CLOEXEC, 78);
		if (fd != 78)
			fail_errno("F_DUPFD_CLOEXEC 78");
		close(c);
		close(s);
		execl(self, "exec_child", "--child", "78", "0", "--expect-closed", (char *)NULL);
		fail_errno("execl %s", self);
	}
	reap(p, "part 3 child");
	close(c);
	char x;
	if (read(s, &x, 1) != 0)
		fail("part 3: no EOF after the child exec'd and the parent closed");
	close(s);
	printf("part 3: FD_CLOEXEC socket closed by exec, peer saw EOF\n");

	printf("PASS exec_child bytes=%llu\n", (unsigned long long)n);
	return 0;
}
