/* msg_torture: whole messages of 1 B to 4 MiB, each written with ONE call,
 * read back with the less common receive flags, both directions at once,
 * plus the timeouts; then an optional sendfile() tail.
 *
 *   msg_torture [--host 127.0.0.1] [--msgs N] [--max BYTES] [--seed S]
 *               [--sendfile BYTES]
 *
 * The parent listens and forks the client (which connects); in each process
 * one thread sends and one receives.
 * 0. Timeouts, before any data moves (the peer waits on a pipe):
 *    client: recv() with MSG_DONTWAIT fails with EAGAIN; recv() with a
 *    300 ms SO_RCVTIMEO fails with EAGAIN after 0.3 .. 3 s; send() of 64 MiB
 *    with a 300 ms SO_SNDTIMEO to a server that does not read returns a
 *    partial count (or EAGAIN) after the timeout.  The count goes to the
 *    server over the pipe; it reads and checks those bytes first.
 * 1. N messages each way: a 16-byte header (length, sequence number) and a
 *    body of the stream of the direction, header and body in one sendmsg()
 *    or writev() of 1..64 iovecs.  The receiver peeks the header
 *    (MSG_PEEK) and checks the read that follows returns the same bytes;
 *    reads the body with recvmsg(MSG_WAITALL) into 1..64 iovecs, or with
 *    readv() calls, or read() calls sized by FIONREAD, in turn.
 * 2. --sendfile B: the server sends B bytes of a file with sendfile() while
 *    the client sends B bytes with write(); both checked.
 * 3. Both shut down their writing side and read EOF.
 * Output (deterministic): per direction "c2s|s2c msgs=N bytes=T sha256=X",
 * the timeout checks, "PASS msg_torture". */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEED_C2S 101
#define SEED_S2C 202
#define SEED_FILE 303
#define HDR 16

static int nmsgs = 60;
static size_t max_body = 4 << 20;
static uint64_t seed = 1;
static uint64_t sf_bytes;
static const char *who = "?";

static size_t body_len(uint64_t *st)
{
	uint64_t r = splitmix64(st) % 100;
	uint64_t x = splitmix64(st);
	if (r < 45)
		return 1 + (size_t)(x % 256);
	if (r < 80)
		return 1 + (size_t)(x % 65536);
	return 1 + (size_t)(x % max_body);
}

/* Splits [0, len) (len >= 1) into 1..64 non-empty pieces of random sizes. */
static int split(uint64_t *st, char *base, size_t len, struct iovec *v)
{
	int n = 1 + (int)(splitmix64(st) % 64);
	if ((size_t)n > len)
		n = (int)len;
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		size_t left = len - off, rest = (size_t)(n - 1 - i), k;
		if (rest == 0) {
			k = left;
		} else {
			size_t avg = left / (rest + 1);
			k = 1 + (size_t)(splitmix64(st) % (2 * avg + 1));
			if (k > left - rest)
				k = left - rest;
		}
		v[i].iov_base = base + off;
		v[i].iov_len = k;
		off += k;
	}
	return n;
}

struct dir {
	int fd;
	uint64_t seed;
	uint64_t bytes;     /* stream offset */
	struct sha256 s;
	int msgs;
	int partial_writes;
};

static void *sender(void *arg)
{
	struct dir *d = arg;
	uint64_t st = seed * 7 + d->seed;
	char *buf = malloc(HDR + max_body);
	struct iovec v[64];
	for (int m = 0; m < nmsgs; m++) {
		size_t len = body_len(&st);
		uint64_t h[2] = {len, (uint64_t)m};
		memcpy(buf, h, HDR);
		gen_bytes(d->seed, d->bytes, buf + HDR, len);
		size_t total = HDR + len, done = 0;
		int n = split(&st, buf, total, v), use_writev = m % 2;
		while (done < total) {
			/* the iovecs from `done` on */
			struct iovec w[64];
			int k = 0;
			size_t skip = done;
			for (int i = 0; i < n; i++) {
				if (skip >= v[i].iov_len) {
					skip -= v[i].iov_len;
					continue;
				}
				w[k].iov_base = (char *)v[i].iov_base + skip;
				w[k++].iov_len = v[i].iov_len - skip;
				skip = 0;
			}
			ssize_t r;
			if (use_writev) {
				r = writev(d->fd, w, k);
			} else {
				struct msghdr mh = {.msg_iov = w, .msg_iovlen = (size_t)k};
				r = sendmsg(d->fd, &mh, MSG_NOSIGNAL);
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				fail_errno("%s: %s of message %d (%zu bytes)", who,
					   use_writev ? "writev" : "sendmsg", m, total);
			if ((size_t)r < total - done)
				d->partial_writes++;
			done += (size_t)r;
		}
		d->bytes += len;
		d->msgs++;
	}
	free(buf);
	return NULL;
}

static void read_exact_waitall(int fd, char *buf, size_t len, uint64_t *st)
{
	size_t done = 0;
	while (done < len) {
		struct iovec v[64];
		int n = split(st, buf + done, len - done, v);
		struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)n};
		ssize_t r = recvmsg(fd, &mh, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("%s: recvmsg(MSG_WAITALL) of %zu bytes returned %zd", who, len - done, r);
		done += (size_t)r;
	}
}

