/* Process groups from /proc (see shunt_procgrp.h). */
#include "shunt_procgrp.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"

/* /proc/<pid>/stat from its state field on, into buf; NULL if gone.  The
 * name in parentheses may hold anything: the fields follow the last ')'. */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t got = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[got] = '\0';
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

pid_t procgrp_of(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	int pgrp;
	/* state ppid pgrp */
	if (!f || sscanf(f, "%*c %*d %d", &pgrp) != 1)
		return -1;
	return (pid_t)pgrp;
}

void procgrp_each(const pid_t *pgid, int n, void (*fn)(pid_t pid, int i, void *arg), void *arg)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		pid_t g = procgrp_of(pid);
		for (int i = 0; g > 0 && i < n; i++)
			if (pgid[i] == g)
				fn(pid, i, arg);
	}
	closedir(d);
}

struct sockets {
	unsigned long *inodes;
	int n, max;
};

static void add_sockets(pid_t pid, int i, void *arg)
{
	(void)i;
	struct sockets *s = arg;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *fd = opendir(path);
	if (!fd)
		return;
	for (struct dirent *fe; (fe = readdir(fd)) && s->n < s->max;) {
		char link[64 + sizeof(fe->d_name)], target[64];
		snprintf(link, sizeof(link), "%s/%s", path, fe->d_name);
		ssize_t l = readlink(link, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = '\0';
		unsigned long ino;
		if (sscanf(target, "socket:[%lu]", &ino) == 1)
			s->inodes[s->n++] = ino;
	}
	closedir(fd);
}

int procgrp_sockets(pid_t pgid, unsigned long *inodes, int max)
{
	struct sockets s = { inodes, 0, max };
	procgrp_each(&pgid, 1, add_sockets, &s);
	return s.n;
}

static void add_cpu(pid_t pid, int i, void *arg)
{
	int64_t *out = arg, ns = proc_cpu_ns(pid);
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	long cut, cst, hz = sysconf(_SC_CLK_TCK);
	if (ns > 0)
		out[i] += ns;
	/* fields 16 and 17: cutime, cstime */
	if (f && sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %ld %ld", &cut,
			&cst) == 2 && cut + cst > 0)
		out[i] += (int64_t)(cut + cst) * (1000000000 / (hz > 0 ? hz : 100));
}

void procgrp_cpu_ns(const pid_t *pgid, int n, int64_t *out)
{
	for (int i = 0; i < n; i++)
		out[i] = 0;
	procgrp_each(pgid, n, add_cpu, out);
}
