/* shunt-tcpbench: a plain TCP ping-pong / stream benchmark.
 *
 *   shunt-tcpbench server (--port P [--bind ADDR] | --unix PATH) [--once]
 *   shunt-tcpbench client (--host H --port P | --unix PATH)
 *                         --mode pingpong|stream|connect|idle
 *                         --size BYTES (--duration SEC | --iters N) [--warmup N]
 *                         [--cdf] [--start-at NS] [--peer-pid PID] [--think US]
 *
 * Ordinary blocking sockets and read/write/recv/send, so that under
 * LD_PRELOAD=libshunt.so every data call goes through the interposed libc
 * functions.  The server handles connections one after the other (no fork,
 * no threads); it prints "listening PORT" on stdout once it accepts
 * connections (--port 0 picks a free port).  --unix runs the same protocol
 * over a Unix domain stream socket (the reference shunt bench compares
 * with; the server prints "listening PATH").
 *
 * Wire protocol (the benchmark's own, not shunt's): the client sends a
 * 16-byte header {magic, mode, size, think} in network order.
 *   pingpong: the client sends SIZE bytes, the server echoes them (after
 *             computing THINK microseconds, --think); repeated.
 *             The client stamps a sequence number into each message and
 *             checks the echo.  TCP_NODELAY on both ends.
 *   stream:   the client writes SIZE-byte buffers until done, then shuts
 *             down its sending side; the server counts what it read and
 *             answers with the 8-byte count, so the reported figure is what
 *             arrived.  The time runs from the first write to the count.
 *   idle:     a ping-pong connection that, after one round trip (so both
 *             ends have set it up), carries nothing for --duration seconds
 *             while the client waits for data in poll() and the server in
 *             read(): the CPU both processes use meanwhile is what an idle
 *             connection costs (the client's own, and with --peer-pid the
 *             server's, read from their CPU-time clocks; the time starts
 *             once the server is off its CPU).
 *
 * --start-at NS: start measuring (after connecting) when CLOCK_MONOTONIC
 * reads NS, so that clients started one after the other run at once
 * (shunt bench's oversubscribed placement).
 *
 * Output, one machine-readable line on stdout:
 *   pingpong size=64 iters=N p50_us=... p90_us=... p99_us=... p999_us=... max_us=... mean_us=...
 *   stream size=65536 bytes=... seconds=... gbps=... MBps=...
 *   connect iters=N p50_us=... p99_us=... rate=...
 *   idle seconds=... self_cpu_us=... [peer_cpu_us=...]
 * plus, with --cdf, a "cdf size=... points=Q:US,..." line (bench_util.h).
 * connect mode: --iters is the number of connections (default 1000);
 * with --duration as well, it stops at whichever comes first.
 * Exit status: 0 ok, 1 error, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bench_util.h"

#define PROG "shunt-tcpbench"
#define MAGIC 0x53544231u          /* "STB1" */
#define MODE_PINGPONG 1u
#define MODE_STREAM 2u
#define MAX_SIZE (64u << 20)
#define MIN_STREAM_BUF (256u << 10)

/* The most a server computes per message (--think), in microseconds. */
#define MAX_THINK_US 1000000u

struct hdr {
	uint32_t magic, mode, size, reserved;
};

/* Unix domain stream sockets instead of TCP (--unix): no TCP_NODELAY. */
static int unix_mode;

__attribute__((format(printf, 1, 2)))
static void err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}


/* ---- I/O helpers: full transfers, EINTR retried ------------------------ */

/* Read exactly len bytes.  Returns len, 0 on EOF before the first byte,
 * -1 on error or EOF in the middle (errno = EPIPE then). */
static ssize_t read_full(int fd, void *buf, size_t len, int use_recv)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = use_recv ? recv(fd, (char *)buf + got, len - got, 0)
				     : read(fd, (char *)buf + got, len - got);
		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			if (got == 0)
				return 0;
			errno = EPIPE;
			return -1;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return (ssize_t)got;
}

