/* shunt-ringbench: the raw limit of the shared-memory ring, i.e. what
 * shunt's shm transport is measured against.
 *
 *   shunt-ringbench pingpong [--size BYTES] (--duration SEC | --iters N)
 *                            [--warmup N] [--ring BYTES] [--cpu A,B] [--cdf]
 *   shunt-ringbench stream   [--size BYTES] (--duration SEC | --iters N)
 *                            [--ring BYTES] [--cpu A,B]
 *   shunt-ringbench idle     --duration SEC [--ring BYTES] [--cpu A,B]
 * each also [--start-at NS] (shunt-tcpbench's: both processes start
 * measuring when CLOCK_MONOTONIC reads NS).
 *
 * Two processes (fork) and two SPSC rings (shm/shm_ring.c), one per
 * direction, in one MAP_SHARED memfd; no sockets, no syscalls on the data
 * path.  Both sides busy-poll with shm_cpu_relax() and fall back to
 * sched_yield() after SPIN_POLLS empty polls, so the run also behaves when
 * both processes share a CPU.  The parent is the client, the child the
 * server, as in shunt-tcpbench (bench/tcp_pingpong.c), whose options,
 * defaults and output this follows:
 *   pingpong: the parent writes SIZE bytes into ring 0 (a sequence number in
 *             the first 8), the child copies them out and writes them back
 *             into ring 1; the parent checks the echo.  One round trip per
 *             sample.
 *   stream:   the parent writes SIZE-byte messages into ring 0 until done,
 *             then marks the end of the stream; the child reads with a 256 KiB buffer (like
 *             the TCP server), checks the sequence number at the start of
 *             every message and answers with the byte count in ring 1.  The
 *             time runs from the first write to the count.
 *   idle:     one round trip, then no message for --duration seconds while
 *             both processes wait, polling as every wait here does: the CPU
 *             they use meanwhile (the parent's and the child's CPU-time
 *             clocks) is what an idle raw ring costs.
 *   --ring    bytes per ring, a power of two (default 1 MiB)
 *   --cpu A,B pin the parent to CPU A and the child to CPU B
 *   --cdf     pingpong: also print the latency distribution (bench_util.h)
 *
 * Output, one machine-readable line on stdout (the shunt-tcpbench format):
 *   pingpong size=64 iters=N p50_us=... p90_us=... p99_us=... p999_us=... max_us=... mean_us=...
 *   stream size=65536 bytes=... seconds=... gbps=... MBps=...
 *   idle seconds=... self_cpu_us=... peer_cpu_us=...
 * Exit status: 0 ok, 1 error (data mismatch included), 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#include "shm/shm_ring.h"

#define PROG "shunt-ringbench"
#define MAX_SIZE (64u << 20)
#define MIN_RING 64u
#define MAX_RING (1u << 30)
#define READ_BUF (256u << 10)  /* stream reader buffer, as the TCP server's */
#define SPIN_POLLS 1000u       /* empty polls before sched_yield() */
#define PEER_CHECK 4096u       /* yields between checks that the peer lives */

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


/* ---- the shared mapping ------------------------------------------------- */

/* ctl[0]: parent -> child, ctl[1]: child -> parent.  The data areas follow
 * at DATA_OFF and DATA_OFF + ring.  The end-of-stream flags are the
 * benchmark's own (only the ring's data path is measured). */
struct shared {
	struct shm_ring_ctl ctl[2];
	struct {
		uint32_t eof;  /* the writer will write no more */
		uint32_t gone; /* the reader will read no more */
	} flags[2] __attribute__((aligned(SHM_CACHELINE)));
	uint32_t child_ready __attribute__((aligned(SHM_CACHELINE)));
};
#define DATA_OFF 4096u
_Static_assert(sizeof(struct shared) <= DATA_OFF, "control block fits a page");

/* One side's state. */
struct end {
	struct shm_ring tx, rx;
	uint32_t *tx_eof, *tx_gone, *rx_eof, *rx_gone;
	pid_t peer;        /* parent: the child; child: the parent */
	int is_child;
	int reaped, status; /* parent: the child exited, with this status */
};

static struct shared *map_rings(uint64_t ring)
{
	size_t len = DATA_OFF + 2 * (size_t)ring;
	int fd = memfd_create(PROG, MFD_CLOEXEC);
	if (fd < 0) {
		err("memfd_create: %s", strerror(errno));
		return NULL;
	}
	if (ftruncate(fd, (off_t)len) != 0) {
		err("ftruncate %zu: %s", len, strerror(errno));
		close(fd);
		return NULL;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		err("mmap %zu: %s", len, strerror(errno));
		return NULL;
	}
	return p;
}

