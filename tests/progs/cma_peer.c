/* cma_peer: large reads and writes between two processes of one program
 * (the parent accepts, a forked child connects), for shm's single copy
 * (shm/shm_cma.c) and every way it falls back.
 *
 *   cma_peer mixed [--bytes N]   both directions in turn: writes of sizes
 *                                across the single-copy threshold (1 B to
 *                                3 MiB), reads of other such sizes, every
 *                                byte checked
 *   cma_peer kill                the writer is SIGKILLed while it copies
 *                                into the reader's buffer: the reader gets
 *                                the bytes before that write, then EOF
 *   cma_peer fault               the reader's buffer is half unmapped, then
 *                                not mapped at all: the read returns the
 *                                mapped part, then fails with EFAULT, as
 *                                the kernel's would; every byte arrives
 *   cma_peer noptrace            the reader is not dumpable (no ptrace
 *                                right for a peer without CAP_SYS_PTRACE):
 *                                every byte arrives through the ring
 *   cma_peer posted [--hold F]   as noptrace, dumpable: every write finds
 *                                the reader's buffer posted, 8 x 2 MiB;
 *                                with --hold, the reader then creates F.ready
 *                                and keeps the connection until F.go exists
 *                                (for `shunt stat`)
 *
 * The reader of kill, fault and noptrace reads while the writer waits: the
 * writer sends only once the reader's thread sleeps in its read (its
 * /proc state, a futex wait), so a posted buffer is there to be found.
 * Prints "PASS cma_peer MODE ..." and exits 0, or a FAIL line. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEED_C2S 31
#define SEED_S2C 32
#define MIB (1u << 20)

static const size_t wsizes[] = {1, 100, 16384, 65536, 262143, 262144, 262145, 1048576,
				3 * MIB + 17, 524288, 7, 2 * MIB};
static const size_t rsizes[] = {4 * MIB, 300000, 1 * MIB, 65536, 262144, 7, 2 * MIB + 3,
				8 * MIB};

static void send_stream(int fd, uint64_t seed, uint64_t total)
{
	char *buf = malloc(4 * MIB);
	if (!buf)
		fail("out of memory");
	uint64_t off = 0;
	for (size_t i = 0; off < total; i++) {
		size_t n = wsizes[i % (sizeof wsizes / sizeof *wsizes)];
		if (n > total - off)
			n = (size_t)(total - off);
		gen_bytes(seed, off, buf, n);
		if (write_full(fd, buf, n) != (ssize_t)n)
			fail_errno("write at %llu", (unsigned long long)off);
		off += n;
	}
	free(buf);
}

static void recv_stream(int fd, uint64_t seed, uint64_t total)
{
	char *buf = malloc(8 * MIB);
	if (!buf)
		fail("out of memory");
	uint64_t off = 0;
	for (size_t i = 0; off < total; i++) {
		size_t n = rsizes[i % (sizeof rsizes / sizeof *rsizes)];
		ssize_t r = i & 1 ? recv(fd, buf, n, 0) : read(fd, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_errno("read at %llu of %llu: %zd", (unsigned long long)off,
				   (unsigned long long)total, r);
		long long bad = gen_check(seed, off, buf, (size_t)r);
		if (bad >= 0)
			fail("byte %llu wrong", (unsigned long long)off + (unsigned long long)bad);
		off += (uint64_t)r;
	}
	free(buf);
}

static void read_proc(const char *path, char *b, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, b, len - 1);
	if (fd >= 0)
		close(fd);
	b[n > 0 ? n : 0] = 0;
}

/* Wait until the main thread of process pid sleeps (its state S, and in a
 * futex wait where its wchan may be read: not of a process that is not
 * dumpable): the reader, told to go on, reads, and its read waits with its
 * buffer posted. */
