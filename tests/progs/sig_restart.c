/* sig_restart: a blocking recv() interrupted by a caught signal ends as the
 * kernel's does: restarted after a handler with SA_RESTART, failing with
 * EINTR after one without, and failing with EINTR whatever the handler
 * when the socket has a receive timeout (SO_RCVTIMEO).  Handlers set with
 * sigaction(), signal() (restarting) and after siginterrupt(1) (not); the
 * process also has a handler without SA_RESTART for SIGALRM (watchdog), so
 * only the handler that ran can decide.
 *
 *   sig_restart
 *
 * For each case a thread blocks in recv() on one end of a loopback pair
 * while the main thread signals it (SIGUSR1) until the handler ran 20
 * times, or until the recv() returned; then, where the case expects a
 * restart, it sends one byte, which the recv() must return.  A signal that
 * lands before the recv() blocks proves nothing but changes no outcome.
 * Output (deterministic): one line per case, "PASS sig_restart". */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t hits;

static void on_usr1(int sig)
{
	(void)sig;
	hits++;
}

struct reader {
	int fd;
	ssize_t r;
	int err;
	char b;
	int done;
};

static void *read_one(void *p)
{
	struct reader *a = p;
	a->r = recv(a->fd, &a->b, 1, 0);
	a->err = errno;
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* siginterrupt() is deprecated, not gone: programs still call it (Python's
 * signal.siginterrupt), so it is tested here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* How the handler is installed. */
enum how { BY_SIGACTION, BY_SIGNAL, BY_SIGINTERRUPT };

static void install(enum how how, int sa_flags)
{
	if (how == BY_SIGACTION) {
		struct sigaction sa, q;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_usr1;
		sa.sa_flags = sa_flags;
		if (sigaction(SIGUSR1, &sa, NULL) < 0 || sigaction(SIGUSR1, NULL, &q) < 0)
			fail_errno("sigaction");
		/* Asked back, the action is the one set. */
		if (q.sa_handler != on_usr1 || (q.sa_flags & (SA_RESTART | SA_SIGINFO)) != sa_flags)
			fail("sigaction gives back another action (flags %#x, set %#x)",
			     (unsigned)q.sa_flags, (unsigned)sa_flags);
		return;
	}
	/* signal(): BSD semantics in glibc (SA_RESTART), unless siginterrupt
	 * said otherwise. */
	if (siginterrupt(SIGUSR1, how == BY_SIGINTERRUPT) < 0)
		fail_errno("siginterrupt");
	if (signal(SIGUSR1, on_usr1) == SIG_ERR)
		fail_errno("signal");
	if (how == BY_SIGINTERRUPT && siginterrupt(SIGUSR1, 1) < 0)
		fail_errno("siginterrupt");
}

static void one_case(const char *name, enum how how, int sa_flags, int timeo_s, int restart)
{
	install(how, sa_flags);
	int c, s;
	tcp_pair("127.0.0.1", &c, &s);
	if (timeo_s) {
		struct timeval tv = {timeo_s, 0};
		if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
			fail_errno("setsockopt SO_RCVTIMEO");
	}
	struct reader a = {.fd = s};
	pthread_t t;
	hits = 0;
	if (pthread_create(&t, NULL, read_one, &a))
		fail("pthread_create");
	/* Until the handler ran often enough that some signal found the recv
	 * blocked (where it must be restarted), or the recv ended. */
	while (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE) && !(restart && hits >= 20)) {
		pthread_kill(t, SIGUSR1);
		usleep(1000);
	}
	if (restart && write_full(c, "x", 1) != 1)
		fail_errno("write");
	pthread_join(t, NULL);
	if (restart && !(a.r == 1 && a.b == 'x'))
		fail("%s: recv returned %zd (%s), not the byte: the call was not restarted", name,
		     a.r, a.r < 0 ? strerror(a.err) : "-");
	if (!restart && !(a.r == -1 && a.err == EINTR))
		fail("%s: recv returned %zd (%s), not EINTR", name, a.r,
		     a.r < 0 ? strerror(a.err) : "-");
	printf("%s: %s\n", name, restart ? "restarted, byte read" : "EINTR");
	fflush(stdout);
	close(c);
	close(s);
}

int main(void)
{
	watchdog(60);
	/* The watchdog's SIGALRM handler has no SA_RESTART: the handler that
	 * ran decides, not the set of handlers. */
	one_case("sigaction SA_RESTART, no timeout", BY_SIGACTION, SA_RESTART, 0, 1);
	one_case("sigaction SA_RESTART, SO_RCVTIMEO 20 s", BY_SIGACTION, SA_RESTART, 20, 0);
	one_case("sigaction without SA_RESTART", BY_SIGACTION, 0, 0, 0);
	one_case("signal()", BY_SIGNAL, 0, 0, 1);
	one_case("signal() after siginterrupt(1)", BY_SIGINTERRUPT, 0, 0, 0);
	printf("PASS sig_restart\n");
	return 0;
}
