/* echo_server: echoes every byte back on each accepted connection, with the
 * socket API and the wait interface chosen on the command line.
 *
 *   echo_server [--host 127.0.0.1] [--port 0] [--port-file F] [--conns K]
 *               [--wait thread|poll|ppoll|select|pselect|epoll|epoll-et|
 *                       epoll-oneshot|epoll-pwait|epoll-pwait2]
 *               [--send API] [--recv API] [--user NAME]
 *
 * --user: once listening, become that user (initgroups, setgid, setuid), as
 * a server that drops privileges itself does.
 * It writes the bound port to F (atomically) once listening, serves until K
 * connections have finished (K=0: until killed), then prints one line per
 * connection, sorted so runs can be diffed:
 *   conn bytes=N sha256=X
 *   PASS echo_server conns=K
 */
#include "common.h"
#include "waiter.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#define BUFSZ (256 * 1024)

static const char *host = "127.0.0.1";
static int port = 0;
static const char *port_file;
static int want_conns = 0;
static const char *user;
static int wait_mode = -1;   /* thread per connection */
static int send_api = API_MIX, recv_api = API_MIX;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char **results;
static int nresults, capresults;

static void record(uint64_t bytes, const struct sha256 *s)
{
	char hex[65], *line;
	sha256_hex(s, hex);
	if (asprintf(&line, "conn bytes=%llu sha256=%s", (unsigned long long)bytes, hex) < 0)
		fail("oom");
	pthread_mutex_lock(&lock);
	if (nresults == capresults) {
		capresults = capresults ? 2 * capresults : 64;
		results = realloc(results, (size_t)capresults * sizeof *results);
	}
	results[nresults++] = line;
	pthread_mutex_unlock(&lock);
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void finish(void)
{
	qsort(results, (size_t)nresults, sizeof *results, cmpstr);
	for (int i = 0; i < nresults; i++)
		printf("%s\n", results[i]);
	printf("PASS echo_server conns=%d\n", nresults);
	fflush(stdout);
}

static void write_port_file(int p)
{
	char tmp[4096];
	if (!port_file)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", p) < 0 || fclose(f) != 0)
		fail_errno("write %s", tmp);
	if (rename(tmp, port_file) < 0)
		fail_errno("rename %s", port_file);
}

/* ---------------------------------------------------------- thread per conn */

static void *serve_blocking(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[BUFSZ];
	struct sha256 s;
	uint64_t total = 0, k = 0;
	sha256_init(&s);
	for (;;) {
		ssize_t r = api_recv(recv_api, k++, fd, buf, sizeof buf);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fail_errno("server %s", api_recv_name(recv_api));
		}
		if (r == 0)
			break;
		sha256_update(&s, buf, (size_t)r);
		total += (uint64_t)r;
		size_t off = 0;
		while (off < (size_t)r) {
			ssize_t w = api_send(send_api, k++, fd, buf + off, (size_t)r - off);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				fail_errno("server %s", api_send_name(send_api));
			}
			off += (size_t)w;
		}
	}
	if (shutdown(fd, SHUT_WR) < 0)
		fail_errno("server shutdown");
	close(fd);
	record(total, &s);
	return NULL;
}

static void run_threads(int lfd)
{
	int n = 0;
	pthread_t *t = NULL;
	for (;;) {
		if (want_conns && n == want_conns)
			break;
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fail_errno("accept");
		}
		t = realloc(t, (size_t)(n + 1) * sizeof *t);
		if (pthread_create(&t[n], NULL, serve_blocking, (void *)(intptr_t)fd) != 0)
			fail("pthread_create");
		n++;
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* ---------------------------------------------------------- event loop */

struct conn {
	int fd;
	char *buf;
	size_t start, end;
	int rd_eof, rd_blocked, wr_blocked;
	uint64_t total, k;
	struct sha256 s;
};

#define LISTEN_TAG 0xffffffffu
static struct conn **conns;   /* by fd */
static int lfd_ev;
static struct waiter *wt;
static int finished, accept_ready, maxfd;

static void conn_process(struct conn *c)
{
	int progress;
	do {
		progress = 0;
		if (!c->rd_eof && !c->rd_blocked && c->end < BUFSZ) {
			ssize_t r = api_recv(recv_api, c->k++, c->fd, c->buf + c->end, BUFSZ - c->end);
			if (r > 0) {
				sha256_update(&c->s, c->buf + c->end, (size_t)r);
				c->end += (size_t)r;
				c->total += (uint64_t)r;
				progress = 1;
			} else if (r == 0) {
				c->rd_eof = 1;
				progress = 1;
			} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->rd_blocked = 1;
			} else if (errno != EINTR) {
				fail_errno("server %s", api_recv_name(recv_api));
			}
		}
		if (c->start < c->end && !c->wr_blocked) {
			ssize_t w = api_send(send_api, c->k++, c->fd, c->buf + c->start, c->end - c->start);
			if (w > 0) {
				c->start += (size_t)w;
				progress = 1;
			} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				c->wr_blocked = 1;
			} else if (w < 0 && errno != EINTR) {
				fail_errno("server %s", api_send_name(send_api));
			}
		}
		if (c->start == c->end)
			c->start = c->end = 0;
	} while (progress);
}

