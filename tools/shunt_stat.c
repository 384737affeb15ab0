/* shunt stat: what libshunt.so is doing in every process, from the counters
 * it keeps in <rundir>/s/<pid> (read-only: no ptrace, no signal).
 *
 *   shunt stat [-p PID] [-n NAME] [-i SECONDS [-c COUNT]] [--json] [--rundir DIR]
 *   shunt stat -l [-p PID] [-n NAME] [--json] [--rundir DIR]
 *
 * One line per open connection, like ss or smcss, then each process's
 * totals (connections by transport, including closed ones, bytes, the
 * shared memory it holds for rings, fallbacks by reason).  With -i, samples repeat every SECONDS and every sample after
 * the first shows rates (per second, from the difference with the previous
 * sample of the same connection).  --json prints one JSON object per sample
 * (JSON Lines with -i).  Files of processes that died are skipped and
 * removed.  The text names the rundir read and says when it found nothing;
 * -p of a process that is not there, or has no counters, is an error.
 * -l lists the listener registry instead (shunt_stat_listen.c). */
#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/shunt_config.h"
#include "shunt_outfmt.h"
#include "shunt_stat_listen.h"
#include "shunt_stat_sockmap.h"
#include "shunt_statfile.h"
#include "shunt_tool.h"
#include "core/shunt_stats_read.h"

struct opts {
	long pid;              /* 0: all */
	const char *name;      /* NULL: all; fnmatch(3) pattern */
	double interval;       /* 0: one sample */
	long count;            /* samples with -i; 0: until interrupted */
	int json;
	int listening;         /* -l: the listener registry */
	const char *rundir;
};

/* What a connection had at the previous sample, for rates. */
struct prev {
	long pid;
	unsigned slot;
	uint64_t opened_ns, mono_ns;
	uint64_t bytes_in, bytes_out, calls_in, calls_out, spin_hits, sleeps;
};

struct sample {
	const struct opts *o;
	int nsample;            /* 1 for the first */
	struct prev *old, *cur; /* previous sample's connections, this one's */
	size_t nold, ncur, capold, capcur;
	int nprocs;
	int header_done;        /* text: the column header of this sample */
	int failed;
};

static void stat_usage(FILE *f)
{
	fprintf(f,
		"usage: shunt stat [-p PID] [-n NAME] [-i SECONDS [-c COUNT]] [--json] [--rundir DIR]\n"
		"       shunt stat -l [-p PID] [-n NAME] [--json] [--rundir DIR]\n"
		"  -p, --pid PID        only this process\n"
		"  -n, --name NAME      only programs named NAME (a glob: 'redis*')\n"
		"  -i, --interval SECS  repeat every SECS seconds; later samples show rates per second\n"
		"  -c, --count N        stop after N samples (with -i)\n"
		"      --json           one JSON object per sample\n"
		"  -l, --listening      the listeners registered in the rundir (address, scope,\n"
		"                       owner, live or stale, the processes holding them)\n"
		"      --rundir DIR     read DIR instead of the rundir of this environment\n"
		"Columns: bytes and messages (calls) in and out, fallback reason of kernel-path\n"
		"connections, spin%% (waits that ended while spinning) and sleeps.  Each process's\n"
		"total line adds the shared memory it holds for rings: 'rings reserved=' bytes of\n"
		"the arenas it made (counted in the rundir's filesystem, /dev/shm), 'mapped=' bytes\n"
		"of other processes' arenas it maps.\n");
}

#define usage_error(...) shunt_usage_error("stat", __VA_ARGS__)

static const struct prev *find_prev(const struct sample *s, long pid,
				    const struct shunt_conn_snap *c)
{
	/* Both lists are in (pid, slot) order: a binary search. */
	size_t lo = 0, hi = s->nold;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct prev *p = &s->old[mid];
		if (p->pid < pid || (p->pid == pid && p->slot < c->slot))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nold) {
		const struct prev *p = &s->old[lo];
		/* Same slot and opening time: the same connection (a
		 * demotion changes gen, not that). */
		if (p->pid == pid && p->slot == c->slot && p->opened_ns == c->s.opened_ns)
			return p;
	}
	return NULL;
}

