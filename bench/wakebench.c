/* shunt-wakebench: what one cross-process wakeup costs, by mechanism; how
 * the shm transport's sleeping wait was chosen (docs/PERFORMANCE.md).
 *
 *   shunt-wakebench MECH [--iters N] [--cpu A,B]
 *   MECH: futex | eventfd | eventfd-poll | dgram-poll | spin | tcp
 *
 * Two processes hand a token back and forth through a shared page; every
 * hand-off goes to sleep and is woken by the chosen mechanism (spin: no
 * sleep, the limit; tcp: a 64-byte loopback ping-pong, the baseline).  The
 * -poll variants sleep in poll() on two fds, as a program's event loop
 * does.  Prints the round-trip p50/p99 in microseconds. */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct page {
	uint32_t turn;          /* whose turn: 0 parent, 1 child */
	uint32_t sleeping[2];
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

enum { FUTEX, EFD, EFD_POLL, DGRAM_POLL, SPIN, TCP };
static int tcpfd[2];
static int mech;
static int efd[2], dg[2], dummy;
static struct sockaddr_un addr[2];

static void wake(struct page *p, int who)
{
	switch (mech) {
	case FUTEX:
		syscall(SYS_futex, &p->turn, FUTEX_WAKE, 1, NULL, NULL, 0);
		break;
	case EFD:
	case EFD_POLL: {
		uint64_t one = 1;
		if (write(efd[who], &one, 8) != 8)
			abort();
		break;
	}
	case DGRAM_POLL: {
		char b = 0;
		sendto(dg[!who], &b, 1, MSG_DONTWAIT, (struct sockaddr *)&addr[who], sizeof addr[who]);
		break;
	}
	}
}

/* Wait until it is me's turn: count ourselves asleep, look once more,
 * sleep (the protocol shunt uses: the waker pays a wakeup only for a
 * sleeper, and a sleeper never misses one). */
static void wait_turn(struct page *p, uint32_t me)
{
	if (mech == TCP) {
		char b[64];
		if (read(tcpfd[me], b, sizeof b) <= 0)
			abort();
		return;
	}
	while (__atomic_load_n(&p->turn, __ATOMIC_ACQUIRE) != me) {
		if (mech == SPIN) {
			__builtin_ia32_pause();
			continue;
		}
		__atomic_store_n(&p->sleeping[me], 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&p->turn, __ATOMIC_ACQUIRE) == me) {
			__atomic_store_n(&p->sleeping[me], 0, __ATOMIC_RELAXED);
			break;
		}
		switch (mech) {
		case FUTEX:
			syscall(SYS_futex, &p->turn, FUTEX_WAIT, !me, NULL, NULL, 0);
			break;
		case EFD: {
			uint64_t v;
			if (read(efd[me], &v, 8) != 8 && errno != EAGAIN)
				abort();
			break;
		}
		case EFD_POLL: {
			struct pollfd f[2] = {{efd[me], POLLIN, 0}, {dummy, POLLIN, 0}};
			poll(f, 2, -1);
			uint64_t v;
			if (read(efd[me], &v, 8) < 0 && errno != EAGAIN)
				abort();
			break;
		}
		case DGRAM_POLL: {
			struct pollfd f[2] = {{dg[me], POLLIN, 0}, {dummy, POLLIN, 0}};
			poll(f, 2, -1);
			char b[16];
			recv(dg[me], b, sizeof b, MSG_DONTWAIT);
			break;
		}
		}
		__atomic_store_n(&p->sleeping[me], 0, __ATOMIC_RELAXED);
	}
}

static void pass(struct page *p, uint32_t to)
{
	if (mech == TCP) {
		char b[64] = {0};
		if (write(tcpfd[!to], b, sizeof b) != sizeof b)
			abort();
		return;
	}
	__atomic_store_n(&p->turn, to, __ATOMIC_RELEASE);
	if (mech == SPIN)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleeping[to], __ATOMIC_RELAXED))
		wake(p, to);
}

static void pin(int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof s, &s);
}

int main(int argc, char **argv)
{
	static const char usage[] =
		"usage: shunt-wakebench futex|eventfd|eventfd-poll|dgram-poll|spin|tcp [--iters N] [--cpu A,B]\n";
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	const char *m = argv[1];
	mech = !strcmp(m, "futex") ? FUTEX : !strcmp(m, "eventfd") ? EFD
	     : !strcmp(m, "eventfd-poll") ? EFD_POLL : !strcmp(m, "dgram-poll") ? DGRAM_POLL
	     : !strcmp(m, "spin") ? SPIN : !strcmp(m, "tcp") ? TCP : -1;
	if (mech < 0) {
		fprintf(stderr, "shunt-wakebench: unknown mechanism '%s'\n%s", m, usage);
		return 2;
	}
	long iters = 20000;
	int ca = -1, cb = -1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc && (iters = atol(argv[i + 1])) >= 100)
			i++;
		else if (!strcmp(argv[i], "--cpu") && i + 1 < argc &&
			 sscanf(argv[i + 1], "%d,%d", &ca, &cb) == 2 && ca >= 0 && cb >= 0)
			i++;
		else {
			fprintf(stderr, "shunt-wakebench: bad argument '%s' (--iters needs >= 100)\n%s",
				argv[i], usage);
			return 2;
		}
	}
	struct page *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	efd[0] = eventfd(0, mech == EFD ? 0 : EFD_NONBLOCK);
	efd[1] = eventfd(0, mech == EFD ? 0 : EFD_NONBLOCK);
	int pp[2];
	if (pipe(pp))
		return 1;
	dummy = pp[0];
	for (int i = 0; i < 2; i++) {
		dg[i] = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		addr[i].sun_family = AF_UNIX;
		snprintf(addr[i].sun_path + 1, sizeof addr[i].sun_path - 1, "wakebench-%d-%d", getpid(), i);
		if (bind(dg[i], (struct sockaddr *)&addr[i], sizeof addr[i]))
			return 1;
	}
	if (mech == TCP) {
		int l = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t al = sizeof a;
		if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
		    getsockname(l, (struct sockaddr *)&a, &al))
			return 1;
		tcpfd[0] = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(tcpfd[0], (struct sockaddr *)&a, sizeof a))
			return 1;
		tcpfd[1] = accept(l, NULL, NULL);
		int one = 1;
		setsockopt(tcpfd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(tcpfd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	pid_t c = fork();
	if (c == 0) {
		pin(cb);
		for (;;) {
			wait_turn(p, 1);
			pass(p, 0);
		}
	}
	pin(ca);
	uint64_t *rtt = malloc(sizeof *rtt * (size_t)iters);
	if (!rtt)
		return 1;
	for (long i = 0; i < 1000; i++) {
		pass(p, 1);
		wait_turn(p, 0);
	}
	for (long i = 0; i < iters; i++) {
		uint64_t t = now_ns();
		pass(p, 1);
		wait_turn(p, 0);
		rtt[i] = now_ns() - t;
	}
	kill(c, 9);
	waitpid(c, NULL, 0);
	qsort(rtt, (size_t)iters, sizeof *rtt, cmp);
	printf("%s p50_us=%.2f p99_us=%.2f\n", m, rtt[iters / 2] / 1000.0, rtt[iters * 99 / 100] / 1000.0);
	return 0;
}
