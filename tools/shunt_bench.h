/* shunt bench: shared declarations of its parts.
 *   shunt_bench.c         options, the rounds, the order of the runs
 *   shunt_bench_run.c     the benchmark programs as child processes: the
 *                         servers, one client run, its output, its transport
 *   shunt_bench_report.c  the table (medians, ratios) and the CSV file
 *   shunt_bench_plot.c    the SVG picture: latency CDFs, throughput bars
 *   shunt_bench_netns.c   --netns: two namespaces with their agents, for the
 *                         fabric column (and kernel TCP as its reference) */
#ifndef SHUNT_BENCH_H
#define SHUNT_BENCH_H

#include <stdio.h>
#include <sys/types.h>

#define BENCH_MAX_SIZES 8
#define BENCH_MAX_ROUNDS 100
#define BENCH_CDF_MAX 64

/* The columns, fastest first as the picture shows them. */
enum bench_tp {
	BT_RING,    /* raw shared-memory ring: the limit (shunt-ringbench) */
	BT_UNIX,    /* Unix domain stream socket */
	BT_TCP,     /* kernel TCP over loopback: the reference of the ratios */
	BT_SHM,     /* the TCP benchmark, both ends under shunt: shm */
	BT_FABRIC,  /* the same with transport fabric, when the library has it */
	BT_COUNT
};

/* The measured quantities.  Latencies are per size; the rest not. */
enum bench_metric {
	BM_P50, BM_P90, BM_P99, BM_P999, BM_MAX, /* ping-pong round trip, us */
	BM_GBPS,      /* stream throughput, Gbit/s */
	BM_MSGS,      /* messages per second, a stream of the smallest size */
	BM_CONNS,     /* connections per second (connect + one RTT + close) */
	BM_CONN_P50,  /* one such connection, p50 in us */
	BM_COUNT
};

struct bench_cdf {
	int n;
	double q[BENCH_CDF_MAX], us[BENCH_CDF_MAX];
};

struct bench_opts {
	int rounds;
	double duration;            /* seconds per run */
	unsigned warmup;            /* ping-pong round trips not counted */
	unsigned sizes[BENCH_MAX_SIZES];
	int nsizes;
	unsigned stream_size;
	unsigned connects;          /* most connections per connect run */
	int cpus[2];                /* client, server; -1: not pinned */
	int fabric;                 /* -1 auto (probe), 0 off, 1 required */
	int only;                   /* bit mask of enum bench_tp to run */
	const char *csv, *plot;
	int verbose;
	int netns;                  /* --netns: tcp and fabric across two namespaces */
};

/* --netns: the clients' host (namespace 0) and the servers' (namespace 1). */
#define BENCH_NETNS_CLIENT "198.18.0.1"
#define BENCH_NETNS_SERVER "198.18.0.2"

struct bench {
	struct bench_opts o;
	char tcpbench[4096], ringbench[4096];  /* the programs */
	char rundir[128];                     /* the shunt side's private rundir */
	char machine[512];
	int avail[BT_COUNT];                  /* column measured */
	char why[BT_COUNT][200];              /* not measured, or a warning */
	pid_t server[BT_COUNT];
	pid_t client;                         /* the client running, if any */
	char addr[BT_COUNT][160];             /* port, or Unix socket path */
	double *v;                            /* see BV() */
	struct bench_cdf *cdf;                /* see BCDF() */
	unsigned long long verified[BT_COUNT]; /* shunt runs whose transport was checked */
	/* --netns */
	char ns[2][64];                       /* namespace names, client's and server's */
	char ns_rundir[2][128];               /* each host's rundir */
	int ns_made[2];
	pid_t agent[2];                       /* each host's shuntd */
	int agent_log[2];                     /* its stderr, read until it serves */
};

/* Value of round r (NAN when not measured). */
#define BV(b, tp, m, s, r) \
	((b)->v[((((size_t)(tp) * BM_COUNT + (m)) * BENCH_MAX_SIZES + (s)) * (b)->o.rounds) + (r)])
#define BCDF(b, tp, s, r) \
	((b)->cdf[(((size_t)(tp) * BENCH_MAX_SIZES + (s)) * (b)->o.rounds) + (r)])

extern const char *const bench_tp_name[BT_COUNT];

/* shunt_bench_run.c */
int bench_find_programs(struct bench *b);
int bench_start_servers(struct bench *b);
void bench_stop_servers(struct bench *b);
/* The fabric column: a short run tells whether connections take it. */
void bench_probe_fabric(struct bench *b);
/* One run of one test in round r; results stored in b. */
enum bench_test { BTEST_PINGPONG, BTEST_STREAM, BTEST_MSGS, BTEST_CONNECT };
int bench_run(struct bench *b, enum bench_tp tp, enum bench_test test, int size_idx, int r);

/* shunt_bench_netns.c: 0, or -1 with a message (bench_netns_down cleans up
 * what was made). */
int bench_netns_up(struct bench *b);
void bench_netns_down(struct bench *b);
/* Does column tp cross the namespace pair? */
#define BENCH_CROSS(b, tp) ((b)->o.netns && ((tp) == BT_TCP || (tp) == BT_FABRIC))

/* shunt_bench_report.c */
double bench_median(const struct bench *b, enum bench_tp tp, enum bench_metric m, int s);
void bench_median_cdf(const struct bench *b, enum bench_tp tp, int s, struct bench_cdf *out);
void bench_print_table(const struct bench *b, FILE *f);
int bench_write_csv(const struct bench *b, const char *path);

/* shunt_bench_plot.c */
int bench_write_svg(const struct bench *b, const char *path);

#endif
