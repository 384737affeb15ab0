/* shunt bench: shared declarations of its parts.
 *   shunt_bench.c         options, the rounds, the order of the runs
 *   shunt_bench_metric.c  the vocabulary: columns, placements, measured
 *                         quantities (names, units, which way is better),
 *                         medians and ratios to kernel TCP
 *   shunt_bench_place.c   the placements: checked, set up and undone
 *   shunt_bench_proc.c    process groups seen through /proc: their CPU time
 *                         and their CPUs
 *   shunt_bench_run.c     the benchmark programs as child processes: the
 *                         servers, one run (one client, or one per pair),
 *                         its output, its CPU time, its transport
 *   shunt_bench_verdict.c regressions against kernel TCP, the exit status,
 *                         the targets
 *   shunt_bench_report.c  the table and the CSV file
 *   shunt_bench_plot.c    the SVG picture: latency CDFs, throughput bars
 *   shunt_bench_large.c   --large: streams of large writes against memcpy,
 *                         process_vm_readv and the raw ring
 *   shunt_bench_netns.c   --netns: two namespaces with their agents, for the
 *                         fabric column (and kernel TCP as its reference) */
#ifndef SHUNT_BENCH_H
#define SHUNT_BENCH_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define BENCH_MAX_SIZES 8
#define BENCH_MAX_ROUNDS 100
#define BENCH_MAX_PAIRS 128
#define BENCH_CDF_MAX 64

/* The columns, fastest first as the picture shows them. */
enum bench_tp {
	BT_RING,    /* raw shared-memory ring: the limit (shunt-ringbench) */
	BT_UNIX,    /* Unix domain stream socket */
	BT_TCP,     /* kernel TCP over loopback: the reference of the ratios */
	BT_SHM,     /* the TCP benchmark, both ends under shunt: shm */
	BT_FABRIC,  /* the same with transport fabric, when the library has it */
	BT_SOCKMAP, /* kernel TCP, plain programs, shuntd's sockmap path on */
	BT_COUNT
};

/* Where the scheduler may put the two ends of a pair (docs/PERFORMANCE.md). */
enum bench_place {
	BP_FREE,       /* not pinned, nothing else running: as users run it */
	BP_PINNED,     /* client on one CPU, server on another */
	BP_NEIGHBOUR,  /* not pinned, one CPU-bound busy loop running */
	BP_OVERSUB,    /* N pairs of a column at once, N > CPUs */
	BP_COUNT
};

/* The measured quantities.  Up to BM_CPU_RTT_S they are per ping-pong
 * size, the others not.  CPU: user + system of both ends (_C the client's,
 * _S the server's) per operation. */
enum bench_metric {
	BM_P50, BM_P90, BM_P99, BM_P999, BM_MAX, /* ping-pong round trip, us */
	BM_RTTS,      /* round trips per second */
	BM_CPU_RTT, BM_CPU_RTT_C, BM_CPU_RTT_S,  /* us per round trip */
	BM_GBPS,      /* stream throughput, Gbit/s */
	BM_CPU_MB, BM_CPU_MB_C, BM_CPU_MB_S,     /* us per MB streamed */
	BM_MSGS,      /* messages per second, a stream of the smallest size */
	BM_CPU_MSG, BM_CPU_MSG_C, BM_CPU_MSG_S,  /* ns per message */
	BM_CONNS,     /* connections per second (connect + one RTT + close) */
	BM_CONN_P50,  /* one such connection, p50 in us */
	BM_CPU_CONN, BM_CPU_CONN_C, BM_CPU_CONN_S, /* us per connection */
	BM_IDLE, BM_IDLE_C, BM_IDLE_S, /* idle connection: us of CPU per second */
	BM_COUNT
};
#define BM_PER_SIZE(m) ((m) <= BM_CPU_RTT_S)

struct bench_metric_info {
	const char *key, *unit;
	const char *test;   /* CSV test name */
	int lower_better;
	int judged;         /* a row of the regression check against kernel TCP */
	int shown;          /* a row of the table (the others are in the CSV) */
};
extern const struct bench_metric_info bench_metric[BM_COUNT];

struct bench_cdf {
	int n;
	double q[BENCH_CDF_MAX], us[BENCH_CDF_MAX];
};

struct bench_opts {
	int rounds;
	int confirm;                /* rounds re-run for a suspect row (--confirm) */
	double duration;            /* seconds per run */
	unsigned warmup;            /* ping-pong round trips not counted */
	unsigned sizes[BENCH_MAX_SIZES];
	int nsizes;
	unsigned stream_size;
	unsigned connects;          /* most connections per connect run (per pair) */
	enum bench_place place[BP_COUNT]; /* the placements, in this order */
	int nplace;
	int cpus[2];                /* pinned: client, server; -1: the first two usable */
	int pairs;                  /* oversub: pairs at once; 0: 2 x usable CPUs */
	unsigned think_us;          /* ping-pong: the server computes this per message */
	int fabric;                 /* -1 auto (probe), 0 off, 1 required */
	int only;                   /* bit mask of enum bench_tp to run */
	const char *csv, *plot;
	int verbose;
	int netns;                  /* --netns: tcp and fabric across two namespaces */
	int large;                  /* --large: large-write streams and their limits */
};

