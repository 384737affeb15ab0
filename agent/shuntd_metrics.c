/* GET /metrics: the agent's own counters, and the shims' counters of this
 * host summed from <rundir>/s/<pid> (core/shunt_stats_read.h).
 *
 * The shims' totals are counters too: a process that exits takes its
 * numbers with it, so the totals last seen of each process are kept (by
 * pid and start time) and folded into a "departed" sum when it is gone.
 * What a process did between its last scan and its exit is not seen; scans
 * run at every sweep and every scrape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shunt_reason.h"
#include "shunt/version.h"
#include "shuntd.h"
#include "shuntd_pending.h"
#include "shuntd_sockmap.h"
#include "core/shunt_stats_read.h"

#define NT SHUNT_STATS_TRANSPORTS
#define NR SHUNT_STATS_REASONS
#define MAX_PROCS 16384

struct totals {
	uint64_t conns[NT];          /* decided, by transport */
	uint64_t bytes_in[NT], bytes_out[NT];
	uint64_t fallbacks[NR];
};

struct proc {
	int32_t pid;
	uint64_t start_ns;
	struct totals t;
};

static struct proc *seen;     /* last scan, in pid order */
static size_t nseen;
static struct totals departed;

struct scan {
	struct proc *now;
	size_t n, cap;
	uint64_t open[NT];
};

static void add(struct totals *a, const struct totals *b)
{
	for (unsigned i = 0; i < NT; i++) {
		a->conns[i] += b->conns[i];
		a->bytes_in[i] += b->bytes_in[i];
		a->bytes_out[i] += b->bytes_out[i];
	}
	for (unsigned i = 0; i < NR; i++)
		a->fallbacks[i] += b->fallbacks[i];
}

static int each(const struct shunt_proc_snap *p, void *arg)
{
	struct scan *s = arg;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		if (cap > MAX_PROCS)
			return 1;
		struct proc *np = realloc(s->now, cap * sizeof *np);
		if (!np)
			return 1;
		s->now = np;
		s->cap = cap;
	}
	struct proc *e = &s->now[s->n++];
	struct shunt_stat_sum sum[NT];
	memset(e, 0, sizeof *e);
	e->pid = p->hdr.pid;
	e->start_ns = p->hdr.start_ns;
	shunt_stats_totals(p, sum);
	for (unsigned i = 0; i < NT; i++) {
		e->t.conns[i] = p->hdr.conns[i];
		e->t.bytes_in[i] = sum[i].bytes_in;
		e->t.bytes_out[i] = sum[i].bytes_out;
	}
	for (unsigned i = 0; i < NR; i++)
		e->t.fallbacks[i] = p->hdr.fallbacks[i];
	for (unsigned i = 0; i < p->nconns; i++)
		if (p->conns[i].s.transport < NT)
			s->open[p->conns[i].s.transport]++;
	return 0;
}

