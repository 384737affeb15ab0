/* hold_echo: connections held open across events the test causes between
 * commands (an agent killed and restarted, every fd "not ours" closed),
 * with byte-exact traffic on demand.
 *
 *   hold_echo server --host ADDR --port-file F [--wait poll|epoll]
 *   hold_echo client --host ADDR --port P
 *
 * The server listens on ADDR (port written to F) and echoes every byte of
 * every connection back, in one loop over the listener, its connections
 * and stdin that sleeps in poll() (the default) or epoll_wait().  The client reads commands on stdin, one a line,
 * and answers each on stdout:
 *   open N      connect N more connections, one after the other, each
 *               checked with a 4096-byte echo: "opened I port=LOCALPORT"
 *               each, then "done open"
 *   echo N      on every open connection, N more bytes of its own stream
 *               (64 KiB at a time, each echoed back before the next),
 *               checked byte for byte: "echoed N conns=K"
 *   totals      "conn I port=P bytes=B" (bytes each way so far), "done totals"
 *   drop        close every connection (after the server's EOF, as at the
 *               end): "dropped K left=L" (L: fds open that are not its own)
 * Both serve these (the server from stdin between connections' traffic):
 *   closeall    close() every fd from 3 to the soft RLIMIT_NOFILE but the
 *               program's own sockets, as a daemon "closing every fd" does:
 *               "closeall open=O ok=K left=L" (O fds were open that are not
 *               the program's, K close calls returned 0, L fds are open
 *               after, per /proc/self/fd)
 *   closerange  the same with close_range() over the gaps between its own
 *               fds: "closerange open=O calls=C left=L"
 *   closefrom   closefrom(highest own fd + 1): "closefrom open=O from=F left=L"
 *   dup2all     dup2() of /dev/null onto every open fd that is not its own:
 *               "dup2all open=O ok=K busy=B" (B failed with EBUSY; the ones
 *               that took the copy are closed again)
 *   forkclose   fork a child that does closeall and reports what it has
 *               left open, then exits: "forkclose open=O child_left=C
 *               left=L" (L: the parent's, after)
 * At EOF on stdin both close their connections and exit 0; any wrong byte,
 * error or early EOF is a FAIL line and exit 1. */
#include "common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXC 64
#define CHUNK 65536

static int own[MAXC + 4];
static int nown;
static int cfd[MAXC];
static uint64_t done_bytes[MAXC];
static int ports[MAXC];
static int nconn;

static int is_own(int fd)
{
	if (fd <= 2)
		return 1;
	for (int i = 0; i < nown; i++)
		if (own[i] == fd)
			return 1;
	return 0;
}

static void own_add(int fd)
{
	if (nown < (int)(sizeof own / sizeof *own))
		own[nown++] = fd;
}

static void own_del(int fd)
{
	for (int i = 0; i < nown; i++)
		if (own[i] == fd)
			own[i] = own[--nown];
}

/* Open fds (from /proc/self/fd) that are not the program's own. */
static int count_foreign(int *list, int cap)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail_errno("opendir /proc/self/fd");
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int fd = atoi(de->d_name);
		if (fd == dirfd(d) || is_own(fd))
			continue;
		if (list && n < cap)
			list[n] = fd;
		n++;
	}
	closedir(d);
	return n;
}

static int fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("getrlimit");
	return rl.rlim_cur > (1u << 20) ? 1 << 20 : (int)rl.rlim_cur;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The fd commands; 0 if line is not one. */
/* close() of every fd from 3 to the limit but our own: how many returned 0. */
static int close_all(void)
{
	int ok = 0, lim = fd_limit();
	for (int fd = 3; fd < lim; fd++)
		if (!is_own(fd) && close(fd) == 0)
			ok++;
	return ok;
}