/* --netns: the clients' host (namespace 0) and the servers' (namespace 1). */
#define BENCH_NETNS_CLIENT "198.18.0.1"
#define BENCH_NETNS_SERVER "198.18.0.2"

struct bench {
	struct bench_opts o;
	char tcpbench[4096], ringbench[4096];  /* the programs */
	char rundir[128];                     /* the shunt side's private rundir */
	char machine[512];
	double load[2];                       /* 1-minute load average, start and end */
	cpu_set_t all;                        /* the CPUs this run may use */
	int ncpus;                            /* how many */
	int avail[BT_COUNT];                  /* column measured */
	char why[BT_COUNT][200];              /* not measured, or a warning */
	int place_ok[BP_COUNT];               /* placement can be set up here */
	char place_why[BP_COUNT][200];        /* why not, or a remark */
	int nservers;                         /* servers per column: the pairs */
	pid_t server[BT_COUNT][BENCH_MAX_PAIRS];
	char addr[BT_COUNT][BENCH_MAX_PAIRS][160]; /* port, or Unix socket path */
	pid_t client[BENCH_MAX_PAIRS];        /* the clients running, if any */
	pid_t hog;                            /* neighbour: the busy loop */
	double *v;                            /* see BV() */
	struct bench_cdf *cdf;                /* see BCDF() */
	unsigned long long verified[BT_COUNT]; /* shunt runs whose transport was checked */
	/* --netns */
	char ns[2][64];                       /* namespace names, client's and server's */
	char ns_rundir[2][128];               /* each host's rundir */
	int ns_made[2];
	pid_t agent[2];                       /* each host's shuntd */
	int agent_log[2];                     /* its stderr, read until it serves */
	/* the sockmap column */
	char sm_cgroup[300];                  /* its processes' cgroup */
	char sm_bpffs[200];                   /* the bpffs of its shuntd's pins */
	pid_t sm_agent;                       /* its shuntd */
};

/* Rounds kept per figure: the rounds, then the confirmation rounds of a
 * suspect row (round o.rounds + i is confirmation round i). */
#define BENCH_SLOTS(b) ((b)->o.rounds + (b)->o.confirm)
/* Value of round r (NAN when not measured). */
#define BV(b, pl, tp, m, s, r)                                                              \
	((b)->v[(((((size_t)(pl) * BT_COUNT + (tp)) * BM_COUNT + (m)) * BENCH_MAX_SIZES + (s)) * \
		 (size_t)BENCH_SLOTS(b)) + (r)])
#define BCDF(b, pl, tp, s, r)                                                                 \
	((b)->cdf[((((size_t)(pl) * BT_COUNT + (tp)) * BENCH_MAX_SIZES + (s)) *                   \
		   (size_t)BENCH_SLOTS(b)) + (r)])

/* shunt_bench_metric.c */
extern const char *const bench_tp_name[BT_COUNT];   /* "kernel TCP" */
extern const char *const bench_tp_key[BT_COUNT];    /* "tcp", as --only names it */
extern const char *const bench_place_key[BP_COUNT]; /* "free", as --placement names it */
double bench_median(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		    enum bench_metric m, int s);
void bench_median_cdf(const struct bench *b, enum bench_place pl, enum bench_tp tp, int s,
		      struct bench_cdf *out);
/* Median of column tp over kernel TCP's, turned so that > 1 is better
 * (kernel TCP / column for what is better lower); NAN without both. */
double bench_ratio(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		   enum bench_metric m, int s);
/* Index of the smallest ping-pong size (the message-rate size), of size
 * bytes (-1: not among them). */
int bench_smallest(const struct bench *b);
int bench_size_index(const struct bench *b, unsigned bytes);

/* shunt_bench_place.c */
/* Which placements can be set up here (b->place_ok, b->place_why), and
 * the pairs of the oversubscribed one; after the options. */
void bench_place_check(struct bench *b);
/* Before and after the runs of placement pl: 0, or -1 with a message. */
int bench_place_enter(struct bench *b, enum bench_place pl);
void bench_place_leave(struct bench *b, enum bench_place pl);
/* The client's CPU in placement pl (-1: not pinned); pairs run at once. */
int bench_place_client_cpu(const struct bench *b, enum bench_place pl);
int bench_place_pairs(const struct bench *b, enum bench_place pl);
/* "client on CPU 0, server on CPU 1" */
void bench_place_describe(const struct bench *b, enum bench_place pl, char *buf, size_t len);

/* shunt_bench_proc.c */
/* CPU time of this process's children reaped so far (they include what
 * their own waited-for children used), in ns. */
int64_t bench_children_cpu_ns(void);
/* Every thread of every process of group pgid onto the CPUs of set.
 * 0, or -1 with errno. */
