/* The runtime directory. */
#ifndef SHUNT_RUNDIR_H
#define SHUNT_RUNDIR_H

#include <sys/types.h>

#include "config/shunt_rundir_path.h" /* the location rules, shared with the tools */
#include "shunt_rundir_layout.h"            /* what is in it */

/* <rundir>, resolved once: configured, else /run/shunt on tmpfs (root),
 * else /dev/shm/shunt-$UID, else /tmp/shunt-$UID.  NULL if none is usable:
 * it must be ours and not writable by others. */
const char *shunt_rundir(void);

/* 1 when shm_group shares the rundir with a group (its id in *gid): files
 * are made group-readable and -writable, and offers whose file belongs to
 * the group are trusted as well as our own uid's. */
int shunt_rundir_group(gid_t *gid);

#endif
