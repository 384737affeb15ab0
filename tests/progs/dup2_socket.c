/* dup2_socket: moves live TCP sockets to other fd numbers and checks that
 * data, addresses, flags and close semantics follow the file, not the number.
 *
 *   dup2_socket [--high FD] [--nofile N] [--host 127.0.0.1]
 *
 * Steps (each prints one deterministic line):
 *  1  raise RLIMIT_NOFILE to N (default 200000)
 *  2  dup2 a connected socket onto fd 100, close the original, talk on 100
 *  3  dup2 over a *live* socket: its connection closes (peer reads EOF) and
 *     the number now carries the other connection
 *  4  dup2 onto a high number: 150000 when RLIMIT_NOFILE can be raised
 *     that far (root with CAP_SYS_RESOURCE), else just under the hard limit
 *     (a NOTE on stderr says so).  Start it with a low soft limit to check
 *     that shunt follows a limit raised at run time.
 *  5  fcntl F_DUPFD (>= 7/15 high), F_DUPFD_CLOEXEC, dup3 O_CLOEXEC, dup: the
 *     close-on-exec flag is per number, data flows through each
 *  6  O_NONBLOCK set through one number is seen through the others
 *  7  the server side moved with dup2 as well
 *  8  dup2(fd, fd) is a no-op; dup3(fd, fd, 0) fails with EINVAL;
 *     dup2 onto a closed fd number works; dup2 of a closed fd is EBADF
 *  9  closing every number but one keeps the connection; closing the last
 *     one delivers EOF to the peer
 * 10  fresh connections reuse the freed numbers and work
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t seq = 1;

/* Sends 48 KiB from a to b and 48 KiB back, checking both. */
static void talk(const char *what, int a, int b)
{
	char buf[49152], in[49152];
	for (int dir = 0; dir < 2; dir++) {
		int from = dir ? b : a, to = dir ? a : b;
		uint64_t s = seq++;
		gen_bytes(s, 0, buf, sizeof buf);
		if (write_full(from, buf, sizeof buf) != (ssize_t)sizeof buf)
			fail_errno("%s: write", what);
		if (read_full(to, in, sizeof in) != (ssize_t)sizeof in)
			fail("%s: short read", what);
		if (gen_check(s, 0, in, sizeof in) >= 0)
			fail("%s: data differs", what);
	}
}

static void expect_eof(const char *what, int fd)
{
	char c;
	ssize_t r;
	do
		r = read(fd, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 0)
		fail("%s: expected EOF, read returned %zd (%s)", what, r,
		     r < 0 ? strerror(errno) : "data");
}