static void fork_close(void)
{
	int open_ = count_foreign(NULL, 0), p[2], left = -1;
	if (pipe(p) < 0)
		fail_errno("pipe");
	pid_t pid = fork();
	if (pid < 0)
		fail_errno("fork");
	if (pid == 0) {
		own_add(p[1]);
		close(p[0]);
		close_all();
		left = count_foreign(NULL, 0);
		if (write(p[1], &left, sizeof left) != sizeof left)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &left, sizeof left) != sizeof left)
		fail("forkclose: no answer from the child");
	close(p[0]);
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("forkclose: the child did not exit 0");
	printf("forkclose open=%d child_left=%d left=%d\n", open_, left, count_foreign(NULL, 0));
}

static int fd_command(const char *line)
{
	if (!strcmp(line, "closeall")) {
		int open_ = count_foreign(NULL, 0), ok = close_all();
		printf("closeall open=%d ok=%d left=%d\n", open_, ok, count_foreign(NULL, 0));
	} else if (!strcmp(line, "forkclose")) {
		fork_close();
	} else if (!strcmp(line, "closerange")) {
		int open_ = count_foreign(NULL, 0), calls = 0;
		int s[MAXC + 4], n = nown;
		memcpy(s, own, sizeof(int) * (size_t)n);
		qsort(s, (size_t)n, sizeof *s, cmp_int);
		unsigned lo = 3;
		for (int i = 0; i < n; i++) {
			if ((unsigned)s[i] > lo) {
				if (close_range(lo, (unsigned)s[i] - 1, 0) < 0)
					fail_errno("close_range %u..%d", lo, s[i] - 1);
				calls++;
			}
			if ((unsigned)s[i] + 1 > lo)
				lo = (unsigned)s[i] + 1;
		}
		if (close_range(lo, ~0u, 0) < 0)
			fail_errno("close_range %u..", lo);
		calls++;
		printf("closerange open=%d calls=%d left=%d\n", open_, calls,
		       count_foreign(NULL, 0));
	} else if (!strcmp(line, "closefrom")) {
		int open_ = count_foreign(NULL, 0), hi = 2;
		for (int i = 0; i < nown; i++)
			if (own[i] > hi)
				hi = own[i];
		closefrom(hi + 1);
		printf("closefrom open=%d from=%d left=%d\n", open_, hi + 1,
		       count_foreign(NULL, 0));
	} else if (!strcmp(line, "dup2all")) {
		int list[4096];
		int n = count_foreign(list, 4096), ok = 0, busy = 0;
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul < 0)
			fail_errno("/dev/null");
		for (int i = 0; i < n && i < 4096; i++) {
			if (list[i] == nul)
				continue;
			if (dup2(nul, list[i]) == list[i]) {
				ok++;
				close(list[i]);
			} else if (errno == EBUSY) {
				busy++;
			} else {
				fail_errno("dup2 onto %d", list[i]);
			}
		}
		close(nul);
		printf("dup2all open=%d ok=%d busy=%d\n", n, ok, busy);
	} else {
		return 0;
	}
	fflush(stdout);
	return 1;
}

/* ---- client ---- */

static uint64_t seed_of(int i) { return 0x5eed0000u + (uint64_t)i; }

/* len more bytes of connection i's stream, echoed and checked. */
static void echo_n(int i, uint64_t len)
{
	static unsigned char out[CHUNK], in[CHUNK];
	while (len) {
		size_t n = len < CHUNK ? (size_t)len : CHUNK;
		gen_bytes(seed_of(i), done_bytes[i], out, n);
		if (write_full(cfd[i], out, n) != (ssize_t)n)
			fail_errno("conn %d: write at %llu", i, (unsigned long long)done_bytes[i]);
		ssize_t r = read_full(cfd[i], in, n);
		if (r != (ssize_t)n)
			fail("conn %d: %s after %llu + %zd bytes", i, r < 0 ? strerror(errno) : "EOF",
			     (unsigned long long)done_bytes[i], r < 0 ? 0 : r);
		long long bad = gen_check(seed_of(i), done_bytes[i], in, n);
		if (bad >= 0)
			fail("conn %d: wrong byte at offset %llu", i,
			     (unsigned long long)done_bytes[i] + (unsigned long long)bad);
		done_bytes[i] += n;
		len -= n;
	}
}

