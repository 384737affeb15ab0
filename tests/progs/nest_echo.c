/* nest_echo: an echo server and client whose event loops wait on epoll sets
 * nested in other waits, as libuv, tokio and glib do.  The connections sit
 * in two inner epoll sets (connection i in inner[i % 2]); what the program
 * sleeps in is chosen by --mode:
 *
 *   epoll      an outer epoll set holding the inner epoll fds (level)
 *   epoll-et   the same, the inner fds registered EPOLLET in the outer set
 *   poll       poll() over the inner epoll fds
 *   select     select() over them
 *   deep       outer epoll -> middle epoll -> inner epoll (two levels)
 *   oneshot    as epoll, with the connections EPOLLONESHOT in the inner sets,
 *              re-armed with EPOLL_CTL_MOD after every event
 *
 * The server's listening socket sits next to the inner sets (a plain kernel
 * fd in the same wait).  Every outer wait blocks (timeout -1): a wakeup that
 * never comes hangs the program until the watchdog fails it.  A handler
 * moves at most one chunk per event and an outer event is answered by one
 * inner epoll_wait with maxevents 2 (except epoll-et, which must drain), so
 * data is often left in the rings for the next outer wait to find.
 *
 *   nest_echo server --mode M [--host H] --port-file F --conns K
 *   nest_echo client --mode M [--host H] --port P --conns K --bytes N
 *                    --seed S [--pause-ms T]
 *
 * The client sends connection i the stream gen_bytes(S + i), checks every
 * echoed byte against it, and pauses T ms (the whole process) twice on
 * connection 0, so the server's outer wait is asleep when data comes again.
 * With epoll-et the client first checks that outer waits with no new edge
 * sleep (300 ms of them) instead of spinning.
 * Output (sorted, comparable between a plain run and a run under shunt):
 *   server: conn bytes=N sha256=X ... PASS nest_echo server conns=K
 *   client: conn bytes=N sha256=X ... PASS nest_echo client conns=K
 * and on stderr one line of counters:
 *   stat waits=W long_waits=L spurious=P idle_wall_ms=A idle_cpu_ms=B
 * long_waits: outer waits that slept over 20 ms and then returned an event
 * (a wakeup came); spurious: outer events after which the inner set had
 * nothing; idle_*: wall and CPU time spent in those long waits. */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64
#define BUFSZ (64 * 1024)

enum mode { M_EPOLL, M_EPOLL_ET, M_POLL, M_SELECT, M_DEEP, M_ONESHOT };
static const char *const mode_names[] = {"epoll", "epoll-et", "poll", "select", "deep", "oneshot"};

static int server_role;
static int mode = -1;
static const char *host = "127.0.0.1";
static int port;
static const char *port_file;
static int nconns = 1;
static uint64_t nbytes = 1 << 20;
static uint64_t seed = 1;
static int pause_ms;

/* Tags in epoll data: what an event is about. */
#define TAG_LISTEN 0xffff0001u
#define TAG_INNER 0xffff0100u /* + index */
#define TAG_MID 0xffff0200u

struct conn {
	int fd;
	int idx;
	int done;
	uint32_t interest; /* registered EPOLLIN/EPOLLOUT */
	uint64_t k;        /* calls, for chunk sizes */
	/* server */
	unsigned char buf[BUFSZ];
	size_t off, len;   /* pending echo bytes in buf */
	int eof;
	/* client */
	uint64_t sent, recvd;
	int shut;
	int pauses;
	struct sha256 sha; /* bytes received */
};

static struct conn conns[MAXC];
static int nopen, nfinished, accepted;
static int lfd = -1;
static int inner[2], mid = -1, outer = -1;
static unsigned long waits, long_waits, spurious;
static uint64_t idle_wall_ns, idle_cpu_ns;
static char *results[MAXC];

static size_t chunk(struct conn *c)
{
	/* 1..17 KiB, varying per call */
	return 1024 + (size_t)((c->k++ * 7919 + (uint64_t)c->idx * 104729) % (16 * 1024));
}

static int inner_of(const struct conn *c)
{
	return inner[c->idx % 2];
}

static uint32_t want(const struct conn *c)
{
	uint32_t w = 0;
	if (server_role) {
		if (!c->eof && c->len < BUFSZ)
			w |= EPOLLIN;
		if (c->len)
			w |= EPOLLOUT;
	} else {
		if (c->sent < nbytes)
			w |= EPOLLOUT;
		w |= EPOLLIN;
	}
	return w;
}

/* Register or update c's interest in its inner set.  oneshot: every call
 * re-arms (the event that brought us here disabled the item). */
