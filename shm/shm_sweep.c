/* Housekeeping of <rundir>/o: what processes killed without closing leave
 * behind.  Each process sweeps once, boundedly, when it first uses shm.
 *   wake sockets named between network namespaces (<key>.c .s .cw .sw,
 *     kept ones w-<pid>-<n>; abstract ones leave nothing): stale when a
 *     datagram to them is refused (nobody has the name bound);
 *   offers (<key>, a symlink naming a slot): a live offer is taken or
 *     withdrawn within offer_timeout_ms (at most 60 s) of its creation;
 *     older ones are dead;
 *   arenas (a-<pid>-<n>): stale when the owner's flock is gone. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_real.h"
#include "core/shunt_rundir_open.h"
#include "core/shunt_sweep.h"
#include "shm_internal.h"

#define SWEEP_MAX 512
#define OFFER_MAX_AGE_S 120

static int sweep_one(const char *path, const char *name, void *arg)
{
	time_t now = *(time_t *)arg;
	struct stat st;
	if (name[0] == '.' || lstat(path, &st) < 0)
		return 0;
	if (S_ISSOCK(st.st_mode)) {
		if (shunt_socket_stale(shm_wake_sender(), path))
			unlink(path);
	} else if (S_ISREG(st.st_mode) && !strncmp(name, "a-", 2)) {
		/* An arena: its owner holds LOCK_SH for life.  Ends in other
		 * processes keep their mappings after the name goes. */
		int f = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
		if (f >= 0 && flock(f, LOCK_EX | LOCK_NB) == 0)
			unlink(path);
		if (f >= 0)
			REAL(close)(f);
	} else if ((S_ISLNK(st.st_mode) || S_ISREG(st.st_mode)) &&
		   now - st.st_mtime > OFFER_MAX_AGE_S) {
		/* An offer (a name for a slot) never taken. */
		if (S_ISLNK(st.st_mode))
			shm_names_unlink(path);
		else
			unlink(path);
	}
	return 0;
}

void shm_sweep(void)
{
	static pid_t swept;
	pid_t pid = shunt_pid();
	const char *rd = shunt_rundir();
	if (!rd || __atomic_exchange_n(&swept, pid, __ATOMIC_ACQ_REL) == pid)
		return;
	char dir[SHUNT_PATH_MAX];
	if (shunt_rundir_path(dir, sizeof dir, rd, SHUNT_ROOM_OFFER, NULL) < 0)
		return;
	SHUNT_GUARD_ENTER();
	time_t now = time(NULL);
	shunt_sweep_dir(dir, SWEEP_MAX, sweep_one, &now);
	SHUNT_GUARD_LEAVE();
}
