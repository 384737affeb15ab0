#include "shunt_registry.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shunt_forklock.h"
#include "shunt_core.h"
#include "shunt_ownfd.h"
#include "shunt_real.h"
#include "shunt_regname.h"
#include "shunt_rundir_layout.h"
#include "shunt_rundir_open.h"
#include "shunt_tuple.h"

unsigned long shunt_netns(void)
{
	/* Read once per process: a forked child may unshare its namespace,
	 * a thread cannot move the process's.  (Two threads reading at once
	 * read the same.) */
	static unsigned long ino;
	static pid_t at;
	pid_t me = shunt_pid();
	if (__atomic_load_n(&at, __ATOMIC_ACQUIRE) != me) {
		struct stat st;
		unsigned long v = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
		__atomic_store_n(&ino, v, __ATOMIC_RELAXED);
		__atomic_store_n(&at, me, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&ino, __ATOMIC_RELAXED);
}

static void entry_name(char *buf, size_t len, const uint8_t a[16], unsigned port)
{
	shunt_regname_format(buf, len, shunt_netns(), a, port);
}

static int entry_path(char *buf, size_t len, const char *rundir, const char *name)
{
	return shunt_rundir_path(buf, len, rundir, SHUNT_ROOM_LISTEN, "%s", name);
}

/* A registry shared by a group (shm_group: l/ is setgid and group-writable)
 * gets entries the group can open, to probe their lock.  Decided from the
 * directory, so shuntd, which reads the same registry, needs no config. */
static int dir_shared(const char *rundir)
{
	char dir[SHUNT_PATH_MAX];
	struct stat st;
	return shunt_rundir_path(dir, sizeof dir, rundir, SHUNT_ROOM_LISTEN, NULL) == 0 &&
	       stat(dir, &st) == 0 && (st.st_mode & (S_ISGID | 0020)) == (S_ISGID | 0020);
}

static void share_like_dir(int fd, const char *rundir)
{
	if (dir_shared(rundir))
		fchmod(fd, 0660);
}

/* ---- the registry's generation -------------------------------------------
 * A counter in shared memory (<rundir>/l/.generation, one page) that every
 * registration bumps once its entry is made and locked.  A client that
 * found no live listener for an address remembers the generation it read
 * before it looked: while the counter has not moved, no listener can have
 * registered anywhere in the rundir, so the next connection there skips
 * the look (an open() per name, the only system call shunt would add to a
 * plain connect to a host that does not run it).  The file is made by
 * whichever process needs it first; anyone who can write in l/ may bump
 * it (as the registry's entries, it is the rundir's users' and group's). */

#define GEN_NAME ".generation"
#define GEN_LEN 4096

static struct shunt_map_once gen_once;

/* The counter, mapped on first use (made if it is not there): NULL when it
 * cannot be had, and then lookups are never skipped. */
static uint64_t *gen_get(const char *rundir)
{
	int mine;
	uint64_t *g = shunt_map_once(&gen_once, &mine);
	if (g || !mine)
		return g;
	char path[SHUNT_PATH_MAX];
	return shunt_map_once_done(&gen_once,
				   entry_path(path, sizeof path, rundir, GEN_NAME)
					   ? MAP_FAILED
					   : shunt_rundir_map(path, GEN_LEN, dir_shared(rundir)));
}

static void gen_bump(const char *rundir)
{
	uint64_t *g = gen_get(rundir);
	if (g)
		__atomic_add_fetch(g, 1, __ATOMIC_RELEASE);
}

/* Open (creating) and share-lock one entry.  Retries when a client removed
 * the file between our open and our lock, so a live listener never holds a
 * lock on an unlinked entry. */
static int hold(const char *rundir, const char *name, int *owner)
{
	char path[SHUNT_PATH_MAX];
	if (entry_path(path, sizeof path, rundir, name))
		return -1;
	for (int tries = 0; tries < 8; tries++) {
		int fd = shunt_rundir_open(path, O_RDONLY | O_CREAT, SHUNT_FILE_MODE, S_IFREG,
					   SHUNT_ANY_OWNER, NULL);
		if (fd < 0)
			return -1;
		share_like_dir(fd, rundir);
		struct stat a, b;
		if (flock(fd, LOCK_SH) == 0 && fstat(fd, &a) == 0 &&
		    stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			gen_bump(rundir);
			return shunt_fd_own(fd, owner);
		}
		REAL(close)(fd);
	}
	return -1;
}

static void add(const char *rundir, struct shunt_registration *l, const uint8_t a[16],
		unsigned port)
{
	if (l->nlocks == SHUNT_REG_MAX_NAMES)
		return;
	char *name = l->names[l->nlocks];
	entry_name(name, sizeof l->names[0], a, port);
	for (int i = 0; i < l->nlocks; i++)
		if (!strcmp(l->names[i], name))
			return;
	if (hold(rundir, name, &l->locks[l->nlocks]) >= 0)
		l->nlocks++;
}

int shunt_registry_add(const char *rundir, int fd, struct shunt_registration *l)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	uint8_t a[16];
	uint16_t port;
	l->nlocks = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    shunt_addr16((struct sockaddr *)&ss, a, &port) < 0)
		return -1;
	add(rundir, l, a, port);
	if (shunt_addr16_any(a)) {
		int v6only = 0;
		socklen_t ol = sizeof v6only;
		if (ss.ss_family == AF_INET6)
			REAL(getsockopt)(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol);
		struct ifaddrs *ifs, *i;
		if (getifaddrs(&ifs) == 0) {
			for (i = ifs; i; i = i->ifa_next) {
				if (!i->ifa_addr)
					continue;
				int fam = i->ifa_addr->sa_family;
				if (!(fam == AF_INET && !(ss.ss_family == AF_INET6 && v6only)) &&
				    !(fam == AF_INET6 && ss.ss_family == AF_INET6))
					continue;
				uint16_t dummy;
				uint8_t ia[16];
				if (shunt_addr16(i->ifa_addr, ia, &dummy) == 0 && !shunt_addr16_loopback(ia))
					add(rundir, l, ia, port);
			}
			freeifaddrs(ifs);
		}
	}
	return l->nlocks ? 0 : -1;
}

