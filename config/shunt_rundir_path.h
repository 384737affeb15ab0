/* Where the runtime directory is: the choice, without the I/O.
 *
 * Shared by libshunt.so (which creates the directory) and the shunt tool and
 * shuntd (which only read it), so that both always agree on one place.  The
 * callers do the file-system calls and hand the answers in. */
#ifndef SHUNT_RUNDIR_PATH_H
#define SHUNT_RUNDIR_PATH_H

#include <stddef.h>
#include <sys/stat.h>

/* <rundir>/o/<16 hex>.cw must fit a Unix socket path (108 bytes). */
#define SHUNT_RUNDIR_MAX 80
#define SHUNT_RUNDIR_CANDIDATES 3

/* The directories to try, most preferred first, into out[i] (each
 * SHUNT_RUNDIR_MAX + 1 bytes): the configured one alone when set; else
 * /run/shunt when euid is 0 and /run is memory-backed, /dev/shm/shunt-$UID,
 * /tmp/shunt-$UID.  Returns how many (0 when the configured one is too long). */
int shunt_rundir_candidates(const char *configured, unsigned euid, int run_in_memory,
			    char out[SHUNT_RUNDIR_CANDIDATES][SHUNT_RUNDIR_MAX + 1]);

/* Why a directory (lstat result) may not be part of euid's rundir, or
 * NULL when it may: a directory, owned by euid, not writable by others, nor
 * by its group unless shared (shm_group is set): no one else can plant
 * offers or registry entries in it. */
const char *shunt_rundir_refusal(const struct stat *st, unsigned euid, int shared);
/* 1 when shunt_rundir_refusal() has nothing to say. */
int shunt_rundir_acceptable(const struct stat *st, unsigned euid, int shared);

/* 1 when a statfs f_type is tmpfs or ramfs: rings live in the rundir, and a
 * ring on disk would be written back to it. */
int shunt_fs_in_memory(unsigned long f_type);

#endif
