/* shunt bench: the sockmap column, kernel TCP with shuntd's sockmap path
 * on (plain programs both ends).
 *
 * Never on the root cgroup: the column's servers and clients are moved
 * into a cgroup of the run's own (under the cgroup v2 hierarchy), where a
 * shuntd of the run's own attaches, its pins in a bpffs mounted in the
 * run's rundir; everything is removed at the end (and on a signal, by the
 * caller).  Needs root; otherwise the column is left out, and says why. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shunt_bench.h"
#include "core/shunt_sockmap.h"
#include "shunt_child.h"

int bench_sockmap_up(struct bench *b)
{
	char *why = b->why[BT_SOCKMAP];
	size_t wl = sizeof(b->why[0]);
	char root[256], conf[300], pin[300];
	if (geteuid() != 0) {
		snprintf(why, wl, "left out: needs root (BPF programs, a cgroup)");
		return -1;
	}
	if (shunt_sm_cgroup2_root(root, sizeof root) < 0) {
		snprintf(why, wl, "left out: no cgroup v2 hierarchy mounted");
		return -1;
	}
	snprintf(b->sm_cgroup, sizeof b->sm_cgroup, "%s/shunt-bench-%d", root, (int)getpid());
	snprintf(b->sm_bpffs, sizeof b->sm_bpffs, "%s/bpffs", b->rundir);
	if (mkdir(b->sm_cgroup, 0755) != 0) {
		snprintf(why, wl, "left out: cgroup %.120s: %s", b->sm_cgroup, strerror(errno));
		b->sm_cgroup[0] = 0;
		return -1;
	}
	if (mkdir(b->sm_bpffs, 0700) != 0 || mount("bpf", b->sm_bpffs, "bpf", 0, "mode=0700") != 0) {
		snprintf(why, wl, "left out: bpffs at %.120s: %s", b->sm_bpffs, strerror(errno));
		rmdir(b->sm_bpffs);
		b->sm_bpffs[0] = 0;
		return -1;
	}
	snprintf(conf, sizeof conf, "%s/sockmap.conf", b->rundir);
	snprintf(pin, sizeof pin, "%s/shunt", b->sm_bpffs);
	/* Its agent port: any free one (only its sockmap path is wanted). */
	FILE *f = fopen(conf, "w");
	if (!f || fprintf(f, "sockmap = on\nsockmap_cgroup = %s\nsockmap_pin = %s\nrundir = %s/sm-agent\n"
			  "agent_port = %d\n", b->sm_cgroup, pin, b->rundir,
			  20000 + (int)(getpid() % 12000)) < 0 || fclose(f) != 0) {
		snprintf(why, wl, "left out: %.120s: %s", conf, strerror(errno));
		return -1;
	}
	char rd[300];
	snprintf(rd, sizeof rd, "%s/sm-agent", b->rundir);
	mkdir(rd, 0700);
	char buf[4096];
	bench_shuntd_start(NULL, conf, &b->sm_agent, buf, sizeof buf, NULL);
	if (!strstr(buf, "sockmap: attached")) {
		char *s = strstr(buf, "sockmap: ");
		char *e = strchr(s ? s : buf, '\n');
		if (e)
			*e = 0;
		snprintf(why, wl, "left out: shuntd --sockmap did not attach: %.150s", s ? s : buf);
		return -1;
	}
	return 0;
}

void bench_sockmap_down(struct bench *b)
{
	if (b->sm_agent > 0)
		child_stop(b->sm_agent, 1, 2000);
	b->sm_agent = 0;
	if (b->sm_bpffs[0]) {
		umount2(b->sm_bpffs, MNT_DETACH);
		rmdir(b->sm_bpffs);
		b->sm_bpffs[0] = 0;
	}
	/* Its processes have exited by now; a straggler's exit lets it go. */
	for (int i = 0; b->sm_cgroup[0] && i < 100; i++) {
		if (rmdir(b->sm_cgroup) == 0 || errno != EBUSY)
			break;
		usleep(20000);
	}
	b->sm_cgroup[0] = 0;
}
