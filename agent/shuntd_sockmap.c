/* shuntd's sockmap path: loads bpf/shunt_sockmap.bpf.c (its skeleton,
 * generated at build time), attaches the sockops program to a cgroup v2
 * and the sk_msg program to the sockhash, and pins the link and the maps
 * under sockmap_pin so that the shims find the mark map, the tools the
 * counters, and the next shuntd (or shuntd --sockmap-off) what to remove.
 *
 * A shuntd that dies without its exit path leaves the pinned link
 * attached: the programs keep doing what they did (they never drop a
 * send), and the next start or --sockmap-off detaches them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "shuntd.h"
#include "shuntd_sockmap.h"
#include "core/shunt_sockmap.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

static const char *const pins[] = {SHUNT_SM_PIN_LINK, SHUNT_SM_PIN_SOCKS, SHUNT_SM_PIN_SKIP,
				   SHUNT_SM_PIN_COUNTERS};

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	return snprintf(buf, len, "%s/%s", dir, name) >= (int)len ? -1 : 0;
}

/* Every pin under dir, then dir: how many there were, or -1 at the first
 * that stays (err says which; with err NULL, on to the rest). */
static int unpin_all(const char *dir, char *err, size_t errlen)
{
	int found = 0;
	char path[PATH_MAX];
	for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
		if (pin_path(path, sizeof path, dir, pins[i]) < 0)
			continue;
		if (unlink(path) == 0)
			found++;
		else if (errno != ENOENT && err) {
			snprintf(err, errlen, "sockmap: removing %s: %s", path, strerror(errno));
			return -1;
		}
	}
	rmdir(dir);
	return found;
}

#ifdef SHUNT_HAVE_SOCKMAP
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/shunt_sockmap.skel.h" /* generated: bpf/CMakeLists.txt */

static struct shunt_sockmap *skel;
static struct bpf_link *sm_link;
static int counters_fd = -1;
static char pinned_dir[PATH_MAX];
static char cgroup_path[PATH_MAX];

static int libbpf_say(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || (level == LIBBPF_INFO && !shuntd.log_debug))
		return 0;
	/* The verifier's log comes as one message of many lines. */
	char text[4096];
	vsnprintf(text, sizeof text, fmt, ap);
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (*line)
			shuntd_log("libbpf: %s", line);
	}
	return 0;
}

/* Fill the rodata's rules from the configuration's: the sockops program
 * sees no program name, so a rule naming programs counts as matching when
 * it sends connections to the kernel (such connections stay on TCP) and
 * as not matching otherwise.  -1 when there are too many. */
static int set_rules(const struct shunt_config *cfg)
{
	unsigned n = 0;
	for (unsigned i = 0; i < cfg->nrules; i++) {
		const struct shunt_rule *r = &cfg->rules[i];
		int kernel = r->transport == SHUNT_TP_KERNEL;
		if (!kernel && strcmp(r->prog, "*"))
			continue;
		if (n == SHUNT_SM_MAX_RULES)
			return -1;
		struct shunt_sm_rule *o = &skel->rodata->rules[n++];
		memset(o, 0, sizeof *o);
		o->kernel = (unsigned char)kernel;
		o->role = r->role == SHUNT_ROLE_CLIENT ? 1 : r->role == SHUNT_ROLE_SERVER ? 2 : 0;
		o->family = r->family == AF_INET ? 2 : r->family == AF_INET6 ? 10 : 0;
		o->prefix = (unsigned char)r->prefix;
		memcpy(o->addr, r->addr, 16);
		o->port_lo = r->port_lo;
		o->port_hi = r->port_hi;
	}
	skel->rodata->nrules = n;
	skel->rodata->default_kernel = cfg->default_transport == SHUNT_TP_KERNEL;
	return 0;
}

/* dir's parent is a bpffs; the default's, /sys/fs/bpf, is mounted when
 * it is not yet (as systemd does at boot). */
static int bpffs_ready(const char *dir, char *err, size_t errlen)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (!slash || slash == parent) {
		snprintf(err, errlen, "sockmap_pin %s: must be a directory inside a bpffs", dir);
		return -1;
	}
	*slash = 0;
	struct statfs sf;
	if (statfs(parent, &sf) == 0 && sf.f_type == BPF_FS_MAGIC)
		return 0;
	if (!strcmp(parent, "/sys/fs/bpf") && mount("bpf", parent, "bpf", 0, "mode=0755") == 0)
		return 0;
	snprintf(err, errlen, "sockmap_pin %s: %s is not a bpffs (mount -t bpf bpf %s)", dir,
		 parent, parent);
	return -1;
}

