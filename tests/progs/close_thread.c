/* close_thread: closes a socket from one thread while other threads wait on
 * it, and prints what the waiters see.  Nothing may hang or crash, and the
 * printed trace must be the same with and without shunt.
 *
 *   close_thread [--host 127.0.0.1]
 *
 * Linux semantics being checked (a blocked call holds a reference to the
 * open file, close() only drops the number):
 *  s1  epoll_wait (1 s timeout) on the only reference: close() releases the
 *      file and removes it from the epoll set; data sent afterwards raises no
 *      event; epoll_wait times out.
 *  s2  the socket has a dup: close() of one number leaves the registration;
 *      data arriving later wakes epoll_wait (no timeout) with the cookie.
 *  s3  a thread blocked in read(): after close() the read still completes
 *      with the data the peer sends afterwards.
 *  s4  s1 and s3 at once: the reader gets the data; the epoll waiter returns
 *      (timeout or an event with the right cookie; which one is a race, so
 *      only "returned" is printed).
 *  s5  epoll set with the socket and an eventfd, no timeout: close the
 *      socket, the peer writes, then the eventfd fires: epoll_wait returns the
 *      eventfd's event (never one for the closed socket's cookie alone).
 *  s6  poll() blocked on the socket: after close() and data from the peer,
 *      poll reports POLLNVAL for the closed number.
 *  s7  recv() blocked with a 1 s SO_RCVTIMEO: after close() and no data,
 *      recv fails with EAGAIN when the timeout expires.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static const char *host = "127.0.0.1";

struct waiter_arg {
	int fd;          /* socket, or epoll fd */
	int timeout_ms;
	volatile pid_t tid;
	/* results */
	int ret, err;
	uint64_t cookie;
	uint32_t events;
	char data[64];
	short revents;
	uint64_t elapsed_ms;
};

/* Waits (bounded) until thread tid is asleep inside a blocking syscall. */
static void wait_blocked(struct waiter_arg *a, const char *what)
{
	uint64_t t0 = now_ns();
	while (a->tid == 0) {
		if (now_ns() - t0 > 5000000000ULL)
			fail("%s: thread did not start", what);
		usleep(1000);
	}
	char path[128], buf[256];
	for (;;) {
		if (now_ns() - t0 > 5000000000ULL)
			fail("%s: thread never blocked in a system call", what);
		snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)a->tid);
		FILE *f = fopen(path, "r");
		char state = '?';
		if (f) {
			if (fgets(buf, sizeof buf, f)) {
				char *p = strrchr(buf, ')');
				if (p && p[1] == ' ')
					state = p[2];
			}
			fclose(f);
		}
		snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)a->tid);
		f = fopen(path, "r");
		long nr = -2;
		if (f) {
			if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
				nr = strtol(buf, NULL, 10);
			fclose(f);
		}
		int waiting = 0;
		switch (nr) {
		case SYS_read: case SYS_readv: case SYS_recvfrom: case SYS_recvmsg:
		case SYS_ppoll: case SYS_pselect6: case SYS_epoll_pwait:
#ifdef SYS_poll
		case SYS_poll:
#endif
#ifdef SYS_select
		case SYS_select:
#endif
#ifdef SYS_epoll_wait
		case SYS_epoll_wait:
#endif
#ifdef SYS_epoll_pwait2
		case SYS_epoll_pwait2:
#endif
		case SYS_futex:   /* an accelerated transport may sleep on one */
			waiting = 1;
		}
		if (state == 'S' && waiting) {
			usleep(20000);   /* the call is asleep; let it settle */
			return;
		}
		usleep(1000);
	}
}

static void *epoll_thread(void *p)
{
	struct waiter_arg *a = p;
	struct epoll_event ev[4];
	a->tid = (pid_t)syscall(SYS_gettid);
	uint64_t t0 = now_ns();
	do
		a->ret = epoll_wait(a->fd, ev, 4, a->timeout_ms);
	while (a->ret < 0 && errno == EINTR);
	a->err = a->ret < 0 ? errno : 0;
	a->elapsed_ms = (now_ns() - t0) / 1000000;
	if (a->ret > 0) {
		a->cookie = ev[0].data.u64;
		a->events = ev[0].events;
	}
	return NULL;
}

