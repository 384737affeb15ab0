/* shunt ab: shared declarations.
 *   shunt_ab.c        options, the runs (server, readiness, client), table
 *   shunt_ab_parse.c  the key figures of known programs' output */
#ifndef SHUNT_AB_H
#define SHUNT_AB_H

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

#endif
