/* shunt stat -l: the listeners registered in <rundir>/l/, like smcss -l or
 * ss -l, each read with shunt_regprobe.c: live or stale (the listener died;
 * the next client to look removes it), and the processes holding it, of our
 * PID namespace only: a live entry with no process shown is held from
 * another one. */
#include "shunt_stat_listen.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/shunt_stats_read.h"
#include "shunt_outfmt.h"
#include "shunt_regprobe.h"

struct listener {
	struct regprobe p;
	char local[64];
};

/* One entry of l/: 0 with *l filled, -1 when it is not a registry entry. */
static int read_entry(int dirfd, const char *name, struct listener *l)
{
	if (regprobe_entry(dirfd, name, &l->p) != 0)
		return -1;
	if (l->p.r.any)
		snprintf(l->local, sizeof(l->local), "*:%u", l->p.r.port);
	else
		shunt_stats_format_addr(l->p.r.addr, (uint16_t)l->p.r.port, l->local,
					sizeof(l->local));
	return 0;
}

static int wanted(const struct listener *l, long pid, const char *name)
{
	if (!pid && !name)
		return 1;
	for (int i = 0; i < l->p.nholders; i++)
		if ((!pid || l->p.holders[i] == pid) &&
		    (!name || fnmatch(name, l->p.progs[i], 0) == 0))
			return 1;
	return 0;
}

static int by_port(const void *a, const void *b)
{
	const struct listener *x = a, *y = b;
	if (x->p.r.port != y->p.r.port)
		return x->p.r.port < y->p.r.port ? -1 : 1;
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
	user_name(l->p.uid, user, sizeof(user));
	if (l->p.r.host_wide)
		snprintf(scope, sizeof(scope), "host");
	else
		snprintf(scope, sizeof(scope), "netns:%lu", l->p.r.netns);
	size_t n = 0;
	for (int i = 0; i < l->p.nholders && n < sizeof(procs); i++)
		n += (size_t)snprintf(procs + n, sizeof(procs) - n, "%s%ld/%s", i ? "," : "",
				      l->p.holders[i], l->p.progs[i]);
	if (l->p.live && !l->p.nholders)
		snprintf(procs, sizeof(procs), "(another PID namespace)");
	printf("%-46s %-18s %-10s %-6s %s\n", l->local, scope, user, l->p.live ? "live" : "stale",
	       procs);
}

static void print_json(const struct listener *l, int first)
{
	char user[64], addr[64];
	user_name(l->p.uid, user, sizeof(user));
	snprintf(addr, sizeof(addr), "%s", l->local);
	char *colon = strrchr(addr, ':');
	if (colon)
		*colon = '\0';
	printf("%s{\"local\":", first ? "" : ",");
	json_str(stdout, l->local);
	printf(",\"address\":");
	json_str(stdout, addr);
	printf(",\"port\":%u,\"scope\":\"%s\",\"netns\":", l->p.r.port,
	       l->p.r.host_wide ? "host" : "netns");
	if (l->p.r.host_wide)
		printf("null");
	else
		printf("%lu", l->p.r.netns);
	printf(",\"uid\":%u,\"user\":", l->p.uid);
	json_str(stdout, user);
	printf(",\"state\":\"%s\",\"processes\":[", l->p.live ? "live" : "stale");
	for (int i = 0; i < l->p.nholders; i++) {
		printf("%s{\"pid\":%ld,\"program\":", i ? "," : "", l->p.holders[i]);
		json_str(stdout, l->p.progs[i]);
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
