/* The runtime directory: listener registry (l/), connection offers and
 * rings (o/), per-process statistics (s/). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "shunt_log.h"
#include "shunt_real.h"
#include "shunt_rundir.h"
#include "config/shunt_rundir_path.h"

static char rundir[SHUNT_PATH_MAX];
static int rundir_state; /* 0 unknown, 1 ok, -1 unusable */
/* shm_group: the rundir is shared with the members of group_gid. */
static int group_on;
static gid_t group_gid;

#define GROUP_DIR_MODE 02770 /* setgid: what is created inside is the group's */

/* A directory of ours: owned by this uid and not writable by others, so no
 * other user can plant offers or registry entries in it.  With shm_group
 * also one of the group's: its group, group-writable, setgid (every file
 * made in it belongs to the group, whoever makes it), never writable by
 * others; one we own is made so. */
static int own_dir(const char *path)
{
	if (mkdir(path, group_on ? GROUP_DIR_MODE : 0700) < 0 && errno != EEXIST)
		return -1;
	struct stat st;
	if (!group_on)
		return lstat(path, &st) < 0 || !shunt_rundir_acceptable(&st, geteuid()) ? -1 : 0;
	/* By descriptor: what is checked and changed is what we opened. */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int ok = fstat(fd, &st) == 0 && !(st.st_mode & 002);
	if (ok && st.st_uid == geteuid()) {
		/* (mkdir's mode went through the umask.) */
		if (st.st_gid != group_gid && fchown(fd, (uid_t)-1, group_gid) < 0)
			ok = 0; /* not a member of the group */
		else if ((st.st_mode & 07777) != GROUP_DIR_MODE && fchmod(fd, GROUP_DIR_MODE) < 0)
			ok = 0;
	} else if (ok) {
		ok = st.st_gid == group_gid && (st.st_mode & 02070) == 02070;
	}
	REAL(close)(fd);
	return ok ? 0 : -1;
}

static int try_rundir(const char *dir)
{
	char sub[SHUNT_PATH_MAX + 4];
	if (strlen(dir) > SHUNT_RUNDIR_MAX || own_dir(dir) < 0)
		return -1;
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++)
		if (shunt_room_made_by_library(r) &&
		    (shunt_rundir_path(sub, sizeof sub, dir, r, NULL) < 0 || own_dir(sub) < 0))
			return -1;
	snprintf(rundir, sizeof rundir, "%s", dir);
	return 0;
}

/* shm_group, a number or a name (NSS may open files or sockets: under the
 * guard).  A name this host does not know leaves the rundir private. */
static void resolve_group(const struct shunt_config *cfg)
{
	unsigned g;
	if (!cfg->shm_group[0])
		return;
	if (shunt_config_group_id(cfg, &g)) {
		group_gid = (gid_t)g;
		group_on = 1;
		return;
	}
	struct group gr, *res = NULL;
	char buf[4096];
	if (getgrnam_r(cfg->shm_group, &gr, buf, sizeof buf, &res) == 0 && res) {
		group_gid = res->gr_gid;
		group_on = 1;
		return;
	}
	shunt_log(SHUNT_LOG_WARN, "shm_group %s: no such group; the rundir stays private to the user",
		  cfg->shm_group);
}

int shunt_rundir_group(gid_t *gid)
{
	if (!shunt_rundir() || !group_on)
		return 0;
	if (gid)
		*gid = group_gid;
	return 1;
}

static int memory_backed(const char *dir)
{
	struct statfs fs;
	return statfs(dir, &fs) == 0 && shunt_fs_in_memory((unsigned long)fs.f_type);
}

/* Rings live in files of the rundir, so it must be memory-backed: a ring
 * on disk would be written back to it.  /run/shunt for root, the
 * system-wide place; where /run is not tmpfs (some containers and VMs),
 * /dev/shm is. */
const char *shunt_rundir(void)
{
	int st = __atomic_load_n(&rundir_state, __ATOMIC_ACQUIRE);
	if (st)
		return st > 0 ? rundir : NULL;
	const struct shunt_config *cfg = shunt_config();
	char cand[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1];
	int ok = -1;
	SHUNT_GUARD_ENTER();
	resolve_group(cfg);
	int n = shunt_rundir_candidates(cfg->rundir, (unsigned)geteuid(),
					!cfg->rundir[0] && geteuid() == 0 && memory_backed("/run"),
					cand);
	for (int i = 0; i < n && ok < 0; i++)
		ok = try_rundir(cand[i]);
	if (cfg->rundir[0] && ok < 0)
		shunt_log(SHUNT_LOG_WARN,
			  "rundir %s is not usable (longer than 80 bytes, not ours%s, or writable by others); shm is off",
			  cfg->rundir, group_on ? " nor the shm_group's" : "");
	else if (cfg->rundir[0] && !memory_backed(rundir))
		shunt_log(SHUNT_LOG_WARN,
			  "rundir %s is not on tmpfs: ring pages will be written back to disk",
			  rundir);
	SHUNT_GUARD_LEAVE();
	__atomic_store_n(&rundir_state, ok == 0 ? 1 : -1, __ATOMIC_RELEASE);
	return ok == 0 ? rundir : NULL;
}