static void update(struct conn *c, int add)
{
	uint32_t w = want(c);
	if (!add && w == c->interest && mode != M_ONESHOT)
		return;
	struct epoll_event ev = {.events = w | (mode == M_ONESHOT ? EPOLLONESHOT : 0),
				 .data.u32 = (uint32_t)c->idx};
	if (epoll_ctl(inner_of(c), add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev) < 0)
		fail_errno("epoll_ctl(%s) conn %d", add ? "ADD" : "MOD", c->idx);
	c->interest = w;
}

static void finish(struct conn *c)
{
	char hex[65];
	sha256_hex(&c->sha, hex);
	uint64_t n = server_role ? c->sha.len : c->recvd;
	if (asprintf(&results[c->idx], "conn bytes=%llu sha256=%s", (unsigned long long)n, hex) < 0)
		fail("oom");
	if (epoll_ctl(inner_of(c), EPOLL_CTL_DEL, c->fd, NULL) < 0)
		fail_errno("epoll_ctl(DEL) conn %d", c->idx);
	close(c->fd);
	c->done = 1;
	nfinished++;
}

static void pause_now(void)
{
	struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void server_event(struct conn *c, uint32_t ev)
{
	if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->eof && c->len < BUFSZ) {
		/* compact, then one read */
		if (c->off) {
			memmove(c->buf, c->buf + c->off, c->len);
			c->off = 0;
		}
		size_t room = BUFSZ - c->len, n = chunk(c);
		ssize_t r = read(c->fd, c->buf + c->len, n < room ? n : room);
		if (r > 0) {
			sha256_update(&c->sha, c->buf + c->len, (size_t)r);
			c->len += (size_t)r;
		} else if (r == 0) {
			c->eof = 1;
		} else if (errno != EAGAIN && errno != EINTR) {
			fail_errno("read conn %d", c->idx);
		}
	}
	if ((ev & (EPOLLOUT | EPOLLERR)) && c->len) {
		size_t n = chunk(c);
		ssize_t w = write(c->fd, c->buf + c->off, n < c->len ? n : c->len);
		if (w > 0) {
			c->off += (size_t)w;
			c->len -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			fail_errno("write conn %d", c->idx);
		}
	}
	if (c->eof && !c->len)
		finish(c);
	else
		update(c, 0);
}

static void client_event(struct conn *c, uint32_t ev)
{
	unsigned char b[32 * 1024];
	uint64_t s = seed + (uint64_t)c->idx;
	if ((ev & (EPOLLOUT | EPOLLERR)) && c->sent < nbytes) {
		size_t n = chunk(c);
		if (n > nbytes - c->sent)
			n = (size_t)(nbytes - c->sent);
		if (n > sizeof b)
			n = sizeof b;
		gen_bytes(s, c->sent, b, n);
		ssize_t w = write(c->fd, b, n);
		if (w > 0) {
			c->sent += (uint64_t)w;
			/* Twice, on connection 0: stop the whole process once the
			 * server has had time to echo everything, so its outer
			 * wait is asleep when the next bytes come. */
			if (c->idx == 0 && pause_ms && c->pauses < 2 &&
			    c->sent >= (uint64_t)(c->pauses + 1) * (nbytes / 3)) {
				c->pauses++;
				pause_now();
			}
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			fail_errno("write conn %d", c->idx);
		}
		if (c->sent == nbytes && !c->shut) {
			if (shutdown(c->fd, SHUT_WR) < 0)
				fail_errno("shutdown conn %d", c->idx);
			c->shut = 1;
		}
	}
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
		size_t n = chunk(c);
		if (n > sizeof b)
			n = sizeof b;
		ssize_t r = read(c->fd, b, n);
		if (r > 0) {
			long long bad = gen_check(s, c->recvd, b, (size_t)r);
			if (bad >= 0)
				fail("conn %d: echoed byte %llu differs from what was sent", c->idx,
				     (unsigned long long)c->recvd + (unsigned long long)bad);
			sha256_update(&c->sha, b, (size_t)r);
			c->recvd += (uint64_t)r;
			if (c->recvd > c->sent)
				fail("conn %d: %llu bytes echoed, only %llu sent", c->idx,
				     (unsigned long long)c->recvd, (unsigned long long)c->sent);
		} else if (r == 0) {
			if (c->recvd != nbytes)
				fail("conn %d: EOF after %llu of %llu bytes", c->idx,
				     (unsigned long long)c->recvd, (unsigned long long)nbytes);
			finish(c);
			return;
		} else if (errno != EAGAIN && errno != EINTR) {
			fail_errno("read conn %d", c->idx);
		}
	}
	update(c, 0);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			fail_errno("accept");
		}
		if (accepted == nconns)
			fail("more connections than --conns %d", nconns);
		set_nonblock(fd, 1);
		struct conn *c = &conns[accepted];
		c->fd = fd;
		c->idx = accepted++;
		sha256_init(&c->sha);
		nopen++;
		update(c, 1);
	}
}

