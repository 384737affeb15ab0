/* echo_client: sends a deterministic pseudo-random stream over C concurrent
 * connections to an echo server, reads the echo back, and checks it byte for
 * byte.  The socket API and the wait interface are chosen on the command line
 * so the same program exercises every interposed path.
 *
 *   echo_client --port P [--host 127.0.0.1] [--bytes N] [--conns C] [--seed S]
 *               [--send write|send|sendto|sendmsg|writev|mix]
 *               [--recv read|recv|recvfrom|recvmsg|readv|mix]
 *               [--wait block|poll|ppoll|select|pselect|epoll|epoll-et|
 *                       epoll-oneshot|epoll-pwait|epoll-pwait2]
 *               [--chunk MAX] [--clearenv] [--gate FILE]
 *
 * --gate: once every connection is made, send nothing until FILE exists, so
 * a test can first see the server asleep in its wait.
 * --clearenv empties the environment before the first socket call, as some
 * daemons do (nginx for its workers): a preloaded library must have taken
 * its settings already.
 * Output (deterministic for given arguments, so runs can be diffed):
 *   conn I bytes=N sent_sha256=X recv_sha256=Y
 *   PASS echo_client conns=C bytes=N send=A recv=B wait=W
 * Exit 0 on PASS, 1 on any mismatch or error. */
#include "common.h"
#include "waiter.h"

#include <errno.h>
#include <getopt.h>
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

struct conn {
	int idx;
	int fd;
	uint64_t seed;
	uint64_t tx, rx;         /* bytes sent / received so far */
	uint64_t ktx, krx;       /* call counters (api mix) */
	uint64_t tx_state, rx_state;   /* chunk sizes, one per direction */
	int tx_done, rx_done;
	int finished;            /* removed from the waiter */
	struct sha256 stx, srx;
};

static const char *host = "127.0.0.1";
static int port = -1;
static uint64_t nbytes = 1 << 20;
static int nconns = 1;
static uint64_t seed = 1;
static int send_api = API_MIX, recv_api = API_MIX;
static int wait_mode = -1;   /* -1 = blocking threads */
static size_t max_chunk = 65536;
static struct conn *conns;
static int active;

static size_t next_chunk(struct conn *c, uint64_t left)
{
	size_t n = 1 + (size_t)(splitmix64(&c->tx_state) % max_chunk);
	return n > left ? (size_t)left : n;
}

/* Sends until EAGAIN (non-blocking) or until done.  Returns 1 on progress. */
static int pump_tx(struct conn *c, int blocking)
{
	static __thread char buf[1 << 17];
	int progress = 0;
	while (!c->tx_done) {
		if (c->tx == nbytes) {
			if (shutdown(c->fd, SHUT_WR) < 0)
				fail_errno("conn %d: shutdown", c->idx);
			c->tx_done = 1;
			return 1;
		}
		size_t n = next_chunk(c, nbytes - c->tx);
		if (n > sizeof buf)
			n = sizeof buf;
		gen_bytes(c->seed, c->tx, buf, n);
		ssize_t r = api_send(send_api, c->ktx++, c->fd, buf, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (!blocking && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				return progress;
			}
			fail_errno("conn %d: %s at offset %llu", c->idx,
				   api_send_name(send_api), (unsigned long long)c->tx);
		}
		if (r == 0 || (size_t)r > n)
			fail("conn %d: send returned %zd for %zu", c->idx, r, n);
		sha256_update(&c->stx, buf, (size_t)r);
		c->tx += (uint64_t)r;
		progress = 1;
	}
	return progress;
}

static int pump_rx(struct conn *c, int blocking)
{
	static __thread char buf[1 << 17];
	int progress = 0;
	while (!c->rx_done) {
		size_t want = 1 + (size_t)(splitmix64(&c->rx_state) % max_chunk);
		if (want > sizeof buf)
			want = sizeof buf;
		ssize_t r = api_recv(recv_api, c->krx++, c->fd, buf, want);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (!blocking && (errno == EAGAIN || errno == EWOULDBLOCK))
				return progress;
			fail_errno("conn %d: %s at offset %llu", c->idx,
				   api_recv_name(recv_api), (unsigned long long)c->rx);
		}
		progress = 1;
		if (r == 0) {
			if (c->rx != nbytes)
				fail("conn %d: EOF after %llu of %llu bytes", c->idx,
				     (unsigned long long)c->rx, (unsigned long long)nbytes);
			c->rx_done = 1;
			return 1;
		}
		if ((size_t)r > want)
			fail("conn %d: recv returned %zd for %zu", c->idx, r, want);
		if (c->rx + (uint64_t)r > nbytes)
			fail("conn %d: received %llu bytes, more than the %llu sent",
			     c->idx, (unsigned long long)(c->rx + (uint64_t)r),
			     (unsigned long long)nbytes);
		long long bad = gen_check(c->seed, c->rx, buf, (size_t)r);
		if (bad >= 0)
			fail("conn %d: echoed data differs at offset %lld", c->idx, bad);
		sha256_update(&c->srx, buf, (size_t)r);
		c->rx += (uint64_t)r;
	}
	return progress;
}

static void *tx_thread(void *arg)
{
	pump_tx(arg, 1);
	return NULL;
}

static void *rx_thread(void *arg)
{
	pump_rx(arg, 1);
	return NULL;
}

