/* shunt doctor: the runtime directory.  Which one the library would use
 * and why (config/shunt_rundir_path.h's candidates, taken as
 * core/shunt_rundir.c takes them: the first that is, or can be made, its
 * own), then that one: its permissions and its rooms' (whether another user
 * could plant files), the directories above it, its file system (memory or
 * disk), room for the rings of --connections connections, and what dead
 * processes left in it.  Nothing is made or removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_rundir_layout.h"
#include "core/shunt_sweep.h"
#include "shunt_doctor.h"
#include "shunt_doctor_judge.h"
#include "shunt_regprobe.h"

/* Offers and filed frames older than this are dead (shm_sweep.c and
 * shuntd_rundir.c sweep them at the same age). */
#define OFFER_MAX_AGE_S 120
#define STALE_MAX 4096

/* This process may give a file group gid: root, or a member. */
static int member_of(gid_t gid)
{
	if (geteuid() == 0 || getegid() == gid)
		return 1;
	gid_t groups[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* The verdicts the library takes a directory with: fine, or only the
 * doctor objects (a group-writable private rundir is still taken). */
static int library_accepts(enum doctor_code c)
{
	return c == DOC_RUNDIR_PERM || c == DOC_RUNDIR_READABLE || c == DOC_RUNDIR_GROUP_WRITABLE;
}

static enum doctor_code verdict(const struct doctor *d, const struct stat *st, char *why,
				size_t len)
{
	return doctor_dir_verdict(st, d->euid, d->group_on, (unsigned)d->group_gid,
				  d->group_on && member_of(d->group_gid), why, len);
}

/* The parent of path (which has no trailing slash) into out. */
static void parent_of(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	char *slash = strrchr(out, '/');
	if (slash == out)
		out[1] = '\0';
	else if (slash)
		*slash = '\0';
}

/* Whether the library would take dir (core/shunt_rundir.c try_rundir):
 * it and each room it makes are, or can be made, its own.  why gets the
 * reason it would not. */
static int library_takes(const struct doctor *d, const char *dir, char *why, size_t len)
{
	struct stat st;
	char v[256];
	if (lstat(dir, &st) < 0) {
		char parent[PATH_MAX];
		parent_of(dir, parent, sizeof(parent));
		if (access(parent, W_OK | X_OK) == 0)
			return 1;
		int e = errno;
		if (snprintf(why, len, "absent, and %s: %s", parent,
			     e == ENOENT ? "absent" : "not writable by this user") >= (int)len)
			snprintf(why, len, "absent, and cannot be made");
		return 0;
	}
	enum doctor_code c = verdict(d, &st, v, sizeof(v));
	if (!library_accepts(c)) {
		snprintf(why, len, "%s", v);
		return 0;
	}
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++) {
		char sub[SHUNT_PATH_MAX];
		if (!shunt_room_made_by_library(r) ||
		    shunt_rundir_path(sub, sizeof(sub), dir, r, NULL) < 0 || lstat(sub, &st) < 0)
			continue;
		c = verdict(d, &st, v, sizeof(v));
		if (!library_accepts(c)) {
			snprintf(why, len, "%s/: %s", shunt_room_dir(r), v);
			return 0;
		}
	}
	return 1;
}

/* The rundir the library would use into d->rundir, and why; -1 when none. */
static int choose(struct doctor *d, char *why, size_t len)
{
	struct statfs fs;
	int run_mem = statfs("/run", &fs) == 0 && shunt_fs_in_memory((unsigned long)fs.f_type);
	char cand[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1];
	int n = shunt_rundir_candidates(d->cfg.rundir, d->euid, run_mem, cand);
	if (n == 0) {
		doctor_add(d, DOC_RUNDIR_TOO_LONG,
			   "rundir %s is %zu bytes, more than %d: shm is off (reason ring-alloc)",
			   d->cfg.rundir, strlen(d->cfg.rundir), SHUNT_RUNDIR_MAX);
		return -1;
	}
	size_t w = 0;
	if (d->cfg.rundir[0]) {
		memcpy(d->rundir, cand[0], sizeof(d->rundir));
		snprintf(why, len, "the rundir setting");
		return 0;
	}
	w += (size_t)snprintf(why + w, len - w, "the default for uid %u%s: the first the library can use of",
			      d->euid, d->euid == 0 && !run_mem ? " (/run is not memory-backed)" : "");
	for (int i = 0; i < n && w < len; i++) {
		char no[512];
		if (library_takes(d, cand[i], no, sizeof(no))) {
			memcpy(d->rundir, cand[i], sizeof(d->rundir));
			snprintf(why + w, len - w, " %s", cand[i]);
			return 0;
		}
		w += (size_t)snprintf(why + w, len - w, " %s (%s),", cand[i], no);
	}
	if (w && w < len && why[w - 1] == ',')
		why[w - 1] = '\0';
	return -1;
}

/* Permissions of the rundir and of each of its rooms: one finding per kind
 * of problem, naming where.  1 when the library can use them. */
static int permissions(struct doctor *d)
{
	char where[DOC_COUNT][512], first_why[DOC_COUNT][256];
	int usable = 1, found = 0;
	memset(where, 0, sizeof(where));
	for (int r = -1; r < SHUNT_ROOM_COUNT; r++) {
		char path[SHUNT_PATH_MAX], v[256];
		struct stat st;
		if (r < 0)
			snprintf(path, sizeof(path), "%s", d->rundir);
		else if (shunt_rundir_path(path, sizeof(path), d->rundir, r, NULL) < 0)
			continue;
		if (lstat(path, &st) < 0)
			continue; /* made when first needed */
		enum doctor_code c = verdict(d, &st, v, sizeof(v));
		if (c == DOC_RUNDIR_PERM)
			continue;
		if (!library_accepts(c) && (r < 0 || shunt_room_made_by_library(r)))
			usable = 0;
		size_t n = strlen(where[c]);
		if (!n)
			snprintf(first_why[c], sizeof(first_why[c]), "%s", v);
		snprintf(where[c] + n, sizeof(where[c]) - n, "%s%s", n ? ", " : "",
			 r < 0 ? "the rundir" : shunt_room_dir(r));
	}
	for (int c = 0; c < DOC_COUNT; c++) {
		if (!where[c][0])
			continue;
		found = 1;
		doctor_add(d, (enum doctor_code)c, "%s (%s): %s", d->rundir, where[c], first_why[c]);
	}
	if (!found) {
		struct stat st;
		if (lstat(d->rundir, &st) < 0)
			doctor_add(d, DOC_RUNDIR_PERM, "%s is made by the library at its first decision%s",
				   d->rundir,
				   d->group_on ? ", the shm_group's with mode 2770" : ", mode 0700");
		else if (d->group_on)
			doctor_add(d, DOC_RUNDIR_PERM,
				   "shared with group %u: mode %04o, owner uid %u, group %u; the rooms likewise",
				   (unsigned)d->group_gid, (unsigned)(st.st_mode & 07777),
				   (unsigned)st.st_uid, (unsigned)st.st_gid);
		else
			doctor_add(d, DOC_RUNDIR_PERM,
				   "private: mode %04o, owner uid %u; no other user can plant files; the rooms likewise",
				   (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
	}
	return usable;
}

/* The directories above the rundir: whoever can write one of them can
 * replace what is inside. */
static void parents(struct doctor *d)
{
	char p[PATH_MAX], bad[1024] = "";
	size_t n = 0;
	snprintf(p, sizeof(p), "%s", d->rundir);
	while (strcmp(p, "/")) {
		char up[PATH_MAX];
		struct stat st;
		parent_of(p, up, sizeof(up));
		snprintf(p, sizeof(p), "%s", up);
		if (stat(p, &st) == 0 && doctor_parent_unsafe(&st, d->euid) && n < sizeof(bad))
			n += (size_t)snprintf(bad + n, sizeof(bad) - n, "%s%s (mode %04o, uid %u)",
					      n ? ", " : "", p, (unsigned)(st.st_mode & 07777),
					      (unsigned)st.st_uid);
	}
	if (n)
		doctor_add(d, DOC_RUNDIR_PARENT, "%s lies in %s", d->rundir, bad);
}

/* File system and room: of the rundir, or of the directory it will be
 * made in. */
static void filesystem(struct doctor *d)
{
	char p[PATH_MAX], name[32], free_s[32], size_s[32], need_s[32], ring_s[32];
	struct statfs fs;
	snprintf(p, sizeof(p), "%s", d->rundir);
	while (statfs(p, &fs) < 0 && strcmp(p, "/")) {
		char up[PATH_MAX];
		parent_of(p, up, sizeof(up));
		snprintf(p, sizeof(p), "%s", up);
	}
	const char *fsn = doctor_fs_name((unsigned long)fs.f_type);
	if (fsn)
		snprintf(name, sizeof(name), "%s", fsn);
	else
		snprintf(name, sizeof(name), "type 0x%lx", (unsigned long)fs.f_type);
	if (shunt_fs_in_memory((unsigned long)fs.f_type))
		doctor_add(d, DOC_RUNDIR_FS, "%s is on %s: memory-backed", p, name);
	else
		doctor_add(d, DOC_RUNDIR_DISK,
			   "%s is on %s, not memory-backed: ring pages would be written back to disk", p,
			   name);
	uint64_t bsize = (uint64_t)fs.f_bsize;
	uint64_t avail = (uint64_t)fs.f_bavail * bsize, size = (uint64_t)fs.f_blocks * bsize;
	uint64_t need = doctor_rings_need(d->connections, d->cfg.ring_size);
	doctor_bytes(avail, free_s, sizeof(free_s));
	doctor_bytes(size, size_s, sizeof(size_s));
	doctor_bytes(need, need_s, sizeof(need_s));
	doctor_bytes(d->cfg.ring_size, ring_s, sizeof(ring_s));
	doctor_add(d, avail < need ? DOC_RUNDIR_SPACE : DOC_RUNDIR_ROOM,
		   "%s free of %s; %lu connections with ring_size %s take %s (2 x ring_size + 4 KiB each)%s",
		   free_s, size_s, d->connections, ring_s, need_s,
		   avail < need ? ": the connections past the room fall back (ring-alloc)" : "");
}

struct stale {
	time_t now;
	int room;
	unsigned n[SHUNT_ROOM_COUNT];
};

static int lock_free(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	int gone = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
	if (fd >= 0)
		close(fd); /* (the lock goes with it) */
	return gone;
}

/* One entry: counted when what made it is gone, as the sweeps judge it
 * (registry entries, counters and arenas by their owner's flock, offers
 * and filed frames by age; wake sockets would need a datagram: not
 * looked at). */
static int count_stale(const char *path, const char *name, void *arg)
{
	struct stale *s = arg;
	struct stat st;
	if (name[0] == '.' || lstat(path, &st) < 0)
		return 0;
	int dead = 0;
	switch (s->room) {
	case SHUNT_ROOM_LISTEN:
	case SHUNT_ROOM_STATS:
		dead = S_ISREG(st.st_mode) && lock_free(path);
		break;
	case SHUNT_ROOM_OFFER:
		if (S_ISREG(st.st_mode) && !strncmp(name, "a-", 2))
			dead = lock_free(path);
		else if (S_ISLNK(st.st_mode) || S_ISREG(st.st_mode))
			dead = s->now - st.st_mtime > OFFER_MAX_AGE_S;
		break;
	default:
		dead = s->now - st.st_mtime > OFFER_MAX_AGE_S;
		break;
	}
	s->n[s->room] += (unsigned)dead;
	return 0;
}

static void stale(struct doctor *d)
{
	struct stale s = {.now = time(NULL)};
	unsigned total = 0;
	char list[256] = "";
	size_t w = 0;
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++) {
		char dir[SHUNT_PATH_MAX];
		if (shunt_rundir_path(dir, sizeof(dir), d->rundir, r, NULL) < 0)
			continue;
		s.room = r;
		shunt_sweep_dir(dir, STALE_MAX, count_stale, &s);
		total += s.n[r];
		if (s.n[r] && w < sizeof(list))
			w += (size_t)snprintf(list + w, sizeof(list) - w, "%s%s/ %u", w ? ", " : "",
					      shunt_room_dir(r), s.n[r]);
	}
	if (total)
		doctor_add(d, DOC_RUNDIR_STALE, "%u entr%s left by processes that are gone (%s)", total,
			   total == 1 ? "y" : "ies", list);
	else
		doctor_add(d, DOC_RUNDIR_CLEAN, "nothing left by processes that are gone");
}

void doctor_rundir(struct doctor *d)
{
	char why[1536];
	if (d->cfg.shm_group[0] && !d->group_on)
		doctor_add(d, DOC_GROUP_UNKNOWN,
			   "shm_group %s: no such group here, so the rundir stays private to the user",
			   d->cfg.shm_group);
	if (choose(d, why, sizeof(why)) < 0) {
		if (why[0])
			doctor_add(d, DOC_RUNDIR_MISSING, "no rundir the library can use: %s: shm is off "
				   "(reason ring-alloc)", why);
		d->rundir[0] = '\0';
		return;
	}
	struct stat st;
	int exists = lstat(d->rundir, &st) == 0;
	char parent[PATH_MAX];
	parent_of(d->rundir, parent, sizeof(parent));
	if (!exists && access(parent, W_OK | X_OK) < 0) {
		doctor_add(d, DOC_RUNDIR_MISSING, "%s (%s) is absent and cannot be made: %s %s", d->rundir,
			   why, parent, errno == ENOENT ? "is absent" : "is not writable by this user");
		return;
	}
	doctor_add(d, DOC_RUNDIR, "%s: %s%s", d->rundir, why,
		   exists ? "" : "; absent: the library makes it at its first decision");
	d->rundir_ok = permissions(d);
	if (d->group_on && !member_of(d->group_gid)) {
		/* (A group's rundir is not even open to those outside it.) */
		int said = 0;
		for (int i = 0; i < d->nfindings; i++)
			said |= d->findings[i].code == DOC_GROUP_MEMBER;
		if (!said)
			doctor_add(d, DOC_GROUP_MEMBER, "this user (uid %u) is not a member of shm_group %s",
				   d->euid, d->cfg.shm_group);
		d->rundir_ok = 0;
	}
	parents(d);
	filesystem(d);
	if (exists)
		stale(d);
}
