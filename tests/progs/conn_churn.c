/* conn_churn: many TCP connections between a server and a client process.
 *
 *   conn_churn server --port-file F --conns N --mode many|loop [--host H]
 *                     [--report A,B]
 *   conn_churn client --port P      --conns N --mode many|loop [--host H]
 *                     [--report A,B]
 *
 * many: the client opens N connections and keeps them all open, then sends
 *       on every one a message of 1..16384 bytes (size and content fixed by
 *       the connection's index) and reads the echo, all at once through one
 *       epoll set; then it closes them all.  The server accepts and echoes
 *       through epoll.  Both raise RLIMIT_NOFILE first.  The client prints
 *       the number of its open fds while all N were open.
 * loop: N times, one after the other: connect, send 1..512 bytes, read the
 *       echo, close (the client closes first).  The server accepts one
 *       connection at a time, echoes until EOF, closes.
 * --report A,B: after the A-th and the B-th connection is closed, print this
 *       process's open fd count, VmRSS and number of mappings:
 *   <role> at=K fds=F rss_kb=R maps=M
 * Everything else printed is deterministic:
 *   <role> conns=N bytes=T sha256=X
 *   PASS conn_churn <role> */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *role = "?";
static int nconns = 1000;
static int loop_mode;
static long report[2] = {-1, -1};

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	if (!d)
		fail_errno("opendir /proc/self/fd");
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		/* What each fd is, on stderr: a count that grew says which. */
		char p[300], t[256];
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(p, t, sizeof t - 1);
		if (l > 0) {
			t[l] = 0;
			int dom = -1, type = -1;
			socklen_t sl = sizeof dom;
			if (!strncmp(t, "socket:", 7)) {
				getsockopt(atoi(e->d_name), SOL_SOCKET, SO_DOMAIN, &dom, &sl);
				sl = sizeof type;
				getsockopt(atoi(e->d_name), SOL_SOCKET, SO_TYPE, &type, &sl);
			}
			fprintf(stderr, "fd %s -> %s(domain=%d,type=%d)\n", e->d_name, t, dom, type);
		}
	}
	closedir(d);
	return n - 1; /* the directory's own fd */
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	if (!f)
		fail_errno("/proc/self/status");
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':')
			v = strtol(line + kl + 1, NULL, 10);
	fclose(f);
	return v;
}

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;
	if (!f)
		fail_errno("/proc/self/maps");
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void maybe_report(long k)
{
	if (k != report[0] && k != report[1])
		return;
	fprintf(stderr, "report at=%ld\n", k);
	printf("%s at=%ld fds=%d rss_kb=%ld maps=%d\n", role, k, count_fds(), status_kb("VmRSS"),
	       count_maps());
	fflush(stdout);
}

static void raise_nofile(int want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("getrlimit");
	if (rl.rlim_cur >= (rlim_t)want)
		return;
	rl.rlim_cur = (rlim_t)want;
	if (rl.rlim_max < rl.rlim_cur)
		rl.rlim_max = rl.rlim_cur; /* needs CAP_SYS_RESOURCE */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail_errno("setrlimit RLIMIT_NOFILE %d", want);
}

static size_t msg_len(int i, size_t max)
{
	uint64_t st = 0x9e3779b97f4a7c15ULL ^ (uint64_t)i;
	return 1 + (size_t)(splitmix64(&st) % max);
}

/* ------------------------------------------------------------------ many */

struct mconn {
	int fd;
	size_t len, sent, got;
	int done;
};