static void run_threads(void)
{
	pthread_t *t = calloc((size_t)nconns * 2, sizeof *t);
	for (int i = 0; i < nconns; i++) {
		if (pthread_create(&t[2 * i], NULL, tx_thread, &conns[i]) != 0 ||
		    pthread_create(&t[2 * i + 1], NULL, rx_thread, &conns[i]) != 0)
			fail("pthread_create");
	}
	for (int i = 0; i < 2 * nconns; i++)
		pthread_join(t[i], NULL);
	free(t);
}

static void on_ready(void *arg, uint32_t tag, int in, int out, int err)
{
	struct conn *c = &conns[tag];
	(void)arg;
	if (err) {
		in = out = 1;
	}
	if (out)
		pump_tx(c, 0);
	if (in)
		pump_rx(c, 0);
}

/* What each open connection had done when the waits stopped: for the
 * test's report, to tell a lost wakeup from a peer that stopped. */
static void report_stall(void)
{
	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];
		if (c->fd < 0 || c->finished)
			continue;
		struct pollfd p = {c->fd, POLLIN | POLLOUT, 0};
		int unread = -1, unsent = -1;
		poll(&p, 1, 0);
		ioctl(c->fd, FIONREAD, &unread);
		ioctl(c->fd, SIOCOUTQ, &unsent);
		fprintf(stdout, "stall: conn %d fd %d tx %llu%s rx %llu%s revents 0x%x unread %d unsent %d\n",
			c->idx, c->fd, (unsigned long long)c->tx, c->tx_done ? " (done)" : "",
			(unsigned long long)c->rx, c->rx_done ? " (done)" : "", p.revents, unread,
			unsent);
	}
}

static void run_events(void)
{
	struct waiter *w = waiter_new(wait_mode, 65536);
	for (int i = 0; i < nconns; i++) {
		if (set_nonblock(conns[i].fd, 1) < 0)
			fail_errno("O_NONBLOCK");
		waiter_set(w, conns[i].fd, (uint32_t)i, 1, 1);
	}
	active = nconns;
	while (active > 0) {
		int n = waiter_wait(w, 10000, on_ready, NULL);
		if (n == 0) {
			report_stall();
			fail("%s: no progress for 10 s (%d connections open)",
			     wait_mode_name(wait_mode), active);
		}
		for (int i = 0; i < nconns; i++) {
			struct conn *c = &conns[i];
			if (c->fd < 0 || c->finished)
				continue;
			if (c->tx_done && c->rx_done) {
				waiter_del(w, c->fd);
				c->finished = 1;
				active--;
				continue;
			}
			waiter_set(w, c->fd, (uint32_t)i, !c->rx_done, !c->tx_done);
		}
	}
	waiter_free(w);
}

static void usage(void)
{
	fprintf(stderr, "usage: echo_client --port P [--host H] [--bytes N] [--conns C] "
			"[--seed S] [--send API] [--recv API] [--wait MODE] [--chunk MAX] [--gate FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port", 1, 0, 'p' }, { "bytes", 1, 0, 'b' },
		{ "conns", 1, 0, 'c' }, { "seed", 1, 0, 's' }, { "send", 1, 0, 'S' },
		{ "recv", 1, 0, 'R' }, { "wait", 1, 0, 'w' }, { "chunk", 1, 0, 'k' },
		{ "clearenv", 0, 0, 'E' }, { "gate", 1, 0, 'g' }, { 0, 0, 0, 0 },
	};
	int o;
	const char *gate = NULL;
	prog_name = "echo_client";
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'b': nbytes = strtoull(optarg, NULL, 0); break;
		case 'c': nconns = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'S':
			send_api = api_send_parse(optarg);
			if (send_api == -2)
				usage();
			break;
		case 'R':
			recv_api = api_recv_parse(optarg);
			if (recv_api == -2)
				usage();
			break;
		case 'w':
			if (strcmp(optarg, "block") == 0)
				wait_mode = -1;
			else if ((wait_mode = wait_mode_parse(optarg)) < 0)
				usage();
			break;
		case 'k': max_chunk = strtoull(optarg, NULL, 0); break;
		case 'g': gate = optarg; break;
		case 'E':
			if (clearenv() != 0)
				fail("clearenv");
			break;
		default: usage();
		}
	}
	if (port <= 0 || nconns < 1 || max_chunk < 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	watchdog(120);

	conns = calloc((size_t)nconns, sizeof *conns);
	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];
		c->idx = i;
		c->seed = seed * 1000003ULL + (uint64_t)i;
		c->tx_state = c->seed ^ 0x5bd1e995;
		c->rx_state = c->seed ^ 0x1b873593;
		sha256_init(&c->stx);
		sha256_init(&c->srx);
		c->fd = tcp_connect(host, port);
	}
	/* The watchdog bounds this wait. */
	while (gate && access(gate, F_OK) != 0)
		usleep(10000);
	if (wait_mode < 0)
		run_threads();
	else
		run_events();

	int ok = 1;
	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];
		char a[65], b[65];
		sha256_hex(&c->stx, a);
		sha256_hex(&c->srx, b);
		printf("conn %d bytes=%llu sent_sha256=%s recv_sha256=%s\n", i,
		       (unsigned long long)c->rx, a, b);
		if (c->tx != nbytes || c->rx != nbytes || strcmp(a, b) != 0)
			ok = 0;
		close(c->fd);
	}
	if (!ok)
		fail("sent and echoed streams differ");
	printf("PASS echo_client conns=%d bytes=%llu send=%s recv=%s wait=%s\n", nconns,
	       (unsigned long long)nbytes, api_send_name(send_api), api_recv_name(recv_api),
	       wait_mode < 0 ? "block" : wait_mode_name(wait_mode));
	return 0;
}