static void remember(struct sample *s, long pid, const struct shunt_conn_snap *c,
		     uint64_t mono)
{
	if (s->ncur == s->capcur) {
		size_t cap = s->capcur ? s->capcur * 2 : 256;
		struct prev *n = realloc(s->cur, cap * sizeof *n);
		if (!n)
			return; /* no rate for it next time */
		s->cur = n;
		s->capcur = cap;
	}
	struct prev *p = &s->cur[s->ncur++];
	p->pid = pid;
	p->slot = c->slot;
	p->opened_ns = c->s.opened_ns;
	p->mono_ns = mono;
	p->bytes_in = c->s.bytes_in;
	p->bytes_out = c->s.bytes_out;
	p->calls_in = c->s.calls_in;
	p->calls_out = c->s.calls_out;
	p->spin_hits = c->s.spin_hits;
	p->sleeps = c->s.sleeps;
}

static double rate(uint64_t now, uint64_t before, double secs)
{
	return now >= before && secs > 0 ? (double)(now - before) / secs : 0;
}

static const char *state_name(const struct shunt_stat_slot *s)
{
	return s->state ? "demoted" : "open";
}

/* Waits that ended while spinning, in percent; -1 when nothing waited. */
static double spin_pct(uint64_t hits, uint64_t sleeps)
{
	return hits + sleeps ? 100.0 * (double)hits / (double)(hits + sleeps) : -1;
}

static void print_conn_text(const struct sample *s, const struct shunt_proc_snap *p,
			    const struct shunt_conn_snap *c, const struct prev *pr)
{
	const struct shunt_stat_slot *x = &c->s;
	char l[64], r[64], spin[16];
	shunt_stats_format_addr(x->local, x->lport, l, sizeof l);
	shunt_stats_format_addr(x->peer, x->pport, r, sizeof r);
	const char *reason = x->transport == SHUNT_TP_KERNEL || x->state
				     ? shunt_stats_reason_name(x->reason)
				     : "";
	if (!reason[0])
		reason = "-";
	if (s->nsample > 1) {
		/* Rates: against the previous sample, or since the connection
		 * opened when it is new. */
		double secs = pr ? (double)(p->mono_ns - pr->mono_ns) / 1e9 : 0;
		uint64_t hits = x->spin_hits - (pr ? pr->spin_hits : 0);
		uint64_t sl = x->sleeps - (pr ? pr->sleeps : 0);
		double pct = spin_pct(hits, sl);
		if (pct < 0)
			snprintf(spin, sizeof spin, "-");
		else
			snprintf(spin, sizeof spin, "%.0f", pct);
		if (!pr) {
			printf("%-7d %-15.15s %-22s %-22s %-7s %-7s %12s %12s %10s %10s %-14s %5s %8s\n",
			       p->hdr.pid, p->hdr.prog, l, r, shunt_stats_transport_name(x->transport),
			       state_name(x), "new", "new", "new", "new", reason, spin, "-");
			return;
		}
		printf("%-7d %-15.15s %-22s %-22s %-7s %-7s %12.0f %12.0f %10.0f %10.0f %-14s %5s %8.0f\n",
		       p->hdr.pid, p->hdr.prog, l, r, shunt_stats_transport_name(x->transport),
		       state_name(x), rate(x->bytes_in, pr->bytes_in, secs),
		       rate(x->bytes_out, pr->bytes_out, secs), rate(x->calls_in, pr->calls_in, secs),
		       rate(x->calls_out, pr->calls_out, secs), reason, spin,
		       rate(x->sleeps, pr->sleeps, secs));
		return;
	}
	double pct = spin_pct(x->spin_hits, x->sleeps);
	if (pct < 0)
		snprintf(spin, sizeof spin, "-");
	else
		snprintf(spin, sizeof spin, "%.0f", pct);
	printf("%-7d %-15.15s %-22s %-22s %-7s %-7s %12llu %12llu %10llu %10llu %-14s %5s %8llu\n",
	       p->hdr.pid, p->hdr.prog, l, r, shunt_stats_transport_name(x->transport), state_name(x),
	       (unsigned long long)x->bytes_in, (unsigned long long)x->bytes_out,
	       (unsigned long long)x->calls_in, (unsigned long long)x->calls_out, reason, spin,
	       (unsigned long long)x->sleeps);
}

static void print_header_text(const struct sample *s)
{
	if (s->nsample > 1)
		printf("%-7s %-15s %-22s %-22s %-7s %-7s %12s %12s %10s %10s %-14s %5s %8s\n", "PID",
		       "PROGRAM", "LOCAL", "PEER", "TRANS", "STATE", "BYTES_IN/s", "BYTES_OUT/s",
		       "MSGS_IN/s", "MSGS_OUT/s", "REASON", "SPIN%", "SLEEPS/s");
	else
		printf("%-7s %-15s %-22s %-22s %-7s %-7s %12s %12s %10s %10s %-14s %5s %8s\n", "PID",
		       "PROGRAM", "LOCAL", "PEER", "TRANS", "STATE", "BYTES_IN", "BYTES_OUT",
		       "MSGS_IN", "MSGS_OUT", "REASON", "SPIN%", "SLEEPS");
}

