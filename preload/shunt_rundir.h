/* The runtime directory. */
#ifndef SHUNT_RUNDIR_H
#define SHUNT_RUNDIR_H

#define SHUNT_PATH_MAX 256
/* <rundir>/o/<16 hex>.cw must fit a Unix socket path (108 bytes). */
#define SHUNT_RUNDIR_MAX 80

/* <rundir>, resolved once: configured, else /run/shunt on tmpfs (root),
 * else /dev/shm/shunt-$UID, else /tmp/shunt-$UID.  NULL if none is usable:
 * it must be ours and not writable by others. */
const char *shunt_rundir(void);

#endif