static void drop_all(void)
{
	for (int i = 0; i < nconn; i++) {
		/* Nothing more may arrive: the echo has returned everything. */
		if (shutdown(cfd[i], SHUT_WR) < 0)
			fail_errno("shutdown conn %d", i);
		char b;
		ssize_t r = read(cfd[i], &b, 1);
		if (r != 0)
			fail("conn %d: %s at the end", i, r < 0 ? strerror(errno) : "a stray byte");
		own_del(cfd[i]);
		close(cfd[i]);
	}
	nconn = 0;
}

static int client(const char *host, int port)
{
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		unsigned long long n;
		if (sscanf(line, "open %llu", &n) == 1) {
			for (unsigned long long k = 0; k < n; k++) {
				if (nconn == MAXC)
					fail("too many connections");
				int i = nconn++;
				done_bytes[i] = 0;
				cfd[i] = tcp_connect(host, port);
				own_add(cfd[i]);
				struct sockaddr_storage ss;
				socklen_t sl = sizeof ss;
				if (getsockname(cfd[i], (struct sockaddr *)&ss, &sl) < 0)
					fail_errno("getsockname");
				ports[i] = ntohs(((struct sockaddr_in *)&ss)->sin_port);
				echo_n(i, 4096);
				printf("opened %d port=%d\n", i, ports[i]);
			}
			printf("done open\n");
		} else if (sscanf(line, "echo %llu", &n) == 1) {
			for (int i = 0; i < nconn; i++)
				echo_n(i, n);
			printf("echoed %llu conns=%d\n", n, nconn);
		} else if (!strcmp(line, "totals")) {
			for (int i = 0; i < nconn; i++)
				printf("conn %d port=%d bytes=%llu\n", i, ports[i],
				       (unsigned long long)done_bytes[i]);
			printf("done totals\n");
		} else if (!strcmp(line, "drop")) {
			int k = nconn;
			drop_all();
			printf("dropped %d left=%d\n", k, count_foreign(NULL, 0));
		} else if (!fd_command(line)) {
			fail("bad command: %s", line);
		}
		fflush(stdout);
	}
	drop_all();
	return 0;
}

/* ---- server ---- */

/* The server's wait: poll() on p, or with --wait epoll an epoll set kept
 * equal to p (fds added as they appear, deleted before they are closed or
 * leave p) and epoll_wait(), its answers written back as p's revents. */
static int epfd = -1;
static unsigned char ep_in[MAXC + 64];

