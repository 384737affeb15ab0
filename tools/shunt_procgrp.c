/* Process groups from /proc (see shunt_procgrp.h). */
#include "shunt_procgrp.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /proc/<pid>/stat from its state field on (after "comm) "), into buf. */
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
	/* the command name may hold ')' and blanks: the last ')' ends it */
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

int procgrp_each(pid_t pgrp, void (*fn)(pid_t pid, void *arg), void *arg)
{
	int n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	for (struct dirent *de; (de = readdir(d));) {
		char buf[1024];
		int pid = atoi(de->d_name), pg;
		const char *f = pid > 0 ? stat_fields(pid, buf, sizeof(buf)) : NULL;
		/* state ppid pgrp ... */
		if (!f || sscanf(f, "%*c %*d %d", &pg) != 1 || pg != pgrp)
			continue;
		fn(pid, arg);
		n++;
	}
	closedir(d);
	return n;
}

struct sockets {
	unsigned long *inodes;
	int n, max;
};

static void add_sockets(pid_t pid, void *arg)
{
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

int procgrp_sockets(pid_t pgrp, unsigned long *inodes, int max)
{
	struct sockets s = { inodes, 0, max };
	procgrp_each(pgrp, add_sockets, &s);
	return s.n;
}

static void add_cpu(pid_t pid, void *arg)
{
	double *ticks = arg;
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	unsigned long ut, st;
	long cut, cst;
	/* fields 14-17: utime stime cutime cstime, in clock ticks */
	if (f && sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", &ut, &st,
			&cut, &cst) == 4)
		*ticks += (double)ut + (double)st + (double)cut + (double)cst;
}

double procgrp_cpu_s(pid_t pgrp)
{
	double ticks = 0;
	long hz = sysconf(_SC_CLK_TCK);
	procgrp_each(pgrp, add_cpu, &ticks);
	return ticks / (double)(hz > 0 ? hz : 100);
}
