/* Opening what is in the runtime directory.  Anyone who can write there
 * (the user, a shm_group member, a broken tool) may have left a FIFO, a
 * symlink, a device or a directory where a file is expected: an open must
 * never block on it (a FIFO waits for a writer), never follow it, and what
 * it opened must be the kind of file the caller reads.  Used for every
 * file the library and shuntd open there. */
#ifndef SHUNT_RUNDIR_OPEN_H
#define SHUNT_RUNDIR_OPEN_H

#include <dirent.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define SHUNT_ANY_OWNER ((uid_t)-1)

/* open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode),
 * then fstat: the fd when the file is of type (S_IFREG, S_IFDIR, ...) and,
 * unless owner is SHUNT_ANY_OWNER, owned by owner; *st (may be NULL) gets
 * its fstat.  Otherwise -1 with errno (ELOOP: a symlink; EPERM: another
 * owner; EINVAL: another type).  The fd is closed with REAL(close). */
int shunt_rundir_open(const char *path, int flags, mode_t mode, mode_t type, uid_t owner,
		      struct stat *st);

/* The same, relative to the directory fd dfd (openat). */
int shunt_rundir_openat(int dfd, const char *name, int flags, mode_t mode, mode_t type,
			uid_t owner, struct stat *st);

/* opendir(dir) for a directory of the rundir, refusing a symlink in its
 * place (that would list, and have a sweep remove, another directory's
 * files).  NULL with errno when it is not a directory. */
DIR *shunt_rundir_opendir(const char *dir);

/* A shared page of len bytes at path, made if it is not there (mode
 * SHUNT_FILE_MODE, or 0660 with group), its space reserved before it is
 * touched (a page of a full tmpfs touched through a mapping is a SIGBUS):
 * counters every process of the rundir sees.  MAP_FAILED if it cannot be. */
void *shunt_rundir_map(const char *path, size_t len, int group);

/* Such a page, mapped once per process on first use (threads racing for
 * it: one maps, the others do without it meanwhile). */
struct shunt_map_once {
	void *map;
	int state; /* 0 not tried, 1 being mapped, 2 mapped, -1 unusable */
};
/* The mapping, or NULL when it is not there (yet); *mine is set to 1 when
 * the caller is to map it now and report with shunt_map_once_done. */
void *shunt_map_once(struct shunt_map_once *m, int *mine);
/* The caller's mapping (MAP_FAILED: unusable for good); returns it, or
 * NULL. */
void *shunt_map_once_done(struct shunt_map_once *m, void *map);
/* The mapping if it is there, without trying to make it. */
static inline void *shunt_map_once_peek(const struct shunt_map_once *m)
{
	return __atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2 ? m->map : NULL;
}

#endif
