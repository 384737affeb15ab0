/* fork_locks: fork while a thread holds each of shunt's locks in turn; the
 * child must find every lock free, make a connection, and exit.  Run with
 * libshunt-testhooks.so preloaded (its hooks are found with dlsym).
 *
 *   fork_locks PORT
 *
 * For each lock: "lock NAME: child ok transport=T" (the child's echo of
 * 4000 bytes to 127.0.0.1:PORT checked byte for byte), or "FAIL: ...".
 * Then the parent makes a connection too.  A child stuck for 10 s is
 * killed (SIGALRM) and reported.  Exit 0 when every child passed. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int (*lock_count)(void);
static const char *(*lock_name)(int);
static int (*lock_hold)(int);
static int (*locks_free)(void);
static const char *(*fd_transport)(int);

/* An echo round of n bytes on a new connection; the transport it took, or
 * NULL on any failure. */
static const char *echo(int port, size_t n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return NULL;
	char out[4096], in[4096];
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(i * 7 + 3);
	size_t got = 0;
	int ok = write(fd, out, n) == (ssize_t)n;
	while (ok && got < n) {
		ssize_t r = read(fd, in + got, n - got);
		ok = r > 0;
		got += ok ? (size_t)r : 0;
	}
	const char *t = ok && !memcmp(in, out, n) ? fd_transport(fd) : NULL;
	close(fd);
	return t ? t : ok ? "?" : NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fork_locks PORT\n");
		return 2;
	}
	int port = atoi(argv[1]);
	lock_count = (int (*)(void))dlsym(RTLD_DEFAULT, "shunt_test_lock_count");
	lock_name = (const char *(*)(int))dlsym(RTLD_DEFAULT, "shunt_test_lock_name");
	lock_hold = (int (*)(int))dlsym(RTLD_DEFAULT, "shunt_test_lock_hold");
	locks_free = (int (*)(void))dlsym(RTLD_DEFAULT, "shunt_test_locks_free");
	fd_transport = (const char *(*)(int))dlsym(RTLD_DEFAULT, "shunt_fd_transport");
	if (!lock_count || !lock_name || !lock_hold || !locks_free || !fd_transport) {
		printf("FAIL: libshunt-testhooks.so is not preloaded\n");
		return 1;
	}
	/* A connection first: every part of the library is started (the
	 * locks' users exist, as in a program that forks mid-life). */
	if (!echo(port, 4000)) {
		printf("FAIL: the parent's first connection\n");
		return 1;
	}
	int n = lock_count(), bad = 0;
	setvbuf(stdout, NULL, _IONBF, 0);
	for (int i = 0; i < n; i++) {
		const char *name = lock_name(i);
		if (lock_hold(i) < 0) {
			printf("FAIL: lock %s could not be held\n", name);
			return 1;
		}
		pid_t pid = fork();
		if (pid == 0) {
			alarm(10);
			int held = locks_free();
			if (held >= 0) {
				printf("FAIL: lock %s: the child finds %s held\n", name, lock_name(held));
				_exit(3);
			}
			const char *t = echo(port, 4000);
			if (!t) {
				printf("FAIL: lock %s: the child's connection failed\n", name);
				_exit(4);
			}
			printf("lock %s: child ok transport=%s\n", name, t);
			_exit(0);
		}
		int st = 0;
		if (pid < 0 || waitpid(pid, &st, 0) != pid) {
			printf("FAIL: lock %s: fork or wait failed\n", name);
			return 1;
		}
		if (WIFSIGNALED(st)) {
			printf("FAIL: lock %s: the child was stuck (signal %d)\n", name, WTERMSIG(st));
			bad++;
		} else if (WEXITSTATUS(st) != 0) {
			bad++;
		}
	}
	const char *t = echo(port, 4000);
	printf("parent after %d forks: %s\n", n, t ? t : "connection failed");
	return bad || !t ? 1 : 0;
}