static int write_full(int fd, const void *buf, size_t len, int use_send)
{
	size_t put = 0;
	while (put < len) {
		ssize_t n = use_send ? send(fd, (const char *)buf + put, len - put, 0)
				     : write(fd, (const char *)buf + put, len - put);
		if (n > 0)
			put += (size_t)n;
		else if (n < 0 && errno != EINTR)
			return -1;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	if (unix_mode)
		return;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		err("TCP_NODELAY: %s", strerror(errno));
}

/* ---- argument parsing --------------------------------------------------- */


/* ---- server ------------------------------------------------------------- */

static int serve_pingpong(int fd, uint32_t size, uint32_t think)
{
	char *buf = malloc(size);
	if (!buf) {
		err("out of memory");
		return -1;
	}
	set_nodelay(fd);
	int rc = 0;
	for (;;) {
		ssize_t n = read_full(fd, buf, size, 0);
		if (n == 0)
			break;
		if (n > 0)
			think_us(think);
		if (n < 0 || write_full(fd, buf, size, 0) != 0) {
			err("server: pingpong: %s", strerror(errno));
			rc = -1;
			break;
		}
	}
	free(buf);
	return rc;
}

static int serve_stream(int fd, uint32_t size)
{
	size_t cap = size < MIN_STREAM_BUF ? MIN_STREAM_BUF : size;
	char *buf = malloc(cap);
	if (!buf) {
		err("out of memory");
		return -1;
	}
	uint64_t total = 0;
	int rc = 0;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n > 0) {
			total += (uint64_t)n;
		} else if (n == 0) {
			break;
		} else if (errno != EINTR) {
			err("server: stream read: %s", strerror(errno));
			rc = -1;
			break;
		}
	}
	free(buf);
	if (rc == 0) {
		uint32_t be[2] = { htonl((uint32_t)(total >> 32)),
				   htonl((uint32_t)total) };
		if (write_full(fd, be, sizeof(be), 1) != 0) {
			err("server: stream reply: %s", strerror(errno));
			rc = -1;
		}
	}
	return rc;
}

static int serve_one(int fd)
{
	struct hdr h;
	ssize_t n = read_full(fd, &h, sizeof(h), 1);
	if (n == 0)
		return 0;   /* a probe that connected and left */
	if (n < 0) {
		err("server: header: %s", strerror(errno));
		return -1;
	}
	uint32_t mode = ntohl(h.mode), size = ntohl(h.size);
	if (ntohl(h.magic) != MAGIC || size == 0 || size > MAX_SIZE ||
	    (mode != MODE_PINGPONG && mode != MODE_STREAM)) {
		err("server: bad header (not a " PROG " client?)");
		return -1;
	}
	uint32_t think = ntohl(h.reserved);
	if (think > MAX_THINK_US) {
		err("server: bad header (think %u us)", think);
		return -1;
	}
	return mode == MODE_PINGPONG ? serve_pingpong(fd, size, think)
				     : serve_stream(fd, size);
}

static int listen_on(const char *bind_addr, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res, *ai;
	int gai = getaddrinfo(bind_addr, port, &hints, &res);
	if (gai) {
		err("server: %s:%s: %s", bind_addr ? bind_addr : "*", port,
		    gai_strerror(gai));
		return -1;
	}
	int fd = -1, saved = 0;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 16) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		err("server: listen on %s:%s: %s", bind_addr ? bind_addr : "*",
		    port, strerror(saved));
	return fd;
}

