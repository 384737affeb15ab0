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
#include "shunt_rundir_open.h"
#include "config/shunt_rundir_path.h"

static char rundir[SHUNT_PATH_MAX];
static int rundir_state; /* 0 unknown, 1 ok, -1 unusable */
/* shm_group: the rundir is shared with the members of group_gid. */
static int group_on;
static gid_t group_gid;

#define GROUP_DIR_MODE 02770 /* setgid: what is created inside is the group's */

/* A directory of ours: owned by this uid and writable by no one else, so no
 * other user can plant offers or registry entries in it.  With shm_group
 * one of the group's: its group, group-writable, setgid (every file made
 * in it belongs to the group, whoever makes it), never writable by others;
 * one we own is made so.  -1 with *why (may stay empty: nothing to tell)
 * when it may not be used. */
static int own_dir(const char *path, char *why, size_t whylen)
{
	why[0] = 0;
	if (mkdir(path, group_on ? GROUP_DIR_MODE : 0700) < 0 && errno != EEXIST)
		return -1;
	/* By descriptor: what is checked and changed is what we opened. */
	struct stat st;
	int fd = shunt_rundir_open(path, O_RDONLY | O_DIRECTORY, 0, S_IFDIR, SHUNT_ANY_OWNER, &st);
	if (fd < 0) {
		int e = errno;
		if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
			snprintf(why, whylen, "a symlink");
		else if (e == EACCES && st.st_uid != geteuid())
			snprintf(why, whylen, "it belongs to uid %u", (unsigned)st.st_uid);
		else
			snprintf(why, whylen, "%s", e == EINVAL ? "not a directory" : strerror(e));
		return -1;
	}
	const char *no = shunt_rundir_refusal(&st, (unsigned)geteuid(), group_on);
	if (no && st.st_uid != geteuid())
		snprintf(why, whylen, "it belongs to uid %u", (unsigned)st.st_uid);
	else if (no)
		snprintf(why, whylen, "%s", no);
	if (!group_on || st.st_mode & 002) {
		REAL(close)(fd);
		return no ? -1 : 0;
	}
	why[0] = 0;
	int ok = 1;
	if (st.st_uid == geteuid()) {
		/* (mkdir's mode went through the umask.) */
		if (st.st_gid != group_gid && fchown(fd, (uid_t)-1, group_gid) < 0) {
			ok = 0;
			snprintf(why, whylen, "cannot give it to the shm_group: not a member?");
		} else if ((st.st_mode & 07777) != GROUP_DIR_MODE && fchmod(fd, GROUP_DIR_MODE) < 0) {
			ok = 0;
			snprintf(why, whylen, "cannot make it mode 2770");
		}
	} else {
		ok = st.st_gid == group_gid && (st.st_mode & 02070) == 02070;
		if (!ok)
			snprintf(why, whylen, "neither this user's nor the shm_group's");
	}
	REAL(close)(fd);
	return ok ? 0 : -1;
}

/* 0 when dir (and its rooms) can be ours; else -1, and *why says what is
 * wrong with what is there (empty: it could not be made). */
static int try_rundir(const char *dir, char *why, size_t whylen)
{
	char sub[SHUNT_PATH_MAX + 4];
	why[0] = 0;
	if (strlen(dir) > SHUNT_RUNDIR_MAX) {
		snprintf(why, whylen, "longer than %d bytes", SHUNT_RUNDIR_MAX);
		return -1;
	}
	if (own_dir(dir, why, whylen) < 0)
		return -1;
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++) {
		if (!shunt_room_made_by_library(r))
			continue;
		if (shunt_rundir_path(sub, sizeof sub, dir, r, NULL) < 0 ||
		    own_dir(sub, why, whylen) < 0) {
			char in[128];
			snprintf(in, sizeof in, "%s", why);
			snprintf(why, whylen, "%s/: %s", shunt_room_dir(r), in[0] ? in : "cannot be made");
			return -1;
		}
	}
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
	/* A candidate someone else made first (/dev/shm/shunt-$UID is any
	 * user's to create), or one others can write, is refused out loud:
	 * silently moving on would let anyone turn shm off for this user. */
	int refused = 0;
	for (int i = 0; i < n && ok < 0; i++) {
		char why[160];
		ok = try_rundir(cand[i], why, sizeof why);
		if (ok < 0 && (why[0] || cfg->rundir[0])) {
			refused = i + 1;
			shunt_log(SHUNT_LOG_WARN, "rundir %s is not usable (%s)%s", cand[i],
				  why[0] ? why : "it cannot be made",
				  i + 1 < n ? "; trying the next" : "; shm is off");
		}
	}
	if (ok == 0 && refused)
		shunt_log(SHUNT_LOG_WARN, "rundir: using %s", rundir);
	if (cfg->rundir[0] && ok == 0 && !memory_backed(rundir))
		shunt_log(SHUNT_LOG_WARN,
			  "rundir %s is not on tmpfs: ring pages will be written back to disk",
			  rundir);
	SHUNT_GUARD_LEAVE();
	__atomic_store_n(&rundir_state, ok == 0 ? 1 : -1, __ATOMIC_RELEASE);
	return ok == 0 ? rundir : NULL;
}

