/* The runtime directory: listener registry (l/), connection offers and
 * rings (o/), per-process statistics (s/). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "shunt_log.h"
#include "shunt_real.h"
#include "shunt_rundir.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif


static char rundir[SHUNT_PATH_MAX];
static int rundir_state; /* 0 unknown, 1 ok, -1 unusable */

/* A directory of ours: owned by this uid and not writable by others, so no
 * other user can plant offers or registry entries in it. */
static int own_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -1;
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return -1;
	if (st.st_uid != geteuid() || (st.st_mode & 002))
		return -1;
	return 0;
}

static int try_rundir(const char *dir)
{
	char sub[SHUNT_PATH_MAX + 4];
	/* <dir>/o/<16 hex>.cw must fit a Unix socket path (108 bytes). */
	if (strlen(dir) > SHUNT_RUNDIR_MAX || own_dir(dir, 0700) < 0)
		return -1;
	snprintf(sub, sizeof sub, "%s/l", dir);
	if (own_dir(sub, 0700) < 0)
		return -1;
	snprintf(sub, sizeof sub, "%s/o", dir);
	if (own_dir(sub, 0700) < 0)
		return -1;
	snprintf(sub, sizeof sub, "%s/s", dir);
	if (own_dir(sub, 0700) < 0)
		return -1;
	snprintf(rundir, sizeof rundir, "%s", dir);
	return 0;
}

static int memory_backed(const char *dir)
{
	struct statfs fs;
	return statfs(dir, &fs) == 0 &&
	       ((unsigned long)fs.f_type == TMPFS_MAGIC || (unsigned long)fs.f_type == RAMFS_MAGIC);
}

/* Rings live in files of the rundir, so it must be memory-backed: a ring
 * on disk would be written back to it.  /run/shunt is the brief's default;
 * where /run is not tmpfs (some containers and VMs), /dev/shm is. */
const char *shunt_rundir(void)
{
	int st = __atomic_load_n(&rundir_state, __ATOMIC_ACQUIRE);
	if (st)
		return st > 0 ? rundir : NULL;
	const struct shunt_config *cfg = shunt_config();
	char buf[SHUNT_PATH_MAX];
	int ok = -1;
	SHUNT_GUARD_ENTER();
	if (cfg->rundir[0]) {
		ok = try_rundir(cfg->rundir);
		if (ok < 0)
			shunt_log(SHUNT_LOG_WARN,
				  "rundir %s is not usable (longer than 80 bytes, not ours, or writable by others); shm is off",
				  cfg->rundir);
		else if (!memory_backed(rundir))
			shunt_log(SHUNT_LOG_WARN,
				  "rundir %s is not on tmpfs: ring pages will be written back to disk",
				  rundir);
	} else {
		if (geteuid() == 0 && memory_backed("/run"))
			ok = try_rundir("/run/shunt");
		if (ok < 0) {
			snprintf(buf, sizeof buf, "/dev/shm/shunt-%u", (unsigned)geteuid());
			ok = try_rundir(buf);
		}
		if (ok < 0) {
			snprintf(buf, sizeof buf, "/tmp/shunt-%u", (unsigned)geteuid());
			ok = try_rundir(buf);
		}
	}
	SHUNT_GUARD_LEAVE();
	__atomic_store_n(&rundir_state, ok == 0 ? 1 : -1, __ATOMIC_RELEASE);
	return ok == 0 ? rundir : NULL;
}

