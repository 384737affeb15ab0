/* timeo_inherit: receive timeouts set where a blocking read does not see
 * them being set: on the socket before connect(), and on the listener (an
 * accepted socket starts with the listener's).  Each read must fail with
 * EAGAIN once its timeout passes, as the kernel's would.
 *
 *   timeo_inherit [--host 127.0.0.1]
 *
 * The parent listens with a 100 ms SO_RCVTIMEO and forks the client, whose
 * socket gets a 300 ms SO_RCVTIMEO before it connects.
 *   server: accept, recv -> EAGAIN after 0.1 .. 3 s (the client is quiet)
 *   client: recv -> EAGAIN after 0.3 .. 3 s (the server is quiet), then
 *           sends "c"
 *   server: reads "c" (retrying its 100 ms timeout), answers "s"
 *   client: reads "s"
 * Output (deterministic): one line per check, "PASS timeo_inherit". */
#include "common.h"

#include <errno.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void set_rcvtimeo(int fd, long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		fail_errno("setsockopt SO_RCVTIMEO");
}

/* recv() that must time out after lo_ms .. 3000 ms. */
static void expect_timeout(const char *who, int fd, unsigned lo_ms)
{
	char b;
	uint64_t t0 = now_ns();
	ssize_t r = recv(fd, &b, 1, 0);
	uint64_t ms = (now_ns() - t0) / 1000000;
	if (r != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail_errno("%s: recv with a %u ms timeout returned %zd", who, lo_ms, r);
	if (ms + 20 < lo_ms || ms > 3000)
		fail("%s: recv with a %u ms timeout took %llu ms", who, lo_ms,
		     (unsigned long long)ms);
	printf("%s: %u ms timeout: EAGAIN in time\n", who, lo_ms);
	fflush(stdout);
}

/* One byte, retrying reads that time out (at most 3 s in all). */
static char read_one(const char *who, int fd)
{
	uint64_t t0 = now_ns();
	for (;;) {
		char b;
		ssize_t r = recv(fd, &b, 1, 0);
		if (r == 1)
			return b;
		if (r == 0)
			fail("%s: EOF", who);
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			fail_errno("%s: recv", who);
		if (now_ns() - t0 > 3000000000ull)
			fail("%s: nothing in 3 s", who);
	}
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	static const struct option opts[] = {{"host", required_argument, NULL, 'h'}, {0}};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o != 'h') {
			fprintf(stderr, "usage: timeo_inherit [--host ADDR]\n");
			return 2;
		}
		host = optarg;
	}
	watchdog(30);
	int port;
	int l = tcp_listen(host, 0, 8, &port);
	set_rcvtimeo(l, 100);
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		close(l);
		/* The timeout is set before connect(). */
		int fd = socket(strchr(host, ':') ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			fail_errno("socket");
		set_rcvtimeo(fd, 300);
		struct sockaddr_storage a;
		memset(&a, 0, sizeof a);
		socklen_t alen;
		if (strchr(host, ':')) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a;
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
			if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
				fail("bad host %s", host);
			alen = sizeof *s6;
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&a;
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
			if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
				fail("bad host %s", host);
			alen = sizeof *s4;
		}
		while (connect(fd, (struct sockaddr *)&a, alen) < 0)
			if (errno != EINTR)
				fail_errno("connect");
		expect_timeout("client", fd, 300);
		if (write_full(fd, "c", 1) != 1)
			fail_errno("client: write");
		if (read_one("client", fd) != 's')
			fail("client: wrong answer");
		printf("client: answer read\n");
		close(fd);
		_exit(0);
	}
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail_errno("accept");
	expect_timeout("server", s, 100);
	if (read_one("server", s) != 'c')
		fail("server: wrong byte");
	if (write_full(s, "s", 1) != 1)
		fail_errno("server: write");
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the client failed");
	close(s);
	close(l);
	printf("PASS timeo_inherit\n");
	return 0;
}
