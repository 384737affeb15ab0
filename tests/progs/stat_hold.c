/* stat_hold: connections with known traffic, kept open, for `shunt stat`.
 *
 *   stat_hold server --port-file F --ports N [--host ADDR]
 *   stat_hold client --port P[,P...] [--host ADDR] [--no-close] [--fork-exit]
 *                    [--fork-exec PROG] [--fork-send I:N]
 *   stat_hold noop      (exits 0: a program to exec that loads the library)
 *
 * The server listens on N ports of ADDR (default 127.0.0.1; written to F,
 * comma separated, once all listen) and accepts one connection on each, in order.
 * On connection i the client sends 1000*(i+1)*7 + 13 bytes (in writes of at
 * most 4096), the server reads exactly that many, then sends back
 * 1000*(i+1)*3 + 5 bytes the same way: both sides know every count.
 *
 * Each side then prints, per connection, what its calls moved:
 *   conn I out=BYTES outcalls=N in=BYTES incalls=N
 * (calls = write or read calls that moved at least one byte), then "ready",
 * and serves commands read from stdin, one per line:
 *   send I N   (client) write N more bytes on connection I, then print "sent I N"
 * The server meanwhile reads and discards whatever arrives, and prints
 * "closed I" when it closes connection I at the peer's EOF.  At EOF on stdin
 * both close their connections and exit 0; with --no-close the client exits
 * with them still open (for the exit summary of open connections).
 * --fork-exit: before serving commands, the client forks a child that
 * exits at once through exit() (destructors run); --fork-exec PROG: a child
 * that execs "PROG noop"; --fork-send I:N: a child that sends N more bytes
 * on connection I (not in the parent's counts printed), then exit()s.  All
 * are waited for and must exit 0, before "ready". */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXC 8
#define CHUNK 4096

struct counts {
	unsigned long long out, outcalls, in, incalls;
};

static struct counts cnt[MAXC];
static struct in_addr host; /* --host; 127.0.0.1 unless given */

static size_t c2s(int i) { return 1000u * (unsigned)(i + 1) * 7 + 13; }
static size_t s2c(int i) { return 1000u * (unsigned)(i + 1) * 3 + 5; }