static void print_totals_text(const struct shunt_proc_snap *p)
{
	struct shunt_stat_sum t[SHUNT_STATS_TRANSPORTS];
	shunt_stats_totals(p, t);
	uint64_t in = 0, out = 0, min = 0, mout = 0;
	printf("  total %d %s: connections", p->hdr.pid, p->hdr.prog);
	for (unsigned i = SHUNT_TP_SHM; i < SHUNT_STATS_TRANSPORTS; i++) {
		printf(" %s=%llu", shunt_stats_transport_name(i), (unsigned long long)p->hdr.conns[i]);
		in += t[i].bytes_in;
		out += t[i].bytes_out;
		min += t[i].calls_in;
		mout += t[i].calls_out;
	}
	printf(" (open %u) bytes in=%llu out=%llu msgs in=%llu out=%llu", p->nconns,
	       (unsigned long long)in, (unsigned long long)out, (unsigned long long)min,
	       (unsigned long long)mout);
	/* Shared memory held for rings (a library that does not say: none
	 * printed). */
	if (shunt_stats_has_rings(p))
		printf(" rings reserved=%llu mapped=%llu",
		       (unsigned long long)p->hdr.ring_reserved,
		       (unsigned long long)p->hdr.ring_mapped);
	printf(" fallbacks");
	int any = 0;
	for (unsigned r = 1; r < SHUNT_STATS_REASONS; r++)
		if (p->hdr.fallbacks[r]) {
			printf(" %s=%llu", shunt_stats_reason_name(r),
			       (unsigned long long)p->hdr.fallbacks[r]);
			any = 1;
		}
	printf("%s\n", any ? "" : " none");
}

static void json_u64(const char *key, uint64_t v, int comma)
{
	printf("\"%s\":%llu%s", key, (unsigned long long)v, comma ? "," : "");
}

static void print_conn_json(const struct sample *s, const struct shunt_proc_snap *p,
			    const struct shunt_conn_snap *c, const struct prev *pr, int first)
{
	const struct shunt_stat_slot *x = &c->s;
	char l[64], r[64];
	shunt_stats_format_addr(x->local, x->lport, l, sizeof l);
	shunt_stats_format_addr(x->peer, x->pport, r, sizeof r);
	printf("%s{\"fd\":%d,\"role\":", first ? "" : ",", x->fd);
	json_str(stdout, shunt_stats_role_name(x->role));
	printf(",\"local\":");
	json_str(stdout, l);
	printf(",\"peer\":");
	json_str(stdout, r);
	printf(",\"transport\":");
	json_str(stdout, shunt_stats_transport_name(x->transport));
	printf(",\"state\":");
	json_str(stdout, state_name(x));
	printf(",\"reason\":");
	if (x->transport == SHUNT_TP_KERNEL || x->state)
		json_str(stdout, shunt_stats_reason_name(x->reason));
	else
		printf("null");
	printf(",");
	json_u64("opened_ns", x->opened_ns, 1);
	json_u64("bytes_in", x->bytes_in, 1);
	json_u64("bytes_out", x->bytes_out, 1);
	json_u64("msgs_in", x->calls_in, 1);
	json_u64("msgs_out", x->calls_out, 1);
	json_u64("spin_hits", x->spin_hits, 1);
	json_u64("sleeps", x->sleeps, 1);
	/* shm single copy: bytes of bytes_in/out that went so */
	json_u64("single_copy_in", x->cma_in, 1);
	json_u64("single_copy_out", x->cma_out, 0);
	if (s->nsample > 1 && pr) {
		double secs = (double)(p->mono_ns - pr->mono_ns) / 1e9;
		printf(",\"rates\":{\"seconds\":%.6f,\"bytes_in\":%.3f,\"bytes_out\":%.3f,"
		       "\"msgs_in\":%.3f,\"msgs_out\":%.3f,\"sleeps\":%.3f}",
		       secs, rate(x->bytes_in, pr->bytes_in, secs),
		       rate(x->bytes_out, pr->bytes_out, secs), rate(x->calls_in, pr->calls_in, secs),
		       rate(x->calls_out, pr->calls_out, secs), rate(x->sleeps, pr->sleeps, secs));
	} else if (s->nsample > 1) {
		printf(",\"rates\":null");
	}
	printf("}");
}