static int pin_map(struct bpf_map *m, const char *name, mode_t mode, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (pin_path(path, sizeof path, pinned_dir, name) < 0 || bpf_map__pin(m, path) < 0 ||
	    chmod(path, mode) < 0) {
		snprintf(err, errlen, "sockmap: pinning %s/%s: %s", pinned_dir, name,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int sockmap_start(const struct shunt_config *cfg, char *err, size_t errlen)
{
	libbpf_set_print(libbpf_say);
	if (bpffs_ready(cfg->sockmap_pin, err, errlen) < 0 || sockmap_clean(cfg, err, errlen) < 0)
		return -1;
	if (cfg->sockmap_cgroup[0])
		snprintf(cgroup_path, sizeof cgroup_path, "%s", cfg->sockmap_cgroup);
	else if (shunt_sm_cgroup2_root(cgroup_path, sizeof cgroup_path) < 0) {
		snprintf(err, errlen, "sockmap: no cgroup v2 hierarchy is mounted (sockmap_cgroup)");
		return -1;
	}
	int cgfd = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0) {
		snprintf(err, errlen, "sockmap: cgroup %s: %s", cgroup_path, strerror(errno));
		return -1;
	}
	char why[PATH_MAX + 128];
	if (shunt_sm_cgroup_check(cgfd, cgroup_path, why, sizeof why) < 0) {
		snprintf(err, errlen, "sockmap: %s", why);
		close(cgfd);
		return -1;
	}
	const char *step = "open";
	skel = shunt_sockmap__open();
	if (!skel)
		goto fail;
	step = "rules";
	errno = E2BIG;
	if (set_rules(cfg) < 0)
		goto fail;
	step = "load (needs CAP_BPF and CAP_NET_ADMIN, or root)";
	if (shunt_sockmap__load(skel) < 0)
		goto fail;
	step = "attach sk_msg";
	if (bpf_prog_attach(bpf_program__fd(skel->progs.shunt_sk_msg),
			    bpf_map__fd(skel->maps.socks), BPF_SK_MSG_VERDICT, 0) < 0)
		goto fail;
	step = "pin directory";
	snprintf(pinned_dir, sizeof pinned_dir, "%s", cfg->sockmap_pin);
	if (mkdir(pinned_dir, 0755) < 0 && errno != EEXIST)
		goto fail;
	chmod(pinned_dir, 0755);
	/* The mark map is anyone's: a mark only keeps a connection on TCP.
	 * The counters are read by shunt stat; the sockhash is root's. */
	if (pin_map(skel->maps.socks, SHUNT_SM_PIN_SOCKS, 0600, err, errlen) < 0 ||
	    pin_map(skel->maps.skip_cookie, SHUNT_SM_PIN_SKIP, 0622, err, errlen) < 0 ||
	    pin_map(skel->maps.counters, SHUNT_SM_PIN_COUNTERS, 0644, err, errlen) < 0) {
		close(cgfd);
		sockmap_stop();
		return -1;
	}
	step = "attach sockops to the cgroup";
	sm_link = bpf_program__attach_cgroup(skel->progs.shunt_sockops, cgfd);
	if (!sm_link) {
		sm_link = NULL;
		goto fail;
	}
	step = "pin the link";
	char path[PATH_MAX];
	if (pin_path(path, sizeof path, pinned_dir, SHUNT_SM_PIN_LINK) < 0 ||
	    bpf_link__pin(sm_link, path) < 0)
		goto fail;
	close(cgfd);
	counters_fd = bpf_map__fd(skel->maps.counters);
	shuntd_log("sockmap: attached to cgroup %s, pinned in %s (%u rule(s))", cgroup_path,
		   pinned_dir, skel->rodata->nrules);
	return 0;
fail:;
	int e = errno;
	snprintf(err, errlen, "sockmap: %s: %s", step, strerror(e));
	close(cgfd);
	sockmap_stop();
	return -1;
}

void sockmap_stop(void)
{
	if (sm_link) {
		bpf_link__detach(sm_link);
		bpf_link__destroy(sm_link);
		sm_link = NULL;
	}
	if (pinned_dir[0]) {
		unpin_all(pinned_dir, NULL, 0);
		pinned_dir[0] = 0;
	}
	if (skel) {
		shunt_sockmap__destroy(skel);
		skel = NULL;
		counters_fd = -1;
		shuntd_log("sockmap: detached from cgroup %s", cgroup_path);
	}
}

static int detach_pinned_link(const char *dir)
{
	char path[PATH_MAX];
	if (pin_path(path, sizeof path, dir, SHUNT_SM_PIN_LINK) < 0)
		return -1;
	int fd = bpf_obj_get(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = bpf_link_detach(fd);
	close(fd);
	return rc;
}
#else
int sockmap_start(const struct shunt_config *cfg, char *err, size_t errlen)
{
	(void)cfg;
	snprintf(err, errlen, "sockmap: this shuntd was built without it (clang, bpftool and "
			      "libbpf were missing at build time)");
	return -1;
}

void sockmap_stop(void)
{
}

static int detach_pinned_link(const char *dir)
{
	(void)dir;
	return 0;
}
#endif

int sockmap_clean(const struct shunt_config *cfg, char *err, size_t errlen)
{
	const char *dir = cfg->sockmap_pin;
	if (detach_pinned_link(dir) < 0) {
		snprintf(err, errlen, "sockmap: detaching %s/%s: %s", dir, SHUNT_SM_PIN_LINK,
			 strerror(errno));
		return -1;
	}
	int found = unpin_all(dir, err, errlen);
	if (found < 0)
		return -1;
	if (found)
		shuntd_log("sockmap: removed what an earlier shuntd left in %s", dir);
	return 0;
}

void sockmap_metrics(FILE *f)
{
	static const char *const help = "# HELP %s %s\n# TYPE %s %s\n";
	uint64_t c[SHUNT_SM_NCOUNTERS] = {0};
	int on = 0;
#ifdef SHUNT_HAVE_SOCKMAP
	on = skel && sm_link;
	if (counters_fd >= 0)
		shunt_sm_counters_read(counters_fd, c);
#endif
	fprintf(f, help, "shuntd_sockmap_attached",
		"1 when this agent runs the sockmap path (shuntd --sockmap).",
		"shuntd_sockmap_attached", "gauge");
	fprintf(f, "shuntd_sockmap_attached %d\n", on);
	fprintf(f, help, "shuntd_sockmap_connections_total",
		"Local TCP connections whose two ends entered the sockhash.",
		"shuntd_sockmap_connections_total", "counter");
	fprintf(f, "shuntd_sockmap_connections_total %llu\n", (unsigned long long)c[SHUNT_SM_CONNS]);
	fprintf(f, help, "shuntd_sockmap_sockets_total", "Sockets entered into the sockhash.",
		"shuntd_sockmap_sockets_total", "counter");
	fprintf(f, "shuntd_sockmap_sockets_total %llu\n",
		(unsigned long long)c[SHUNT_SM_SOCKS_ADDED]);
	fprintf(f, help, "shuntd_sockmap_sends_total",
		"Sends of sockets in the sockhash: redirected to the peer, or left to TCP.",
		"shuntd_sockmap_sends_total", "counter");
	fprintf(f, "shuntd_sockmap_sends_total{result=\"redirected\"} %llu\n",
		(unsigned long long)c[SHUNT_SM_MSGS]);
	fprintf(f, "shuntd_sockmap_sends_total{result=\"tcp\"} %llu\n",
		(unsigned long long)c[SHUNT_SM_MISSES]);
	fprintf(f, help, "shuntd_sockmap_bytes_total", "Bytes redirected to the peer socket.",
		"shuntd_sockmap_bytes_total", "counter");
	fprintf(f, "shuntd_sockmap_bytes_total %llu\n", (unsigned long long)c[SHUNT_SM_BYTES]);
	fprintf(f, help, "shuntd_sockmap_skipped_total",
		"Connection ends kept off the sockhash, by reason.",
		"shuntd_sockmap_skipped_total", "counter");
	static const struct {
		int idx;
		const char *reason;
	} skipped[] = {{SHUNT_SM_SKIP_SHIM, "shim"},
		       {SHUNT_SM_SKIP_RULE, "rule-kernel"},
		       {SHUNT_SM_SKIP_REMOTE, "remote"},
		       {SHUNT_SM_ADD_FAILED, "refused"}};
	for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
		fprintf(f, "shuntd_sockmap_skipped_total{reason=\"%s\"} %llu\n", skipped[i].reason,
			(unsigned long long)c[skipped[i].idx]);
}
