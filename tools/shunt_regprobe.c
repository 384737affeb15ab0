/* The listener registry, looked at without changing it (shunt_regprobe.h). */
#include "shunt_regprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/shunt_registry.h"
#include "core/shunt_rundir_layout.h"
#include "core/shunt_tuple.h"

/* The pids /proc/locks shows holding a flock on dev:ino. */
static int lock_holders(dev_t dev, ino_t ino, long *pids, int max)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	int n = 0;
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		char kind[16];
		long pid;
		unsigned maj, min;
		unsigned long inode;
		/* "1: FLOCK  ADVISORY  READ 1234 00:1a:5678 0 EOF"; a waiter's
		 * line has "->" where the kind is. */
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &pid, &maj, &min,
			   &inode) != 5 ||
		    strcmp(kind, "FLOCK") || inode != (unsigned long)ino ||
		    makedev(maj, min) != dev || pid <= 0)
			continue;
		int dup = 0;
		for (int i = 0; i < n && !dup; i++)
			dup = pids[i] == pid;
		if (!dup)
			pids[n++] = pid;
	}
	fclose(f);
	return n;
}

static void comm_of(long pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "re");
	buf[0] = '\0';
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	if (!buf[0])
		snprintf(buf, len, "?");
}

/* The effective uid of pid now (a server may have dropped privileges after
 * listen()), -1 when unknown. */
static long euid_of(long pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	FILE *f = fopen(path, "re");
	long euid = -1;
	while (f && fgets(line, sizeof(line), f)) {
		long r, e;
		if (sscanf(line, "Uid: %ld %ld", &r, &e) == 2) {
			euid = e;
			break;
		}
	}
	if (f)
		fclose(f);
	return euid;
}

int regprobe_entry(int dirfd, const char *name, struct regprobe *p)
{
	memset(p, 0, sizeof(*p));
	if (shunt_regname_parse(name, &p->r) != 0)
		return -1;
	snprintf(p->name, sizeof(p->name), "%s", name);
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	p->uid = (unsigned)st.st_uid;
	p->gid = (unsigned)st.st_gid;
	p->mode = (unsigned)(st.st_mode & 07777);
	/* Taken and given back at once: reading changes nothing. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		p->live = 0;
		flock(fd, LOCK_UN);
	} else {
		p->live = errno == EWOULDBLOCK;
	}
	/* The mark is the entry's size (shunt_registry_mark()), read as the
	 * library's lookup reads it: one byte refusing, two local. */
	p->refuses = p->live && st.st_size > 0 && st.st_size != 2;
	p->local = p->live && st.st_size == 2;
	close(fd);
	p->nholders = p->live ? lock_holders(st.st_dev, st.st_ino, p->holders, REGPROBE_HOLDERS) : 0;
	for (int i = 0; i < p->nholders; i++) {
		comm_of(p->holders[i], p->progs[i], sizeof(p->progs[i]));
		p->euids[i] = euid_of(p->holders[i]);
	}
	return 0;
}

int regprobe_lookup(const char *rundir, const uint8_t a[16], unsigned port, struct regprobe *p)
{
	char dir[SHUNT_PATH_MAX], name[SHUNT_REGNAME_MAX];
	if (shunt_rundir_path(dir, sizeof(dir), rundir, SHUNT_ROOM_LISTEN, NULL) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	/* As the library: the address's own name; for a loopback address,
	 * when that is not live, the wildcard's.  A live entry is the answer,
	 * else a stale one, which the library would remove. */
	shunt_regname_format(name, sizeof(name), shunt_netns(), a, port);
	int found = regprobe_entry(dfd, name, p) == 0;
	if ((!found || !p->live) && shunt_addr16_loopback(a)) {
		struct regprobe any;
		shunt_regname_format(name, sizeof(name), shunt_netns(), (const uint8_t[16]){0}, port);
		if (regprobe_entry(dfd, name, &any) == 0 && (!found || any.live)) {
			*p = any;
			found = 1;
		}
	}
	close(dfd);
	return found;
}