static void *read_thread(void *p)
{
	struct waiter_arg *a = p;
	a->tid = (pid_t)syscall(SYS_gettid);
	uint64_t t0 = now_ns();
	do
		a->ret = (int)read(a->fd, a->data, sizeof a->data - 1);
	while (a->ret < 0 && errno == EINTR);
	a->err = a->ret < 0 ? errno : 0;
	a->elapsed_ms = (now_ns() - t0) / 1000000;
	return NULL;
}

static void *recv_thread(void *p)
{
	struct waiter_arg *a = p;
	a->tid = (pid_t)syscall(SYS_gettid);
	uint64_t t0 = now_ns();
	a->ret = (int)recv(a->fd, a->data, sizeof a->data - 1, 0);
	a->err = a->ret < 0 ? errno : 0;
	a->elapsed_ms = (now_ns() - t0) / 1000000;
	return NULL;
}

static void *poll_thread(void *p)
{
	struct waiter_arg *a = p;
	struct pollfd pf = { a->fd, POLLIN, 0 };
	a->tid = (pid_t)syscall(SYS_gettid);
	uint64_t t0 = now_ns();
	do
		a->ret = poll(&pf, 1, a->timeout_ms);
	while (a->ret < 0 && errno == EINTR);
	a->err = a->ret < 0 ? errno : 0;
	a->revents = pf.revents;
	a->elapsed_ms = (now_ns() - t0) / 1000000;
	return NULL;
}

static int ep_with(int fd, uint64_t cookie)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fail_errno("epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = cookie };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail_errno("epoll_ctl ADD");
	return ep;
}

static void peer_send(int s, const char *msg)
{
	ssize_t r = send(s, msg, strlen(msg), MSG_NOSIGNAL);
	(void)r;   /* may fail with EPIPE/ECONNRESET once the other end is gone */
}

static void start(pthread_t *t, void *(*fn)(void *), struct waiter_arg *a)
{
	if (pthread_create(t, NULL, fn, a) != 0)
		fail("pthread_create");
}