static void read_exact_readv(int fd, char *buf, size_t len, uint64_t *st)
{
	size_t done = 0;
	while (done < len) {
		struct iovec v[64];
		int n = split(st, buf + done, len - done, v);
		ssize_t r = readv(fd, v, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("%s: readv returned %zd", who, r);
		done += (size_t)r;
	}
}

static void read_exact_fionread(int fd, char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 20000) != 1)
			fail("%s: poll: not readable in 20 s", who);
		int avail = -1;
		if (ioctl(fd, FIONREAD, &avail) < 0)
			fail_errno("%s: FIONREAD", who);
		if (avail <= 0)
			fail("%s: poll says readable, FIONREAD says %d", who, avail);
		size_t k = (size_t)avail < len - done ? (size_t)avail : len - done;
		ssize_t r = read(fd, buf + done, k);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("%s: read returned %zd", who, r);
		done += (size_t)r;
	}
}

static void *receiver(void *arg)
{
	struct dir *d = arg;
	uint64_t st = seed * 13 + d->seed;
	char *buf = malloc(max_body);
	for (int m = 0; m < nmsgs; m++) {
		char peek[HDR], hdr[HDR];
		ssize_t r;
		/* MSG_PEEK until the whole header is there */
		for (int tries = 0;; tries++) {
			r = recv(d->fd, peek, HDR, MSG_PEEK);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				fail_errno("%s: recv(MSG_PEEK) of header %d returned %zd", who, m, r);
			if (r == HDR)
				break;
			struct pollfd p = {d->fd, POLLIN, 0};
			poll(&p, 1, 10);
			if (tries > 100000)
				fail("%s: header %d never complete", who, m);
		}
		r = recv(d->fd, hdr, HDR, MSG_WAITALL);
		if (r != HDR)
			fail_errno("%s: recv(MSG_WAITALL) header %d returned %zd", who, m, r);
		if (memcmp(peek, hdr, HDR) != 0)
			fail("%s: MSG_PEEK showed other bytes than the read (message %d)", who, m);
		uint64_t h[2];
		memcpy(h, hdr, HDR);
		if (h[1] != (uint64_t)m || h[0] == 0 || h[0] > max_body)
			fail("%s: bad header %d: len=%llu seq=%llu", who, m, (unsigned long long)h[0],
			     (unsigned long long)h[1]);
		size_t len = (size_t)h[0];
		switch (m % 3) {
		case 0: read_exact_waitall(d->fd, buf, len, &st); break;
		case 1: read_exact_readv(d->fd, buf, len, &st); break;
		default: read_exact_fionread(d->fd, buf, len); break;
		}
		long long bad = gen_check(d->seed, d->bytes, buf, len);
		if (bad >= 0)
			fail("%s: message %d differs at byte %lld", who, m, bad);
		sha256_update(&d->s, buf, len);
		d->bytes += len;
		d->msgs++;
	}
	free(buf);
	return NULL;
}

static void exchange(int fd, uint64_t tx_seed, uint64_t rx_seed, struct dir *rx)
{
	struct dir tx = {fd, tx_seed, 0, {{0}, 0, {0}, 0}, 0, 0};
	*rx = (struct dir){fd, rx_seed, 0, {{0}, 0, {0}, 0}, 0, 0};
	sha256_init(&rx->s);
	pthread_t ts, tr;
	if (pthread_create(&ts, NULL, sender, &tx) || pthread_create(&tr, NULL, receiver, rx))
		fail("pthread_create");
	pthread_join(ts, NULL);
	pthread_join(tr, NULL);
}

