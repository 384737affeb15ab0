/* The agent's side of the runtime directory: filing relayed DEMOTE
 * positions in r/ (fabric offers are held in memory, shuntd_pending.c), and
 * removing what dead processes left behind (l/ entries whose lock is free,
 * relays nobody took, shm files and wake sockets of dead connections). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_rundir_layout.h"
#include "core/shunt_rundir_open.h"
#include "core/shunt_sweep.h"
#include "core/shunt_tuple.h"
#include "shuntd.h"
#include "shuntd_pending.h"

/* Relays the agent forgot (filed before a restart) go at their age. */
#define RELAY_MAX_AGE_S PEND_TTL_S
#define TMP_MAX_AGE_S 10
#define SWEEP_MAX 4096

/* A rundir shared with a group (shm_group: setgid, group rwx) has
 * subdirectories of the group's too, mode 2770, as the library makes them
 * (core/shunt_rundir.c): the shims of the members accept no other, so
 * one the agent made first must be the same. */
#define GROUP_DIR_MODE 02770

static int group_dir(const struct stat *st)
{
	return (st->st_mode & 02070) == 02070;
}

static int subdir(const char *rundir, const char *sub, const struct stat *owner, char *err,
		  size_t errlen)
{
	char p[300];
	snprintf(p, sizeof p, "%s/%s", rundir, sub);
	if (mkdir(p, group_dir(owner) ? GROUP_DIR_MODE : 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", p, strerror(errno));
		return -1;
	}
	/* By descriptor: what is checked is what is changed. */
	struct stat st;
	int fd = shunt_rundir_open(p, O_RDONLY | O_DIRECTORY, 0, S_IFDIR, SHUNT_ANY_OWNER, &st);
	if (fd < 0) {
		snprintf(err, errlen, "%s is not a directory", p);
		return -1;
	}
	/* (mkdir's mode went through the umask; the group is the rundir's
	 * by setgid, unless the directory is older than that.) */
	int rc = 0;
	if (group_dir(owner) && st.st_uid == shuntd_fsuid() &&
	    ((st.st_mode & 07777) != GROUP_DIR_MODE || st.st_gid != owner->st_gid) &&
	    (fchown(fd, (uid_t)-1, owner->st_gid) < 0 || fchmod(fd, GROUP_DIR_MODE) < 0)) {
		snprintf(err, errlen, "%s: cannot make it the group's: %s", p, strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

/* Root's agent serving a rundir another user owns acts there as that user
 * (setfsuid/setfsgid: file access only; the agent stays root otherwise).
 * The owner can swap any name there for a symlink between a check and a
 * use; as the owner, whatever the agent then creates, removes or changes
 * is something the owner could have touched anyway.  What the agent makes
 * (subdirectories, agent.sock, relayed positions) is the owner's. */
static uid_t fs_uid;         /* whose rights files are touched with */
static uid_t owner_uid;      /* the rundir's owner, when acting as it */
static gid_t owner_gid;
static int as_owner;

uid_t shuntd_fsuid(void)
{
	return fs_uid;
}

static int act_as(uid_t uid, gid_t gid)
{
	setfsgid(gid);
	setfsuid(uid);
	/* (Both return the previous id: asking again tells whether it took.) */
	if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
		return -1;
	fs_uid = uid;
	return 0;
}

int shuntd_outside_rundir(int on)
{
	if (!as_owner)
		return 0;
	return on ? act_as(0, 0) : act_as(owner_uid, owner_gid);
}

int rundir_prepare(const char *rundir, char *err, size_t errlen)
{
	struct stat st;
	fs_uid = geteuid();
	if (mkdir(rundir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", rundir, strerror(errno));
		return -1;
	}
	if (lstat(rundir, &st) < 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 002)) {
		snprintf(err, errlen, "rundir %s: not a directory, or writable by others", rundir);
		return -1;
	}
	if (geteuid() == 0 && st.st_uid != 0) {
		owner_uid = st.st_uid;
		owner_gid = st.st_gid;
		as_owner = 1;
		if (act_as(owner_uid, owner_gid) < 0) {
			snprintf(err, errlen, "rundir %s: cannot act as its owner (uid %u)", rundir,
				 (unsigned)st.st_uid);
			return -1;
		}
	}
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++)
		if (subdir(rundir, shunt_room_dir(r), &st, err, errlen) < 0)
			return -1;
	return 0;
}

/* What rundir_prepare made, still there and ours to use: a few stat(2) and
 * access(2) calls, no directory listing, so a health probe every second
 * costs nothing.  Filing a relay needs r/ writable; queries, sweeps and
 * metrics read l/, o/ and s/. */
int rundir_check(const char *rundir, char *err, size_t errlen)
{
	struct stat st;
	if (stat(rundir, &st) < 0) {
		snprintf(err, errlen, "rundir %s: %s", rundir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || (st.st_mode & 002)) {
		snprintf(err, errlen, "rundir %s: not a directory, or writable by others", rundir);
		return -1;
	}
	for (int r = 0; r < SHUNT_ROOM_COUNT; r++) {
		char p[300];
		if (shunt_rundir_path(p, sizeof p, rundir, r, NULL) < 0 || stat(p, &st) < 0 ||
		    !S_ISDIR(st.st_mode) || access(p, R_OK | W_OK | X_OK) < 0) {
			snprintf(err, errlen, "rundir %s: %s/ is missing or not usable", rundir,
				 shunt_room_dir(r));
			return -1;
		}
	}
	return 0;
}

/* One frame as <rundir>/<sub>/<name>, written whole under a temporary name,
 * then renamed: the shim sees no file or a complete one. */
static int file_frame(const char *rundir, enum shunt_room room, const char *name,
		      const struct agent_msg *m, unsigned uid, gid_t gid, mode_t mode)
{
	static unsigned seq;
	uint8_t buf[AGENT_FRAME_MAX];
	char tmp[320], path[320];
	size_t n = agent_encode(m, buf);
	if (!n)
		return -1;
	if (shunt_rundir_path(path, sizeof path, rundir, room, "%s", name) < 0 ||
	    shunt_rundir_path(tmp, sizeof tmp, rundir, room, ".%s.%d.%u", name, (int)getpid(),
			      seq++) < 0)
		return -1;
	int fd = shunt_rundir_open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, S_IFREG, SHUNT_ANY_OWNER,
				   NULL);
	if (fd < 0)
		return -1;
	int ok = write(fd, buf, n) == (ssize_t)n;
	/* Another uid only with root's own rights; acting as the rundir's
	 * owner, a file for another member is the group's to read. */
	uid_t to = shuntd_fsuid() == 0 && uid != 0 ? (uid_t)uid : (uid_t)-1;
	if (ok && (to != (uid_t)-1 || gid != (gid_t)-1))
		ok = fchown(fd, to, gid) == 0;
	ok = ok && fchmod(fd, mode) == 0;
	ok = close(fd) == 0 && ok;
	if (ok && rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return -1;
}

/* The name both ends of a connection give its files: the key of its tuple
 * (core/shunt_tuple.h), which the wire form carries field by field. */
static void key_of(const struct agent_tuple *w, char *key, size_t len)
{
	struct shunt_tuple t;
	memset(&t, 0, sizeof t);
	memcpy(t.caddr, w->caddr, 16);
	memcpy(t.saddr, w->saddr, 16);
	t.cport = w->cport;
	t.sport = w->sport;
	shunt_tuple_key(&t, key, len);
}

/* r/<key>.<c|s>: the name of a relay for one end of tuple t. */
static void relay_name(const struct agent_tuple *t, int client, char *name, size_t len)
{
	char key[32];
	key_of(t, key, sizeof key);
	snprintf(name, len, "%s.%c", key, client ? 'c' : 's');
}

int rundir_file_relay(const char *rundir, const struct agent_relay *r, unsigned uid)
{
	struct agent_msg m = {.type = AGENT_RELAY};
	char name[40];
	struct stat st;
	if (stat(rundir, &st) < 0)
		return -1;
	m.u.relay = *r;
	relay_name(&r->tuple, r->to_client, name, sizeof name);
	return file_frame(rundir, SHUNT_ROOM_RELAY, name, &m, uid, st.st_gid, 0640);
}

void rundir_unfile_relay(const char *rundir, const struct agent_tuple *t, int client)
{
	char name[40], path[320];
	relay_name(t, client, name, sizeof name);
	if (shunt_rundir_path(path, sizeof path, rundir, SHUNT_ROOM_RELAY, "%s", name) == 0)
		unlink(path);
}

static void pending_gone(const struct pending *p)
{
	if (p->kind == PK_OFFER) {
		/* (A contested one held no offer: counted when contested.) */
		if (!p->contested)
			shuntd.n.expired[0]++;
		return;
	}
	shuntd.n.expired[1]++;
	/* (Taken by its shim already, most likely: then there is no file.) */
	rundir_unfile_relay(shuntd.rundir, &p->tuple, p->kind == PK_RELAY_C);
}

void pending_tick(struct ev_loop *el, void *data)
{
	(void)el;
	(void)data;
	pending_expire(ev_now_ms(), pending_gone);
}

/* ---- sweeping -------------------------------------------------------------------- */

/* l/: entries whose lock is free (their listener is gone). */
static int sweep_registry(const char *path, const char *name, void *arg)
{
	(void)arg;
	if (name[0] == '.')
		return 0;
	int fd = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
	if (fd < 0)
		return 0;
	/* Every listener holds LOCK_SH while it lives; a listener racing us
	 * re-checks the inode after locking (core/shunt_registry.c hold()), so
	 * removing a free entry is safe. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && unlink(path) == 0) {
		shuntd.n.swept[SW_REGISTRY]++;
		SHUNTD_DEBUG("swept stale registry entry %s", name);
	}
	close(fd);
	return 0;
}

/* Filed relays (and their temporary names) past their age. */
static int sweep_filed(const char *path, const char *name, void *arg)
{
	time_t now = *(time_t *)arg;
	struct stat st;
	time_t max = name[0] == '.' ? TMP_MAX_AGE_S : RELAY_MAX_AGE_S;
	if (lstat(path, &st) == 0 && now - st.st_mtime > max && unlink(path) == 0)
		shuntd.n.swept[SW_RELAY]++;
	return 0;
}

/* o/: wake sockets nobody has bound any more (named ones, of connections
 * between network namespaces: abstract ones leave no file), as
 * shm_sweep.c does in each process.  Ring files are left to the shims' own sweep, which knows their
 * formats and lifetimes. */
static int sweep_socket(const char *path, const char *name, void *arg)
{
	int s = *(int *)arg;
	struct stat st;
	if (name[0] != '.' && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    shunt_socket_stale(s, path) && unlink(path) == 0)
		shuntd.n.swept[SW_SHM]++;
	return 0;
}

void rundir_sweep(struct ev_loop *el, void *data)
{
	char dir[300];
	time_t now = time(NULL);
	if (!shunt_rundir_path(dir, sizeof dir, shuntd.rundir, SHUNT_ROOM_LISTEN, NULL))
		shunt_sweep_dir(dir, SWEEP_MAX, sweep_registry, NULL);
	/* Relayed positions nobody took, filed before the agent last started
	 * (the ones it filed since go at their lifetime, pending_tick). */
	if (!shunt_rundir_path(dir, sizeof dir, shuntd.rundir, SHUNT_ROOM_RELAY, NULL))
		shunt_sweep_dir(dir, SWEEP_MAX, sweep_filed, &now);
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s >= 0 && !shunt_rundir_path(dir, sizeof dir, shuntd.rundir, SHUNT_ROOM_OFFER, NULL))
		shunt_sweep_dir(dir, SWEEP_MAX, sweep_socket, &s);
	if (s >= 0)
		close(s);
	metrics_scan();
}