/* One inner set has something (the outer wait said so): answer it.  Returns
 * the number of connection events handled. */
static int service_inner(int which)
{
	struct epoll_event ev[8];
	int total = 0;
	for (;;) {
		int n = epoll_wait(inner[which], ev, mode == M_EPOLL_ET ? 8 : 2, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail_errno("epoll_wait(inner)");
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = &conns[ev[i].data.u32];
			if (c->done)
				continue;
			if (server_role)
				server_event(c, ev[i].events);
			else
				client_event(c, ev[i].events);
		}
		total += n;
		/* Edge triggered outside: drain, or no new edge may come. */
		if (mode != M_EPOLL_ET || n == 0)
			return total;
	}
}

static void service_tag(uint32_t tag)
{
	if (tag == TAG_LISTEN) {
		accept_all();
	} else if (tag == TAG_MID) {
		struct epoll_event ev[4];
		int n = epoll_wait(mid, ev, 4, 0);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait(mid)");
		if (n <= 0)
			spurious++;
		for (int i = 0; i < n; i++)
			service_tag(ev[i].data.u32);
	} else {
		if (service_inner((int)(tag - TAG_INNER)) == 0)
			spurious++;
	}
}

static int make_ep(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fail_errno("epoll_create1");
	return ep;
}

static void add_to(int ep, int fd, uint32_t tag, uint32_t extra)
{
	struct epoll_event ev = {.events = EPOLLIN | extra, .data.u32 = tag};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail_errno("epoll_ctl(ADD) of an epoll fd / listener");
}

