/* shunt doctor: the sockmap path (shuntd --sockmap).  Is it attached (a
 * pinned link under sockmap_pin), and if the configuration asks for it and
 * it is not, why not: the kernel (a sockhash cannot be made), the rights,
 * the cgroup v2 hierarchy or a sockmap_cgroup outside it, the bpffs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/bpf.h>

#include "core/shunt_sockmap.h"
#include "shunt_doctor.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

void doctor_sockmap(struct doctor *d)
{
	const char *pin = d->cfg.sockmap_pin;
	int att = shunt_sm_attached(pin);
	if (att > 0) {
		uint64_t c[SHUNT_SM_NCOUNTERS];
		int fd = shunt_sm_obj_get(pin, SHUNT_SM_PIN_COUNTERS, BPF_F_RDONLY);
		if (fd >= 0 && shunt_sm_counters_read(fd, c) == 0)
			doctor_add(d, DOC_SOCKMAP,
				   "attached (%s): %llu connection(s), %llu byte(s) redirected so far",
				   pin, (unsigned long long)c[SHUNT_SM_CONNS],
				   (unsigned long long)c[SHUNT_SM_BYTES]);
		else
			doctor_add(d, DOC_SOCKMAP, "attached (%s; its counters are root's to read)", pin);
		if (fd >= 0)
			close(fd);
		return;
	}
	char why[200];
	int ok = shunt_sm_probe(why, sizeof why);
	if (!d->cfg.sockmap) {
		if (ok > 0)
			doctor_add(d, DOC_SOCKMAP_OFF, "not attached (sockmap = off); this kernel can run it");
		else
			doctor_add(d, DOC_SOCKMAP_OFF, "not attached (sockmap = off); %s", why);
		return;
	}
	if (ok <= 0) {
		doctor_add(d, DOC_SOCKMAP_UNAVAILABLE, "sockmap = on but nothing is attached: %s", why);
		return;
	}
	char root[PATH_MAX];
	if (!d->cfg.sockmap_cgroup[0] && shunt_sm_cgroup2_root(root, sizeof root) < 0) {
		doctor_add(d, DOC_SOCKMAP_UNAVAILABLE,
			   "sockmap = on but nothing is attached: no cgroup v2 hierarchy is mounted");
		return;
	}
	if (d->cfg.sockmap_cgroup[0]) {
		int cg = open(d->cfg.sockmap_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		char cwhy[PATH_MAX + 128];
		int bad = cg < 0 || shunt_sm_cgroup_check(cg, d->cfg.sockmap_cgroup, cwhy,
							  sizeof cwhy) < 0;
		if (cg < 0)
			snprintf(cwhy, sizeof cwhy, "cgroup %s: %s", d->cfg.sockmap_cgroup,
				 strerror(errno));
		if (cg >= 0)
			close(cg);
		if (bad) {
			doctor_add(d, DOC_SOCKMAP_UNAVAILABLE, "sockmap = on but nothing is attached: %s",
				   cwhy);
			return;
		}
	}
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", pin);
	char *slash = strrchr(parent, '/');
	struct statfs sf;
	if (slash && slash != parent)
		*slash = 0;
	if (strcmp(parent, "/sys/fs/bpf") && (statfs(parent, &sf) < 0 || sf.f_type != BPF_FS_MAGIC)) {
		doctor_add(d, DOC_SOCKMAP_UNAVAILABLE,
			   "sockmap = on but nothing is attached: %s is not a bpffs", parent);
		return;
	}
	doctor_add(d, DOC_SOCKMAP_UNAVAILABLE,
		   "sockmap = on and this kernel can run it, but nothing is attached in %s: is shuntd "
		   "running (as root)?",
		   pin);
}