static void wait_futex_sleep(pid_t pid)
{
	char path[128], b[512];
	for (int i = 0; i < 600000; i++) {
		snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
		read_proc(path, b, sizeof b);
		const char *p = strrchr(b, ')');
		if (p && p[1] == ' ' && p[2] == 'S') {
			snprintf(path, sizeof path, "/proc/%d/task/%d/wchan", (int)pid, (int)pid);
			read_proc(path, b, sizeof b);
			if (strstr(b, "futex") || !strcmp(b, "0") || !b[0])
				return;
		}
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	fail("the reader never slept in its read");
}

/* ---- kill ---------------------------------------------------------------- */

#define KILL_PREFIX 1000u
#define KILL_BIG (256u * MIB)

static volatile unsigned char *watched;
static pid_t victim;

/* The first byte of the copy lands in the buffer: kill the writer now,
 * long before a 512 MiB copy can end. */
static void *watch(void *arg)
{
	(void)arg;
	const volatile uint64_t *w = (const volatile uint64_t *)watched;
	while (w[0] == 0xA5A5A5A5A5A5A5A5ull && w[1] == 0xA5A5A5A5A5A5A5A5ull)
		;
	kill(victim, SIGKILL);
	return NULL;
}

static int run_kill(int c, int s, pid_t child, int *ctl)
{
	(void)c;
	char pre[KILL_PREFIX];
	if (read_full(s, pre, sizeof pre) != (ssize_t)sizeof pre || gen_check(SEED_C2S, 0, pre, sizeof pre) >= 0)
		fail("prefix wrong");
	unsigned char *big = mmap(NULL, KILL_BIG, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (big == MAP_FAILED)
		fail_errno("mmap");
	memset(big, 0xA5, KILL_BIG);
	watched = big;
	victim = child;
	pthread_t t;
	if (pthread_create(&t, NULL, watch, NULL))
		fail("pthread_create");
	if (write(ctl[1], "g", 1) != 1)
		fail_errno("go");
	uint64_t got = 0;
	for (;;) {
		ssize_t r = recv(s, big, KILL_BIG, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == ECONNRESET)
			break;
		if (r < 0)
			fail_errno("recv after the prefix");
		if (r == 0)
			break;
		if (gen_check(SEED_C2S, KILL_PREFIX + got, big, (size_t)r) >= 0)
			fail("bytes after the prefix wrong");
		got += (uint64_t)r;
	}
	pthread_join(t, NULL);
	int st;
	waitpid(child, &st, 0);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		fail("the writer was not killed (status %d)", st);
	if (got == KILL_BIG)
		fail("the whole write arrived: the kill came after the copy");
	printf("PASS cma_peer kill after=%llu\n", (unsigned long long)got);
	return 0;
}

static void child_kill(int c, int *ctl)
{
	char *buf = malloc(KILL_PREFIX + KILL_BIG);
	if (!buf)
		fail("out of memory");
	gen_bytes(SEED_C2S, 0, buf, KILL_PREFIX + KILL_BIG);
	if (write_full(c, buf, KILL_PREFIX) != KILL_PREFIX)
		fail_errno("prefix");
	char g;
	if (read(ctl[0], &g, 1) != 1)
		fail("no go");
	wait_futex_sleep(getppid());
	write_full(c, buf + KILL_PREFIX, KILL_BIG);
	fail("the write of the killed writer returned");
}

/* ---- fault --------------------------------------------------------------- */

static int run_fault(int c, int s, int *ctl)
{
	(void)c;
	/* Half mapped: the single copy stops at the hole. */
	char *m = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || munmap(m + MIB, MIB))
		fail_errno("mmap");
	if (write(ctl[1], "g", 1) != 1)
		fail_errno("go");
	ssize_t r = recv(s, m, 2 * MIB, 0);
	if (r <= 0 || (size_t)r > MIB)
		fail_errno("read into a half-mapped buffer: %zd", r);
	if (gen_check(SEED_C2S, 0, m, (size_t)r) >= 0)
		fail("half-mapped read wrong");
	uint64_t off = (uint64_t)r;
	char *buf = malloc(8 * MIB);
	/* The rest of the first write (1.5 MiB), read with a good buffer. */
	while (off < 3 * MIB / 2) {
		r = recv(s, buf, 3 * MIB / 2 - off, 0);
		if (r <= 0 || gen_check(SEED_C2S, off, buf, (size_t)r) >= 0)
			fail_errno("rest of the first write");
		off += (uint64_t)r;
	}
	/* Not mapped at all: EFAULT, and the bytes wait. */
	if (munmap(m, MIB))
		fail_errno("munmap");
	if (write(ctl[1], "g", 1) != 1)
		fail_errno("go");
	r = recv(s, m, MIB, 0);
	if (r != -1 || errno != EFAULT)
		fail("read into an unmapped buffer: %zd (%s), not EFAULT", r, strerror(errno));
	uint64_t end = off + MIB;
	while (off < end) {
		r = recv(s, buf, 8 * MIB, 0);
		if (r <= 0 || gen_check(SEED_C2S, off, buf, (size_t)r) >= 0)
			fail_errno("after EFAULT");
		off += (uint64_t)r;
	}
	r = recv(s, buf, 1, 0);
	if (r != 0)
		fail("no EOF after the stream: %zd", r);
	printf("PASS cma_peer fault bytes=%llu\n", (unsigned long long)off);
	return 0;
}

static void child_fault(int c, int *ctl)
{
	char *buf = malloc(3 * MIB);
	gen_bytes(SEED_C2S, 0, buf, 5 * MIB / 2);
	char g;
	if (read(ctl[0], &g, 1) != 1)
		fail("no go");
	wait_futex_sleep(getppid());
	if (write_full(c, buf, 3 * MIB / 2) != 3 * MIB / 2)
		fail_errno("first write");
	if (read(ctl[0], &g, 1) != 1)
		fail("no second go");
	wait_futex_sleep(getppid());
	if (write_full(c, buf + 3 * MIB / 2, MIB) != MIB)
		fail_errno("second write");
	shutdown(c, SHUT_WR);
}

/* ---- noptrace ------------------------------------------------------------ */

#define NOPT_WRITES 8u

static const char *hold;

static int run_noptrace(int c, int s, int *ctl)
{
	(void)c;
	if (c && prctl(PR_SET_DUMPABLE, 0) != 0)
		fail_errno("PR_SET_DUMPABLE");
	char *buf = malloc(4 * MIB);
	uint64_t off = 0;
	for (unsigned i = 0; i < NOPT_WRITES; i++) {
		if (write(ctl[1], "g", 1) != 1)
			fail_errno("go");
		uint64_t end = off + 2 * MIB;
		while (off < end) {
			ssize_t r = recv(s, buf, 4 * MIB, 0);
			if (r <= 0 || gen_check(SEED_C2S, off, buf, (size_t)r) >= 0)
				fail_errno("read at %llu", (unsigned long long)off);
			off += (uint64_t)r;
		}
	}
	if (hold) {
		char f[4096];
		snprintf(f, sizeof f, "%s.ready", hold);
		int fd = open(f, O_WRONLY | O_CREAT, 0644);
		if (fd < 0 || write(fd, "1\n", 2) != 2)
			fail_errno("%s", f);
		close(fd);
		snprintf(f, sizeof f, "%s.go", hold);
		while (access(f, F_OK) != 0) {
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
		}
	}
	printf("PASS cma_peer %s bytes=%llu\n", c ? "noptrace" : "posted", (unsigned long long)off);
	return 0;
}

static void child_noptrace(int c, int *ctl)
{
	char *buf = malloc(2 * MIB);
	for (unsigned i = 0; i < NOPT_WRITES; i++) {
		gen_bytes(SEED_C2S, (uint64_t)i * 2 * MIB, buf, 2 * MIB);
		char g;
		if (read(ctl[0], &g, 1) != 1)
			fail("no go");
		wait_futex_sleep(getppid());
		if (write_full(c, buf, 2 * MIB) != 2 * MIB)
			fail_errno("write %u", i);
	}
}

int main(int argc, char **argv)
{
	prog_name = "cma_peer";
	if (argc < 2)
		fail("usage: cma_peer mixed|kill|fault|noptrace [--bytes N]");
	const char *mode = argv[1];
	uint64_t bytes = 64ull * MIB;
	if (argc == 4 && !strcmp(argv[2], "--bytes"))
		bytes = strtoull(argv[3], NULL, 0);
	if (argc == 4 && !strcmp(argv[2], "--hold"))
		hold = argv[3];
	watchdog(300);
	int port, ctl[2];
	int l = tcp_listen("127.0.0.1", 0, 4, &port);
	if (pipe(ctl))
		fail_errno("pipe");
	pid_t child = fork();
	if (child < 0)
		fail_errno("fork");
	if (child == 0) {
		int c = tcp_connect("127.0.0.1", port);
		if (!strcmp(mode, "mixed")) {
			send_stream(c, SEED_C2S, bytes);
			recv_stream(c, SEED_S2C, bytes);
		} else if (!strcmp(mode, "kill")) {
			child_kill(c, ctl);
		} else if (!strcmp(mode, "fault")) {
			child_fault(c, ctl);
		} else if (!strcmp(mode, "noptrace") || !strcmp(mode, "posted")) {
			child_noptrace(c, ctl);
		}
		close(c);
		_exit(0);
	}
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail_errno("accept");
	int rc;
	if (!strcmp(mode, "mixed")) {
		recv_stream(s, SEED_C2S, bytes);
		send_stream(s, SEED_S2C, bytes);
		int st;
		waitpid(child, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fail("the client failed (status %d)", st);
		printf("PASS cma_peer mixed bytes=%llu\n", (unsigned long long)bytes);
		rc = 0;
	} else if (!strcmp(mode, "kill")) {
		rc = run_kill(-1, s, child, ctl);
	} else if (!strcmp(mode, "fault")) {
		rc = run_fault(-1, s, ctl);
	} else if (!strcmp(mode, "noptrace")) {
		rc = run_noptrace(-1, s, ctl);
	} else if (!strcmp(mode, "posted")) {
		rc = run_noptrace(0, s, ctl);
	} else {
		fail("unknown mode %s", mode);
	}
	if (strcmp(mode, "kill") && strcmp(mode, "mixed")) {
		int st;
		waitpid(child, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fail("the client failed (status %d)", st);
	}
	close(s);
	return rc;
}
