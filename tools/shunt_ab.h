/* shunt ab: shared declarations.
 *   shunt_ab.c          options, their checks, the runs in order, exit status
 *   shunt_ab_run.c      one run: the server, readiness, the client, CPU time,
 *                       the shunt side's transports
 *   shunt_ab_report.c   the table, --json and --csv
 *   shunt_ab_stats.c    the verdict of a figure (paired ratios, interval)
 *   shunt_ab_sockperf.c sockperf's message-rate window
 *   shunt_ab_parse.c    the key figures of known programs' output */
#ifndef SHUNT_AB_H
#define SHUNT_AB_H

#include <stdio.h>

#include "shunt_ab_stats.h"
#include "shunt_run_env.h"
#include "shunt_statfile.h"

#define AB_MAX_FIGS 48

/* One key figure of one run: "GET (req/s)" = 98000, higher is better. */
struct ab_fig {
	char name[64];
	double value;
	int higher_better;
};

struct ab_figs {
	int n;
	struct ab_fig f[AB_MAX_FIGS];
	double ops;   /* operations the client says it made (round trips,
			 requests, messages sent), 0 when it does not say:
			 what CPU time is shared out over */
};

/* The formats shunt ab reads; "time" means none (wall time only). */
extern const char *const ab_formats[];

/* Parse text (a client's stdout and stderr) as format ("auto": whichever
 * matches).  Figures are appended to out.  Returns the format recognised,
 * or NULL when none was (then out is unchanged). */
const char *ab_parse(const char *format, const char *text, struct ab_figs *out);

/* Append a figure (ignored when out is full). */
void ab_add(struct ab_figs *out, const char *name, double value, int higher_better);

/* ---- the measurement ---------------------------------------------------- */

#define AB_MAX_NAMES 64
#define AB_CMD_MAX 4200

enum { AB_PLAIN, AB_SHUNT };
extern const char *const ab_side_name[2];

/* One run of one side. */
struct ab_run {
	int done, ok;
	char error[200];          /* why it failed, in a sentence */
	char tail[700];           /* the last lines of the failing output */
	double wall_s, server_cpu_s, client_cpu_s, ops;
	int have_stats;           /* shunt side: stats read */
	struct shunt_stat_totals stats;
};

struct ab {
	/* options */
	const char *server, *client_given, *format, *keep, *json, *csv;
	struct run_env env;             /* the shunt side's --config, --transport, --options */
	int runs, warmup, port, verbose;
	int cpus[2];                    /* server's, client's; -1: not pinned */
	double ready_timeout, timeout;
	/* what the report states */
	char client[AB_CMD_MAX];        /* the client as run (sockperf: with --mps) */
	int mps_added;
	char settings[2048];            /* the shunt side's non-default settings */
	char machine[512];
	double load_end;                /* the load average when the runs ended */
	const char *format_seen;
	/* figures: names in order of first appearance; values per side, run */
	int nnames;
	char names[AB_MAX_NAMES][64];
	int higher_better[AB_MAX_NAMES];
	double v[2][AB_MAX_NAMES][AB_MAX_RUNS];
	struct ab_run run[2][AB_MAX_RUNS];
};

/* shunt_ab_run.c */
/* One run of side for run index r (warmup: not recorded).  0 when it
 * succeeded; failures are recorded in a->run and told on stderr. */
int ab_run_one(struct ab *a, int side, int r, int warmup);
/* Is a socket listening on TCP port (any address)? */
int ab_port_listening(unsigned port);
/* Kill what the runs started on SIGINT/SIGTERM/SIGHUP. */
void ab_catch_signals(void);

/* shunt_ab_report.c */
/* Connections of the shunt side's successful runs by transport; how many
 * runs said.  *accelerated: any on shm or fabric. */
int ab_shunt_transports(const struct ab *a, struct shunt_stat_totals *t, int *accelerated);
/* Complete pairs: runs in which both sides succeeded. */
int ab_complete_pairs(const struct ab *a);
void ab_print_report(const struct ab *a, FILE *f);
int ab_write_json(const struct ab *a, const char *path);
int ab_write_csv(const struct ab *a, const char *path);

#endif
