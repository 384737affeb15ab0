/* stream_peer: one long TCP stream between a server and a client process,
 * every byte checked, for the slow-reader and kill -9 scenarios.
 *
 *   stream_peer server --port-file F [--host H] [--slow-us U] [--chunk K]
 *                      [--bidi] [--progress-file P --progress-bytes B]
 *   stream_peer client --port PORT   [--host H] [--bytes N] [--chunk K]
 *                      [--bidi] [--progress-file P --progress-bytes B]
 *
 * The client sends N bytes (N=0: until the connection breaks) of the stream
 * of seed 11, then shuts down writing; the server accepts one connection and
 * reads it, checking each byte, in reads of at most K bytes and sleeping U
 * microseconds after each read when --slow-us is given (a slow reader).
 * With --bidi the server also sends the stream of seed 22 until the
 * connection breaks (or, with N>0, N bytes), and the client reads it.
 * --progress-file: once B bytes have been received, P is created (so a test
 * can kill the peer mid-stream).
 *
 * Each side prints what it received and how its streams ended:
 *   server: recv bytes=N sha256=X end=EOF|ECONNRESET|...
 *   server: send end=done|EPIPE|ECONNRESET|...
 * (sha256 only when the stream ended at EOF), and exits 0 unless a byte was
 * wrong or a call failed in a way no TCP peer could cause. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEED_C2S 11
#define SEED_S2C 22

static const char *role = "?";
static uint64_t nbytes;
static size_t chunk = 65536;
static unsigned slow_us;
static int bidi;
static const char *progress_file;
static uint64_t progress_bytes = 1 << 20;

static const char *end_name(int err)
{
	switch (err) {
	case 0: return "EOF";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case ETIMEDOUT: return "ETIMEDOUT";
	default: return strerror(err);
	}
}

static void touch(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "1\n", 2) != 2 || close(fd) < 0 || rename(tmp, path) < 0)
		fail_errno("progress file %s", path);
}

struct dir {
	int fd;
	uint64_t seed;
	uint64_t bytes;
	int err;           /* 0 = clean end */
	char hex[65];
};

static void *receiver(void *arg)
{
	struct dir *d = arg;
	char *buf = malloc(chunk);
	struct sha256 s;
	int told = 0;
	sha256_init(&s);
	for (;;) {
		ssize_t r = read(d->fd, buf, chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			d->err = errno;
			break;
		}
		if (r == 0)
			break;
		long long bad = gen_check(d->seed, d->bytes, buf, (size_t)r);
		if (bad >= 0)
			fail("%s: received data differs at offset %lld", role, bad);
		sha256_update(&s, buf, (size_t)r);
		d->bytes += (uint64_t)r;
		if (progress_file && !told && d->bytes >= progress_bytes) {
			touch(progress_file);
			told = 1;
		}
		if (slow_us) {
			struct timespec ts = {0, (long)slow_us * 1000L};
			nanosleep(&ts, NULL);
		}
	}
	if (!d->err)
		sha256_hex(&s, d->hex);
	free(buf);
	return NULL;
}

static void *sender(void *arg)
{
	struct dir *d = arg;
	char *buf = malloc(chunk);
	for (;;) {
		size_t k = chunk;
		if (nbytes) {
			if (d->bytes == nbytes)
				break;
			if (nbytes - d->bytes < k)
				k = (size_t)(nbytes - d->bytes);
		}
		gen_bytes(d->seed, d->bytes, buf, k);
		ssize_t r = write(d->fd, buf, k);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			d->err = errno;
			break;
		}
		if (r == 0)
			fail("%s: write returned 0", role);
		d->bytes += (uint64_t)r;
	}
	if (!d->err && shutdown(d->fd, SHUT_WR) < 0)
		d->err = errno;
	free(buf);
	return NULL;
}

static void run(int fd, uint64_t rx_seed, uint64_t tx_seed, int do_send)
{
	struct dir rx = {fd, rx_seed, 0, 0, ""}, tx = {fd, tx_seed, 0, 0, ""};
	pthread_t tr, tt;
	if (do_send && pthread_create(&tt, NULL, sender, &tx) != 0)
		fail("pthread_create");
	int do_recv = !do_send || bidi;
	if (do_recv && pthread_create(&tr, NULL, receiver, &rx) != 0)
		fail("pthread_create");
	if (do_send)
		pthread_join(tt, NULL);
	if (do_recv)
		pthread_join(tr, NULL);
	if (do_recv) {
		if (rx.err)
			printf("%s: recv bytes>0=%d end=%s\n", role, rx.bytes > 0, end_name(rx.err));
		else
			printf("%s: recv bytes=%llu sha256=%s end=EOF\n", role,
			       (unsigned long long)rx.bytes, rx.hex);
	}
	if (do_send)
		printf("%s: send end=%s\n", role, tx.err ? end_name(tx.err) : "done");
	fflush(stdout);
	fprintf(stderr, "%s: received %llu, sent %llu\n", role, (unsigned long long)rx.bytes,
		(unsigned long long)tx.bytes);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port", 1, 0, 'p' }, { "port-file", 1, 0, 'f' },
		{ "bytes", 1, 0, 'b' }, { "chunk", 1, 0, 'k' }, { "slow-us", 1, 0, 's' },
		{ "bidi", 0, 0, 'd' }, { "progress-file", 1, 0, 'P' },
		{ "progress-bytes", 1, 0, 'B' }, { 0, 0, 0, 0 },
	};
	const char *host = "127.0.0.1", *port_file = NULL;
	int port = 0, o;
	prog_name = "stream_peer";
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: stream_peer server|client [options]\n");
		return 2;
	}
	role = argv[1];
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': port_file = optarg; break;
		case 'b': nbytes = strtoull(optarg, NULL, 0); break;
		case 'k': chunk = strtoull(optarg, NULL, 0); break;
		case 's': slow_us = (unsigned)atoi(optarg); break;
		case 'd': bidi = 1; break;
		case 'P': progress_file = optarg; break;
		case 'B': progress_bytes = strtoull(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	if (chunk < 1)
		chunk = 1;
	signal(SIGPIPE, SIG_IGN);
	watchdog(100);
	if (strcmp(role, "server") == 0) {
		int bound;
		int l = tcp_listen(host, port, 4, &bound);
		if (port_file) {
			char tmp[4096];
			snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
			FILE *f = fopen(tmp, "w");
			if (!f || fprintf(f, "%d\n", bound) < 0 || fclose(f) || rename(tmp, port_file))
				fail_errno("port file");
		}
		int s = accept(l, NULL, NULL);
		if (s < 0)
			fail_errno("accept");
		close(l);
		run(s, SEED_C2S, SEED_S2C, bidi);
		close(s);
	} else {
		if (port <= 0)
			fail("client needs --port");
		int c = tcp_connect(host, port);
		run(c, SEED_S2C, SEED_C2S, 1);
		close(c);
	}
	return 0;
}