static void send_n(int fd, int i, size_t n)
{
	static char buf[CHUNK];
	memset(buf, 'a' + i, sizeof buf);
	while (n) {
		ssize_t r = write(fd, buf, n < CHUNK ? n : CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("write conn %d", i);
		cnt[i].out += (size_t)r;
		cnt[i].outcalls++;
		n -= (size_t)r;
	}
}

static void recv_n(int fd, int i, size_t n)
{
	static char buf[CHUNK];
	while (n) {
		ssize_t r = read(fd, buf, n < CHUNK ? n : CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("read conn %d (%zu bytes missing)", i, n);
		cnt[i].in += (size_t)r;
		cnt[i].incalls++;
		n -= (size_t)r;
	}
}

static void report(int n)
{
	for (int i = 0; i < n; i++)
		printf("conn %d out=%llu outcalls=%llu in=%llu incalls=%llu\n", i, cnt[i].out,
		       cnt[i].outcalls, cnt[i].in, cnt[i].incalls);
	printf("ready\n");
	fflush(stdout);
}

static int server(const char *port_file, int n)
{
	int lfd[MAXC], cfd[MAXC];
	char ports[MAXC * 8] = "";
	for (int i = 0; i < n; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = host};
		socklen_t l = sizeof a;
		lfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd[i] < 0 || bind(lfd[i], (struct sockaddr *)&a, sizeof a) < 0 ||
		    listen(lfd[i], 4) < 0 || getsockname(lfd[i], (struct sockaddr *)&a, &l) < 0)
			fail_errno("listen");
		snprintf(ports + strlen(ports), sizeof ports - strlen(ports), "%s%u", i ? "," : "",
			 ntohs(a.sin_port));
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", ports) < 0 || fclose(f) != 0 || rename(tmp, port_file) < 0)
		fail_errno("%s", port_file);
	for (int i = 0; i < n; i++) {
		cfd[i] = accept(lfd[i], NULL, NULL);
		if (cfd[i] < 0)
			fail_errno("accept");
		recv_n(cfd[i], i, c2s(i));
		send_n(cfd[i], i, s2c(i));
	}
	report(n);
	/* Drain until stdin says stop. */
	struct pollfd p[MAXC + 1];
	int open_ = n;
	for (;;) {
		p[0] = (struct pollfd){0, POLLIN, 0};
		for (int i = 0; i < n; i++)
			p[i + 1] = (struct pollfd){cfd[i], POLLIN, 0};
		if (poll(p, (nfds_t)n + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail_errno("poll");
		}
		if (p[0].revents) {
			char b[256];
			ssize_t r = read(0, b, sizeof b);
			if (r <= 0)
				break;
		}
		for (int i = 0; i < n; i++) {
			if (cfd[i] < 0 || !p[i + 1].revents)
				continue;
			char b[CHUNK];
			ssize_t r = read(cfd[i], b, sizeof b);
			if (r > 0)
				continue;
			close(cfd[i]); /* the peer is gone */
			cfd[i] = -1;
			open_--;
			printf("closed %d\n", i);
			fflush(stdout);
		}
		(void)open_;
	}
	for (int i = 0; i < n; i++)
		if (cfd[i] >= 0)
			close(cfd[i]);
	return 0;
}

/* A forked child that sends n bytes on connection i, then exit()s. */
static void fork_send(int fd, int i, size_t n)
{
	pid_t pid = fork();
	if (pid < 0)
		fail_errno("fork");
	if (pid == 0) {
		send_n(fd, i, n);
		exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("child %d did not exit 0", (int)pid);
}

static void fork_child(const char *exec_prog, const int *fd, int n)
{
	/* The exec'd program does not get the connections (a careful
	 * program's way; an inherited one would be demoted first). */
	for (int i = 0; exec_prog && i < n; i++)
		fcntl(fd[i], F_SETFD, FD_CLOEXEC);
	pid_t pid = fork();
	if (pid < 0)
		fail_errno("fork");
	if (pid == 0) {
		if (exec_prog) {
			execl(exec_prog, exec_prog, "noop", (char *)NULL);
			_exit(127);
		}
		exit(0); /* runs destructors, as a child of a real daemon would */
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("child %d did not exit 0", (int)pid);
}

static int client(char *portlist, int no_close, int fork_exit, const char *fork_exec,
		  int send_conn, size_t send_bytes)
{
	int fd[MAXC] = {0}, n = 0;
	for (char *tok = strtok(portlist, ","); tok && n < MAXC; tok = strtok(NULL, ",")) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_addr = host,
					.sin_port = htons((uint16_t)atoi(tok))};
		fd[n] = socket(AF_INET, SOCK_STREAM, 0);
		if (fd[n] < 0 || connect(fd[n], (struct sockaddr *)&a, sizeof a) < 0)
			fail_errno("connect to %s", tok);
		send_n(fd[n], n, c2s(n));
		recv_n(fd[n], n, s2c(n));
		n++;
	}
	if (fork_exit)
		fork_child(NULL, fd, n);
	if (fork_exec)
		fork_child(fork_exec, fd, n);
	if (send_conn >= 0 && send_conn < n)
		fork_send(fd[send_conn], send_conn, send_bytes);
	report(n);
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		int i;
		size_t len;
		if (sscanf(line, "send %d %zu", &i, &len) == 2 && i >= 0 && i < n) {
			send_n(fd[i], i, len);
			printf("sent %d %zu\n", i, len);
			fflush(stdout);
		} else {
			fail("bad command: %s", line);
		}
	}
	if (no_close)
		exit(0);
	for (int i = 0; i < n; i++)
		close(fd[i]);
	return 0;
}

int main(int argc, char **argv)
{
	prog_name = "stat_hold";
	if (argc == 2 && !strcmp(argv[1], "noop"))
		return 0; /* the program a forked child execs */
	watchdog(120);
	host.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 2; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--host") && inet_pton(AF_INET, argv[i + 1], &host) != 1)
			fail("bad --host %s", argv[i + 1]);
	if (argc >= 2 && !strcmp(argv[1], "server")) {
		const char *pf = NULL;
		int n = 1;
		for (int i = 2; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--port-file"))
				pf = argv[i + 1];
			else if (!strcmp(argv[i], "--ports"))
				n = atoi(argv[i + 1]);
			else if (!strcmp(argv[i], "--host"))
				; /* read above */
			else
				fail("unknown option %s", argv[i]);
		}
		if (!pf || n < 1 || n > MAXC)
			fail("usage: stat_hold server --port-file F --ports N");
		return server(pf, n);
	}
	if (argc >= 2 && !strcmp(argv[1], "client")) {
		char *ports = NULL;
		const char *fexec = NULL;
		int no_close = 0, fexit = 0, sconn = -1;
		size_t sbytes = 0;
		for (int i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--port") && i + 1 < argc)
				ports = argv[++i];
			else if (!strcmp(argv[i], "--host") && i + 1 < argc)
				i++; /* read above */
			else if (!strcmp(argv[i], "--no-close"))
				no_close = 1;
			else if (!strcmp(argv[i], "--fork-exit"))
				fexit = 1;
			else if (!strcmp(argv[i], "--fork-exec") && i + 1 < argc)
				fexec = argv[++i];
			else if (!strcmp(argv[i], "--fork-send") && i + 1 < argc &&
				 sscanf(argv[++i], "%d:%zu", &sconn, &sbytes) == 2)
				;
			else
				fail("unknown option %s", argv[i]);
		}
		if (!ports)
			fail("usage: stat_hold client --port P[,P...]");
		return client(ports, no_close, fexit, fexec, sconn, sbytes);
	}
	fail("usage: stat_hold server|client ...");
}