int bench_group_pin(pid_t pgid, const cpu_set_t *set);
/* shuntd (next to this shunt) with --config conf, behind the words of
 * prefix (NULL-ended; "ip netns exec NS", or none), in a group of its own;
 * waits up to 10 s for its "serving on".  *pid: the child, or -1 (the
 * caller stops it either way); its log so far in log (always ended), its
 * stderr's pipe in *log_fd (closed here if log_fd is NULL).  0 once it
 * serves, -1 if not (log says why). */
int bench_shuntd_start(char *const prefix[], const char *conf, pid_t *pid, char *log,
		       size_t loglen, int *log_fd);

/* shunt_bench_run.c */
int bench_find_programs(struct bench *b);
int bench_start_servers(struct bench *b);
void bench_stop_servers(struct bench *b);
/* The fabric column: a short run tells whether connections take it. */
void bench_probe_fabric(struct bench *b);
/* One run of one test in placement pl, round r; results stored in b. */
enum bench_test { BTEST_PINGPONG, BTEST_STREAM, BTEST_MSGS, BTEST_CONNECT, BTEST_IDLE };
/* shunt_bench_metric.c: "pingpong", as bench_metric[].test names a test */
extern const char *const bench_test_key[];
int bench_run(struct bench *b, enum bench_place pl, enum bench_tp tp, enum bench_test test,
	      int size_idx, int r);

/* shunt_bench_large.c: the --large run instead of the usual one; the exit
 * status. */
int bench_large(struct bench *b);

/* shunt_bench_netns.c: 0, or -1 with a message (bench_netns_down cleans up
 * what was made). */
int bench_netns_up(struct bench *b);
void bench_netns_down(struct bench *b);
/* shunt_bench_sockmap.c: 0, or -1 with why[BT_SOCKMAP] (bench_sockmap_down
 * cleans up either way; also on a signal). */
int bench_sockmap_up(struct bench *b);
void bench_sockmap_down(struct bench *b);
/* Does column tp cross the namespace pair? */
#define BENCH_CROSS(b, tp) ((b)->o.netns && ((tp) == BT_TCP || (tp) == BT_FABRIC))

/* shunt_bench_verdict.c */
/* How much worse than kernel TCP a row may be before it is a regression. */
#define BENCH_MARGIN 0.05
/* Is col worse than ref (the rounds' figures, NAN for none)?  1 when its
 * median is worse by more than BENCH_MARGIN (as a ratio, > 1 better, below
 * 1 - BENCH_MARGIN) and the ranges of the rounds do not overlap; 0 when
 * not; -1 when a side has no figure. */
int bench_worse(const double *col, int ncol, const double *ref, int nref, int lower_better);
/* One-sided rank test (Mann-Whitney) on fresh rounds: 1 when col is worse
 * than ref (median ratio below 1 - BENCH_MARGIN, and ranked worse with
 * p < BENCH_CONFIRM_P), 0 when not, -1 when a side has no figure. */
#define BENCH_CONFIRM_P 0.05
int bench_worse_confirmed(const double *col, int ncol, const double *ref, int nref,
			  int lower_better);
/* Is column tp judged against kernel TCP in this run (a shunt column,
 * measured, under the same conditions as kernel TCP)? */
int bench_compared(const struct bench *b, enum bench_tp tp);
/* Worse in the rounds (bench_worse): 1, 0, or -1 when not judged. */
int bench_suspect(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		  enum bench_metric m, int s);
/* Confirmation rounds with figures for this row in both columns. */
int bench_confirm_rounds(const struct bench *b, enum bench_place pl, enum bench_tp tp,
			 enum bench_metric m, int s);
/* 1: regression (a suspect confirmed by its confirmation rounds, or a
 * suspect that has none), 0: not, -1: no verdict (not judged, or no
 * figures). */
int bench_regressed(const struct bench *b, enum bench_place pl, enum bench_tp tp,
		    enum bench_metric m, int s);
/* Rows (placement, metric, size, column) that regressed. */
int bench_regressions(const struct bench *b);
/* 1 when a measurement failed, else 3 when a row regressed, else 0. */
int bench_exit_status(int failed, int regressions);

enum bench_target_state { BTS_NOT_CHECKED, BTS_MET, BTS_NOT_MET };
struct bench_target {
	const char *key;      /* CSV metric */
	enum bench_place pl;
	char what[128];       /* "64 B ping-pong p50, free: shunt-shm / raw ring" */
	double value, limit;
	int at_most;          /* value <= limit is met; else value >= limit */
	const char *unit;     /* "x" (a ratio) or "us/s" */
	enum bench_target_state state;
	char why[160];        /* not checked: why */
};
#define BENCH_TARGETS 24
/* The targets for shunt-shm, from the medians; informative. */
int bench_targets(const struct bench *b, struct bench_target *t);

/* shunt_bench_report.c */
void bench_print_table(const struct bench *b, FILE *f);
/* "warning: the machine is not quiet ..." when the load average at the
 * start was above half the usable CPUs and the free or pinned placement
 * runs (their figures are those of an idle machine).  1 when printed. */
int bench_quiet_warning(const struct bench *b, FILE *f);
int bench_write_csv(const struct bench *b, const char *path);

/* shunt_bench_plot.c */
int bench_write_svg(const struct bench *b, const char *path);

#endif
