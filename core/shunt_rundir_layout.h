/* What is in the runtime directory: one table for the library (which makes
 * the rooms it needs), shuntd (which files into r/ and sweeps them all) and
 * the tools (which read s/).  Where the directory is: the location
 * rules of config/shunt_rundir_path.h.
 *
 * Every file shunt makes there is private to the user (SHUNT_FILE_MODE), or
 * with shm_group the group's too (0660). */
#ifndef SHUNT_RUNDIR_LAYOUT_H
#define SHUNT_RUNDIR_LAYOUT_H

#include <stddef.h>

#define SHUNT_PATH_MAX 256
#define SHUNT_FILE_MODE 0600
/* shuntd's Unix socket, in the rundir: local shims' requests (a fabric
 * offer held for an accepted connection). */
#define SHUNT_AGENT_SOCK "agent.sock"

/* X(id, directory, made by every process at its first use, what it holds) */
#define SHUNT_ROOMS(X)                                                            \
	X(LISTEN, "l", 1, "listener registry: a file per listening address, "      \
			  "share-locked while a process listens there")            \
	X(OFFER, "o", 1, "shm offers, ring arenas, wake sockets")                  \
	X(STATS, "s", 1, "counters, a file per process (shunt_stats.h)")           \
	X(RELAY, "r", 0, "DEMOTE positions relayed through shuntd")

enum shunt_room {
#define SHUNT_ROOM_ENUM(id, dir, lib, what) SHUNT_ROOM_##id,
	SHUNT_ROOMS(SHUNT_ROOM_ENUM)
#undef SHUNT_ROOM_ENUM
	SHUNT_ROOM_COUNT
};

/* The room's directory name ("l", "o", ...). */
static inline const char *shunt_room_dir(enum shunt_room r)
{
	static const char *const dirs[] = {
#define SHUNT_ROOM_DIR(id, dir, lib, what) dir,
		SHUNT_ROOMS(SHUNT_ROOM_DIR)
#undef SHUNT_ROOM_DIR
	};
	return dirs[r];
}

/* 1 when every process makes the room at its first use of the rundir (the
 * others are made by shuntd, or on first need). */
static inline int shunt_room_made_by_library(enum shunt_room r)
{
	static const unsigned char lib[] = {
#define SHUNT_ROOM_LIB(id, dir, lib, what) lib,
		SHUNT_ROOMS(SHUNT_ROOM_LIB)
#undef SHUNT_ROOM_LIB
	};
	return lib[r];
}

/* <rundir>/<room> into buf, then "/" and fmt's expansion when fmt is not
 * NULL.  0, or -1 when it does not fit. */
int shunt_rundir_path(char *buf, size_t len, const char *rundir, enum shunt_room room,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
