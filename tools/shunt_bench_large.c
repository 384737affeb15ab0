/* shunt bench --large: streams of large writes (256 KiB, 1 MiB, 8 MiB) and
 * the limits they are judged against, in one run.
 *
 * Limits, measured in this process: memcpy of 1 MiB chunks in cache (1 MiB
 * buffers) and beyond it (128 MiB), and process_vm_readv (Cross Memory
 * Attach, shm's single copy) from a child's memory, at each write size and
 * beyond the cache.  Streams, one client and one server process a run
 * (shunt-tcpbench, shunt-ringbench): the raw two-copy ring, kernel TCP, and
 * TCP under shunt on shm as configured by default, and with single copy
 * from 256 KiB (cma_min=256k); the columns take turns in an order that rotates with the
 * rounds.  CPU per MB is both processes' (their rusage), over the bytes the
 * reader counted.  Then the targets for the 1 MiB and 8 MiB streams:
 * shunt-shm at least the higher of 0.9x the raw ring and 0.8x the single
 * copy's rate, at most 0.6x the raw ring's CPU per MB, at least 5x kernel
 * TCP.  Informative: the exit status says only whether a run failed. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "shunt_bench.h"
#include "shunt_child.h"

enum { LC_RING, LC_TCP, LC_SHM, LC_SHM_CMA, LC_COUNT };
static const char *const lc_name[LC_COUNT] = {"raw ring", "kernel TCP", "shunt-shm",
					      "shm, cma_min=256k"};
static const unsigned lsize[] = {256u << 10, 1u << 20, 8u << 20};
#define NLSIZE (sizeof lsize / sizeof *lsize)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double loadavg(void)
{
	double l = NAN;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = NAN;
		fclose(f);
	}
	return l;
}

/* GB/s of memcpy in chunks of chunk bytes over buffers of span bytes. */
static double memcpy_rate(size_t chunk, size_t span, double secs)
{
	char *s = malloc(span), *d = malloc(span);
	if (!s || !d) {
		free(s);
		free(d);
		return NAN;
	}
	memset(s, 1, span);
	memset(d, 2, span);
	double t0 = now_s(), t;
	size_t off = 0, bytes = 0;
	do {
		for (int i = 0; i < 16; i++) {
			memcpy(d + off, s + off, chunk);
			__asm__ __volatile__("" ::"r"(d) : "memory");
			bytes += chunk;
			off = off + chunk >= span ? 0 : off + chunk;
		}
	} while ((t = now_s()) - t0 < secs);
	free(s);
	free(d);
	return (double)bytes / (t - t0) / 1e9;
}

/* GB/s of process_vm_readv in chunks of chunk bytes from span bytes of a
 * child's memory into as many of ours; *cpu_us_mb: this process's CPU per
 * MB meanwhile. */
static double cma_rate(size_t chunk, size_t span, double secs, double *cpu_us_mb)
{
	*cpu_us_mb = NAN;
	char *s = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *d = malloc(span);
	int p[2];
	if (s == MAP_FAILED || !d || pipe(p)) {
		free(d);
		return NAN;
	}
	pid_t pid = fork();
	if (pid == 0) {
		memset(s, 1, span); /* its own pages */
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause(); /* until the parent is done with it (SIGKILL) */
	}
	double rate = NAN;
	char c;
	close(p[1]);
	/* Touched after the fork: not pages shared with the child, which
	 * the first copy into them would fault apart one by one. */
	memset(d, 2, span);
	if (pid > 0 && read(p[0], &c, 1) == 1) {
		struct timespec c0, c1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		double t0 = now_s(), t;
		size_t off = 0, bytes = 0;
		int ok = 1;
		do {
			for (int i = 0; i < 4 && ok; i++) {
				struct iovec l = {d + off, chunk}, r = {s + off, chunk};
				ok = process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)chunk;
				bytes += chunk;
				off = off + chunk >= span ? 0 : off + chunk;
			}
		} while (ok && (t = now_s()) - t0 < secs);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		if (ok) {
			rate = (double)bytes / (t - t0) / 1e9;
			double cpu = (double)(c1.tv_sec - c0.tv_sec) * 1e6 +
				     (double)(c1.tv_nsec - c0.tv_nsec) / 1e3;
			*cpu_us_mb = cpu / ((double)bytes / 1e6);
		} else {
			fprintf(stderr, "shunt bench: process_vm_readv: %s\n", strerror(errno));
		}
	}
	close(p[0]);
	if (pid > 0)
		kill(pid, SIGKILL);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	munmap(s, span);
	free(d);
	return rate;
}