static void end_init(struct end *e, struct shared *sh, uint64_t ring, int is_child,
		     pid_t peer)
{
	uint8_t *data = (uint8_t *)sh + DATA_OFF;
	int out = is_child ? 1 : 0;
	shm_ring_init(&e->tx, &sh->ctl[out], data + (size_t)out * ring, ring);
	shm_ring_init(&e->rx, &sh->ctl[!out], data + (size_t)!out * ring, ring);
	e->tx_eof = &sh->flags[out].eof;
	e->tx_gone = &sh->flags[out].gone;
	e->rx_eof = &sh->flags[!out].eof;
	e->rx_gone = &sh->flags[!out].gone;
	e->peer = peer;
	e->is_child = is_child;
	e->reaped = 0;
	e->status = 0;
}

/* ---- waiting ------------------------------------------------------------- */

/* One empty poll: pause, and after SPIN_POLLS of them yield the CPU.
 * Returns -1 when the peer has gone (checked now and then while yielding). */
static int idle(struct end *e, unsigned *polls)
{
	unsigned n = ++*polls;
	if (n < SPIN_POLLS) {
		shm_cpu_relax();
		return 0;
	}
	sched_yield();
	if ((n - SPIN_POLLS) % PEER_CHECK != PEER_CHECK - 1)
		return 0;
	if (e->is_child) {
		if (getppid() != e->peer)
			return -1;
	} else if (e->reaped || waitpid(e->peer, &e->status, WNOHANG) == e->peer) {
		e->reaped = 1;
		return -1;
	}
	return 0;
}

static int ring_ok(struct shm_ring *r, const char *what)
{
	if (shm_ring_sane(r))
		return 0;
	err("%s ring: counters corrupted", what);
	return -1;
}

/* Write all len bytes.  0, or -1 (peer gone, reader shut, bad ring). */
static int put_all(struct end *e, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	size_t done = 0;
	unsigned polls = 0;
	while (done < len) {
		size_t n = shm_ring_write(&e->tx, &iov, 1, done);
		if (n) {
			done += n;
			polls = 0;
			continue;
		}
		/* (the counters are checked once spinning turns to yielding:
		 * reading the peer's line on every poll slows the peer) */
		if (polls >= SPIN_POLLS && ring_ok(&e->tx, "send") != 0)
			return -1;
		if (__atomic_load_n(e->tx_gone, __ATOMIC_ACQUIRE))
			return -1;
		if (idle(e, &polls) != 0) {
			err("%s died", e->is_child ? "parent" : "child");
			return -1;
		}
	}
	return 0;
}

/* Read up to len bytes, at least one: returns the count, 0 at the end of
 * the stream (eof flag and empty), -1 on error. */
static ssize_t get_some(struct end *e, void *buf, size_t len)
{
	struct iovec iov = { buf, len };
	unsigned polls = 0;
	int gone = 0;
	for (;;) {
		size_t n = shm_ring_read(&e->rx, &iov, 1, 0);
		if (n)
			return (ssize_t)n;
		if (polls >= SPIN_POLLS && ring_ok(&e->rx, "receive") != 0)
			return -1;
		/* shut, then empty: everything written before the shut is in */
		if (__atomic_load_n(e->rx_eof, __ATOMIC_ACQUIRE) &&
		    shm_ring_used(&e->rx) == 0)
			return 0;
		if (gone) { /* and nothing came after it went */
			err("%s died", e->is_child ? "parent" : "child");
			return -1;
		}
		gone = idle(e, &polls) != 0;
	}
}

/* Read exactly len bytes: len, 0 at the end before the first byte, -1 on
 * error or an end in the middle. */