static void ep_forget(int fd)
{
	if (epfd < 0 || fd < 0 || fd >= (int)sizeof ep_in || !ep_in[fd])
		return;
	if (epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
		fail_errno("epoll_ctl DEL %d", fd);
	ep_in[fd] = 0;
}

static int server_wait(struct pollfd *p, int np)
{
	if (epfd < 0)
		return poll(p, (nfds_t)np, -1);
	unsigned char want[sizeof ep_in] = {0};
	for (int i = 0; i < np; i++) {
		int fd = p[i].fd;
		p[i].revents = 0;
		if (fd < 0)
			continue; /* as poll() ignores it */
		if (fd >= (int)sizeof ep_in)
			fail("fd %d out of range", fd);
		want[fd] = 1;
		if (ep_in[fd])
			continue;
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			fail_errno("epoll_ctl ADD %d", fd);
		ep_in[fd] = 1;
	}
	for (int fd = 0; fd < (int)sizeof ep_in; fd++)
		if (ep_in[fd] && !want[fd])
			ep_forget(fd);
	struct epoll_event ev[MAXC + 2];
	int n = epoll_wait(epfd, ev, MAXC + 2, -1);
	for (int k = 0; k < n; k++)
		for (int i = 0; i < np; i++)
			if (p[i].fd == ev[k].data.fd)
				p[i].revents = (short)ev[k].events;
	return n;
}

static int server(const char *host, const char *port_file, int use_epoll)
{
	int port;
	int lfd = tcp_listen(host, 0, 64, &port);
	own_add(lfd);
	if (use_epoll) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		if (epfd < 0)
			fail_errno("epoll_create1");
		own_add(epfd);
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, port_file) < 0)
		fail_errno("%s", port_file);
	static char buf[CHUNK];
	char line[256];
	size_t ll = 0;
	int in_open = 1;
	for (;;) {
		struct pollfd p[MAXC + 2];
		int np = 0;
		p[np++] = (struct pollfd){lfd, POLLIN, 0}; /* -1 once closed: ignored */
		if (in_open)
			p[np++] = (struct pollfd){0, POLLIN, 0};
		int base = np;
		for (int i = 0; i < nconn; i++)
			p[np++] = (struct pollfd){cfd[i], POLLIN, 0};
		if (!in_open && nconn == 0)
			return 0;
		if (server_wait(p, np) < 0) {
			if (errno == EINTR)
				continue;
			fail_errno("%s", use_epoll ? "epoll_wait" : "poll");
		}
		if (p[0].revents) {
			int c = accept(lfd, NULL, NULL);
			if (c < 0)
				fail_errno("accept");
			if (nconn == MAXC)
				fail("too many connections");
			cfd[nconn++] = c;
			own_add(c);
		}
		if (in_open && p[1].revents) {
			ssize_t r = read(0, line + ll, sizeof line - 1 - ll);
			if (r <= 0) {
				/* The test is done: stop accepting, finish the
				 * connections as their clients close them. */
				in_open = 0;
				ep_forget(lfd);
				own_del(lfd);
				close(lfd);
				lfd = -1;
			} else {
				ll += (size_t)r;
				line[ll] = 0;
				char *nl;
				while ((nl = strchr(line, '\n'))) {
					*nl = 0;
					if (line[0] && !fd_command(line))
						fail("bad command: %s", line);
					memmove(line, nl + 1, strlen(nl + 1) + 1);
					ll = strlen(line);
				}
				if (ll == sizeof line - 1)
					fail("command too long");
			}
		}
		for (int k = base; k < np; k++) {
			if (!p[k].revents)
				continue;
			int i = k - base;
			ssize_t r = read(cfd[i], buf, sizeof buf);
			if (r < 0 && errno == EINTR)
				continue;
			if (r > 0) {
				if (write_full(cfd[i], buf, (size_t)r) != r)
					fail_errno("echo write");
				continue;
			}
			if (r < 0)
				fail_errno("read conn");
			/* EOF: the client is done with it. */
			ep_forget(cfd[i]);
			own_del(cfd[i]);
			close(cfd[i]);
			cfd[i] = -1;
		}
		int j = 0;
		for (int i = 0; i < nconn; i++)
			if (cfd[i] >= 0)
				cfd[j++] = cfd[i];
		nconn = j;
	}
}

int main(int argc, char **argv)
{
	prog_name = "hold_echo";
	watchdog(140);
	const char *host = "127.0.0.1", *port_file = NULL;
	int port = -1, use_epoll = 0;
	if (argc < 2)
		fail("usage: hold_echo server|client ...");
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--host"))
			host = argv[i + 1];
		else if (!strcmp(argv[i], "--port-file"))
			port_file = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--wait") && !strcmp(argv[i + 1], "epoll"))
			use_epoll = 1;
		else if (!strcmp(argv[i], "--wait") && !strcmp(argv[i + 1], "poll"))
			use_epoll = 0;
		else
			fail("unknown option %s", argv[i]);
	}
	if (!strcmp(argv[1], "server") && port_file)
		return server(host, port_file, use_epoll);
	if (!strcmp(argv[1], "client") && port > 0)
		return client(host, port);
	fail("usage: hold_echo server --host A --port-file F [--wait poll|epoll] | "
	     "client --host A --port P");
}