static void same_conn(const char *what, int a, int b)
{
	char x[80], y[80];
	sock_name(a, 1, x, sizeof x);
	sock_name(b, 0, y, sizeof y);
	if (strcmp(x, y) != 0)
		fail("%s: getpeername %s != peer's getsockname %s", what, x, y);
	struct stat st;
	if (fstat(a, &st) < 0 || !S_ISSOCK(st.st_mode))
		fail("%s: fstat does not show a socket", what);
	int type = 0;
	socklen_t len = sizeof type;
	if (getsockopt(a, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM)
		fail("%s: SO_TYPE", what);
}

static int cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);
	if (f < 0)
		fail_errno("F_GETFD %d", fd);
	return !!(f & FD_CLOEXEC);
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "high", 1, 0, 'H' }, { "nofile", 1, 0, 'n' }, { "host", 1, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	int high = 0, o;
	rlim_t nofile = 200000;
	prog_name = "dup2_socket";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'H': high = atoi(optarg); break;
		case 'n': nofile = strtoull(optarg, NULL, 0); break;
		case 'h': host = optarg; break;
		default:
			fprintf(stderr, "usage: dup2_socket [--high FD] [--nofile N] [--host H]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(30);

	/* 1: raise the soft limit (and the hard one when allowed: that needs
	 * CAP_SYS_RESOURCE, which containers often drop). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("getrlimit");
	rlim_t before = rl.rlim_cur;
	struct rlimit want = { nofile, nofile };
	if (setrlimit(RLIMIT_NOFILE, &want) < 0) {
		if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > nofile)
			rl.rlim_max = nofile;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			fail_errno("setrlimit(RLIMIT_NOFILE, %llu)", (unsigned long long)rl.rlim_cur);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("getrlimit");
	if (high <= 0)
		high = rl.rlim_cur > 151001 ? 150000 : (int)rl.rlim_cur - 1002;
	if (high < 2000 || (rlim_t)high + 1000 >= rl.rlim_cur)
		fail("RLIMIT_NOFILE %llu too low for --high %d", (unsigned long long)rl.rlim_cur, high);
	fprintf(stderr, "dup2_socket: high fd %d\n", high);
	if (high <= 65535)
		fprintf(stderr, "dup2_socket: NOTE: hard RLIMIT_NOFILE is %llu: testing fd %d, "
			"not above 65535\n", (unsigned long long)rl.rlim_max, high);
	int lo1 = high / 15 * 7, lo2 = high / 15 * 9, lo3 = high / 15 * 13;
	printf("1 RLIMIT_NOFILE raised%s\n", rl.rlim_cur > before ? "" : " (already at the hard limit)");

	/* 2 */
	int c1, s1, c2, s2;
	tcp_pair(host, &c1, &s1);
	tcp_pair(host, &c2, &s2);
	/* Like many servers, use a fixed number without looking whether it is
	 * free: whatever had it is silently closed by dup2. */
	if (dup2(c1, 100) != 100)
		fail_errno("dup2(c1, 100)");
	close(c1);
	same_conn("fd 100", 100, s1);
	talk("fd 100", 100, s1);
	printf("2 dup2 onto 100: data flows, addresses match\n");

	/* 3: dup2 over the live socket c2 */
	if (dup2(100, c2) != c2)
		fail_errno("dup2(100, live socket)");
	expect_eof("peer of the replaced socket", s2);
	close(s2);
	close(100);
	same_conn("replaced number", c2, s1);
	talk("replaced number", c2, s1);
	printf("3 dup2 over a live socket: old connection closed, number carries the new one\n");

	/* 4: above 65535 */
	if (dup2(c2, high) != high)
		fail_errno("dup2(%d, %d)", c2, high);
	close(c2);
	same_conn("high fd", high, s1);
	talk("high fd", high, s1);
	if (cloexec(high))
		fail("dup2 result has FD_CLOEXEC");
	printf("4 dup2 onto a high number: data flows\n");

	/* 5 */
	int d1 = fcntl(high, F_DUPFD, lo1);
	if (d1 < lo1)
		fail_errno("F_DUPFD %d gave %d", lo1, d1);
	int d2 = fcntl(high, F_DUPFD_CLOEXEC, lo2);
	if (d2 < lo2)
		fail_errno("F_DUPFD_CLOEXEC %d gave %d", lo2, d2);
	int d3 = dup3(high, lo3, O_CLOEXEC);
	if (d3 != lo3)
		fail_errno("dup3(O_CLOEXEC)");
	int d4 = dup(high);
	if (d4 < 0)
		fail_errno("dup");
	if (cloexec(d1) || !cloexec(d2) || !cloexec(d3) || cloexec(d4))
		fail("FD_CLOEXEC flags wrong: F_DUPFD=%d F_DUPFD_CLOEXEC=%d dup3=%d dup=%d",
		     cloexec(d1), cloexec(d2), cloexec(d3), cloexec(d4));
	talk("F_DUPFD", d1, s1);
	talk("F_DUPFD_CLOEXEC", d2, s1);
	talk("dup3", d3, s1);
	talk("dup", d4, s1);
	same_conn("dup3", d3, s1);
	printf("5 F_DUPFD, F_DUPFD_CLOEXEC, dup3(O_CLOEXEC), dup: flags right, data flows\n");

	/* 6: O_NONBLOCK lives in the open file, shared by every number */
	if (set_nonblock(d1, 1) < 0)
		fail_errno("O_NONBLOCK");
	char ch;
	if (read(d3, &ch, 1) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail("read on another number of a non-blocking socket did not give EAGAIN");
	if (!(fcntl(d4, F_GETFL) & O_NONBLOCK))
		fail("O_NONBLOCK not visible through dup");
	set_nonblock(d4, 0);
	if (fcntl(d1, F_GETFL) & O_NONBLOCK)
		fail("clearing O_NONBLOCK through dup not visible");
	printf("6 O_NONBLOCK is shared by all numbers\n");

	/* 7: server side moved too */
	int sh = dup2(s1, high + 1000);
	if (sh != high + 1000)
		fail_errno("dup2 server side");
	close(s1);
	same_conn("server moved", d3, sh);
	talk("server moved", d4, sh);
	printf("7 server side dup2'd to a high number: data flows\n");

	/* 8: edge cases */
	if (dup2(d1, d1) != d1)
		fail_errno("dup2(fd, fd)");
	errno = 0;
	if (dup3(d1, d1, 0) != -1 || errno != EINVAL)
		fail("dup3(fd, fd, 0) did not fail with EINVAL");
	int closedfd = 120;
	while (is_open(closedfd))
		closedfd++;
	errno = 0;
	if (dup2(closedfd, closedfd + 1) != -1 || errno != EBADF)
		fail("dup2 of a closed fd did not fail with EBADF");
	if (dup2(d1, closedfd) != closedfd)
		fail_errno("dup2 onto a closed number");
	talk("formerly free number", closedfd, sh);
	printf("8 dup2(fd,fd), dup3 EINVAL, dup2 EBADF, dup2 onto a free number: right\n");

	/* 9: close every number but one, then the last */
	close(high);
	close(d1);
	close(d2);
	close(d4);
	close(closedfd);
	talk("last number", d3, sh);
	close(d3);
	expect_eof("peer after the last number closed", sh);
	close(sh);
	printf("9 connection lives until the last number is closed, then EOF\n");

	/* 10: reuse the numbers */
	int c3, s3;
	tcp_pair(host, &c3, &s3);
	talk("fresh pair", c3, s3);
	if (dup2(c3, high) != high)
		fail_errno("dup2 reuse high");
	talk("fresh pair on high", high, s3);
	close(c3);
	close(high);
	expect_eof("fresh pair closed", s3);
	close(s3);
	printf("10 freed numbers reused by new connections\n");

	printf("PASS dup2_socket\n");
	return 0;
}