static int unix_addr(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (!path[0] || strlen(path) >= sizeof(sun->sun_path)) {
		err("--unix: path empty or longer than %zu bytes", sizeof(sun->sun_path) - 1);
		return -1;
	}
	strcpy(sun->sun_path, path);
	return 0;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sun;
	struct stat st;
	if (unix_addr(path, &sun) != 0)
		return -1;
	/* a socket left by an earlier server; never remove anything else */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    listen(fd, 16) != 0) {
		err("server: listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int server_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "unix", required_argument, NULL, 'u' },
		{ "once", no_argument, NULL, '1' },
		{ NULL, 0, NULL, 0 },
	};
	const char *port = NULL, *bind_addr = NULL, *path = NULL;
	int once = 0, o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'p': port = optarg; break;
		case 'b': bind_addr = optarg; break;
		case 'u': path = optarg; break;
		case '1': once = 1; break;
		default: return 2;
		}
	}
	uint64_t pv = 0;
	if ((path ? port || bind_addr
		  : !port || parse_u64(port, &pv, 0) || pv > 65535) || optind != argc) {
		err("usage: " PROG " server (--port P [--bind ADDR] | --unix PATH) [--once]");
		return 2;
	}
	unix_mode = path != NULL;

	int lfd = path ? listen_unix(path) : listen_on(bind_addr, port);
	if (lfd < 0)
		return 1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	unsigned actual = (unsigned)pv;
	if (!path && getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
		actual = ntohs(ss.ss_family == AF_INET6
			       ? ((struct sockaddr_in6 *)&ss)->sin6_port
			       : ((struct sockaddr_in *)&ss)->sin_port);
	if (path)
		printf("listening %s\n", path);
	else
		printf("listening %u\n", actual);
	if (fflush(stdout) != 0) {
		err("server: stdout: %s", strerror(errno));
		return 1;
	}

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			err("server: accept: %s", strerror(errno));
			close(lfd);
			return 1;
		}
		int rc = serve_one(fd);
		close(fd);
		if (once) {
			close(lfd);
			return rc ? 1 : 0;
		}
	}
}

/* ---- client ------------------------------------------------------------- */

/* Where the client connects: the first address of host:port, or the Unix
 * socket path. */
struct target {
	struct sockaddr_storage ss;
	socklen_t len;
};