static void setup(void)
{
	inner[0] = make_ep();
	inner[1] = make_ep();
	switch (mode) {
	case M_EPOLL:
	case M_EPOLL_ET:
	case M_ONESHOT:
		outer = make_ep();
		for (int i = 0; i < 2; i++)
			add_to(outer, inner[i], TAG_INNER + (uint32_t)i,
			       mode == M_EPOLL_ET ? EPOLLET : 0);
		if (lfd >= 0)
			add_to(outer, lfd, TAG_LISTEN, 0);
		break;
	case M_DEEP:
		outer = make_ep();
		mid = make_ep();
		for (int i = 0; i < 2; i++)
			add_to(mid, inner[i], TAG_INNER + (uint32_t)i, 0);
		add_to(outer, mid, TAG_MID, 0);
		if (lfd >= 0)
			add_to(outer, lfd, TAG_LISTEN, 0);
		break;
	default:
		break;
	}
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One outer wait (blocking), then its events.  */
static void outer_wait(void)
{
	uint32_t tags[4];
	int nt = 0;
	uint64_t t0 = now_ns(), c0 = cpu_ns();
	if (mode == M_POLL) {
		struct pollfd p[3] = {{inner[0], POLLIN, 0}, {inner[1], POLLIN, 0}, {lfd, POLLIN, 0}};
		int n = poll(p, lfd >= 0 ? 3 : 2, -1);
		if (n < 0 && errno != EINTR)
			fail_errno("poll");
		for (int i = 0; n > 0 && i < 3; i++) {
			if (p[i].revents & POLLNVAL)
				fail("poll: POLLNVAL on fd %d", p[i].fd);
			if (p[i].revents)
				tags[nt++] = i == 2 ? TAG_LISTEN : TAG_INNER + (uint32_t)i;
		}
	} else if (mode == M_SELECT) {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(inner[0], &r);
		FD_SET(inner[1], &r);
		int hi = inner[0] > inner[1] ? inner[0] : inner[1];
		if (lfd >= 0) {
			FD_SET(lfd, &r);
			hi = lfd > hi ? lfd : hi;
		}
		int n = select(hi + 1, &r, NULL, NULL, NULL);
		if (n < 0 && errno != EINTR)
			fail_errno("select");
		for (int i = 0; n > 0 && i < 2; i++)
			if (FD_ISSET(inner[i], &r))
				tags[nt++] = TAG_INNER + (uint32_t)i;
		if (n > 0 && lfd >= 0 && FD_ISSET(lfd, &r))
			tags[nt++] = TAG_LISTEN;
	} else {
		struct epoll_event ev[4];
		int n = epoll_wait(outer, ev, 4, -1);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait(outer)");
		for (int i = 0; i < n; i++)
			tags[nt++] = ev[i].data.u32;
	}
	uint64_t dt = now_ns() - t0;
	waits++;
	if (nt == 0)
		fail("an outer wait with no timeout returned no event");
	if (dt > 20000000u) {
		long_waits++;
		idle_wall_ns += dt;
		idle_cpu_ns += cpu_ns() - c0;
	}
	for (int i = 0; i < nt; i++)
		service_tag(tags[i]);
}

/* epoll-et, client, before any byte moves: the connections are writable,
 * so the first outer wait reports their inner sets.  Then nothing new
 * happens for 300 ms: outer waits over that time must sleep, not spin.
 * (Wakeups of shunt's own, such as the server's commit, may make edges the
 * kernel alone would not: allowed, a few per connection.) */
static void et_check(void)
{
	struct epoll_event ev[4];
	int n = epoll_wait(outer, ev, 4, 5000);
	if (n < 1)
		fail("epoll-et: writable connections reported no inner set (%d)", n);
	uint64_t t0 = now_ns(), c0 = cpu_ns(), wall;
	int events = 0, calls = 0;
	while ((wall = now_ns() - t0) < 300000000u) {
		n = epoll_wait(outer, ev, 4, (int)((300000000u - wall) / 1000000u) + 1);
		if (n < 0 && errno != EINTR)
			fail_errno("epoll_wait(outer)");
		events += n > 0 ? n : 0;
		calls++;
	}
	uint64_t cpu = cpu_ns() - c0;
	if (cpu * 2 > wall || events > 3 * nconns + 4)
		fail("epoll-et: with no new edge for %llu ms, %d outer waits returned %d events and "
		     "used %llu ms of CPU", (unsigned long long)(wall / 1000000), calls, events,
		     (unsigned long long)(cpu / 1000000));
	/* Now service what the first wait reported. */
	service_inner(0);
	service_inner(1);
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void usage(void)
{
	fprintf(stderr, "usage: nest_echo server|client --mode epoll|epoll-et|poll|select|deep|oneshot "
			"[--host H] [--port P | --port-file F] [--conns K] [--bytes N] [--seed S] "
			"[--pause-ms T]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	prog_name = "nest_echo";
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "server"))
		server_role = 1;
	else if (strcmp(argv[1], "client"))
		usage();
	static const struct option opts[] = {
		{"mode", required_argument, 0, 'm'},  {"host", required_argument, 0, 'h'},
		{"port", required_argument, 0, 'p'},  {"port-file", required_argument, 0, 'f'},
		{"conns", required_argument, 0, 'c'}, {"bytes", required_argument, 0, 'b'},
		{"seed", required_argument, 0, 's'},  {"pause-ms", required_argument, 0, 'P'},
		{0, 0, 0, 0}};
	int o;
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'm':
			for (int i = 0; i < (int)(sizeof mode_names / sizeof *mode_names); i++)
				if (!strcmp(optarg, mode_names[i]))
					mode = i;
			break;
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': port_file = optarg; break;
		case 'c': nconns = atoi(optarg); break;
		case 'b': nbytes = strtoull(optarg, NULL, 10); break;
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'P': pause_ms = atoi(optarg); break;
		default: usage();
		}
	}
	if (mode < 0 || nconns < 1 || nconns > MAXC || (!server_role && !port))
		usage();
	watchdog(60);
	if (server_role) {
		int bound;
		lfd = tcp_listen(host, 0, 128, &bound);
		set_nonblock(lfd, 1);
		setup();
		if (port_file) {
			char tmp[4096];
			snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
			FILE *f = fopen(tmp, "w");
			if (!f || fprintf(f, "%d\n", bound) < 0 || fclose(f) != 0 ||
			    rename(tmp, port_file) < 0)
				fail_errno("write %s", port_file);
		}
	} else {
		setup();
		for (int i = 0; i < nconns; i++) {
			struct conn *c = &conns[i];
			c->fd = tcp_connect(host, port);
			c->idx = i;
			set_nonblock(c->fd, 1);
			sha256_init(&c->sha);
			nopen++;
			update(c, 1);
		}
		if (mode == M_EPOLL_ET)
			et_check();
	}
	while (nfinished < nconns)
		outer_wait();
	qsort(results, (size_t)nconns, sizeof *results, cmpstr);
	for (int i = 0; i < nconns; i++)
		printf("%s\n", results[i]);
	printf("PASS nest_echo %s conns=%d\n", server_role ? "server" : "client", nconns);
	fflush(stdout);
	fprintf(stderr, "stat waits=%lu long_waits=%lu spurious=%lu idle_wall_ms=%llu idle_cpu_ms=%llu\n",
		waits, long_waits, spurious, (unsigned long long)(idle_wall_ns / 1000000),
		(unsigned long long)(idle_cpu_ns / 1000000));
	return 0;
}