static ssize_t get_all(struct end *e, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = get_some(e, (char *)buf + got, len - got);
		if (n < 0)
			return -1;
		if (n == 0) {
			if (got == 0)
				return 0;
			err("stream ended inside a message");
			return -1;
		}
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void shut_tx(struct end *e)
{
	__atomic_store_n(e->tx_eof, 1, __ATOMIC_RELEASE);
}

static void shut_rx(struct end *e)
{
	__atomic_store_n(e->rx_gone, 1, __ATOMIC_RELEASE);
}

/* ---- child: the server --------------------------------------------------- */

static int serve_pingpong(struct end *e, uint32_t size, uint32_t think)
{
	char *buf = malloc(size);
	if (!buf) {
		err("child: out of memory");
		return -1;
	}
	int rc = 0;
	for (;;) {
		ssize_t n = get_all(e, buf, size);
		if (n == 0)
			break;
		if (n > 0)
			think_us(think);
		if (n < 0 || put_all(e, buf, size) != 0) {
			rc = -1;
			break;
		}
	}
	free(buf);
	return rc;
}

/* Count what arrives and check the sequence number in the first
 * min(size, 8) bytes of every message, across any read boundaries. */
static int serve_stream(struct end *e, uint32_t size)
{
	uint8_t *buf = malloc(READ_BUF);
	if (!buf) {
		err("child: out of memory");
		return -1;
	}
	size_t k = size < sizeof(uint64_t) ? size : sizeof(uint64_t);
	uint64_t total = 0, seq = 0, status = 0;
	uint32_t off = 0; /* position inside the current message */
	for (;;) {
		ssize_t n = get_some(e, buf, READ_BUF);
		if (n == 0)
			break;
		if (n < 0) {
			status = 2;
			break;
		}
		total += (uint64_t)n;
		for (size_t i = 0; i < (size_t)n;) {
			if (off < k) {
				uint8_t want = (uint8_t)(seq >> (8 * off)); /* little-endian */
				if (buf[i] != want) {
					err("stream: data mismatch in message %" PRIu64
					    " at byte %u", seq, off);
					status = 1;
					break;
				}
				i++;
				off++;
			} else {
				size_t skip = size - off;
				if (skip > (size_t)n - i)
					skip = (size_t)n - i;
				i += skip;
				off += (uint32_t)skip;
			}
			if (off == size) {
				off = 0;
				seq++;
			}
		}
		if (status)
			break;
	}
	if (status == 0 && off != 0) {
		err("stream: ended inside message %" PRIu64, seq);
		status = 1;
	}
	free(buf);
	if (status)
		shut_rx(e); /* the writer stops instead of waiting for space */
	uint64_t reply[2] = { total, status };
	if (put_all(e, reply, sizeof(reply)) != 0)
		return -1;
	return status ? -1 : 0;
}

/* ---- parent: the client -------------------------------------------------- */



/* One round trip; 0 or -1.  The first 8 bytes carry seq. */
static int round_trip(struct end *e, char *out, char *in, uint32_t size, uint64_t seq)
{
	size_t k = size < sizeof(seq) ? size : sizeof(seq);
	memcpy(out, &seq, k);
	if (put_all(e, out, size) != 0)
		return -1;
	if (get_all(e, in, size) <= 0) {
		err("pingpong: no echo for message %" PRIu64, seq);
		return -1;
	}
	if (memcmp(in, out, k) != 0 ||
	    memcmp(in + size - k, out + size - k, k) != 0) {
		err("pingpong: echo mismatch at message %" PRIu64, seq);
		return -1;
	}
	return 0;
}

static int client_pingpong(struct end *e, uint32_t size, uint64_t iters,
			   double duration, uint64_t warmup, int cdf)
{
	if (duration > 0) {
		/* at most ten round trips per microsecond, at most 32M samples
		 * (128 MiB): a longer run ends when they are taken */
		double c = duration * 1e7;
		iters = c > (double)(1u << 25) ? 1u << 25 : (uint64_t)c + 1;
	}
	char *out = malloc(size), *in = malloc(size);
	uint32_t *rtt = malloc(iters * sizeof(*rtt));
	if (!out || !in || !rtt) {
		err("out of memory (%" PRIu64 " samples)", iters);
		free(out);
		free(in);
		free(rtt);
		return -1;
	}
	memset(out, 0xa5, size);
	memset(in, 0, size);
	memset(rtt, 0, iters * sizeof(*rtt)); /* fault the pages in now */

	int rc = 0;
	uint64_t seq = 0, n = 0;
	for (uint64_t i = 0; i < warmup && rc == 0; i++)
		rc = round_trip(e, out, in, size, seq++);
	uint64_t t0 = now_ns(),
		 deadline = duration > 0 ? t0 + (uint64_t)(duration * 1e9) : 0;
	while (rc == 0 && n < iters) {
		rc = round_trip(e, out, in, size, seq++);
		uint64_t t1 = now_ns(), d = t1 - t0;
		rtt[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		if (deadline && t1 >= deadline)
			break;
		t0 = t1;
	}
	shut_tx(e); /* the child sees the end and exits */
	if (rc == 0 && n > 0)
		print_pingpong(size, rtt, n, cdf);
	free(out);
	free(in);
	free(rtt);
	return rc;
}

static int client_stream(struct end *e, uint32_t size, uint64_t iters,
			 double duration)
{
	char *buf = malloc(size);
	if (!buf) {
		err("out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (char)(i * 131u + 7u);
	size_t k = size < sizeof(uint64_t) ? size : sizeof(uint64_t);
	/* small messages: look at the clock every few writes only */
	uint64_t every = size >= 4096 ? 1 : 4096 / size;

	uint64_t sent = 0, writes = 0;
	uint64_t start = now_ns(),
		 deadline = duration > 0 ? start + (uint64_t)(duration * 1e9) : 0;
	int rc = 0;
	for (;;) {
		memcpy(buf, &writes, k); /* the sequence number */
		if (put_all(e, buf, size) != 0) {
			rc = -1;
			break;
		}
		sent += size;
		writes++;
		if (deadline ? writes % every == 0 && now_ns() >= deadline
			     : writes >= iters)
			break;
	}
	free(buf);
	shut_tx(e);
	uint64_t reply[2];
	ssize_t n = get_all(e, reply, sizeof(reply));
	uint64_t end = now_ns();
	if (n <= 0) {
		err("stream: no byte count from the child");
		return -1;
	}
	if (reply[1] != 0) {
		err("stream: the reader found bad data");
		return -1;
	}
	if (rc != 0)
		return rc;
	if (reply[0] != sent) {
		err("stream: sent %" PRIu64 " bytes, child received %" PRIu64,
		    sent, reply[0]);
		return -1;
	}
	double secs = (double)(end - start) / 1e9;
	printf("stream size=%u bytes=%" PRIu64 " seconds=%.6f gbps=%.4f MBps=%.2f\n",
	       size, reply[0], secs, (double)reply[0] * 8 / 1e9 / secs,
	       (double)reply[0] / 1e6 / secs);
	return 0;
}

/* An idle pair (see the top): the parent waits for a message that does not
 * come, the child for the next one (serve_pingpong). */
static int client_idle(struct end *e, double duration)
{
	char out[64], in[64];
	memset(out, 0xa5, sizeof(out));
	if (round_trip(e, out, in, sizeof(out), 0) != 0)
		return -1;
	int64_t self0 = proc_cpu_ns(0), peer0 = proc_cpu_ns(e->peer);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(duration * 1e9), t1;
	unsigned polls = 0;
	while ((t1 = now_ns()) < end) {
		if (shm_ring_used(&e->rx)) {
			err("idle: the child sent something");
			return -1;
		}
		if (idle(e, &polls) != 0) {
			err("child died");
			return -1;
		}
	}
	int64_t self1 = proc_cpu_ns(0), peer1 = proc_cpu_ns(e->peer);
	shut_tx(e);
	if (self0 < 0 || peer0 < 0 || self1 < 0 || peer1 < 0) {
		err("idle: no CPU-time clock for the child");
		return -1;
	}
	printf("idle seconds=%.6f self_cpu_us=%.3f peer_cpu_us=%.3f\n", (double)(t1 - t0) / 1e9,
	       (double)(self1 - self0) / 1e3, (double)(peer1 - peer0) / 1e3);
	return 0;
}

/* ---- argument parsing --------------------------------------------------- */


static int parse_cpus(const char *s, int cpu[2])
{
	uint64_t a, b;
	const char *comma = strchr(s, ',');
	char first[32];
	if (!comma || (size_t)(comma - s) >= sizeof(first))
		return -1;
	memcpy(first, s, (size_t)(comma - s));
	first[comma - s] = 0;
	if (parse_u64(first, &a, 0) || parse_u64(comma + 1, &b, 0) ||
	    a >= CPU_SETSIZE || b >= CPU_SETSIZE)
		return -1;
	cpu[0] = (int)a;
	cpu[1] = (int)b;
	return 0;
}

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		err("pin to CPU %d: %s", cpu, strerror(errno));
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " pingpong [--size BYTES] (--duration SEC | --iters N)\n"
		"                       [--warmup N] [--ring BYTES] [--cpu A,B] [--cdf]\n"
		"       " PROG " stream [--size BYTES] (--duration SEC | --iters N)\n"
		"                       [--ring BYTES] [--cpu A,B]\n"
		"       " PROG " idle --duration SEC [--ring BYTES] [--cpu A,B]\n"
		"each also [--start-at NS]; pingpong also [--think US] (the server computes\n"
		"US microseconds per message before it answers)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "pingpong") && strcmp(argv[1], "stream") &&
			 strcmp(argv[1], "idle"))) {
		int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
		usage(help ? stdout : stderr);
		return help ? 0 : 2;
	}
	/* the child of an idle pair echoes, as in a ping-pong */
	int is_idle = !strcmp(argv[1], "idle"), pp = is_idle || !strcmp(argv[1], "pingpong");
	argc--;
	argv++;

	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "ring", required_argument, NULL, 'r' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "cdf", no_argument, NULL, 'f' },
		{ "start-at", required_argument, NULL, 'S' },
		{ "think", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t think = 0;
	uint64_t size = 0, iters = 0, warmup = 1000, ring = 1u << 20, start_at = 0;
	double duration = 0;
	int have_iters = 0, cpu[2] = { -1, -1 }, cdf = 0, o;
	char *end;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			if (parse_u64(optarg, &size, 1) || !size || size > MAX_SIZE) {
				err("--size: expected 1..%u bytes (k/M suffixes), got '%s'",
				    MAX_SIZE, optarg);
				return 2;
			}
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || end == optarg || !(duration > 0) || duration > 3600) {
				err("--duration: expected seconds in (0, 3600], got '%s'",
				    optarg);
				return 2;
			}
			break;
		case 'n':
			if (parse_u64(optarg, &iters, 1) || !iters || iters > 1000000000u) {
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
		case 'r':
			if (parse_u64(optarg, &ring, 1) || ring < MIN_RING || ring > MAX_RING ||
			    (ring & (ring - 1))) {
				err("--ring: expected a power of two in %u..%u bytes, got '%s'",
				    MIN_RING, MAX_RING, optarg);
				return 2;
			}
			break;
		case 'c':
			if (parse_cpus(optarg, cpu)) {
				err("--cpu: expected two CPU numbers A,B, got '%s'", optarg);
				return 2;
			}
			break;
		case 'f':
			cdf = 1;
			break;
		case 'S':
			if (parse_start_at(PROG, optarg, &start_at))
				return 2;
			break;
		case 'T':
			if (parse_u64(optarg, &think, 0) || think > 1000000) {
				err("--think: expected 0..1000000 microseconds, got '%s'", optarg);
				return 2;
			}
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (have_iters && duration > 0) {
		err("--duration and --iters exclude each other");
		return 2;
	}
	if (is_idle && (have_iters || !(duration > 0))) {
		err("idle: --duration SEC says how long the pair stays idle");
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

	struct shared *sh = map_rings(ring);
	if (!sh)
		return 1;
	fflush(stdout);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		err("fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct end e;
		end_init(&e, sh, ring, 1, parent);
		if (getppid() != parent || (cpu[1] >= 0 && pin(cpu[1]) != 0)) {
			shut_rx(&e);
			shut_tx(&e);
			_exit(1);
		}
		__atomic_store_n(&sh->child_ready, 1, __ATOMIC_RELEASE);
		sleep_until_ns(start_at); /* not polling while the others start */
		int rc = pp ? serve_pingpong(&e, (uint32_t)size, (uint32_t)think)
			    : serve_stream(&e, (uint32_t)size);
		_exit(rc ? 1 : 0);
	}

	struct end e;
	end_init(&e, sh, ring, 0, pid);
	int rc = cpu[0] >= 0 ? pin(cpu[0]) : 0;
	/* start when the child is in place (pinned, polling) */
	unsigned polls = 0;
	while (rc == 0 && !__atomic_load_n(&sh->child_ready, __ATOMIC_ACQUIRE)) {
		if (idle(&e, &polls) != 0) {
			err("child died before it started");
			rc = -1;
		}
	}
	sleep_until_ns(start_at);
	if (rc == 0 && is_idle)
		rc = client_idle(&e, duration);
	else if (rc == 0)
		rc = pp ? client_pingpong(&e, (uint32_t)size, iters, duration, warmup, cdf)
			: client_stream(&e, (uint32_t)size, iters, duration);
	else
		shut_tx(&e);
	{
		int st = e.status;
		if (rc != 0) /* the child may be waiting for bytes that never come */
			shut_rx(&e);
		while (!e.reaped && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (rc == 0)
				err("child failed (%s %d)",
				    WIFEXITED(st) ? "exit" : "signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			rc = -1;
		}
	}
	munmap(sh, DATA_OFF + 2 * (size_t)ring);
	if (fflush(stdout) != 0) {
		err("stdout: %s", strerror(errno));
		rc = -1;
	}
	return rc ? 1 : 0;
}
