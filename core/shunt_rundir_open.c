/* Opening what is in the runtime directory (shunt_rundir_open.h). */
#include "shunt_rundir_open.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shunt_rundir_layout.h"

#include "shunt_real.h"

int shunt_rundir_openat(int dfd, const char *name, int flags, mode_t mode, mode_t type,
			uid_t owner, struct stat *st)
{
	struct stat own;
	if (!st)
		st = &own;
	int fd = openat(dfd, name, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
	if (fd < 0)
		return -1;
	int err = 0;
	if (fstat(fd, st) < 0)
		err = errno;
	else if ((st->st_mode & S_IFMT) != type)
		err = EINVAL;
	else if (owner != SHUNT_ANY_OWNER && st->st_uid != owner)
		err = EPERM;
	if (!err)
		return fd;
	REAL(close)(fd);
	errno = err;
	return -1;
}

DIR *shunt_rundir_opendir(const char *dir)
{
	int dfd = shunt_rundir_open(dir, O_RDONLY | O_DIRECTORY, 0, S_IFDIR, SHUNT_ANY_OWNER, NULL);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d && dfd >= 0) {
		int e = errno;
		REAL(close)(dfd);
		errno = e;
	}
	return d;
}

int shunt_rundir_open(const char *path, int flags, mode_t mode, mode_t type, uid_t owner,
		      struct stat *st)
{
	return shunt_rundir_openat(AT_FDCWD, path, flags, mode, type, owner, st);
}

void *shunt_rundir_map(const char *path, size_t len, int group)
{
	struct stat sb;
	void *m = MAP_FAILED;
	int fd = shunt_rundir_open(path, O_RDWR | O_CREAT, SHUNT_FILE_MODE, S_IFREG,
				   SHUNT_ANY_OWNER, &sb);
	if (fd < 0)
		return MAP_FAILED;
	if (group)
		fchmod(fd, 0660);
	if ((off_t)len <= sb.st_size || posix_fallocate(fd, 0, (off_t)len) == 0)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REAL(close)(fd);
	return m;
}

void *shunt_map_once(struct shunt_map_once *m, int *mine)
{
	*mine = 0;
	int st = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
	if (st == 2)
		return m->map;
	if (st == 0 && __atomic_compare_exchange_n(&m->state, &st, 1, 0, __ATOMIC_ACQ_REL,
						   __ATOMIC_ACQUIRE))
		*mine = 1;
	return NULL;
}

void *shunt_map_once_done(struct shunt_map_once *m, void *map)
{
	if (map == MAP_FAILED) {
		__atomic_store_n(&m->state, -1, __ATOMIC_RELEASE);
		return NULL;
	}
	m->map = map;
	__atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
	return map;
}
