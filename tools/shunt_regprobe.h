/* Looking at the listener registry (<rundir>/l/) without changing it, for
 * `shunt stat -l` and `shunt doctor --to`.  A listener holds
 * flock(LOCK_SH) on its entry while it listens; an entry whose lock can be
 * taken exclusively is stale (the listener died).  The probe takes the lock
 * and gives it back at once and removes nothing, unlike the library's
 * lookup (core/shunt_registry.c), which removes stale entries.  Who holds a
 * lock is read from /proc/locks, which shows only processes of our PID
 * namespace. */
#ifndef SHUNT_REGPROBE_H
#define SHUNT_REGPROBE_H

#include <stdint.h>
#include <sys/types.h>

#include "core/shunt_regname.h"

#define REGPROBE_HOLDERS 16

struct regprobe {
	char name[SHUNT_REGNAME_MAX];
	struct shunt_regname r;
	unsigned uid;          /* the entry's owner: who called listen() */
	unsigned gid;
	unsigned mode;         /* the entry's permission bits */
	int live;
	int refuses;           /* live, and marked by a holder that dropped its
				  privileges: clients make no offer (server-cred) */
	int local;             /* live, and its holders that dropped privileges
				  take offers through a privileged process */
	int nholders;          /* processes of our PID namespace holding it */
	long holders[REGPROBE_HOLDERS];
	char progs[REGPROBE_HOLDERS][32];
	long euids[REGPROBE_HOLDERS]; /* each holder's effective uid now, -1 unknown */
};

/* The entry name in directory dirfd (an open l/): 0 with *p filled, -1
 * when name is not a registry entry or cannot be opened. */
int regprobe_entry(int dirfd, const char *name, struct regprobe *p);

/* The entry a client of this network namespace would look up for a:port
 * (addr16 form), as the library does: the address's own name, then for a
 * loopback address the wildcard's.  1 with *p when an entry exists (live or
 * stale), 0 when none, -1 when <rundir>/l cannot be read (errno). */
int regprobe_lookup(const char *rundir, const uint8_t a[16], unsigned port, struct regprobe *p);

#endif
