/* shunt bench --netns: two "hosts" on one machine, for the fabric column.
 *
 * Two network namespaces joined by a veth pair, 198.18.0.1/24 (the
 * clients') and 198.18.0.2/24 (the servers'), in the benchmarking range
 * 198.18.0.0/15 so they can never clash with a real network; each host has
 * its own rundir and its own shuntd, as two machines would.  Built with
 * ip(8), as tests/e2e/lib_fabric.sh does, and torn down at the end (and on
 * a signal, by the caller).  Only kernel TCP and shunt-fabric cross it: the
 * ratio of fabric is then to TCP over the same veth. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shunt_bench.h"
#include "shunt_child.h"

/* ip ARGS...: 0 when it exits 0. */
static int ip(const char *a, const char *b, const char *c, const char *d, const char *e,
	      const char *f, const char *g, const char *h)
{
	char *argv[] = { "ip", (char *)a, (char *)b, (char *)c, (char *)d, (char *)e,
			 (char *)f, (char *)g, (char *)h, NULL };
	struct child_opts o = CHILD_OPTS_INIT;
	pid_t pid = child_start(argv, &o);
	int st = 0;
	if (pid < 0 || child_wait(pid, 20000, &st) != 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "shunt bench --netns: 'ip %s %s %s %s ...' failed\n", a, b, c,
			d ? d : "");
		return -1;
	}
	return 0;
}

/* shuntd of host h, in its namespace, until it says it serves. */
static int start_agent(struct bench *b, int h)
{
	char conf[200];
	snprintf(conf, sizeof(conf), "%s/shunt.conf", b->ns_rundir[h]);
	FILE *f = fopen(conf, "w");
	if (!f || fprintf(f, "rundir = %s\n", b->ns_rundir[h]) < 0 || fclose(f) != 0) {
		fprintf(stderr, "shunt bench --netns: %s: %s\n", conf, strerror(errno));
		return -1;
	}
	char *prefix[] = { "ip", "netns", "exec", b->ns[h], NULL };
	char log[4096];
	if (bench_shuntd_start(prefix, conf, &b->agent[h], log, sizeof log, &b->agent_log[h]) != 0) {
		fprintf(stderr, "shunt bench --netns: shuntd in %s did not start: %s\n", b->ns[h],
			log);
		return -1;
	}
	return 0;
}

int bench_netns_up(struct bench *b)
{
	b->agent_log[0] = b->agent_log[1] = -1;
	if (geteuid() != 0) {
		fprintf(stderr, "shunt bench: --netns needs root (network namespaces)\n");
		return -1;
	}
	int pid = (int)getpid();
	char va[16], vb[16];
	snprintf(b->ns[0], sizeof(b->ns[0]), "shunt-bench-%d-a", pid);
	snprintf(b->ns[1], sizeof(b->ns[1]), "shunt-bench-%d-b", pid);
	snprintf(va, sizeof(va), "sbv%da", pid % 1000000);
	snprintf(vb, sizeof(vb), "sbv%db", pid % 1000000);
	for (int h = 0; h < 2; h++) {
		if (ip("netns", "add", b->ns[h], NULL, NULL, NULL, NULL, NULL) != 0)
			return -1;
		b->ns_made[h] = 1;
		if (ip("-n", b->ns[h], "link", "set", "lo", "up", NULL, NULL) != 0 ||
		    child_rundir(b->ns_rundir[h], sizeof(b->ns_rundir[h]), h ? "bench-b" : "bench-a"))
			return -1;
	}
	if (ip("link", "add", va, "type", "veth", "peer", "name", vb) != 0 ||
	    ip("link", "set", va, "netns", b->ns[0], NULL, NULL, NULL) != 0 ||
	    ip("link", "set", vb, "netns", b->ns[1], NULL, NULL, NULL) != 0 ||
	    ip("-n", b->ns[0], "addr", "add", BENCH_NETNS_CLIENT "/24", "dev", va, NULL) != 0 ||
	    ip("-n", b->ns[1], "addr", "add", BENCH_NETNS_SERVER "/24", "dev", vb, NULL) != 0 ||
	    ip("-n", b->ns[0], "link", "set", va, "up", NULL, NULL) != 0 ||
	    ip("-n", b->ns[1], "link", "set", vb, "up", NULL, NULL) != 0)
		return -1;
	for (int h = 0; h < 2; h++)
		if (start_agent(b, h) != 0)
			return -1;
	return 0;
}

void bench_netns_down(struct bench *b)
{
	for (int h = 0; h < 2; h++) {
		if (b->agent[h] > 0)
			child_stop(b->agent[h], 1, 2000);
		b->agent[h] = 0;
		if (b->agent_log[h] >= 0)
			close(b->agent_log[h]);
		b->agent_log[h] = -1;
		/* deleting a namespace deletes the veth end in it, and so the pair */
		if (b->ns_made[h])
			ip("netns", "del", b->ns[h], NULL, NULL, NULL, NULL, NULL);
		b->ns_made[h] = 0;
		if (b->ns_rundir[h][0])
			child_rmtree(b->ns_rundir[h]);
		b->ns_rundir[h][0] = '\0';
	}
}
