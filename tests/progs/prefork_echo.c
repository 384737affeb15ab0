/* prefork_echo: a prefork server (listen, then fork N workers that each
 * accept and echo) and its client in one program.
 *
 *   prefork_echo [--workers N] [--bytes B] [--rounds R] [--host 127.0.0.1]
 *
 * 1. The parent listens, forks N workers; each worker loops accept -> echo
 *    until EOF -> close, and exits 0 when the listener is shut down.
 * 2. The parent opens N connections at once and gets an echo on every one
 *    while all are open: a worker serves one connection at a time, so this
 *    proves that N distinct worker processes accepted.
 * 3. Over each of those connections it sends B pseudo-random bytes in chunks
 *    and checks the echo byte for byte.
 * 4. It closes them and runs R more rounds of N short connections (workers
 *    accept again after a connection ends).
 * 5. It shuts the listener down (which wakes the workers' accept with EINVAL)
 *    and reaps the workers; each must exit 0.
 * Prints deterministic lines and PASS, or FAIL and exits 1. */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXW 64
static pid_t workers[MAXW];
static int nworkers = 4;

static void kill_workers(int sig)
{
	static const char m[] = "FAIL: prefork_echo: watchdog: did not finish in time\n";
	(void)sig;
	for (int i = 0; i < nworkers; i++)
		if (workers[i] > 0)
			kill(workers[i], SIGKILL);
	if (write(1, m, sizeof m - 1) < 0) {
		/* nothing */
	}
	_exit(3);
}

static void worker(int lfd, int id)
{
	char buf[65536];
	int served = 0;
	prog_name = "prefork_echo worker";
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EINVAL)   /* listener shut down: we are done */
				break;
			fail_errno("worker %d: accept", id);
		}
		served++;
		for (;;) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				fail_errno("worker %d: read", id);
			}
			if (r == 0)
				break;
			if (write_full(fd, buf, (size_t)r) != r)
				fail_errno("worker %d: write", id);
		}
		close(fd);
	}
	close(lfd);
	_exit(served > 0 ? 0 : 4);   /* every worker must have served */
}

static void echo_check(int fd, uint64_t seed, uint64_t bytes, struct sha256 *s)
{
	char out[16384], in[16384];
	uint64_t off = 0;
	while (off < bytes) {
		size_t n = bytes - off < sizeof out ? (size_t)(bytes - off) : sizeof out;
		gen_bytes(seed, off, out, n);
		if (write_full(fd, out, n) != (ssize_t)n)
			fail_errno("client write");
		if (read_full(fd, in, n) != (ssize_t)n)
			fail("client: short echo at offset %llu", (unsigned long long)off);
		long long bad = gen_check(seed, off, in, n);
		if (bad >= 0)
			fail("echo differs at offset %lld (seed %llu)", bad, (unsigned long long)seed);
		sha256_update(s, in, n);
		off += n;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "workers", 1, 0, 'w' }, { "bytes", 1, 0, 'b' }, { "rounds", 1, 0, 'r' },
		{ "host", 1, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	uint64_t bytes = 1 << 20;
	int rounds = 3, o;
	prog_name = "prefork_echo";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'w': nworkers = atoi(optarg); break;
		case 'b': bytes = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'h': host = optarg; break;
		default:
			fprintf(stderr, "usage: prefork_echo [--workers N] [--bytes B] [--rounds R] [--host H]\n");
			return 2;
		}
	}
	if (nworkers < 1 || nworkers > MAXW)
		fail("workers must be 1..%d", MAXW);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = kill_workers;
	sigaction(SIGALRM, &sa, NULL);
	alarm(60);

	int port;
	int lfd = tcp_listen(host, 0, 128, &port);
	fflush(stdout);
	for (int i = 0; i < nworkers; i++) {
		pid_t p = fork();
		if (p < 0)
			fail_errno("fork");
		if (p == 0) {
			alarm(0);
			worker(lfd, i);
		}
		workers[i] = p;
	}

	/* 2: N simultaneous connections, each echoed while all are open. */
	int *fds = calloc((size_t)nworkers, sizeof *fds);
	for (int i = 0; i < nworkers; i++) {
		fds[i] = tcp_connect(host, port);
		char msg[32], back[32];
		int n = snprintf(msg, sizeof msg, "hello %d", i);
		if (write_full(fds[i], msg, (size_t)n) != n)
			fail_errno("write hello");
		if (read_full(fds[i], back, (size_t)n) != n || memcmp(msg, back, (size_t)n) != 0)
			fail("no echo on connection %d of %d open at once", i, nworkers);
	}
	printf("simultaneous connections echoed: %d\n", nworkers);

	/* 3: bulk data over each of them. */
	for (int i = 0; i < nworkers; i++) {
		struct sha256 s;
		char hex[65];
		sha256_init(&s);
		echo_check(fds[i], 100 + (uint64_t)i, bytes, &s);
		sha256_hex(&s, hex);
		printf("conn %d bytes=%llu sha256=%s\n", i, (unsigned long long)bytes, hex);
	}
	for (int i = 0; i < nworkers; i++)
		close(fds[i]);

	/* 4: more rounds; workers accept again. */
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < nworkers; i++)
			fds[i] = tcp_connect(host, port);
		for (int i = 0; i < nworkers; i++) {
			struct sha256 s;
			sha256_init(&s);
			echo_check(fds[i], 1000 + (uint64_t)(r * nworkers + i), 4096, &s);
		}
		for (int i = 0; i < nworkers; i++)
			close(fds[i]);
		printf("round %d: %d connections echoed\n", r, nworkers);
	}

	/* 5: shut the listener down; every worker exits 0. */
	if (shutdown(lfd, SHUT_RDWR) < 0)
		fail_errno("shutdown(listener)");
	close(lfd);
	int bad = 0;
	for (int i = 0; i < nworkers; i++) {
		int st;
		if (waitpid(workers[i], &st, 0) < 0)
			fail_errno("waitpid");
		workers[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("worker %d: %s %d\n", i, WIFEXITED(st) ? "exit" : "signal",
			       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			bad++;
		}
	}
	if (bad)
		fail("%d workers failed", bad);
	printf("workers exited: %d\n", nworkers);
	printf("PASS prefork_echo workers=%d bytes=%llu rounds=%d\n", nworkers,
	       (unsigned long long)bytes, rounds);
	return 0;
}