static void on_ready(void *arg, uint32_t tag, int in, int out, int err)
{
	(void)arg;
	if (tag == LISTEN_TAG) {
		accept_ready = 1;
		return;
	}
	struct conn *c = conns[tag];
	if (!c)
		fail("event for closed fd %u", tag);
	if (in || err)
		c->rd_blocked = 0;
	if (out || err)
		c->wr_blocked = 0;
	conn_process(c);
}

static void do_accepts(void)
{
	for (;;) {
		int fd = accept4(lfd_ev, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fail_errno("accept4");
		}
		if (fd >= 65536)
			fail("fd %d too large", fd);
		struct conn *c = calloc(1, sizeof *c);
		c->fd = fd;
		c->buf = malloc(BUFSZ);
		sha256_init(&c->s);
		conns[fd] = c;
		if (fd > maxfd)
			maxfd = fd;
		waiter_set(wt, fd, (uint32_t)fd, 1, 0);
		conn_process(c);
	}
}

/* Each connection's state after a long quiet wait, on stdout (the test
 * prints it when the run fails). */
static void report_stall(void)
{
	for (int fd = 0; fd <= maxfd; fd++) {
		struct conn *c = conns[fd];
		if (!c)
			continue;
		struct pollfd p = {fd, POLLIN | POLLOUT, 0};
		int unread = -1, unsent = -1;
		poll(&p, 1, 0);
		ioctl(fd, FIONREAD, &unread);
		ioctl(fd, SIOCOUTQ, &unsent);
		fprintf(stdout, "stall: fd %d total %llu buffered %zu%s%s%s revents 0x%x unread %d unsent %d\n",
			fd, (unsigned long long)c->total, c->end - c->start, c->rd_eof ? " eof" : "",
			c->rd_blocked ? " rd-blocked" : "", c->wr_blocked ? " wr-blocked" : "",
			p.revents, unread, unsent);
	}
}

static void run_events(int lfd)
{
	conns = calloc(65536, sizeof *conns);
	lfd_ev = lfd;
	if (set_nonblock(lfd, 1) < 0)
		fail_errno("O_NONBLOCK");
	wt = waiter_new(wait_mode, 65536);
	int listening = 1;
	waiter_set(wt, lfd, LISTEN_TAG, 1, 0);
	while (!want_conns || finished < want_conns) {
		accept_ready = 0;
		if (waiter_wait(wt, 5000, on_ready, NULL) == 0)
			report_stall();
		if (accept_ready && listening)
			do_accepts();
		for (int fd = 0; fd <= maxfd; fd++) {
			struct conn *c = conns[fd];
			if (!c)
				continue;
			if (c->rd_eof && c->start == c->end) {
				waiter_del(wt, fd);
				if (shutdown(fd, SHUT_WR) < 0)
					fail_errno("server shutdown");
				close(fd);
				record(c->total, &c->s);
				free(c->buf);
				free(c);
				conns[fd] = NULL;
				finished++;
				continue;
			}
			waiter_set(wt, fd, (uint32_t)fd, !c->rd_eof && c->end < BUFSZ,
				   c->start < c->end);
		}
	}
	waiter_free(wt);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port", 1, 0, 'p' }, { "port-file", 1, 0, 'f' },
		{ "conns", 1, 0, 'c' }, { "wait", 1, 0, 'w' }, { "send", 1, 0, 'S' },
		{ "recv", 1, 0, 'R' }, { "user", 1, 0, 'u' }, { 0, 0, 0, 0 },
	};
	int o;
	prog_name = "echo_server";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': port_file = optarg; break;
		case 'u': user = optarg; break;
		case 'c': want_conns = atoi(optarg); break;
		case 'w':
			if (strcmp(optarg, "thread") == 0)
				wait_mode = -1;
			else if ((wait_mode = wait_mode_parse(optarg)) < 0)
				fail("unknown wait mode %s", optarg);
			break;
		case 'S':
			if ((send_api = api_send_parse(optarg)) == -2)
				fail("unknown send API %s", optarg);
			break;
		case 'R':
			if ((recv_api = api_recv_parse(optarg)) == -2)
				fail("unknown recv API %s", optarg);
			break;
		default:
			fprintf(stderr, "usage: echo_server [--host H] [--port P] [--port-file F] "
					"[--conns K] [--wait MODE] [--send API] [--recv API] [--user NAME]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	int bound;
	int lfd = tcp_listen(host, port, 128, &bound);
	if (user) {
		struct passwd *pw = getpwnam(user);
		if (!pw || initgroups(user, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
		    setuid(pw->pw_uid) < 0)
			fail("cannot become %s: %s", user, strerror(errno));
	}
	write_port_file(bound);
	if (wait_mode < 0)
		run_threads(lfd);
	else
		run_events(lfd);
	close(lfd);
	finish();
	return 0;
}