static void client_many(const char *host, int port)
{
	struct mconn *c = calloc((size_t)nconns, sizeof *c);
	int ep = epoll_create1(0), left = nconns;
	char buf[16384];
	struct sha256 s;
	uint64_t total = 0;
	sha256_init(&s);
	for (int i = 0; i < nconns; i++) {
		c[i].fd = tcp_connect(host, port);
		c[i].len = msg_len(i, sizeof buf);
		if (set_nonblock(c[i].fd, 1) < 0)
			fail_errno("O_NONBLOCK");
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)i};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev) < 0)
			fail_errno("epoll_ctl");
	}
	fprintf(stderr, "%s: all %d connections open, fds=%d\n", role, nconns, count_fds());
	printf("%s open_fds=%d\n", role, count_fds());
	struct epoll_event evs[256];
	while (left > 0) {
		int n = epoll_wait(ep, evs, 256, 20000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("%s: no progress for 20 s (%d connections unfinished)", role, left);
		for (int k = 0; k < n; k++) {
			int i = (int)evs[k].data.u32;
			struct mconn *m = &c[i];
			if (m->done)
				continue;
			while (m->sent < m->len) {
				gen_bytes((uint64_t)i + 1, m->sent, buf, m->len - m->sent);
				ssize_t r = write(m->fd, buf, m->len - m->sent);
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (r <= 0)
					fail_errno("%s: conn %d: write", role, i);
				m->sent += (size_t)r;
				if (m->sent == m->len) {
					struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
					if (epoll_ctl(ep, EPOLL_CTL_MOD, m->fd, &ev) < 0)
						fail_errno("epoll_ctl MOD");
				}
			}
			for (;;) {
				ssize_t r = read(m->fd, buf, sizeof buf);
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (r < 0)
					fail_errno("%s: conn %d: read", role, i);
				if (r == 0)
					fail("%s: conn %d: EOF after %zu of %zu bytes", role, i, m->got,
					     m->len);
				if (m->got + (size_t)r > m->len)
					fail("%s: conn %d: more echoed than sent", role, i);
				long long bad = gen_check((uint64_t)i + 1, m->got, buf, (size_t)r);
				if (bad >= 0)
					fail("%s: conn %d: echo differs at offset %lld", role, i, bad);
				m->got += (size_t)r;
				if (m->got == m->len) {
					m->done = 1;
					left--;
					break;
				}
			}
		}
	}
	for (int i = 0; i < nconns; i++) {
		gen_bytes((uint64_t)i + 1, 0, buf, c[i].len);
		sha256_update(&s, buf, c[i].len);
		total += c[i].len;
		close(c[i].fd);
	}
	char hex[65];
	sha256_hex(&s, hex);
	printf("%s conns=%d bytes=%llu sha256=%s\n", role, nconns, (unsigned long long)total, hex);
	close(ep);
	free(c);
}

struct sconn {
	int fd;
	size_t got, sent, idx;
	char buf[16384];
	struct sha256 s;
};

static void server_many(int l)
{
	int ep = epoll_create1(0), closed = 0, accepted = 0;
	struct sconn **c = calloc((size_t)nconns, sizeof *c);
	uint64_t total = 0;
	if (set_nonblock(l, 1) < 0)
		fail_errno("O_NONBLOCK");
	struct epoll_event lev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, l, &lev) < 0)
		fail_errno("epoll_ctl listener");
	struct epoll_event evs[256];
	while (closed < nconns) {
		int n = epoll_wait(ep, evs, 256, 20000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("%s: no progress for 20 s (%d accepted, %d closed)", role, accepted,
			     closed);
		for (int k = 0; k < n; k++) {
			uint32_t tag = evs[k].data.u32;
			if (tag == UINT32_MAX) {
				for (;;) {
					int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK);
					if (fd < 0 && (errno == EAGAIN || errno == EINTR ||
						       errno == ECONNABORTED))
						break;
					if (fd < 0)
						fail_errno("%s: accept", role);
					if (accepted == nconns)
						fail("%s: more than %d connections", role, nconns);
					struct sconn *m = calloc(1, sizeof *m);
					m->fd = fd;
					m->idx = (size_t)accepted;
					sha256_init(&m->s);
					c[accepted] = m;
					struct epoll_event ev = {.events = EPOLLIN,
								 .data.u32 = (uint32_t)accepted++};
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
						fail_errno("epoll_ctl");
				}
				continue;
			}
			struct sconn *m = c[tag];
			for (;;) {
				if (m->sent < m->got) {
					ssize_t w = write(m->fd, m->buf + m->sent, m->got - m->sent);
					if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
						struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
									 .data.u32 = tag};
						epoll_ctl(ep, EPOLL_CTL_MOD, m->fd, &ev);
						break;
					}
					if (w <= 0)
						fail_errno("%s: write", role);
					m->sent += (size_t)w;
					if (m->sent < m->got)
						continue;
					m->sent = m->got = 0;
					struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};
					epoll_ctl(ep, EPOLL_CTL_MOD, m->fd, &ev);
				}
				ssize_t r = read(m->fd, m->buf, sizeof m->buf);
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (r < 0)
					fail_errno("%s: read", role);
				if (r == 0) {
					total += m->s.len;
					epoll_ctl(ep, EPOLL_CTL_DEL, m->fd, NULL);
					close(m->fd);
					free(m);
					c[tag] = NULL;
					closed++;
					break;
				}
				sha256_update(&m->s, m->buf, (size_t)r);
				m->got = (size_t)r;
				m->sent = 0;
			}
		}
	}
	printf("%s conns=%d bytes=%llu\n", role, closed, (unsigned long long)total);
	close(ep);
	free(c);
}