static void print_proc_json(const struct sample *s, const struct shunt_proc_snap *p)
{
	printf("%s{\"pid\":%d,\"program\":", s->nprocs ? "," : "", p->hdr.pid);
	json_str(stdout, p->hdr.prog);
	printf(",\"uid\":%u,\"start_ns\":%llu,\"rings\":", p->hdr.uid,
	       (unsigned long long)p->hdr.start_ns);
	if (shunt_stats_has_rings(p))
		printf("{\"reserved_bytes\":%llu,\"mapped_bytes\":%llu}",
		       (unsigned long long)p->hdr.ring_reserved,
		       (unsigned long long)p->hdr.ring_mapped);
	else
		printf("null");
	printf(",\"connections\":[");
	for (unsigned i = 0; i < p->nconns; i++)
		print_conn_json(s, p, &p->conns[i], find_prev(s, p->hdr.pid, &p->conns[i]), i == 0);
	struct shunt_stat_sum t[SHUNT_STATS_TRANSPORTS];
	shunt_stats_totals(p, t);
	printf("],\"totals\":{\"connections\":{");
	uint64_t in = 0, out = 0, min = 0, mout = 0;
	for (unsigned i = SHUNT_TP_SHM; i < SHUNT_STATS_TRANSPORTS; i++) {
		printf("%s", i > SHUNT_TP_SHM ? "," : "");
		json_u64(shunt_stats_transport_name(i), p->hdr.conns[i], 0);
		in += t[i].bytes_in;
		out += t[i].bytes_out;
		min += t[i].calls_in;
		mout += t[i].calls_out;
	}
	printf("},\"open\":%u,\"closed\":{", p->nconns);
	for (unsigned i = SHUNT_TP_SHM; i < SHUNT_STATS_TRANSPORTS; i++) {
		printf("%s", i > SHUNT_TP_SHM ? "," : "");
		json_u64(shunt_stats_transport_name(i), p->hdr.closed[i].conns, 0);
	}
	printf("},");
	json_u64("bytes_in", in, 1);
	json_u64("bytes_out", out, 1);
	json_u64("msgs_in", min, 1);
	json_u64("msgs_out", mout, 1);
	printf("\"fallbacks\":{");
	int n = 0;
	for (unsigned r = 1; r < SHUNT_STATS_REASONS; r++)
		if (p->hdr.fallbacks[r]) {
			printf("%s", n++ ? "," : "");
			json_u64(shunt_stats_reason_name(r), p->hdr.fallbacks[r], 0);
		}
	printf("}}}");
}

static int each_process(const struct shunt_proc_snap *p, void *arg)
{
	struct sample *s = arg;
	const struct opts *o = s->o;
	if (o->pid && p->hdr.pid != o->pid)
		return 0;
	if (o->name && fnmatch(o->name, p->hdr.prog, 0) != 0)
		return 0;
	if (o->json) {
		print_proc_json(s, p);
	} else {
		if (!s->header_done)
			print_header_text(s);
		s->header_done = 1;
		for (unsigned i = 0; i < p->nconns; i++)
			print_conn_text(s, p, &p->conns[i],
					find_prev(s, p->hdr.pid, &p->conns[i]));
		print_totals_text(p);
	}
	for (unsigned i = 0; i < p->nconns; i++)
		remember(s, p->hdr.pid, &p->conns[i], p->mono_ns);
	s->nprocs++;
	return 0;
}

static int one_sample(struct sample *s, const char *rundir)
{
	const struct opts *o = s->o;
	unsigned removed = 0;
	s->ncur = 0;
	s->nprocs = 0;
	s->header_done = 0;
	if (o->json) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		printf("{\"time\":%lld.%03ld,\"sample\":%d,\"rundir\":", (long long)ts.tv_sec,
		       ts.tv_nsec / 1000000, s->nsample);
		json_str(stdout, rundir);
		printf(",\"processes\":[");
	} else {
		if (o->interval > 0)
			printf("%s# sample %d%s\n", s->nsample > 1 ? "\n" : "", s->nsample,
			       s->nsample > 1 ? ", rates per second" : "");
	}
	int n = shunt_stats_scan(rundir, SHUNT_SCAN_CLEAN, each_process, s, &removed);
	if (n < 0) {
		int e = errno;
		if (o->json)
			printf("]}\n");
		fprintf(stderr, "shunt stat: %s/s: %s\n", rundir, strerror(e));
		return -1;
	}
	if (o->json) {
		printf("],\"stale_removed\":%u", removed);
		stat_sockmap_json();
		printf("}\n");
	} else if (!s->nprocs && o->pid)
		printf("# process %ld no longer uses shunt in %s\n", o->pid, rundir);
	else if (!s->nprocs && o->name)
		printf("# no process named '%s' uses shunt in %s\n", o->name, rundir);
	else if (!s->nprocs)
		printf("# no process uses shunt in %s\n", rundir);
	if (!o->json)
		stat_sockmap_text();
	fflush(stdout);
	/* This sample's connections are the next one's previous. */
	struct prev *t = s->old;
	size_t tc = s->capold;
	s->old = s->cur;
	s->capold = s->capcur;
	s->nold = s->ncur;
	s->cur = t;
	s->capcur = tc;
	return 0;
}