/* A line "KEY=number" of text: the number, or NAN. */
static double field_of(const char *text, const char *key)
{
	const char *p = text ? strstr(text, key) : NULL;
	return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* The port a server printed ("listening PORT"), waited for up to 10 s. */
static int read_port(int fd)
{
	char buf[256];
	size_t n = 0;
	double t0 = now_s();
	while (n < sizeof buf - 1 && now_s() - t0 < 10) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
		char *l = strstr(buf, "listening ");
		if (l && strchr(l, '\n'))
			return atoi(l + 10);
	}
	return -1;
}

/* One stream run of column lc with writes of size bytes: Gbit/s and CPU
 * per MB (both processes), or -1. */
static int run_one(struct bench *b, int lc, unsigned size, double *gbps, double *cpu_mb)
{
	char dur[32], sz[32], port[16], opts[256];
	snprintf(dur, sizeof dur, "%g", b->o.duration);
	snprintf(sz, sizeof sz, "%u", size);
	snprintf(opts, sizeof opts, "rundir=%s%s", b->rundir, lc == LC_SHM_CMA ? ",cma_min=256k" : "");
	int64_t c0 = bench_children_cpu_ns();
	int out = child_tmpfile();
	struct child_opts co = CHILD_OPTS_INIT;
	co.out_fd = out;
	co.err_fd = b->o.verbose ? -2 : -1;
	co.new_group = 1;
	pid_t srv = 0;
	int rc = -1;
	if (lc == LC_RING) {
		char *argv[] = {b->ringbench, "stream", "--size", sz, "--duration", dur, NULL};
		pid_t cl = child_start(argv, &co);
		int st;
		if (cl > 0 && child_wait(cl, 120000, &st) == 0 && WIFEXITED(st) && !WEXITSTATUS(st))
			rc = 0;
		else if (cl > 0)
			child_stop(cl, 1, 1000);
	} else {
		int p[2];
		if (pipe(p))
			goto out;
		struct child_opts so = co;
		so.out_fd = p[1];
		char *plain[] = {b->tcpbench, "server", "--port", "0", "--once", NULL};
		char *shunt[] = {(char *)child_self_exe(), "run", "--transport", "shm", "--options",
				 opts, "--", b->tcpbench, "server", "--port", "0", "--once", NULL};
		srv = child_start(lc == LC_TCP ? plain : shunt, &so);
		close(p[1]);
		int pt = srv > 0 ? read_port(p[0]) : -1;
		close(p[0]);
		if (pt <= 0)
			goto out;
		snprintf(port, sizeof port, "%d", pt);
		char *cplain[] = {b->tcpbench, "client", "--host", "127.0.0.1", "--port", port,
				  "--mode", "stream", "--size", sz, "--duration", dur, NULL};
		char *cshunt[] = {(char *)child_self_exe(), "run", "--transport", "shm", "--options",
				  opts, "--", b->tcpbench, "client", "--host", "127.0.0.1", "--port",
				  port, "--mode", "stream", "--size", sz, "--duration", dur, NULL};
		pid_t cl = child_start(lc == LC_TCP ? cplain : cshunt, &co);
		int st, sst;
		if (cl > 0 && child_wait(cl, 120000, &st) == 0 && WIFEXITED(st) && !WEXITSTATUS(st) &&
		    child_wait(srv, 30000, &sst) == 0) {
			srv = 0;
			rc = 0;
		} else if (cl > 0) {
			child_stop(cl, 1, 1000);
		}
	}
out:
	if (srv > 0)
		child_stop(srv, 1, 1000);
	int64_t c1 = bench_children_cpu_ns();
	char *text = child_slurp(out, NULL);
	close(out);
	double bytes = field_of(text, " bytes=");
	*gbps = field_of(text, " gbps=");
	if (rc == 0 && bytes > 0 && *gbps > 0) {
		*cpu_mb = (double)(c1 - c0) / 1e3 / (bytes / 1e6);
	} else {
		fprintf(stderr, "shunt bench: --large: %s, %u B writes: the run failed%s%s\n",
			lc_name[lc], size, text ? ": " : "", text ? text : "");
		rc = -1;
	}
	free(text);
	return rc;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[BENCH_MAX_ROUNDS];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			s[k++] = v[i];
	if (!k)
		return NAN;
	qsort(s, (size_t)k, sizeof *s, cmp_d);
	return k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
}

static void target(const char *what, double value, double limit, int at_most, const char *unit)
{
	const char *st = isnan(value) || isnan(limit) ? "not checked"
			 : (at_most ? value <= limit : value >= limit) ? "met"
								       : "NOT MET";
	printf("  %-58s %9.2f %s %-9.2f %-5s %s\n", what, value, at_most ? "<=" : ">=", limit,
	       unit, st);
}

