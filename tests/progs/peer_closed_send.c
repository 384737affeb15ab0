/* Sends after the peer closed, as the kernel answers them: the first send
 * after the peer's close is accepted (the peer's kernel answers it with a
 * RST), the next fails with EPIPE and raises SIGPIPE, and one with
 * MSG_NOSIGNAL fails with EPIPE and raises nothing.  (CPython's
 * NetworkConnectionBehaviourTest.testOutsideTimeout sends after its client
 * gave up.)
 *
 * Both ends in this process; every line it prints is the same plainly and
 * under shunt, so the two runs are compared line by line.  Waits for events
 * (EOF, the RST's TCP_CLOSE state), bounded by the watchdog. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
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

int main(int argc, char **argv)
{
	prog_name = "peer_closed_send";
	const char *host = argc > 1 ? argv[1] : "127.0.0.1";
	watchdog(30);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_pipe;
	sigaction(SIGPIPE, &sa, NULL);

	int c, s;
	tcp_pair(host, &c, &s);
	/* Some bytes both ways first, so the connection is in use. */
	if (write_full(c, "hello", 5) != 5 || write_full(s, "world", 5) != 5)
		fail_errno("write");
	char b[16];
	if (read_full(s, b, 5) != 5 || read_full(c, b, 5) != 5)
		fail_errno("read");
	close(c);
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
	return 0;
}
