/* The shm transport's files in <rundir>/o: their names, the owners whose
 * files are trusted, the mode that shares them with shm_group, and the
 * tables every process of the rundir maps once.  The bottom of the
 * transport's setup: the arenas, offers, names and wake sockets above all
 * find their files here. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core/shunt_core.h"
#include "core/shunt_rundir_open.h"
#include "shm_internal.h"

int shm_path(char *buf, size_t len, const char *key, const char *suffix)
{
	return shunt_rundir_path(buf, len, shunt_rundir(), SHUNT_ROOM_OFFER, "%s%s", key, suffix);
}

void *shm_map_once(struct shunt_map_once *m, const char *name, size_t len)
{
	int mine;
	void *p = shunt_map_once(m, &mine);
	if (p || !mine)
		return p;
	char path[SHUNT_PATH_MAX];
	return shunt_map_once_done(m, shm_path(path, sizeof path, name, "")
					      ? MAP_FAILED
					      : shunt_rundir_map(path, len, shunt_rundir_group(NULL)));
}

int shm_arena_open(const char *name)
{
	char path[SHUNT_PATH_MAX];
	if (shm_path(path, sizeof path, name, ""))
		return -1;
	return shunt_rundir_open(path, O_RDWR, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
}

int shm_offer_uid_ok(uid_t uid, gid_t gid)
{
	gid_t g;
	return uid == shunt_euid() || (shunt_rundir_group(&g) && gid == g);
}

void shm_share_fd(int fd)
{
	if (fd >= 0 && shunt_rundir_group(NULL))
		fchmod(fd, 0660);
}

void shm_share_path(const char *path)
{
	if (shunt_rundir_group(NULL))
		chmod(path, 0660);
}