/* ------------------------------------------------------------------ loop */

static void client_loop(const char *host, int port)
{
	char buf[512], got[512];
	struct sha256 s;
	uint64_t total = 0;
	sha256_init(&s);
	for (long i = 1; i <= nconns; i++) {
		int fd = tcp_connect(host, port);
		size_t len = msg_len((int)i, sizeof buf);
		gen_bytes((uint64_t)i, 0, buf, len);
		if (write_full(fd, buf, len) != (ssize_t)len)
			fail_errno("%s: conn %ld: write", role, i);
		if (read_full(fd, got, len) != (ssize_t)len)
			fail("%s: conn %ld: short echo", role, i);
		if (memcmp(buf, got, len) != 0)
			fail("%s: conn %ld: echo differs", role, i);
		sha256_update(&s, got, len);
		total += len;
		if (close(fd) < 0)
			fail_errno("%s: close", role);
		maybe_report(i);
	}
	char hex[65];
	sha256_hex(&s, hex);
	printf("%s conns=%d bytes=%llu sha256=%s\n", role, nconns, (unsigned long long)total, hex);
}

static void server_loop(int l)
{
	char buf[4096];
	struct sha256 s;
	uint64_t total = 0;
	sha256_init(&s);
	for (long i = 1; i <= nconns; i++) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0 && errno == EINTR) {
			i--;
			continue;
		}
		if (fd < 0)
			fail_errno("%s: accept", role);
		for (;;) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				fail_errno("%s: conn %ld: read", role, i);
			if (r == 0)
				break;
			sha256_update(&s, buf, (size_t)r);
			total += (uint64_t)r;
			if (write_full(fd, buf, (size_t)r) != r)
				fail_errno("%s: conn %ld: write", role, i);
		}
		if (close(fd) < 0)
			fail_errno("%s: close", role);
		maybe_report(i);
	}
	char hex[65];
	sha256_hex(&s, hex);
	printf("%s conns=%d bytes=%llu sha256=%s\n", role, nconns, (unsigned long long)total, hex);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port", 1, 0, 'p' }, { "port-file", 1, 0, 'f' },
		{ "conns", 1, 0, 'c' }, { "mode", 1, 0, 'm' }, { "report", 1, 0, 'r' },
		{ 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1", *port_file = NULL;
	int port = 0, o;
	prog_name = "conn_churn";
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: conn_churn server|client [options]\n");
		return 2;
	}
	role = argv[1];
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': port_file = optarg; break;
		case 'c': nconns = atoi(optarg); break;
		case 'm':
			if (strcmp(optarg, "loop") == 0)
				loop_mode = 1;
			else if (strcmp(optarg, "many") != 0)
				fail("--mode many|loop");
			break;
		case 'r': {
			char *e;
			report[0] = strtol(optarg, &e, 10);
			if (*e == ',')
				report[1] = strtol(e + 1, NULL, 10);
			break;
		}
		default: return 2;
		}
	}
	if (nconns < 1)
		fail("--conns must be >= 1");
	signal(SIGPIPE, SIG_IGN);
	watchdog(150);
	if (!loop_mode)
		raise_nofile(4 * nconns + 256);
	if (strcmp(role, "server") == 0) {
		int bound;
		int l = tcp_listen(host, port, loop_mode ? 128 : 4096, &bound);
		if (port_file) {
			char tmp[4096];
			snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
			FILE *f = fopen(tmp, "w");
			if (!f || fprintf(f, "%d\n", bound) < 0 || fclose(f) || rename(tmp, port_file))
				fail_errno("port file");
		}
		if (loop_mode)
			server_loop(l);
		else
			server_many(l);
		close(l);
	} else {
		if (port <= 0)
			fail("client needs --port");
		if (loop_mode)
			client_loop(host, port);
		else
			client_many(host, port);
	}
	printf("PASS conn_churn %s\n", role);
	return 0;
}
