/* shunt bench: the placements, where the scheduler may put the two ends of
 * a pair, as users meet them (docs/PERFORMANCE.md):
 *
 *   free       nothing pinned and nothing else of ours running: what users
 *              see first; the ends usually land on different CPUs
 *   pinned     the client on CPU A, the server on CPU B (--cpus A,B; by
 *              default the first two this process may use): the best case
 *              for spinning
 *   neighbour  nothing pinned, one CPU-bound busy loop running throughout:
 *              both ends are pushed onto one CPU, where spinning against a
 *              peer that cannot run costs twice
 *   oversub    N pairs of a column at once (--pairs; 2 x the usable CPUs by
 *              default): more runnable work than CPUs
 *
 * The servers are started once, not pinned; the pinned placement moves
 * them onto CPU B and back.  The clients are pinned as they start. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shunt_bench.h"

void bench_place_check(struct bench *b)
{
	struct bench_opts *o = &b->o;
	if (sched_getaffinity(0, sizeof(b->all), &b->all) != 0) {
		CPU_ZERO(&b->all);
		for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
			CPU_SET(c, &b->all);
	}
	b->ncpus = CPU_COUNT(&b->all);
	for (int pl = 0; pl < BP_COUNT; pl++) {
		b->place_ok[pl] = 0;
		b->place_why[pl][0] = '\0';
	}
	for (int i = 0; i < o->nplace; i++)
		b->place_ok[o->place[i]] = 1;

	if (b->place_ok[BP_PINNED]) {
		if (o->cpus[0] < 0) {
			/* the first two CPUs this process may use */
			for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
				if (CPU_ISSET(c, &b->all))
					o->cpus[k++] = c;
		}
		if (b->ncpus < 2) {
			b->place_ok[BP_PINNED] = 0;
			snprintf(b->place_why[BP_PINNED], sizeof(b->place_why[0]),
				 "needs two CPUs; this process may use %d", b->ncpus);
		} else {
			for (int k = 0; k < 2; k++)
				if (!CPU_ISSET(o->cpus[k], &b->all)) {
					b->place_ok[BP_PINNED] = 0;
					snprintf(b->place_why[BP_PINNED], sizeof(b->place_why[0]),
						 "CPU %d (--cpus) is not one this process may "
						 "run on", o->cpus[k]);
				}
		}
	}
	if (!o->pairs)
		o->pairs = 2 * b->ncpus < BENCH_MAX_PAIRS ? 2 * b->ncpus : BENCH_MAX_PAIRS;
	if (b->place_ok[BP_OVERSUB] && o->pairs <= b->ncpus)
		snprintf(b->place_why[BP_OVERSUB], sizeof(b->place_why[0]),
			 "not oversubscribed: %d pair(s) on %d CPUs", o->pairs, b->ncpus);
}

/* The neighbour: a child of ours spinning until we kill it.  It must die
 * with us whatever happens to us: the parent-death signal covers our own
 * death, and it takes the default action for the signals whose handler
 * would otherwise stop our servers from inside it. */
static pid_t start_hog(void)
{
	pid_t parent = getpid();
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "shunt bench: neighbour: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		volatile unsigned long spin = 0;
		for (;;)
			spin++;
	}
	return pid;
}

static int pin_servers(struct bench *b, const cpu_set_t *set, const char *what)
{
	int rc = 0;
	for (int tp = 0; tp < BT_COUNT; tp++) {
		if (!b->avail[tp] || b->server[tp][0] <= 0)
			continue;
		if (bench_group_pin(b->server[tp][0], set) != 0) {
			fprintf(stderr, "shunt bench: %s the %s server: %s\n", what,
				bench_tp_name[tp], strerror(errno));
			rc = -1;
		}
	}
	return rc;
}

int bench_place_enter(struct bench *b, enum bench_place pl)
{
	switch (pl) {
	case BP_PINNED: {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(b->o.cpus[1], &set);
		return pin_servers(b, &set, "pinned: pinning");
	}
	case BP_NEIGHBOUR:
		b->hog = start_hog();
		return b->hog > 0 ? 0 : -1;
	default:
		return 0;
	}
}

void bench_place_leave(struct bench *b, enum bench_place pl)
{
	if (pl == BP_PINNED)
		pin_servers(b, &b->all, "pinned: unpinning");
	if (b->hog > 0) {
		kill(b->hog, SIGKILL);
		while (waitpid(b->hog, NULL, 0) < 0 && errno == EINTR)
			;
		b->hog = 0;
	}
}

int bench_place_client_cpu(const struct bench *b, enum bench_place pl)
{
	return pl == BP_PINNED ? b->o.cpus[0] : -1;
}

int bench_place_pairs(const struct bench *b, enum bench_place pl)
{
	return pl == BP_OVERSUB ? b->o.pairs : 1;
}

void bench_place_describe(const struct bench *b, enum bench_place pl, char *buf, size_t len)
{
	switch (pl) {
	case BP_FREE:
		snprintf(buf, len, "not pinned, nothing else running (as users run it first)");
		break;
	case BP_PINNED:
		snprintf(buf, len, "client on CPU %d, server on CPU %d", b->o.cpus[0], b->o.cpus[1]);
		break;
	case BP_NEIGHBOUR:
		snprintf(buf, len, "not pinned, one CPU-bound busy loop running throughout");
		break;
	default:
		snprintf(buf, len, "%d pairs of a column at once on %d CPUs, not pinned",
			 b->o.pairs, b->ncpus);
	}
}
