/* shunt stat -l: the listeners registered in <rundir>/l/, like smcss -l or
 * ss -l.  A listener holds flock(LOCK_SH) on its entry for as long as it
 * listens; an entry whose lock anyone can take exclusively is stale (the
 * listener died; the next client to look removes it).  Who holds a lock is
 * read from /proc/locks, which shows only processes of our PID namespace:
 * a live entry with no process shown is held from another one. */
#include "shunt_stat_listen.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/shunt_regname.h"
#include "shunt_outfmt.h"
#include "core/shunt_stats_read.h"

#define MAX_HOLDERS 16

struct listener {
	struct shunt_regname r;
	char local[64];
	unsigned uid;
	int live;
	int nholders;
	long holders[MAX_HOLDERS];
	char progs[MAX_HOLDERS][32];
};

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

/* One entry of l/: 0 with *l filled, -1 when it is not a registry entry. */
static int read_entry(int dirfd, const char *name, struct listener *l)
{
	if (shunt_regname_parse(name, &l->r) != 0)
		return -1;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	l->uid = (unsigned)st.st_uid;
	/* Taken and given back at once: reading changes nothing. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		l->live = 0;
		flock(fd, LOCK_UN);
	} else {
		l->live = errno == EWOULDBLOCK;
	}
	close(fd);
	l->nholders = l->live ? lock_holders(st.st_dev, st.st_ino, l->holders, MAX_HOLDERS) : 0;
	for (int i = 0; i < l->nholders; i++)
		comm_of(l->holders[i], l->progs[i], sizeof(l->progs[i]));
	if (l->r.any)
		snprintf(l->local, sizeof(l->local), "*:%u", l->r.port);
	else
		shunt_stats_format_addr(l->r.addr, (uint16_t)l->r.port, l->local, sizeof(l->local));
	return 0;
}

static int wanted(const struct listener *l, long pid, const char *name)
{
	if (!pid && !name)
		return 1;
	for (int i = 0; i < l->nholders; i++)
		if ((!pid || l->holders[i] == pid) &&
		    (!name || fnmatch(name, l->progs[i], 0) == 0))
			return 1;
	return 0;
}

static int by_port(const void *a, const void *b)
{
	const struct listener *x = a, *y = b;
	if (x->r.port != y->r.port)
		return x->r.port < y->r.port ? -1 : 1;
	return strcmp(x->local, y->local);
}

static void user_name(unsigned uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "%u", uid);
}

static void print_text(const struct listener *l)
{
	char user[64], scope[32], procs[512] = "-";
	user_name(l->uid, user, sizeof(user));
	if (l->r.host_wide)
		snprintf(scope, sizeof(scope), "host");
	else
		snprintf(scope, sizeof(scope), "netns:%lu", l->r.netns);
	size_t n = 0;
	for (int i = 0; i < l->nholders && n < sizeof(procs); i++)
		n += (size_t)snprintf(procs + n, sizeof(procs) - n, "%s%ld/%s", i ? "," : "",
				      l->holders[i], l->progs[i]);
	if (l->live && !l->nholders)
		snprintf(procs, sizeof(procs), "(another PID namespace)");
	printf("%-46s %-18s %-10s %-6s %s\n", l->local, scope, user, l->live ? "live" : "stale",
	       procs);
}

static void print_json(const struct listener *l, int first)
{
	char user[64], addr[64];
	user_name(l->uid, user, sizeof(user));
	snprintf(addr, sizeof(addr), "%s", l->local);
	char *colon = strrchr(addr, ':');
	if (colon)
		*colon = '\0';
	printf("%s{\"local\":", first ? "" : ",");
	json_str(stdout, l->local);
	printf(",\"address\":");
	json_str(stdout, addr);
	printf(",\"port\":%u,\"scope\":\"%s\",\"netns\":", l->r.port,
	       l->r.host_wide ? "host" : "netns");
	if (l->r.host_wide)
		printf("null");
	else
		printf("%lu", l->r.netns);
	printf(",\"uid\":%u,\"user\":", l->uid);
	json_str(stdout, user);
	printf(",\"state\":\"%s\",\"processes\":[", l->live ? "live" : "stale");
	for (int i = 0; i < l->nholders; i++) {
		printf("%s{\"pid\":%ld,\"program\":", i ? "," : "", l->holders[i]);
		json_str(stdout, l->progs[i]);
		printf("}");
	}
	printf("]}");
}

int stat_listeners(const char *rundir, long pid, const char *name, int json)
{
	char dir[SHUNT_STATS_DIR_MAX + 4];
	snprintf(dir, sizeof(dir), "%s/l", rundir);
	DIR *d = opendir(dir);
	if (!d && errno != ENOENT) {
		fprintf(stderr, "shunt stat: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	struct listener *ls = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		if (n == cap) {
			struct listener *nl = realloc(ls, (cap = cap ? cap * 2 : 32) * sizeof(*ls));
			if (!nl)
				break;
			ls = nl;
		}
		if (read_entry(dirfd(d), de->d_name, &ls[n]) == 0 && wanted(&ls[n], pid, name))
			n++;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(ls, n, sizeof(*ls), by_port);
	if (json) {
		printf("{\"rundir\":");
		json_str(stdout, rundir);
		printf(",\"listeners\":[");
		for (size_t i = 0; i < n; i++)
			print_json(&ls[i], i == 0);
		printf("]}\n");
	} else {
		printf("# rundir %s: %zu listener%s%s\n", rundir, n, n == 1 ? "" : "s",
		       pid || name ? " of the processes asked for" : " registered");
		if (n)
			printf("%-46s %-18s %-10s %-6s %s\n", "LOCAL", "SCOPE", "OWNER", "STATE",
			       "PROCESSES");
		for (size_t i = 0; i < n; i++)
			print_text(&ls[i]);
	}
	free(ls);
	return (int)n;
}
