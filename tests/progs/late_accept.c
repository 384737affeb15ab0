/* late_accept: the server accepts a connection only after the client has
 * already written to it, possibly long after.
 *
 *   late_accept [--host 127.0.0.1] [--bytes N] [--late-ms M] [--until-blocked]
 *
 * The parent listens, then forks the client.  The client connects, and a
 * writer thread sends N bytes of a deterministic stream, then shuts down its
 * writing side.  The client tells the parent over a pipe when the data is
 * "out":
 *   default          once every write() has returned (all N bytes sit in the
 *                    TCP buffer / the ring before anybody accepted);
 *   --until-blocked  once the writer thread is asleep inside write() without
 *                    progress (N is more than the socket / ring can hold, so
 *                    it has to block until the server reads).  The writer
 *                    must not have finished then, or the scenario did not
 *                    happen and the program fails.
 * The parent, told over the pipe, waits M more milliseconds (the "late" part
 * of the scenario: longer than shunt's offer timeout), then accepts, reads
 * and checks all N bytes up to EOF, and answers with N bytes of a second
 * stream.  The client checks the answer up to EOF.
 * Output is deterministic (plain and shunt runs are compared):
 *   server: received N bytes sha256=X
 *   client: received N bytes sha256=Y
 *   PASS late_accept */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEED_UP 5151
#define SEED_DOWN 6161

static uint64_t nbytes = 4 << 20;
static volatile uint64_t written;
static volatile int in_write, writer_done, writer_tid;

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Reads the stream `seed` from fd up to EOF, checking every byte. */
static void recv_check(int fd, uint64_t seed, const char *who)
{
	static char buf[1 << 16];
	struct sha256 s;
	uint64_t off = 0;
	char hex[65];
	sha256_init(&s);
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_errno("%s: read at offset %llu", who, (unsigned long long)off);
		if (r == 0)
			break;
		long long bad = gen_check(seed, off, buf, (size_t)r);
		if (bad >= 0)
			fail("%s: data differs at offset %lld", who, bad);
		sha256_update(&s, buf, (size_t)r);
		off += (uint64_t)r;
	}
	if (off != nbytes)
		fail("%s: EOF after %llu of %llu bytes", who, (unsigned long long)off,
		     (unsigned long long)nbytes);
	sha256_hex(&s, hex);
	printf("%s: received %llu bytes sha256=%s\n", who, (unsigned long long)off, hex);
	fflush(stdout);
}

static void send_stream(int fd, uint64_t seed, const char *who, int track)
{
	static __thread char buf[1 << 16];
	uint64_t off = 0;
	while (off < nbytes) {
		size_t k = nbytes - off < sizeof buf ? (size_t)(nbytes - off) : sizeof buf;
		gen_bytes(seed, off, buf, k);
		if (track)
			__atomic_store_n(&in_write, 1, __ATOMIC_SEQ_CST);
		ssize_t r = write(fd, buf, k);
		if (track)
			__atomic_store_n(&in_write, 0, __ATOMIC_SEQ_CST);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("%s: write at offset %llu", who, (unsigned long long)off);
		off += (uint64_t)r;
		if (track)
			__atomic_store_n(&written, off, __ATOMIC_SEQ_CST);
	}
	if (shutdown(fd, SHUT_WR) < 0)
		fail_errno("%s: shutdown", who);
}

static void *writer(void *arg)
{
	int fd = *(int *)arg;
	writer_tid = (int)syscall(SYS_gettid);
	send_stream(fd, SEED_UP, "client", 1);
	__atomic_store_n(&writer_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Scheduler state of a thread of this process ('R', 'S', ...). */
static char thread_state(int tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Until the writer sleeps inside write() with no progress: 5 looks in a row,
 * 10 ms apart (bounded: 20 s). */
static void wait_blocked(void)
{
	uint64_t last = (uint64_t)-1;
	int same = 0;
	for (int i = 0; i < 2000; i++) {
		if (__atomic_load_n(&writer_done, __ATOMIC_SEQ_CST))
			fail("client: the writer finished all %llu bytes without blocking "
			     "(the scenario needs more than the connection can buffer)",
			     (unsigned long long)nbytes);
		uint64_t w = __atomic_load_n(&written, __ATOMIC_SEQ_CST);
		int tid = __atomic_load_n(&writer_tid, __ATOMIC_SEQ_CST);
		if (tid && __atomic_load_n(&in_write, __ATOMIC_SEQ_CST) && w == last &&
		    thread_state(tid) == 'S')
			same++;
		else
			same = 0;
		last = w;
		if (same >= 5) {
			fprintf(stderr, "client: writer blocked after %llu of %llu bytes\n",
				(unsigned long long)w, (unsigned long long)nbytes);
			return;
		}
		sleep_ms(10);
	}
	fail("client: the writer never blocked");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "bytes", 1, 0, 'b' }, { "late-ms", 1, 0, 'l' },
		{ "until-blocked", 0, 0, 'u' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	unsigned late_ms = 1000;
	int until_blocked = 0, o;
	prog_name = "late_accept";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'b': nbytes = strtoull(optarg, NULL, 0); break;
		case 'l': late_ms = (unsigned)atoi(optarg); break;
		case 'u': until_blocked = 1; break;
		default:
			fprintf(stderr, "usage: late_accept [--host H] [--bytes N] [--late-ms M] "
					"[--until-blocked]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	watchdog(60);
	int port, p[2];
	int l = tcp_listen(host, 0, 16, &port);
	if (pipe(p) < 0)
		fail_errno("pipe");
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		prog_name = "late_accept client";
		/* Die with the parent: nothing outlives a failed run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		/* The listener stays open here: closing an inherited listener
		 * in a child is fork_server's scenario, not this one. */
		close(p[0]);
		int fd = tcp_connect(host, port);
		pthread_t t;
		if (pthread_create(&t, NULL, writer, &fd) != 0)
			fail("pthread_create");
		if (until_blocked) {
			wait_blocked();
		} else {
			pthread_join(t, NULL);
			fprintf(stderr, "client: all %llu bytes written before accept\n",
				(unsigned long long)nbytes);
		}
		if (write(p[1], "w", 1) != 1)
			fail_errno("client: pipe");
		close(p[1]);
		recv_check(fd, SEED_DOWN, "client");
		if (until_blocked)
			pthread_join(t, NULL);
		close(fd);
		_exit(0);
	}
	close(p[1]);
	char b;
	ssize_t r;
	while ((r = read(p[0], &b, 1)) < 0 && errno == EINTR)
		;
	if (r != 1)
		fail("server: the client died before it wrote");
	close(p[0]);
	sleep_ms(late_ms); /* the scenario: accept late, not synchronisation */
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail_errno("server: accept");
	recv_check(s, SEED_UP, "server");
	send_stream(s, SEED_DOWN, "server", 0);
	int st;
	if (waitpid(child, &st, 0) < 0)
		fail_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("client exited with %s %d", WIFEXITED(st) ? "status" : "signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	close(s);
	close(l);
	printf("PASS late_accept\n");
	return 0;
}