static void set_timeo(int fd, int opt, long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) < 0)
		fail_errno("setsockopt timeout");
}

static void pipe_write(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		fail_errno("%s: pipe", who);
}

static void pipe_read(int fd, void *p, size_t n)
{
	if (read_full(fd, p, n) != (ssize_t)n)
		fail("%s: the other process died", who);
}

/* The client's write() stream while the server sendfile()s. */
static void *tail_writer(void *arg)
{
	int fd = *(int *)arg;
	char *buf = malloc(65536);
	for (uint64_t off = 0; off < sf_bytes;) {
		size_t k = sf_bytes - off < 65536 ? (size_t)(sf_bytes - off) : 65536;
		gen_bytes(SEED_FILE + 1, off, buf, k);
		if (write_full(fd, buf, k) != (ssize_t)k)
			fail_errno("client: write after the messages");
		off += k;
	}
	free(buf);
	return NULL;
}

static void read_eof(int fd)
{
	char b;
	ssize_t r;
	while ((r = read(fd, &b, 1)) < 0 && errno == EINTR)
		;
	if (r != 0)
		fail_errno("%s: expected EOF, read returned %zd", who, r);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "msgs", 1, 0, 'n' }, { "max", 1, 0, 'm' },
		{ "seed", 1, 0, 's' }, { "sendfile", 1, 0, 'f' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1";
	int o;
	prog_name = "msg_torture";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'n': nmsgs = atoi(optarg); break;
		case 'm': max_body = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'f': sf_bytes = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: msg_torture [--host H] [--msgs N] [--max B] [--seed S] "
					"[--sendfile B]\n");
			return 2;
		}
	}
	if (max_body < 1)
		max_body = 1;
	signal(SIGPIPE, SIG_IGN);
	watchdog(100);
	int port, c2s[2], s2c[2];
	int l = tcp_listen(host, 0, 4, &port);
	if (pipe(c2s) < 0 || pipe(s2c) < 0)
		fail_errno("pipe");
	char sf_path[] = "/tmp/msg_torture.XXXXXX";
	if (sf_bytes) {
		int f = mkstemp(sf_path);
		if (f < 0)
			fail_errno("mkstemp");
		char b[65536];
		for (uint64_t off = 0; off < sf_bytes;) {
			size_t k = sf_bytes - off < sizeof b ? (size_t)(sf_bytes - off) : sizeof b;
			gen_bytes(SEED_FILE, off, b, k);
			if (write_full(f, b, k) != (ssize_t)k)
				fail_errno("write %s", sf_path);
			off += k;
		}
		close(f);
	}
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		who = "client";
		/* Die with the parent: nothing outlives a failed run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		close(c2s[0]);
		close(s2c[1]);
		/* The inherited listener stays open (see fork_server). */
		int fd = tcp_connect(host, port);
		char b[16];
		/* 0: timeouts, the server waits */
		if (recv(fd, b, sizeof b, MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
			fail("client: recv(MSG_DONTWAIT) on an idle connection did not fail with EAGAIN");
		set_timeo(fd, SO_RCVTIMEO, 300);
		uint64_t t0 = now_ns();
		ssize_t r = recv(fd, b, sizeof b, 0);
		uint64_t ms = (now_ns() - t0) / 1000000;
		if (r != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
			fail_errno("client: recv with SO_RCVTIMEO returned %zd", r);
		if (ms < 280 || ms > 3000)
			fail("client: recv with a 300 ms SO_RCVTIMEO took %llu ms", (unsigned long long)ms);
		set_timeo(fd, SO_RCVTIMEO, 0);
		printf("client: SO_RCVTIMEO 300 ms: EAGAIN in time\n");
		size_t big = 64 << 20;
		char *junk = malloc(big);
		gen_bytes(999, 0, junk, big);
		set_timeo(fd, SO_SNDTIMEO, 300);
		t0 = now_ns();
		r = send(fd, junk, big, MSG_NOSIGNAL);
		ms = (now_ns() - t0) / 1000000;
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			fail_errno("client: send with SO_SNDTIMEO");
		if (r == (ssize_t)big)
			fail("client: 64 MiB fit into a connection nobody reads");
		if (ms < 280 || ms > 5000)
			fail("client: send with a 300 ms SO_SNDTIMEO took %llu ms", (unsigned long long)ms);
		set_timeo(fd, SO_SNDTIMEO, 0);
		free(junk);
		uint64_t sent = r > 0 ? (uint64_t)r : 0;
		fprintf(stderr, "client: SO_SNDTIMEO: %llu bytes sent in %llu ms\n",
			(unsigned long long)sent, (unsigned long long)ms);
		printf("client: SO_SNDTIMEO 300 ms: partial send in time\n");
		fflush(stdout);
		pipe_write(c2s[1], &sent, sizeof sent);
		/* 1 */
		struct dir rx;
		exchange(fd, SEED_C2S, SEED_S2C, &rx);
		char hex[65];
		sha256_hex(&rx.s, hex);
		printf("s2c msgs=%d bytes=%llu sha256=%s\n", rx.msgs, (unsigned long long)rx.bytes, hex);
		fflush(stdout);
		pipe_write(c2s[1], "1", 1);
		/* 2 */
		if (sf_bytes) {
			pthread_t t;
			if (pthread_create(&t, NULL, tail_writer, &fd))
				fail("pthread_create");
			char *buf = malloc(sf_bytes);
			if (read_full(fd, buf, sf_bytes) != (ssize_t)sf_bytes)
				fail("client: short sendfile data");
			long long bad = gen_check(SEED_FILE, 0, buf, sf_bytes);
			if (bad >= 0)
				fail("client: sendfile data differs at %lld", bad);
			pthread_join(t, NULL);
			printf("client: %llu bytes of sendfile() data\n", (unsigned long long)sf_bytes);
			free(buf);
		}
		/* 3 */
		if (shutdown(fd, SHUT_WR) < 0)
			fail_errno("client: shutdown");
		read_eof(fd);
		close(fd);
		fflush(stdout);
		_exit(0);
	}
	who = "server";
	close(c2s[1]);
	close(s2c[0]);
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		fail_errno("accept");
	uint64_t junk;
	pipe_read(c2s[0], &junk, sizeof junk);
	{
		char *b = malloc(65536);
		for (uint64_t off = 0; off < junk;) {
			size_t k = junk - off < 65536 ? (size_t)(junk - off) : 65536;
			ssize_t r = read(fd, b, k);
			if (r <= 0)
				fail_errno("server: reading the partial send");
			long long bad = gen_check(999, off, b, (size_t)r);
			if (bad >= 0)
				fail("server: partial send differs at %lld", (long long)off + bad);
			off += (uint64_t)r;
		}
		free(b);
	}
	struct dir rx;
	exchange(fd, SEED_S2C, SEED_C2S, &rx);
	char one;
	pipe_read(c2s[0], &one, 1); /* the client printed its line */
	char hex[65];
	sha256_hex(&rx.s, hex);
	printf("c2s msgs=%d bytes=%llu sha256=%s\n", rx.msgs, (unsigned long long)rx.bytes, hex);
	fflush(stdout);
	if (sf_bytes) {
		int f = open(sf_path, O_RDONLY);
		if (f < 0)
			fail_errno("open %s", sf_path);
		off_t off = 0;
		while ((uint64_t)off < sf_bytes) {
			ssize_t r = sendfile(fd, f, &off, (size_t)(sf_bytes - (uint64_t)off));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				fail_errno("server: sendfile");
		}
		close(f);
		unlink(sf_path);
		char *buf = malloc(sf_bytes);
		if (read_full(fd, buf, sf_bytes) != (ssize_t)sf_bytes)
			fail("server: short data after the messages");
		long long bad = gen_check(SEED_FILE + 1, 0, buf, sf_bytes);
		if (bad >= 0)
			fail("server: data after the messages differs at %lld", bad);
		free(buf);
	}
	if (shutdown(fd, SHUT_WR) < 0)
		fail_errno("server: shutdown");
	read_eof(fd);
	int st;
	if (waitpid(child, &st, 0) < 0)
		fail_errno("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("client exited with %s %d", WIFEXITED(st) ? "status" : "signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	close(fd);
	close(l);
	printf("PASS msg_torture\n");
	return 0;
}