void shunt_registry_reown(const char *rundir, struct shunt_registration *l)
{
	for (int i = 0; i < l->nlocks; i++) {
		int old = l->locks[i];
		if (hold(rundir, l->names[i], &l->locks[i]) >= 0)
			shunt_fd_release(old);
	}
}

static void uncache(int fd);

void shunt_registry_remove(const char *rundir, struct shunt_registration *l)
{
	for (int i = 0; i < l->nlocks; i++) {
		/* Remove the name only when no other process still listens
		 * there (LOCK_EX succeeds once our shared lock is the last). */
		if (flock(l->locks[i], LOCK_EX | LOCK_NB) == 0) {
			char path[SHUNT_PATH_MAX];
			if (!entry_path(path, sizeof path, rundir, l->names[i]))
				unlink(path);
			uncache(l->locks[i]);
		}
		shunt_fd_release(l->locks[i]);
	}
	l->nlocks = 0;
}

/* The entry's size is its mark (shunt_registry_mark). */
static int mark_of(off_t size)
{
	return size == 0 ? SHUNT_REG_LIVE : size == 2 ? SHUNT_REG_LOCAL : SHUNT_REG_REFUSES;
}

static int live(const char *rundir, const char *name, unsigned *uid)
{
	char path[SHUNT_PATH_MAX];
	if (entry_path(path, sizeof path, rundir, name))
		return 0;
	struct stat st;
	/* (Not a regular file: not an entry, and never one to wait on.) */
	int fd = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, &st);
	if (fd < 0)
		return 0;
	int ok;
	/* The listener created the entry: its owner is the listener's uid. */
	if (uid)
		*uid = (unsigned)st.st_uid;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		/* Nobody holds it: the listener is gone. */
		unlink(path);
		ok = SHUNT_REG_NONE;
	} else {
		ok = errno != EWOULDBLOCK ? SHUNT_REG_NONE : mark_of(st.st_size);
	}
	REAL(close)(fd);
	return ok;
}

/* Entries found live, kept open: the next connection to the same place
 * asks the lock alone (one system call, not four).  A listener that went
 * away released the lock of the file we hold, even if a new one has since
 * registered under the name: then we look the name up again. */