static int resolve(const char *host, const char *port, const char *path,
		   struct target *t)
{
	memset(t, 0, sizeof(*t));
	if (path) {
		if (unix_addr(path, (struct sockaddr_un *)&t->ss) != 0)
			return -1;
		t->len = sizeof(struct sockaddr_un);
		return 0;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai) {
		err("client: %s:%s: %s", host, port, gai_strerror(gai));
		return -1;
	}
	memcpy(&t->ss, ai->ai_addr, ai->ai_addrlen);
	t->len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int connect_unix(const char *path)
{
	struct target t;
	if (resolve(NULL, NULL, path, &t) != 0)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&t.ss, t.len) != 0) {
		err("client: connect %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	int gai = getaddrinfo(host, port, &hints, &res);
	if (gai) {
		err("client: %s:%s: %s", host, port, gai_strerror(gai));
		return -1;
	}
	int fd = -1, saved = 0;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		err("client: connect %s:%s: %s", host, port, strerror(saved));
	return fd;
}



/* One round trip; 0 or -1.  The first 8 bytes carry seq. */
static int round_trip(int fd, char *out, char *in, uint32_t size, uint64_t seq)
{
	size_t k = size < sizeof(seq) ? size : sizeof(seq);
	memcpy(out, &seq, k);
	if (write_full(fd, out, size, 1) != 0)
		return -1;
	ssize_t n = read_full(fd, in, size, 1);
	if (n <= 0) {
		if (n == 0)
			errno = EPIPE;
		return -1;
	}
	if (memcmp(in, out, k) != 0 ||
	    memcmp(in + size - k, out + size - k, k) != 0) {
		err("client: echo mismatch at message %" PRIu64, seq);
		errno = EPROTO;
		return -1;
	}
	return 0;
}

/* Connection setup: iters times (or until the deadline) connect + one
 * 64-byte round trip + close, the cost a short-lived client pays per
 * connection. */
static int client_connect(const char *host, const char *port, const char *path,
			  uint64_t iters, double duration, uint64_t start_at)
{
	struct target t;
	if (resolve(host, port, path, &t) != 0)
		return -1;
	uint32_t *lat = malloc(iters * sizeof(*lat));
	char out[64], in[64];
	struct hdr h = { htonl(MAGIC), htonl(MODE_PINGPONG), htonl(sizeof(out)), 0 };
	int rc = 0;
	sleep_until_ns(start_at);
	uint64_t t_all = now_ns(), n = 0,
		 deadline = duration > 0 ? t_all + (uint64_t)(duration * 1e9) : 0;
	for (uint64_t i = 0; lat && i < iters; i++) {
		uint64_t t0 = now_ns();
		if (deadline && t0 >= deadline)
			break;
		int fd = socket(t.ss.ss_family, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&t.ss, t.len) != 0 ||
		    write_full(fd, &h, sizeof(h), 1) != 0 ||
		    round_trip(fd, out, in, sizeof(out), i) != 0) {
			err("client: connection %" PRIu64 ": %s", i, strerror(errno));
			if (fd >= 0)
				close(fd);
			rc = -1;
			break;
		}
		close(fd);
		uint64_t d = now_ns() - t0;
		lat[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
	}
	double secs = (double)(now_ns() - t_all) / 1e9;
	if (!lat) {
		err("out of memory");
		rc = -1;
	}
	if (rc == 0 && n > 0) {
		qsort(lat, n, sizeof(*lat), cmp_u32);
		printf("connect iters=%" PRIu64 " p50_us=%.3f p99_us=%.3f rate=%.0f\n", n,
		       pct_us(lat, n, 0.50), pct_us(lat, n, 0.99), (double)n / secs);
	}
	free(lat);
	return rc;
}

static int client_pingpong(int fd, uint32_t size, uint64_t iters,
			   double duration, uint64_t warmup, int cdf)
{
	set_nodelay(fd);
	uint64_t cap = iters;
	if (duration > 0) {
		/* at most four round trips per microsecond: TCP is far slower,
		 * and a shm round trip takes about a microsecond; at most 32M
		 * samples (128 MiB): a longer run ends when they are taken */
		double c = duration * 4e6;
		cap = c > (double)(1u << 25) ? 1u << 25 : (uint64_t)c + 1;
	}
	char *out = malloc(size), *in = malloc(size);
	uint32_t *rtt = malloc(cap * sizeof(*rtt));
	if (!out || !in || !rtt) {
		err("client: out of memory (%" PRIu64 " samples)", cap);
		return -1;
	}
	memset(out, 0xa5, size);
	memset(rtt, 0, cap * sizeof(*rtt));   /* fault the pages in now */

	int rc = 0;
	uint64_t seq = 0, n = 0;
	for (uint64_t i = 0; i < warmup && rc == 0; i++)
		rc = round_trip(fd, out, in, size, seq++);
	uint64_t start = now_ns(), t0 = start,
		 deadline = duration > 0 ? start + (uint64_t)(duration * 1e9) : 0;
	while (rc == 0 && n < cap) {
		rc = round_trip(fd, out, in, size, seq++);
		uint64_t t1 = now_ns(), d = t1 - t0;
		rtt[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		if (deadline && t1 >= deadline)
			break;
		t0 = t1;
	}
	if (rc != 0) {
		err("client: pingpong: %s", strerror(errno));
	} else {
		/* orderly close: the server sees EOF and closes too */
		char c;
		shutdown(fd, SHUT_WR);
		while (recv(fd, &c, 1, 0) < 0 && errno == EINTR)
			;
	}
	if (rc == 0 && n > 0)
		print_pingpong(size, rtt, n, cdf);
	free(out);
	free(in);
	free(rtt);
	return rc;
}

static int client_stream(int fd, uint32_t size, uint64_t iters,
			 double duration)
{
	char *buf = malloc(size);
	if (!buf) {
		err("client: out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (char)(i * 131u + 7u);

	uint64_t sent = 0, writes = 0;
	uint64_t start = now_ns(),
		 deadline = duration > 0 ? start + (uint64_t)(duration * 1e9) : 0;
	int rc = 0;
	for (;;) {
		if (write_full(fd, buf, size, 0) != 0) {
			err("client: stream write: %s", strerror(errno));
			rc = -1;
			break;
		}
		sent += size;
		writes++;
		if (deadline ? now_ns() >= deadline : writes >= iters)
			break;
	}
	free(buf);
	if (rc != 0)
		return rc;
	if (shutdown(fd, SHUT_WR) != 0) {
		err("client: shutdown: %s", strerror(errno));
		return -1;
	}
	uint32_t be[2];
	ssize_t n = read_full(fd, be, sizeof(be), 1);
	uint64_t end = now_ns();
	if (n <= 0) {
		err("client: stream: no byte count from the server: %s",
		    n == 0 ? "connection closed" : strerror(errno));
		return -1;
	}
	uint64_t got = (uint64_t)ntohl(be[0]) << 32 | ntohl(be[1]);
	if (got != sent) {
		err("client: stream: sent %" PRIu64 " bytes, server received %" PRIu64,
		    sent, got);
		return -1;
	}
	double secs = (double)(end - start) / 1e9;
	printf("stream size=%u bytes=%" PRIu64 " seconds=%.6f gbps=%.4f MBps=%.2f\n",
	       size, got, secs, (double)got * 8 / 1e9 / secs,
	       (double)got / 1e6 / secs);
	return 0;
}

/* The state letter of process pid (/proc/PID/stat: R running, S
 * sleeping...), or 0. */
static char proc_state(pid_t pid)
{
	char path[64], b[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(b, 1, sizeof b - 1, f);
	fclose(f);
	b[n] = 0;
	const char *p = strrchr(b, ')'); /* the name may hold anything */
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Until the peer is off its CPU (at most a second).  A process's CPU
 * clock read from another process leaves out what a running peer has used
 * since the scheduler last accounted it (up to a tick, 4 ms here): read
 * while it still ran, the first reading was short by that much and the
 * idle figure then held CPU spent before the idle time began (1.1-2.2 ms
 * per second in some rounds, never in others).  A sleeping peer is
 * accounted up to its sleep. */
static void peer_settle(pid_t peer)
{
	for (int i = 0; i < 10000 && proc_state(peer) == 'R'; i++) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

/* An idle connection (see the top): one round trip, then nothing for
 * duration seconds while waiting for data, as a client of a quiet server
 * does.  Nothing may arrive meanwhile.  The time starts once the peer has
 * gone to sleep (peer_settle): what the last message cost it until then,
 * a spin, is the message's, not the idle connection's. */
static int client_idle(int fd, double duration, pid_t peer)
{
	char out[64], in[64];
	set_nodelay(fd);
	memset(out, 0xa5, sizeof(out));
	if (round_trip(fd, out, in, sizeof(out), 0) != 0) {
		err("client: idle: first round trip: %s", strerror(errno));
		return -1;
	}
	if (peer > 0)
		peer_settle(peer);
	int64_t self0 = proc_cpu_ns(0), peer0 = peer > 0 ? proc_cpu_ns(peer) : -1;
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(duration * 1e9), t1;
	while ((t1 = now_ns()) < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)((end - t1 + 999999) / 1000000));
		if (n < 0 && errno != EINTR) {
			err("client: idle: poll: %s", strerror(errno));
			return -1;
		}
		if (n > 0) {
			err("client: idle: the server sent something (revents 0x%x)", p.revents);
			return -1;
		}
	}
	int64_t self1 = proc_cpu_ns(0), peer1 = peer > 0 ? proc_cpu_ns(peer) : -1;
	if (peer > 0 && (peer0 < 0 || peer1 < 0)) {
		err("client: idle: no CPU-time clock for process %d", (int)peer);
		return -1;
	}
	char c;
	shutdown(fd, SHUT_WR);
	while (recv(fd, &c, 1, 0) < 0 && errno == EINTR)
		;
	printf("idle seconds=%.6f self_cpu_us=%.3f", (double)(t1 - t0) / 1e9,
	       (double)(self1 - self0) / 1e3);
	if (peer > 0)
		printf(" peer_cpu_us=%.3f", (double)(peer1 - peer0) / 1e3);
	printf("\n");
	return 0;
}

static int client_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		{ "size", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "unix", required_argument, NULL, 'u' },
		{ "cdf", no_argument, NULL, 'c' },
		{ "start-at", required_argument, NULL, 'S' },
		{ "peer-pid", required_argument, NULL, 'P' },
		{ "think", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t think = 0;
	const char *host = "127.0.0.1", *port = NULL, *mode = "pingpong", *path = NULL;
	uint64_t size = 0, iters = 0, warmup = 1000, pv, start_at = 0, peer = 0;
	double duration = 0;
	int have_iters = 0, cdf = 0, o;
	char *end;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = optarg; break;
		case 'm': mode = optarg; break;
		case 's':
			if (parse_u64(optarg, &size, 1) || !size || size > MAX_SIZE) {
				err("--size: expected 1..%u bytes (k/M suffixes), got '%s'",
				    MAX_SIZE, optarg);
				return 2;
			}
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || end == optarg || !(duration > 0) ||
			    duration > 3600) {
				err("--duration: expected seconds in (0, 3600], got '%s'",
				    optarg);
				return 2;
			}
			break;
		case 'n':
			if (parse_u64(optarg, &iters, 1) || !iters ||
			    iters > 1000000000u) {
				err("--iters: expected 1..1e9, got '%s'", optarg);
				return 2;
			}
			have_iters = 1;
			break;
		case 'w':
			if (parse_u64(optarg, &warmup, 1)) {
				err("--warmup: expected a count, got '%s'", optarg);
				return 2;
			}
			break;
		case 'u': path = optarg; break;
		case 'c': cdf = 1; break;
		case 'S':
			if (parse_start_at(PROG, optarg, &start_at))
				return 2;
			break;
		case 'T':
			if (parse_u64(optarg, &think, 0) || think > MAX_THINK_US) {
				err("--think: expected 0..%u microseconds, got '%s'", MAX_THINK_US,
				    optarg);
				return 2;
			}
			break;
		case 'P':
			if (parse_u64(optarg, &peer, 0) || !peer || peer > INT32_MAX) {
				err("--peer-pid: expected a process id, got '%s'", optarg);
				return 2;
			}
			break;
		default:
			return 2;
		}
	}
	unix_mode = path != NULL;
	int pp = !strcmp(mode, "pingpong"), idle = !strcmp(mode, "idle");
	if (!strcmp(mode, "connect")) {
		if (!port && !path)
			return 2;
		return client_connect(host, port, path, have_iters ? iters : 1000,
				      duration, start_at) ? 1 : 0;
	}
	if (!pp && !idle && strcmp(mode, "stream")) {
		err("--mode: expected pingpong, stream, connect or idle, got '%s'", mode);
		return 2;
	}
	if (idle && !(duration > 0)) {
		err("--mode idle: --duration SEC says how long the connection stays idle");
		return 2;
	}
	if ((path ? port != NULL
		  : !port || parse_u64(port, &pv, 0) || pv == 0 || pv > 65535) ||
	    optind != argc) {
		err("usage: " PROG " client (--host H --port P | --unix PATH)"
		    " --mode pingpong|stream|connect|idle --size BYTES"
		    " (--duration SEC | --iters N) [--warmup N] [--cdf] [--start-at NS]"
		    " [--peer-pid PID] [--think US]");
		return 2;
	}
	if (have_iters && duration > 0) {
		err("--duration and --iters exclude each other");
		return 2;
	}
	if (!size)
		size = pp ? 64 : 65536;
	if (!have_iters && !(duration > 0)) {
		if (pp)
			iters = 100000;
		else
			duration = 5;
	}

	int fd = path ? connect_unix(path) : connect_to(host, port);
	if (fd < 0)
		return 1;
	/* an idle connection is a ping-pong one that stops after a message */
	struct hdr h = { htonl(MAGIC), htonl(pp || idle ? MODE_PINGPONG : MODE_STREAM),
			 htonl(idle ? 64u : (uint32_t)size), htonl(pp ? (uint32_t)think : 0) };
	int rc;
	if (write_full(fd, &h, sizeof(h), 1) != 0) {
		err("client: header: %s", strerror(errno));
		rc = -1;
	} else {
		sleep_until_ns(start_at);
		if (idle)
			rc = client_idle(fd, duration, (pid_t)peer);
		else if (pp)
			rc = client_pingpong(fd, (uint32_t)size, iters, duration, warmup, cdf);
		else
			rc = client_stream(fd, (uint32_t)size, iters, duration);
	}
	close(fd);
	if (fflush(stdout) != 0) {
		err("stdout: %s", strerror(errno));
		rc = -1;
	}
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* a vanished peer must be an EPIPE error, not a silent death */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);

	if (argc >= 2 && !strcmp(argv[1], "server"))
		return server_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "client"))
		return client_main(argc - 1, argv + 1);
	int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
	fprintf(help ? stdout : stderr,
		"usage: " PROG " server (--port P [--bind ADDR] | --unix PATH) [--once]\n"
		"       " PROG " client (--host H --port P | --unix PATH)\n"
		"                      --mode pingpong|stream|connect|idle\n"
		"                      --size BYTES (--duration SEC | --iters N) [--warmup N]\n"
		"                      [--cdf] [--start-at NS] [--peer-pid PID]\n");
	return help ? 0 : 2;
}
