/* Helpers shared by the benchmark programs (shunt-tcpbench, shunt-ringbench),
 * so both report figures the same way. */
#ifndef SHUNT_BENCH_UTIL_H
#define SHUNT_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);
/* Compute (spin on the clock) for us microseconds: a server that works
 * out its answer before it sends it (--think). */
void think_us(uint32_t us);

/* --start-at NS of both benchmark programs: CLOCK_MONOTONIC nanoseconds.
 * 0, or -1 with a message on stderr that names prog. */
int parse_start_at(const char *prog, const char *arg, uint64_t *ns);

/* Sleep until CLOCK_MONOTONIC reads ns (at once when that has passed): the
 * common start of clients run at the same time (--start-at). */
void sleep_until_ns(uint64_t ns);

/* CPU time (user + system, every thread, live or exited) process pid has
 * used so far, in ns, from its CPU-time clock (clock_getcpuclockid: ns
 * precision, where /proc/PID/stat counts 10 ms ticks); 0: this process.
 * -1 when there is no such process. */
int64_t proc_cpu_ns(pid_t pid);

/* A decimal count; with suffixes, k/m/g (binary, optional "iB"/"B").
 * 0 or -1. */
int parse_u64(const char *s, uint64_t *out, int suffixes);

/* qsort comparator for uint32_t. */
int cmp_u32(const void *a, const void *b);

/* Nearest-rank percentile p (0..1) of sorted nanoseconds v[0..n), in us. */
double pct_us(const uint32_t *v, size_t n, double p);

/* Median of v[0..n) (sorts v); NAN when n is 0. */
double median_d(double *v, size_t n);

/* The latency distribution of sorted nanoseconds v[0..n) as one line on
 * stdout, for plots (shunt bench --plot):
 *   cdf size=SIZE points=Q:US,Q:US,...
 * Q a cumulative fraction, US its nearest-rank latency; fixed fractions,
 * denser in the tail, the last one the maximum (Q=1). */
void print_cdf(uint32_t size, const uint32_t *v, size_t n);
/* The "pingpong size=... p50_us=..." line both benches print for n round
 * trips of rtt[] nanoseconds (sorted in place), and the CDF line with cdf. */
void print_pingpong(uint32_t size, uint32_t *rtt, uint64_t n, int cdf);

#endif
