#include "shunt_machine.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* The CPU model from /proc/cpuinfo ("model name", or what other
 * architectures call it). */
static void cpu_model(char *out, size_t len)
{
	static const char *const keys[] = { "model name", "Model", "cpu model", "uarch" };
	char line[512];
	snprintf(out, len, "unknown CPU");
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t kl = strlen(keys[k]);
			if (strncmp(line, keys[k], kl) || (line[kl] != '\t' && line[kl] != ' ' &&
							    line[kl] != ':'))
				continue;
			char *v = strchr(line, ':');
			if (!v)
				continue;
			v++;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, len, "%s", v);
			fclose(f);
			return;
		}
	}
	fclose(f);
}

double shunt_machine_loadavg(void)
{
	double load = -1;
	FILE *f = fopen("/proc/loadavg", "re");
	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = -1;
		fclose(f);
	}
	return load;
}

void shunt_machine_describe(char *buf, size_t len)
{
	char model[256];
	struct utsname u;
	cpu_set_t set;
	int usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_model(model, sizeof(model));
	if (uname(&u) != 0) {
		memset(&u, 0, sizeof(u));
		strcpy(u.sysname, "?");
	}
	/* how busy the machine was: figures from a loaded one are noisier */
	double load = shunt_machine_loadavg();
	int n = snprintf(buf, len, "%ld CPUs (%d usable), %s %s %s, %s", online, usable,
			 u.sysname, u.release, u.machine, model);
	if (load >= 0 && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ", load average %.2f", load);
}