int bench_large(struct bench *b)
{
	const struct bench_opts *o = &b->o;
	int failed = 0;
	if (child_rundir(b->rundir, sizeof b->rundir, "large") != 0)
		return 1;
	double load0 = loadavg();
	double secs = o->duration < 0.3 ? o->duration : 0.3;
	/* The limits. */
	double mc_in = memcpy_rate(1u << 20, 1u << 20, secs);
	double mc_out = memcpy_rate(1u << 20, 128u << 20, secs);
	double cma[NLSIZE], cma_cpu[NLSIZE], cma_out_cpu;
	for (size_t s = 0; s < NLSIZE; s++)
		cma[s] = cma_rate(lsize[s], lsize[s], secs, &cma_cpu[s]);
	double cma_out = cma_rate(1u << 20, 128u << 20, secs, &cma_out_cpu);
	/* The streams, rounds interleaved. */
	double g[NLSIZE][LC_COUNT][BENCH_MAX_ROUNDS], c[NLSIZE][LC_COUNT][BENCH_MAX_ROUNDS];
	for (int r = 0; r < o->rounds; r++)
		for (size_t s = 0; s < NLSIZE; s++)
			for (int k = 0; k < LC_COUNT; k++) {
				int lc = (k + r + (int)s) % LC_COUNT;
				g[s][lc][r] = c[s][lc][r] = NAN;
				if (run_one(b, lc, lsize[s], &g[s][lc][r], &c[s][lc][r]) != 0) {
					g[s][lc][r] = c[s][lc][r] = NAN;
					failed = 1;
				}
			}
	double load1 = loadavg();
	child_rmtree(b->rundir);

	printf("shunt bench --large: %s\n", b->machine);
	printf("load average (1 min): %.2f at the start, %.2f at the end; %d CPUs usable; "
	       "not pinned; %d rounds of %g s\n\n",
	       load0, load1, b->ncpus, o->rounds, o->duration);
	printf("limits (one process, 1 MiB chunks unless said)\n");
	printf("  %-44s %8.2f GB/s  (%.1f Gbit/s)\n", "memcpy, in cache (1 MiB buffers)", mc_in,
	       mc_in * 8);
	printf("  %-44s %8.2f GB/s  (%.1f Gbit/s)\n", "memcpy, beyond cache (128 MiB)", mc_out,
	       mc_out * 8);
	for (size_t s = 0; s < NLSIZE; s++) {
		char l[80];
		snprintf(l, sizeof l, "process_vm_readv, %u KiB chunks, in place", lsize[s] >> 10);
		printf("  %-44s %8.2f GB/s  (%.1f Gbit/s, %.0f us CPU per MB)\n", l, cma[s],
		       cma[s] * 8, cma_cpu[s]);
	}
	printf("  %-44s %8.2f GB/s  (%.1f Gbit/s, %.0f us CPU per MB)\n\n",
	       "process_vm_readv, beyond cache (128 MiB)", cma_out, cma_out * 8, cma_out_cpu);
	printf("%-16s", "stream");
	for (int k = 0; k < LC_COUNT; k++)
		printf(" %22s", lc_name[k]);
	printf("\n%-16s", "");
	for (int k = 0; k < LC_COUNT; k++)
		printf(" %22s", "Gbit/s  us CPU/MB");
	printf("\n");
	double mg[NLSIZE][LC_COUNT], mcpu[NLSIZE][LC_COUNT];
	for (size_t s = 0; s < NLSIZE; s++) {
		char l[32];
		snprintf(l, sizeof l, "%u KiB writes", lsize[s] >> 10);
		printf("%-16s", l);
		for (int k = 0; k < LC_COUNT; k++) {
			mg[s][k] = median(g[s][k], o->rounds);
			mcpu[s][k] = median(c[s][k], o->rounds);
			printf(" %13.1f %8.0f", mg[s][k], mcpu[s][k]);
		}
		printf("\n");
	}
	printf("\ntargets (medians; shunt-shm against the same run's limits)\n");
	for (size_t s = 1; s < NLSIZE; s++) {
		char w[128];
		double ring = mg[s][LC_RING], shm = mg[s][LC_SHM];
		double lim = fmax(0.9 * ring, 0.8 * cma[s] * 8);
		snprintf(w, sizeof w, "%u KiB stream, Gbit/s >= max(0.9x ring, 0.8x CMA rate)",
			 lsize[s] >> 10);
		target(w, shm, lim, 0, "Gbit/s");
		snprintf(w, sizeof w, "%u KiB stream, CPU per MB <= 0.6x the raw ring's",
			 lsize[s] >> 10);
		target(w, mcpu[s][LC_SHM], 0.6 * mcpu[s][LC_RING], 1, "us/MB");
		snprintf(w, sizeof w, "%u KiB stream, >= 5x kernel TCP", lsize[s] >> 10);
		target(w, shm, 5 * mg[s][LC_TCP], 0, "Gbit/s");
	}
	return failed ? 1 : 0;
}
