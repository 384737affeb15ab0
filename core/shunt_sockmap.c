/* The sockmap path's pinned objects, reached with bpf(2) directly: the
 * library must not load libbpf, and these are four commands. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <mntent.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shunt_real.h"
#include "shunt_sockmap.h"

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return REAL(syscall)(__NR_bpf, cmd, a, sizeof *a);
}

int shunt_sm_obj_get(const char *dir, const char *name, unsigned flags)
{
	char path[512];
	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	union bpf_attr a;
	memset(&a, 0, sizeof a);
	a.pathname = (uint64_t)(uintptr_t)path;
	a.file_flags = flags;
	long fd = sys_bpf(BPF_OBJ_GET, &a);
	if (fd < 0)
		return -1;
	/* bpf(2) makes its fds close-on-exec already. */
	return (int)fd;
}

/* Possible CPUs, as the kernel sizes a per-CPU map's values. */
static int possible_cpus(void)
{
	static int n;
	if (n > 0)
		return n;
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[256];
	ssize_t len = REAL(read)(fd, buf, sizeof buf - 1);
	REAL(close)(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	/* "0-3,5,7-8": the highest number plus one. */
	int hi = -1;
	for (char *p = buf; *p;) {
		if (*p >= '0' && *p <= '9') {
			int v = 0;
			while (*p >= '0' && *p <= '9')
				v = v * 10 + (*p++ - '0');
			if (v > hi)
				hi = v;
		} else {
			p++;
		}
	}
	n = hi + 1;
	return n > 0 ? n : -1;
}

#define MAX_CPUS 1024

int shunt_sm_counters_read(int fd, uint64_t out[SHUNT_SM_NCOUNTERS])
{
	int ncpu = possible_cpus();
	if (ncpu <= 0 || ncpu > MAX_CPUS) {
		errno = ERANGE;
		return -1;
	}
	static uint64_t vals[MAX_CPUS];
	for (uint32_t i = 0; i < SHUNT_SM_NCOUNTERS; i++) {
		union bpf_attr a;
		memset(&a, 0, sizeof a);
		a.map_fd = (uint32_t)fd;
		a.key = (uint64_t)(uintptr_t)&i;
		a.value = (uint64_t)(uintptr_t)vals;
		if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0)
			return -1;
		out[i] = 0;
		for (int c = 0; c < ncpu; c++)
			out[i] += vals[c];
	}
	return 0;
}

int shunt_sm_map_put(int fd, const void *key)
{
	uint8_t one = 1;
	union bpf_attr a;
	memset(&a, 0, sizeof a);
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.value = (uint64_t)(uintptr_t)&one;
	a.flags = BPF_ANY;
	return sys_bpf(BPF_MAP_UPDATE_ELEM, &a) < 0 ? -1 : 0;
}

int shunt_sm_attached(const char *dir)
{
	char path[512];
	if (snprintf(path, sizeof path, "%s/%s", dir, SHUNT_SM_PIN_LINK) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (access(path, F_OK) == 0)
		return 1;
	if (errno == ENOENT)
		return access(dir, X_OK) == 0 || errno == ENOENT ? 0 : -1;
	return -1;
}

int shunt_sm_probe(char *why, size_t len)
{
	/* A sockhash is what the path needs that a kernel may lack
	 * (CONFIG_BPF_STREAM_PARSER, CONFIG_NET_SOCK_MSG). */
	union bpf_attr a;
	memset(&a, 0, sizeof a);
	a.map_type = BPF_MAP_TYPE_SOCKHASH;
	a.key_size = sizeof(struct shunt_sm_key);
	a.value_size = sizeof(uint64_t);
	a.max_entries = 1;
	long fd = sys_bpf(BPF_MAP_CREATE, &a);
	if (fd >= 0) {
		REAL(close)((int)fd);
		return 1;
	}
	int e = errno;
	if (e == ENOSYS)
		snprintf(why, len, "this kernel has no bpf(2) (CONFIG_BPF_SYSCALL)");
	else if (e == EPERM || e == EACCES)
		snprintf(why, len, "not allowed to make BPF maps here (root, or CAP_BPF and "
				   "CAP_NET_ADMIN, is needed; unprivileged BPF is off)");
	else if (e == EINVAL)
		snprintf(why, len, "this kernel has no sockhash (CONFIG_BPF_STREAM_PARSER, "
				   "CONFIG_NET_SOCK_MSG)");
	else
		snprintf(why, len, "making a sockhash failed: %s", strerror(e));
	errno = e;
	return e == EPERM || e == EACCES ? -1 : 0;
}

int shunt_sm_cgroup2_root(char *buf, size_t len)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	if (!f)
		return -1;
	struct mntent *m;
	int rc = -1;
	while ((m = getmntent(f)))
		if (!strcmp(m->mnt_type, "cgroup2")) {
			rc = snprintf(buf, len, "%s", m->mnt_dir) >= (int)len ? -1 : 0;
			break;
		}
	endmntent(f);
	return rc;
}

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

int shunt_sm_cgroup_check(int fd, const char *path, char *why, size_t len)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0 || sf.f_type == CGROUP2_SUPER_MAGIC)
		return 0; /* (unknown: attaching will tell) */
	char root[256];
	if (shunt_sm_cgroup2_root(root, sizeof root) < 0)
		snprintf(why, len, "%s is not a cgroup v2 directory (sockmap_cgroup; no cgroup v2 "
			 "hierarchy is mounted)", path);
	else
		snprintf(why, len, "%s is not a cgroup v2 directory (sockmap_cgroup; cgroup v2 is "
			 "mounted at %s)", path, root);
	return -1;
}