#define REG_CACHE 16
static struct {
	uint8_t addr[16];
	uint16_t port;
	int fd;
	pid_t pid;
	int mark;     /* SHUNT_REG_*, as last read */
	uint64_t gen; /* the registry's generation then (+1; 0: not read) */
} reg_cache[REG_CACHE];
static unsigned reg_next;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(reg_mu, SHUNT_RANK_REGISTRY)

static int cached_live(const uint8_t a[16], uint16_t port)
{
	int found = SHUNT_REG_NONE;
	pthread_mutex_lock(&reg_mu);
	for (unsigned i = 0; i < REG_CACHE; i++) {
		if (reg_cache[i].fd <= 0 || reg_cache[i].port != port ||
		    memcmp(reg_cache[i].addr, a, 16))
			continue;
		struct stat st;
		if (reg_cache[i].pid == shunt_pid() && flock(reg_cache[i].fd, LOCK_EX | LOCK_NB) < 0 &&
		    errno == EWOULDBLOCK) {
			/* A holder that dropped its privileges marks the entry
			 * after we cached it, and moves the generation: the
			 * mark is read again when the generation moved. */
			uint64_t *gm = shunt_map_once_peek(&gen_once);
			uint64_t g = gm ? __atomic_load_n(gm, __ATOMIC_ACQUIRE) + 1 : 0;
			if (!g || g != reg_cache[i].gen) {
				reg_cache[i].mark = fstat(reg_cache[i].fd, &st) == 0
							    ? mark_of(st.st_size)
							    : SHUNT_REG_REFUSES;
				reg_cache[i].gen = g;
			}
			found = reg_cache[i].mark;
		} else {
			if (reg_cache[i].pid == shunt_pid())
				shunt_fd_release(reg_cache[i].fd);
			reg_cache[i].fd = 0;
		}
		break;
	}
	pthread_mutex_unlock(&reg_mu);
	return found;
}

static void cache_live(const char *rundir, const char *name, const uint8_t a[16],
		       uint16_t port)
{
	char path[SHUNT_PATH_MAX];
	if (entry_path(path, sizeof path, rundir, name))
		return;
	int fd = shunt_fd_own(
		shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, NULL), NULL);
	if (fd < 0)
		return;
	pthread_mutex_lock(&reg_mu);
	unsigned i = reg_next++ % REG_CACHE;
	if (reg_cache[i].fd > 0 && reg_cache[i].pid == shunt_pid())
		shunt_fd_release(reg_cache[i].fd);
	memcpy(reg_cache[i].addr, a, 16);
	reg_cache[i].port = port;
	reg_cache[i].fd = fd;
	reg_cache[i].pid = shunt_pid();
	reg_cache[i].gen = 0; /* the mark is read at the first use */
	pthread_mutex_unlock(&reg_mu);
}

/* The entry of fd is gone (its last listener, in this process, closed):
 * the cache lets go of its copy now rather than when the slot is reused.
 * A process that makes and closes listeners in a loop (a test suite) would
 * otherwise keep REG_CACHE fds of files nobody can reach, out of the
 * application's limit. */
static void uncache(int fd)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0)
		return;
	pthread_mutex_lock(&reg_mu);
	for (unsigned i = 0; i < REG_CACHE; i++) {
		if (reg_cache[i].fd <= 0 || reg_cache[i].pid != shunt_pid() ||
		    fstat(reg_cache[i].fd, &b) < 0 || b.st_ino != a.st_ino || b.st_dev != a.st_dev)
			continue;
		shunt_fd_release(reg_cache[i].fd);
		reg_cache[i].fd = 0;
	}
	pthread_mutex_unlock(&reg_mu);
}

/* Addresses found without a live listener, with the generation read before
 * looking (direct-mapped; a one-byte lock held for a few loads, which a
 * signal handler re-entering connect() skips rather than waits for). */
#define REG_ABSENT 64
static struct {
	uint8_t addr[16];
	uint16_t port;
	uint64_t gen1; /* the generation + 1; 0: empty */
} reg_absent[REG_ABSENT];
static uint8_t absent_lock;

static unsigned absent_slot(const uint8_t a[16], uint16_t port)
{
	uint32_t h = 2166136261u ^ port;
	for (int i = 0; i < 16; i++)
		h = (h ^ a[i]) * 16777619u;
	return (h ^ (h >> 13)) % REG_ABSENT;
}