static int parse_long(const char *arg, long lo, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo)
		return -1;
	*out = v;
	return 0;
}

int shunt_cmd_stat(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"name", required_argument, NULL, 'n'},
		{"interval", required_argument, NULL, 'i'},
		{"count", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"rundir", required_argument, NULL, 'r'},
		{"listening", no_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct opts o = {0};
	int have_count = 0;
	optind = 1;
	opterr = 0;
	for (int ch; (ch = getopt_long(argc, argv, "+:p:n:i:c:lh", longopts, NULL)) != -1;) {
		switch (ch) {
		case 'p':
			if (parse_long(optarg, 1, &o.pid) < 0)
				return usage_error("-p needs a process id, not '%s'", optarg);
			break;
		case 'n':
			if (!optarg[0])
				return usage_error("-n needs a program name");
			o.name = optarg;
			break;
		case 'i': {
			char *end;
			errno = 0;
			o.interval = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o.interval > 0) ||
			    o.interval > 86400 || isnan(o.interval))
				return usage_error("-i needs a number of seconds > 0, not '%s'",
						   optarg);
			break;
		}
		case 'c':
			if (parse_long(optarg, 1, &o.count) < 0)
				return usage_error("-c needs a count >= 1, not '%s'", optarg);
			have_count = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'r':
			o.rundir = optarg;
			break;
		case 'l':
			o.listening = 1;
			break;
		case 'h':
			stat_usage(stdout);
			return 0;
		case ':':
			return usage_error("%s needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected '%s'", argv[optind]);
	if (have_count && o.interval <= 0)
		return usage_error("-c needs -i");
	if (o.listening && o.interval > 0)
		return usage_error("-l shows the registry once: no -i");

	char rundir[SHUNT_STATS_DIR_MAX], err[SHUNT_STATS_DIR_MAX + 600];
	if (shunt_stats_rundir(o.rundir, rundir, sizeof rundir, err, sizeof err) < 0) {
		fprintf(stderr, "shunt stat: %s\n", err);
		return 1;
	}
	if (o.pid && kill((pid_t)o.pid, 0) != 0 && errno == ESRCH) {
		fprintf(stderr, "shunt stat: no process %ld\n", o.pid);
		return 1;
	}
	if (o.listening) {
		int n = stat_listeners(rundir, o.pid, o.name, o.json);
		if (n < 0)
			return 1;
		if (o.pid && !n) {
			fprintf(stderr, "shunt stat: process %ld holds no listener registered in %s\n",
				o.pid, rundir);
			return 1;
		}
		return 0;
	}
	struct shunt_stat_totals t;
	if (o.pid && !shunt_statfile_sum(rundir, (pid_t)o.pid, &t)) {
		fprintf(stderr, "shunt stat: process %ld has no shunt counters in %s: it runs "
			"without libshunt.so, has decided no connection yet, or uses another "
			"rundir (--rundir)\n", o.pid, rundir);
		return 1;
	}
	if (!o.json)
		printf("# rundir %s\n", rundir);
	struct sample s = {.o = &o};
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	int rc = 0;
	for (s.nsample = 1;; s.nsample++) {
		if (one_sample(&s, rundir) < 0) {
			rc = 1;
			break;
		}
		if (o.pid && !s.nprocs)
			break; /* it exited: nothing more to sample */
		if (o.interval <= 0 || (o.count && s.nsample >= o.count))
			break;
		/* Absolute deadlines: the period does not drift with the time
		 * a sample takes. */
		double whole = floor(o.interval);
		next.tv_sec += (time_t)whole;
		next.tv_nsec += (long)((o.interval - whole) * 1e9);
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	free(s.old);
	free(s.cur);
	return rc;
}