static void join(pthread_t t)
{
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	int o;
	static const struct option opts[] = { { "host", 1, 0, 'h' }, { 0, 0, 0, 0 } };
	prog_name = "close_thread";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'h')
			host = optarg;
		else
			return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(40);
	int c, s;
	pthread_t t1, t2;

	/* s1 */
	{
		tcp_pair(host, &c, &s);
		int ep = ep_with(c, 0x1111);
		struct waiter_arg a = { .fd = ep, .timeout_ms = 1000 };
		start(&t1, epoll_thread, &a);
		wait_blocked(&a, "s1");
		close(c);
		peer_send(s, "late");
		join(t1);
		if (a.ret != 0)
			fail("s1: epoll_wait returned %d (%s), cookie %#llx; expected a timeout",
			     a.ret, strerror(a.err), (unsigned long long)a.cookie);
		if (a.elapsed_ms < 900)
			fail("s1: epoll_wait returned 0 after %llu ms, before its 1 s timeout",
			     (unsigned long long)a.elapsed_ms);
		printf("s1 epoll_wait on the only reference: timeout, no event\n");
		close(ep);
		close(s);
	}

	/* s2 */
	{
		tcp_pair(host, &c, &s);
		int d = dup(c);
		int ep = ep_with(c, 0x2222);
		struct waiter_arg a = { .fd = ep, .timeout_ms = -1 };
		start(&t1, epoll_thread, &a);
		wait_blocked(&a, "s2");
		close(c);
		peer_send(s, "wake");
		join(t1);
		if (a.ret != 1 || a.cookie != 0x2222 || !(a.events & EPOLLIN))
			fail("s2: epoll_wait returned %d cookie %#llx events %#x; expected 1, 0x2222, EPOLLIN",
			     a.ret, (unsigned long long)a.cookie, a.events);
		char buf[16];
		ssize_t r = read(d, buf, sizeof buf);
		if (r != 4 || memcmp(buf, "wake", 4) != 0)
			fail("s2: dup did not read the data");
		printf("s2 epoll_wait with a dup alive: woken by later data, cookie kept\n");
		close(d);
		close(ep);
		close(s);
	}

	/* s3 */
	{
		tcp_pair(host, &c, &s);
		struct waiter_arg a = { .fd = c };
		start(&t1, read_thread, &a);
		wait_blocked(&a, "s3");
		close(c);
		peer_send(s, "hello");
		join(t1);
		if (a.ret != 5 || memcmp(a.data, "hello", 5) != 0)
			fail("s3: blocked read returned %d (%s)", a.ret,
			     a.ret < 0 ? strerror(a.err) : "wrong data");
		printf("s3 read blocked across close: completes with the later data\n");
		close(s);
	}

	/* s4 */
	{
		tcp_pair(host, &c, &s);
		int ep = ep_with(c, 0x4444);
		struct waiter_arg e = { .fd = ep, .timeout_ms = 1500 };
		struct waiter_arg r = { .fd = c };
		start(&t1, epoll_thread, &e);
		start(&t2, read_thread, &r);
		wait_blocked(&e, "s4 epoll");
		wait_blocked(&r, "s4 read");
		close(c);
		peer_send(s, "world");
		join(t2);
		join(t1);
		if (r.ret != 5 || memcmp(r.data, "world", 5) != 0)
			fail("s4: blocked read returned %d (%s)", r.ret,
			     r.ret < 0 ? strerror(r.err) : "wrong data");
		if (e.ret < 0 || e.ret > 1 || (e.ret == 1 && e.cookie != 0x4444))
			fail("s4: epoll_wait returned %d (%s) cookie %#llx", e.ret, strerror(e.err),
			     (unsigned long long)e.cookie);
		fprintf(stderr, "close_thread: s4 epoll_wait returned %d after %llu ms\n", e.ret,
			(unsigned long long)e.elapsed_ms);
		printf("s4 epoll_wait and read across close: read gets the data, epoll_wait returns\n");
		close(ep);
		close(s);
	}

	/* s5 */
	{
		tcp_pair(host, &c, &s);
		int efd = eventfd(0, EFD_CLOEXEC);
		if (efd < 0)
			fail_errno("eventfd");
		int ep = ep_with(c, 0x5555);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0xe5e5 };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) < 0)
			fail_errno("epoll_ctl eventfd");
		struct waiter_arg a = { .fd = ep, .timeout_ms = -1 };
		start(&t1, epoll_thread, &a);
		wait_blocked(&a, "s5");
		close(c);
		peer_send(s, "gone");
		uint64_t one = 1;
		if (write(efd, &one, sizeof one) != sizeof one)
			fail_errno("eventfd write");
		join(t1);
		if (a.ret != 1 || a.cookie != 0xe5e5)
			fail("s5: epoll_wait returned %d cookie %#llx; expected the eventfd's 0xe5e5",
			     a.ret, (unsigned long long)a.cookie);
		printf("s5 epoll_wait with another fd in the set: woken by that fd only\n");
		close(efd);
		close(ep);
		close(s);
	}

	/* s6 */
	{
		tcp_pair(host, &c, &s);
		struct waiter_arg a = { .fd = c, .timeout_ms = 5000 };
		start(&t1, poll_thread, &a);
		wait_blocked(&a, "s6");
		int num = c;
		close(c);
		peer_send(s, "data");
		join(t1);
		/* The number may have been reused by nobody: it must be invalid now. */
		if (a.ret != 1 || !(a.revents & POLLNVAL))
			fail("s6: poll returned %d revents %#x after %llu ms; expected POLLNVAL on fd %d",
			     a.ret, (unsigned)a.revents, (unsigned long long)a.elapsed_ms, num);
		printf("s6 poll across close: POLLNVAL when the peer's data wakes it\n");
		close(s);
	}

	/* s7 */
	{
		tcp_pair(host, &c, &s);
		struct timeval tv = { 1, 0 };
		if (setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
			fail_errno("SO_RCVTIMEO");
		struct waiter_arg a = { .fd = c };
		start(&t1, recv_thread, &a);
		wait_blocked(&a, "s7");
		close(c);
		join(t1);
		if (a.ret != -1 || (a.err != EAGAIN && a.err != EWOULDBLOCK) || a.elapsed_ms < 900)
			fail("s7: recv returned %d (%s) after %llu ms; expected EAGAIN after 1 s",
			     a.ret, strerror(a.err), (unsigned long long)a.elapsed_ms);
		printf("s7 recv with SO_RCVTIMEO across close: EAGAIN at the timeout\n");
		close(s);
	}

	printf("PASS close_thread\n");
	return 0;
}
