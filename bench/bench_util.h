/* Helpers shared by the benchmark programs (shunt-tcpbench, shunt-ringbench),
 * so both report figures the same way. */
#ifndef SHUNT_BENCH_UTIL_H
#define SHUNT_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* A decimal count; with suffixes, k/m/g (binary, optional "iB"/"B").
 * 0 or -1. */
int parse_u64(const char *s, uint64_t *out, int suffixes);

/* qsort comparator for uint32_t. */
int cmp_u32(const void *a, const void *b);

/* Nearest-rank percentile p (0..1) of sorted nanoseconds v[0..n), in us. */
double pct_us(const uint32_t *v, size_t n, double p);

#endif
