/* Sends after the peer closed, as the kernel answers them: the first send
 * after the peer's close is accepted (the peer's kernel answers it with a
 * RST), the next fails with EPIPE and raises SIGPIPE, and one with
 * MSG_NOSIGNAL fails with EPIPE and raises nothing.  (CPython's
 * NetworkConnectionBehaviourTest.testOutsideTimeout sends after its client
 * gave up.)
 *
 * Both ends in this process, or on two hosts: "--serve HOST PORTFILE" is
 * the end that sends after the close, "--close HOST PORT" the one that
 * closes.  Every line it prints is the same plainly and under shunt, so
 * the two runs are compared line by line.  Waits for events
 * (EOF, the RST's TCP_CLOSE state), bounded by the watchdog. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static volatile sig_atomic_t pipes;

static void on_pipe(int sig)
{
	(void)sig;
	pipes++;
}

static void report(const char *what, ssize_t r)
{
	printf("%s: %zd %s sigpipe=%d\n", what, r, r < 0 ? strerror(errno) : "ok", (int)pipes);
	fflush(stdout);
}

/* The peer's RST has arrived once the socket is closed (TCP_INFO is the
 * kernel's own state, under shunt as well). */
static void wait_closed(int fd)
{
	for (;;) {
		struct tcp_info ti;
		socklen_t l = sizeof ti;
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
			fail_errno("TCP_INFO");
		if (ti.tcpi_state == TCP_CLOSE)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

/* The closing end: bytes both ways, then its close. */
static void closer(int c)
{
	char b[16];
	if (write_full(c, "hello", 5) != 5)
		fail_errno("write");
	if (read_full(c, b, 5) != 5)
		fail_errno("read");
	close(c);
}

static void *closer_thread(void *arg)
{
	closer((int)(intptr_t)arg);
	return NULL;
}

/* The end that sends after the peer's close. */
static void sender(int s)
{
	char b[16];
	if (write_full(s, "world", 5) != 5)
		fail_errno("write");
	if (read_full(s, b, 5) != 5)
		fail_errno("read");
	ssize_t r = read(s, b, sizeof b);
	report("read after the peer's close", r);
	/* Accepted: the kernel takes it, the peer's kernel resets. */
	r = send(s, "done!", 5, 0);
	report("first send", r);
	wait_closed(s);
	r = send(s, "again", 5, 0);
	report("second send", r);
	r = send(s, "again", 5, MSG_NOSIGNAL);
	report("third send (MSG_NOSIGNAL)", r);
	r = write(s, "again", 5);
	report("write", r);
	close(s);
}

int main(int argc, char **argv)
{
	prog_name = "peer_closed_send";
	watchdog(30);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_pipe;
	sigaction(SIGPIPE, &sa, NULL);

	if (argc == 4 && strcmp(argv[1], "--serve") == 0) {
		int port, l = tcp_listen(argv[2], 0, 1, &port);
		FILE *f = fopen(argv[3], "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0)
			fail_errno("%s", argv[3]);
		int s = accept(l, NULL, NULL);
		if (s < 0)
			fail_errno("accept");
		close(l);
		sender(s);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "--close") == 0) {
		closer(tcp_connect(argv[2], atoi(argv[3])));
		printf("closed\n");
		return 0;
	}
	const char *host = argc > 1 ? argv[1] : "127.0.0.1";
	int c, s;
	tcp_pair(host, &c, &s);
	pthread_t t;
	if (pthread_create(&t, NULL, closer_thread, (void *)(intptr_t)c) != 0)
		fail("pthread_create");
	sender(s);
	pthread_join(t, NULL);
	return 0;
}
