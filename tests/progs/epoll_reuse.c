/* epoll_reuse: connections closed while still in an epoll set, then a new
 * one in the same set, as an event-loop server with connection churn does
 * (nginx closes a connection without EPOLL_CTL_DEL).
 *
 *   epoll_reuse [--rounds R]
 *
 * A forked child echoes every connection.  The parent puts two connections
 * in one epoll set and waits on each (a wait that sleeps), closes both
 * without deleting them, then opens a new one in the same set and makes R
 * exchanges, each waited for in epoll_wait.  Then the set must be idle: an
 * epoll_wait with nothing coming returns 0 after its timeout, having slept
 * (under half of the wait in CPU time; a wait that keeps returning to look
 * again spends all of it).  Every echo is compared.
 *
 * Last, one connection registered as nginx registers its connections
 * (EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET): an exchange, then its peer exits
 * without closing it (shutdown(SHUT_WR) here makes the echo child exit).
 * The FIN must be reported with EPOLLIN, as the kernel reports it (nginx
 * reads only on EPOLLIN), the read must return 0, and a set still holding
 * the half-closed socket must sleep as above (an edge or two may still
 * come, as from the kernel, but no stream of them).
 * Prints PASS, or FAIL and exits 1. */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void echo_child(int lfd)
{
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			_exit(errno == EINVAL ? 0 : 1);
		pid_t p = fork();
		if (p == 0) {
			close(lfd);
			char b[4096];
			ssize_t n;
			while ((n = read(c, b, sizeof b)) > 0)
				if (write_full(c, b, (size_t)n) != n)
					_exit(1);
			_exit(n == 0 ? 0 : 1);
		}
		close(c);
	}
}

/* One exchange on fd, its echo waited for in epoll_wait on ep.  et: fd
 * is registered edge-triggered, so every event is read to EAGAIN, as an
 * edge-triggered loop must. */
static void exchange(int ep, int fd, uint64_t seed, int et)
{
	char out[200], in[200];
	gen_bytes(seed, 0, out, sizeof out);
	if (write_full(fd, out, sizeof out) != (ssize_t)sizeof out)
		fail_errno("write");
	size_t got = 0;
	while (got < sizeof in) {
		struct epoll_event ev;
		int n = epoll_wait(ep, &ev, 1, 10000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1 || ev.data.fd != fd)
			fail("epoll_wait returned %d (fd %d, want %d)", n, n == 1 ? ev.data.fd : -1, fd);
		for (;;) {
			ssize_t r = read(fd, in + got, sizeof in - got);
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0)
				fail_errno("read");
			got += (size_t)r;
			if (!et || got == sizeof in)
				break;
		}
	}
	if (memcmp(in, out, sizeof in))
		fail("echo differs");
}

static int add(int ep, int fd)
{
	set_nonblock(fd, 1);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail_errno("epoll_ctl ADD %d", fd);
	return fd;
}

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"rounds", 1, 0, 'r'}, {0, 0, 0, 0}};
	int rounds = 20, o;
	prog_name = "epoll_reuse";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o != 'r') {
			fprintf(stderr, "usage: epoll_reuse [--rounds R]\n");
			return 2;
		}
		rounds = atoi(optarg);
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(60);
	int port;
	int lfd = tcp_listen("127.0.0.1", 0, 16, &port);
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0)
		echo_child(lfd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fail_errno("epoll_create1");
	int a = add(ep, tcp_connect("127.0.0.1", port));
	int c = add(ep, tcp_connect("127.0.0.1", port));
	exchange(ep, a, 1, 0);
	exchange(ep, c, 2, 0);
	/* Closed without EPOLL_CTL_DEL: the kernel drops a closed file's
	 * registration by itself. */
	close(a);
	close(c);
	int b = add(ep, tcp_connect("127.0.0.1", port));
	for (int i = 0; i < rounds; i++)
		exchange(ep, b, 100 + (uint64_t)i, 0);
	/* Idle now: the wait must sleep its whole timeout. */
	struct epoll_event ev;
	uint64_t t0 = now_ns();
	double c0 = cpu_s();
	int n = epoll_wait(ep, &ev, 1, 500);
	double cpu = cpu_s() - c0;
	double wall = (double)(now_ns() - t0) / 1e9;
	if (n != 0)
		fail("an idle epoll_wait returned %d (fd %d)", n, n > 0 ? ev.data.fd : -1);
	if (cpu > wall / 2)
		fail("an idle epoll_wait spent %.3f s of CPU in %.3f s: it kept looking", cpu, wall);
	close(b);

	/* Edge-triggered, as nginx: the peer's FIN comes with EPOLLIN. */
	int d = tcp_connect("127.0.0.1", port);
	set_nonblock(d, 1);
	struct epoll_event et = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = d};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, d, &et) < 0)
		fail_errno("epoll_ctl ADD %d (ET)", d);
	exchange(ep, d, 1000, 1);
	if (shutdown(d, SHUT_WR) < 0)
		fail_errno("shutdown");
	for (;;) {
		n = epoll_wait(ep, &ev, 1, 10000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1 || ev.data.fd != d)
			fail("the peer's exit was not reported with EPOLLIN (epoll_wait returned %d, "
			     "events 0x%x)",
			     n, n == 1 ? ev.events : 0);
		if (ev.events & EPOLLIN)
			break;
	}
	char x;
	ssize_t r = read(d, &x, 1);
	if (r != 0)
		fail("read after the peer's exit returned %zd (errno %d), want 0 (EOF)", r,
		     r < 0 ? errno : 0);
	/* Half-closed and still open: quiet, and the waits sleep.  An edge
	 * or two may still come, as from the kernel (EPOLLHUP once the peer's
	 * last ACK or close lands, at a time of the scheduler's choosing),
	 * but no stream of them. */
	t0 = now_ns();
	c0 = cpu_s();
	uint64_t end = t0 + 500000000u, t1;
	int edges = 0;
	while ((t1 = now_ns()) < end) {
		n = epoll_wait(ep, &ev, 1, (int)((end - t1 + 999999) / 1000000));
		if (n > 0 && ++edges > 2)
			fail("waits after EOF kept reporting (events 0x%x)", ev.events);
	}
	cpu = cpu_s() - c0;
	wall = (double)(now_ns() - t0) / 1e9;
	if (cpu > wall / 2)
		fail("a wait holding a half-closed socket spent %.3f s of CPU in %.3f s", cpu, wall);
	close(d);
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	printf("PASS epoll_reuse rounds=%d\n", rounds);
	return 0;
}