static int absent_take(void)
{
	return !__atomic_exchange_n(&absent_lock, 1, __ATOMIC_ACQUIRE);
}

static void absent_give(void)
{
	__atomic_store_n(&absent_lock, 0, __ATOMIC_RELEASE);
}

/* 1 when a..port was found absent at generation g (so it still is). */
static int known_absent(const uint8_t a[16], uint16_t port, uint64_t g)
{
	unsigned i = absent_slot(a, port);
	int hit = 0;
	if (!absent_take())
		return 0;
	hit = reg_absent[i].gen1 == g + 1 && reg_absent[i].port == port &&
	      !memcmp(reg_absent[i].addr, a, 16);
	absent_give();
	return hit;
}

static void note_absent(const uint8_t a[16], uint16_t port, uint64_t g)
{
	unsigned i = absent_slot(a, port);
	if (!absent_take())
		return;
	memcpy(reg_absent[i].addr, a, 16);
	reg_absent[i].port = port;
	reg_absent[i].gen1 = g + 1;
	absent_give();
}

int shunt_registry_lookup(const char *rundir, const struct sockaddr *dst)
{
	uint8_t a[16];
	uint16_t port;
	char name[SHUNT_REGNAME_MAX];
	if (shunt_addr16(dst, a, &port) < 0)
		return SHUNT_REG_NONE;
	int r = cached_live(a, port);
	if (r != SHUNT_REG_NONE)
		return r;
	/* Read before looking: a registration after this read moves it.  Only
	 * SHUNT_REG_NONE is remembered: a live entry, refusing or not, is
	 * cached (and its mark re-read) by cache_live(). */
	uint64_t *gp = gen_get(rundir);
	uint64_t g = gp ? __atomic_load_n(gp, __ATOMIC_ACQUIRE) : 0;
	if (gp && known_absent(a, port, g))
		return SHUNT_REG_NONE;
	entry_name(name, sizeof name, a, port);
	if ((r = live(rundir, name, NULL)) == SHUNT_REG_NONE) {
		if (shunt_addr16_loopback(a)) {
			entry_name(name, sizeof name, (const uint8_t[16]){0}, port);
			if ((r = live(rundir, name, NULL)) != SHUNT_REG_NONE)
				goto found;
		}
		if (gp)
			note_absent(a, port, g);
		return SHUNT_REG_NONE;
	}
found:
	cache_live(rundir, name, a, port);
	return r;
}

int shunt_registry_lookup_uid(const char *rundir, const struct sockaddr *dst, unsigned *uid)
{
	uint8_t a[16];
	uint16_t port;
	char name[SHUNT_REGNAME_MAX];
	if (shunt_addr16(dst, a, &port) < 0)
		return SHUNT_REG_NONE;
	entry_name(name, sizeof name, a, port);
	int r = live(rundir, name, uid);
	if (r != SHUNT_REG_NONE)
		return r;
	if (shunt_addr16_loopback(a)) {
		entry_name(name, sizeof name, (const uint8_t[16]){0}, port);
		return live(rundir, name, uid);
	}
	return SHUNT_REG_NONE;
}

int shunt_registry_open_marks(const char *rundir, const struct shunt_registration *l, int *fds,
			      int max)
{
	int n = 0;
	for (int i = 0; i < l->nlocks && n < max; i++) {
		char path[SHUNT_PATH_MAX];
		if (entry_path(path, sizeof path, rundir, l->names[i]))
			continue;
		int fd = shunt_rundir_open(path, O_WRONLY, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
		if (fd >= 0)
			fds[n++] = fd;
	}
	return n;
}

void shunt_registry_mark(int fd, int what)
{
	/* The size is the mark (one byte refusing, two local): live() sees it
	 * with the fstat it makes anyway; clients that cached the entry read
	 * it again once the generation moved.  Of processes sharing an entry,
	 * one that cannot take offers at all decides for all. */
	struct stat st;
	off_t size = what == SHUNT_REG_LOCAL ? 2 : 1;
	if (size == 2 && (fstat(fd, &st) < 0 || st.st_size != 0))
		return;
	if (ftruncate(fd, size) < 0)
		return;
	uint64_t *g = shunt_map_once_peek(&gen_once);
	if (g)
		__atomic_add_fetch(g, 1, __ATOMIC_RELEASE);
}