static int by_pid(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static uint64_t open_now[NT];
static unsigned nprocs;

void metrics_scan(void)
{
	struct scan s = {0};
	unsigned removed = 0;
	if (shunt_stats_scan(shuntd.rundir, SHUNT_SCAN_CLEAN, each, &s, &removed) < 0) {
		free(s.now);
		return;
	}
	shuntd.n.swept[SW_STATS] += removed;
	if (s.n) /* qsort(NULL, 0) is undefined */
		qsort(s.now, s.n, sizeof *s.now, by_pid);
	/* Processes seen last time and not now (or now a new process with a
	 * recycled pid) are gone: keep their last totals. */
	size_t j = 0;
	for (size_t i = 0; i < nseen; i++) {
		while (j < s.n && s.now[j].pid < seen[i].pid)
			j++;
		if (j == s.n || s.now[j].pid != seen[i].pid || s.now[j].start_ns != seen[i].start_ns)
			add(&departed, &seen[i].t);
	}
	free(seen);
	seen = s.now;
	nseen = s.n;
	nprocs = (unsigned)s.n;
	memcpy(open_now, s.open, sizeof open_now);
}

/* ---- text format ------------------------------------------------------------------ */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_render(size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	metrics_scan();
	struct totals t = departed;
	for (size_t i = 0; i < nseen; i++)
		add(&t, &seen[i].t);
	const struct shuntd_counters *n = &shuntd.n;
	static const char *const req[SR_COUNT] = {"hello", "auth",  "query", "offer",
						  "metrics", "relay", "take", "sign"};
	static const char *const err[SE_COUNT] = {"malformed", "oversized", "version",
						  "auth",      "unexpected", "timeout",
						  "busy",      "http",	     "io"};
	static const char *const off[SO_COUNT] = {"held",	"no_listener", "refused",
						  "table_full", "source_full", "contested",
						  "unsigned",	"badsig"};
	static const char *const tk[ST_COUNT] = {"taken", "none", "refused", "contested"};
	static const char *const swp[SW_COUNT] = {"registry", "relay", "shm", "stats"};

	family(f, "shuntd_build_info", "gauge", "shuntd version.");
	fprintf(f, "shuntd_build_info{version=\"%s\"} 1\n", SHUNT_VERSION);
	family(f, "shuntd_clients_total", "counter", "Client connections accepted, by listener.");
	fprintf(f, "shuntd_clients_total{listener=\"tcp\"} %llu\n",
		(unsigned long long)n->clients[0]);
	fprintf(f, "shuntd_clients_total{listener=\"unix\"} %llu\n",
		(unsigned long long)n->clients[1]);
	family(f, "shuntd_clients_open", "gauge", "Client connections open now.");
	fprintf(f, "shuntd_clients_open %u\n", n->open_clients);
	family(f, "shuntd_clients_max", "gauge",
	       "Clients served at once at most (below the fd limit; the longest idle one "
	       "makes room for a newcomer).");
	fprintf(f, "shuntd_clients_max %u\n", shuntd.max_clients);
	family(f, "shuntd_accept_pauses_total", "counter",
	       "Times accepting rested because accept() found no fd or memory.");
	fprintf(f, "shuntd_accept_pauses_total %llu\n", (unsigned long long)n->accept_pauses);
	family(f, "shuntd_requests_total", "counter", "Requests served, by type.");
	for (int i = 0; i < SR_COUNT; i++)
		fprintf(f, "shuntd_requests_total{type=\"%s\"} %llu\n", req[i],
			(unsigned long long)n->requests[i]);
	family(f, "shuntd_errors_total", "counter",
	       "Clients dropped, by reason (each one closed; the agent kept serving).");
	for (int i = 0; i < SE_COUNT; i++)
		fprintf(f, "shuntd_errors_total{reason=\"%s\"} %llu\n", err[i],
			(unsigned long long)n->errors[i]);
	family(f, "shuntd_queries_total", "counter", "QUERY answers, by result.");
	fprintf(f, "shuntd_queries_total{result=\"live\"} %llu\n", (unsigned long long)n->queries[1]);
	fprintf(f, "shuntd_queries_total{result=\"none\"} %llu\n", (unsigned long long)n->queries[0]);
	family(f, "shuntd_offers_total", "counter",
	       "Fabric offers, by result (held in memory for the accepting shim, or why not).");
	for (int i = 0; i < SO_COUNT; i++)
		fprintf(f, "shuntd_offers_total{result=\"%s\"} %llu\n", off[i],
			(unsigned long long)n->offers[i]);
	family(f, "shuntd_takes_total", "counter",
	       "Offers asked for by accepting shims, by result.");
	for (int i = 0; i < ST_COUNT; i++)
		fprintf(f, "shuntd_takes_total{result=\"%s\"} %llu\n", tk[i],
			(unsigned long long)n->takes[i]);
	family(f, "shuntd_countersigns_total", "counter",
	       "SIGN requests of local shims, by result (signed; no countersign key here; "
	       "the socket passed does not hold the offer's client end).");
	static const char *const sg[SG_COUNT] = {"signed", "no_key", "refused"};
	for (int i = 0; i < SG_COUNT; i++)
		fprintf(f, "shuntd_countersigns_total{result=\"%s\"} %llu\n", sg[i],
			(unsigned long long)n->signs[i]);
	family(f, "shuntd_countersign_required", "gauge",
	       "1 when this agent files only countersigned offers (countersign_key_file).");
	fprintf(f, "shuntd_countersign_required %d\n", shuntd.csign_len > 0);
	family(f, "shuntd_relays_total", "counter",
	       "Relayed DEMOTE positions, by result (filed in r/, or why not).");
	for (int i = 0; i < SO_COUNT; i++)
		if (i != SO_NO_LISTENER && i != SO_UNSIGNED && i != SO_BADSIG)
			fprintf(f, "shuntd_relays_total{result=\"%s\"} %llu\n",
				i == SO_HELD ? "filed" : off[i], (unsigned long long)n->relays[i]);
	family(f, "shuntd_pending", "gauge", "Offers and relays held now, by kind.");
	fprintf(f, "shuntd_pending{kind=\"offer\"} %u\n", pending_count(PK_OFFER));
	fprintf(f, "shuntd_pending{kind=\"relay\"} %u\n",
		pending_count(PK_RELAY_C) + pending_count(PK_RELAY_S));
	family(f, "shuntd_expired_total", "counter",
	       "Offers and relays forgotten at the end of their lifetime, by kind.");
	fprintf(f, "shuntd_expired_total{kind=\"offer\"} %llu\n", (unsigned long long)n->expired[0]);
	fprintf(f, "shuntd_expired_total{kind=\"relay\"} %llu\n", (unsigned long long)n->expired[1]);
	family(f, "shuntd_swept_total", "counter", "Stale rundir entries removed, by kind.");
	for (int i = 0; i < SW_COUNT; i++)
		fprintf(f, "shuntd_swept_total{kind=\"%s\"} %llu\n", swp[i],
			(unsigned long long)n->swept[i]);

	family(f, "shunt_processes", "gauge", "Processes running libshunt.so on this host.");
	fprintf(f, "shunt_processes %u\n", nprocs);
	family(f, "shunt_connections_total", "counter",
	       "Connections decided by the shims of this host, by transport.");
	for (unsigned i = 1; i < NT; i++)
		fprintf(f, "shunt_connections_total{transport=\"%s\"} %llu\n",
			shunt_stats_transport_name(i), (unsigned long long)t.conns[i]);
	family(f, "shunt_connections_open", "gauge", "Connections open now, by transport.");
	for (unsigned i = 1; i < NT; i++)
		fprintf(f, "shunt_connections_open{transport=\"%s\"} %llu\n",
			shunt_stats_transport_name(i), (unsigned long long)open_now[i]);
	family(f, "shunt_bytes_total", "counter",
	       "Bytes the applications moved, by the transport their connection is on.");
	for (unsigned i = 1; i < NT; i++) {
		fprintf(f, "shunt_bytes_total{transport=\"%s\",direction=\"in\"} %llu\n",
			shunt_stats_transport_name(i), (unsigned long long)t.bytes_in[i]);
		fprintf(f, "shunt_bytes_total{transport=\"%s\",direction=\"out\"} %llu\n",
			shunt_stats_transport_name(i), (unsigned long long)t.bytes_out[i]);
	}
	family(f, "shunt_fallbacks_total", "counter",
	       "Connections on the kernel path, by reason.");
	for (unsigned i = 1; i < NR && i < SHUNT_R_COUNT; i++)
		fprintf(f, "shunt_fallbacks_total{reason=\"%s\"} %llu\n", shunt_stats_reason_name(i),
			(unsigned long long)t.fallbacks[i]);
	sockmap_metrics(f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
