/* The runtime directory's location rules (see shunt_rundir_path.h). */
#include "shunt_rundir_path.h"

#include <stdio.h>
#include <string.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

int shunt_rundir_candidates(const char *configured, unsigned euid, int run_in_memory,
			    char out[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1])
{
	int n = 0;
	if (configured && configured[0]) {
		if (strlen(configured) > SHUNT_RUNDIR_MAX)
			return 0;
		snprintf(out[n++], SHUNT_RUNDIR_MAX + 1, "%s", configured);
		return n;
	}
	/* /run/shunt for root, the system-wide place; where /run is not tmpfs
	 * (some containers and VMs), /dev/shm is. */
	if (euid == 0 && run_in_memory)
		snprintf(out[n++], SHUNT_RUNDIR_MAX + 1, "/run/shunt");
	snprintf(out[n++], SHUNT_RUNDIR_MAX + 1, "/dev/shm/shunt-%u", euid);
	snprintf(out[n++], SHUNT_RUNDIR_MAX + 1, "/tmp/shunt-%u", euid);
	return n;
}

const char *shunt_rundir_refusal(const struct stat *st, unsigned euid, int shared)
{
	if (!S_ISDIR(st->st_mode))
		return "not a directory";
	if (st->st_uid != euid)
		return "another user's";
	if (st->st_mode & 002)
		return "writable by others";
	/* A member of the group could plant offers: private means private. */
	if (!shared && (st->st_mode & 020))
		return "writable by its group, and shm_group is not set";
	return NULL;
}

int shunt_rundir_acceptable(const struct stat *st, unsigned euid, int shared)
{
	return !shunt_rundir_refusal(st, euid, shared);
}

int shunt_fs_in_memory(unsigned long f_type)
{
	return f_type == TMPFS_MAGIC || f_type == RAMFS_MAGIC;
}
