/* Ring memory that outlives connections.
 *
 * On these machines a page fault on shared memory costs 10-40 us, and a
 * connection touches at least six pages (a header and two ring pages at
 * each end) plus the unmap: more than a whole TCP connection.  So a client
 * process carves connections out of arenas it keeps mapped, and a server
 * keeps the arenas of its clients mapped: a new connection reuses pages
 * that are already in both page tables.
 *
 *   <rundir>/o/a-<pid>-<n>   4, 16 or 64 slots of SHM_HDR_SIZE + 2 rings
 *
 * Only the process that created an arena (its owner) hands out its slots.
 * Each connection end, in whatever process, holds an open file description
 * of the arena with an OFD read lock on its slot's first byte.  The lock
 * lives while any process still has that description (a forked child
 * inherits it), and dies with the last of them, killed or not.  The owner
 * reuses a slot only when F_OFD_GETLK finds no lock on it: no end anywhere
 * can still touch the old connection.  The owner also holds flock(LOCK_SH)
 * on the arena for its life, so a sweeper knows when it is gone. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "shm_internal.h"

/* A process's first arenas are small (most make a few connections); later
 * ones hold more, so a thousand concurrent connections need a few dozen
 * arenas, not hundreds. */
#define SHM_ARENA_SLOTS 64u
/* Arenas mapped here, ours and our clients'.  Beyond this, an arena is
 * mapped for one connection and unmapped after it (the old cost). */
#define SHM_ARENA_MAX 1024u
/* Clients' arenas with no connection left stay mapped up to this many. */
#define SHM_ARENA_IDLE_MAX 8u

struct shm_arena {
	dev_t dev;
	ino_t ino;
	uint8_t *base;
	size_t len;
	uint64_t slot_size;
	pid_t owner;        /* getpid() of the process that hands out slots,
			       0 for a client's arena mapped by a server */
	int fd;             /* owner: its flock and F_OFD_GETLK probe */
	unsigned users;     /* connection ends of this process using it */
	/* Per slot, this process's locked-or-unlocked description, kept so
	 * the next connection on the slot costs one fcntl, and who opened it:
	 * a forked child leaves its parent's alone. */
	int slotfd[SHM_ARENA_SLOTS];
	pid_t slotpid[SHM_ARENA_SLOTS];
	unsigned cursor;    /* owner: where the next free-slot search starts */
	unsigned nslots;
	uint64_t own_busy;  /* owner: slots an end in this process holds (no
			       need to ask the kernel about those) */
	char name[48];      /* a-<pid>-<n> */
};

static struct shm_arena arenas[SHM_ARENA_MAX];
static unsigned narenas;
static unsigned arena_seq;
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;

static int arena_path(char *buf, size_t len, const char *name)
{
	return shunt_rundir_path(buf, len, shunt_rundir(), SHUNT_ROOM_OFFER, "%s", name);
}

static int slot_lock(int fd, uint64_t off, short type, int cmd)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off,
			   .l_len = 1};
	int rc = REAL(fcntl)(fd, cmd, &fl);
	if (rc == 0 && cmd == F_OFD_GETLK)
		return fl.l_type == F_UNLCK ? 0 : 1;
	return rc;
}

/* This end's hold on a slot: a description of its own, locked. */
static int hold(const char *name, uint64_t off)
{
	char path[SHUNT_PATH_MAX];
	if (arena_path(path, sizeof path, name))
		return -1;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (slot_lock(fd, off, F_RDLCK, F_OFD_SETLK) < 0) {
		REAL(close)(fd);
		return -1;
	}
	return shunt_fd_own(fd, NULL);
}

/* hold(), through the slot's kept description when this process has one. */
static int hold_kept(struct shm_arena *a, unsigned k, uint64_t off)
{
	pid_t me = shunt_pid();
	int fd = a->slotfd[k];
	if (fd >= 0 && a->slotpid[k] == me && slot_lock(fd, off, F_RDLCK, F_OFD_SETLK) == 0)
		return fd;
	fd = hold(a->name, off);
	if (fd >= 0) {
		/* A description left by a connection that was shared by fork
		 * is closed by it; one inherited from a parent is the
		 * parent's. */
		a->slotfd[k] = fd;
		a->slotpid[k] = me;
	}
	return fd;
}

static void entry_init(struct shm_arena *a)
{
	memset(a, 0, sizeof *a);
	for (unsigned k = 0; k < SHM_ARENA_SLOTS; k++)
		a->slotfd[k] = -1;
}

static struct shm_arena *arena_new_own(uint64_t slot_size)
{
	if (narenas == SHM_ARENA_MAX)
		return NULL;
	struct shm_arena *a = &arenas[narenas];
	entry_init(a);
	snprintf(a->name, sizeof a->name, "a-%d-%u", (int)shunt_pid(), arena_seq++);
	char path[SHUNT_PATH_MAX];
	if (arena_path(path, sizeof path, a->name))
		return NULL;
	unsigned owned = 0;
	for (unsigned i = 0; i < narenas; i++)
		owned += arenas[i].owner == shunt_pid() && arenas[i].base;
	a->nslots = owned < 2 ? 4 : owned < 4 ? 16 : SHM_ARENA_SLOTS;
	size_t len = (size_t)slot_size * a->nslots;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* A dead process of ours with a recycled pid. */
		unlink(path);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return NULL;
	shm_share_fd(fd); /* the server maps it read-write */
	struct stat st;
	void *m = MAP_FAILED;
	if (ftruncate(fd, (off_t)len) == 0 && flock(fd, LOCK_SH) == 0 && fstat(fd, &st) == 0)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		REAL(close)(fd);
		unlink(path);
		return NULL;
	}
	a->fd = shunt_fd_own(fd, NULL);
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	a->base = m;
	a->len = len;
	a->slot_size = slot_size;
	a->owner = shunt_pid();
	narenas++;
	return a;
}

/* A free slot of one of our arenas: no end anywhere holds it. */
static struct shm_arena *find_free(uint64_t slot_size, unsigned *slot)
{
	pid_t me = shunt_pid();
	for (unsigned i = 0; i < narenas; i++) {
		struct shm_arena *a = &arenas[i];
		if (a->owner != me || a->slot_size != slot_size || !a->base)
			continue;
		for (unsigned k = 0; k < a->nslots; k++) {
			unsigned s = (a->cursor + k) % a->nslots;
			if (a->own_busy & (1ull << s))
				continue;
			if (slot_lock(a->fd, (uint64_t)s * slot_size, F_WRLCK, F_OFD_GETLK) == 0) {
				a->cursor = (s + 1) % a->nslots;
				*slot = s;
				return a;
			}
		}
	}
	struct shm_arena *a = arena_new_own(slot_size);
	if (a) {
		a->cursor = 1;
		*slot = 0;
	}
	return a;
}

int shm_arena_alloc(uint64_t ring, struct shm_slot *s, char *target, size_t tlen)
{
	uint64_t slot_size = SHM_HDR_SIZE + 2 * ring;
	unsigned k = 0;
	int rc = -1;
	pthread_mutex_lock(&arena_mu);
	struct shm_arena *a = find_free(slot_size, &k);
	if (a) {
		uint64_t off = (uint64_t)k * slot_size;
		s->lockfd = hold_kept(a, k, off);
		s->slot = k;
		s->map = NULL;
		s->map_len = 0;
		if (s->lockfd >= 0) {
			s->arena = a;
			s->hdr = (struct shm_hdr *)(a->base + off);
			s->len = slot_size;
			a->users++;
			a->own_busy |= 1ull << k;
			int n = snprintf(target, tlen, "%s:%u:%llu", a->name, k,
					 (unsigned long long)ring);
			rc = n < 0 || (size_t)n >= tlen ? -1 : 0;
			if (rc < 0) {
				a->users--;
				a->own_busy &= ~(1ull << k);
				slot_lock(s->lockfd, off, F_UNLCK, F_OFD_SETLK);
				s->lockfd = -1;
			}
		}
	}
	pthread_mutex_unlock(&arena_mu);
	if (rc == 0) {
		/* Nobody else can see the slot until the offer names it; the
		 * state goes last (OFFERED, by the caller). */
		memset(s->hdr, 0, SHM_HDR_SIZE);
	}
	return rc;
}

/* "a-<pid>-<n>:<slot>:<ring>" as written by shm_arena_alloc; every part
 * checked, the name kept to a safe alphabet. */
static int parse_target(const char *t, char *name, size_t nlen, unsigned *slot,
			uint64_t *ring)
{
	const char *c1 = strchr(t, ':');
	if (!c1 || (size_t)(c1 - t) >= nlen || c1 - t < 3 || strncmp(t, "a-", 2))
		return -1;
	for (const char *p = t; p < c1; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == 'a'))
			return -1;
	memcpy(name, t, (size_t)(c1 - t));
	name[c1 - t] = 0;
	char *end;
	errno = 0;
	unsigned long k = strtoul(c1 + 1, &end, 10);
	if (errno || end == c1 + 1 || *end != ':' || k >= SHM_ARENA_SLOTS)
		return -1;
	const char *r = end + 1;
	unsigned long long rs = strtoull(r, &end, 10);
	if (errno || end == r || *end || rs < SHM_MIN_RING || rs > SHM_MAX_RING || (rs & (rs - 1)))
		return -1;
	*slot = (unsigned)k;
	*ring = rs;
	return 0;
}

static struct shm_arena *lookup(dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < narenas; i++)
		if (arenas[i].base && arenas[i].dev == dev && arenas[i].ino == ino)
			return &arenas[i];
	return NULL;
}

/* A table entry for a client's arena: a free one, else an idle one. */
static struct shm_arena *entry_for_map(void)
{
	for (unsigned i = 0; i < narenas; i++)
		if (!arenas[i].base)
			return &arenas[i];
	if (narenas < SHM_ARENA_MAX)
		return &arenas[narenas++];
	return NULL;
}

static void unmap_idle_beyond(unsigned keep)
{
	unsigned idle = 0;
	for (unsigned i = narenas; i-- > 0;) {
		struct shm_arena *a = &arenas[i];
		if (!a->base || a->owner || a->users)
			continue;
		if (++idle > keep) {
			munmap(a->base, a->len);
			a->base = NULL;
			for (unsigned k = 0; k < SHM_ARENA_SLOTS; k++)
				if (a->slotfd[k] >= 0 && a->slotpid[k] == shunt_pid())
					shunt_fd_release(a->slotfd[k]);
		}
	}
}

int shm_arena_attach(const char *target, struct shm_slot *s, enum shunt_reason *why)
{
	char name[48];
	unsigned k;
	uint64_t ring;
	*why = SHUNT_R_BAD_OFFER;
	if (parse_target(target, name, sizeof name, &k, &ring) < 0)
		return -1;
	uint64_t slot_size = SHM_HDR_SIZE + 2 * ring, off = (uint64_t)k * slot_size;
	s->slot = k;
	s->map = NULL;
	/* The arena already mapped here (by name: a name is never reused
	 * while its owner lives, and the sweeper removes it once the owner is
	 * gone): one fcntl. */
	pthread_mutex_lock(&arena_mu);
	for (unsigned i = 0; i < narenas; i++) {
		struct shm_arena *a = &arenas[i];
		if (!a->base || a->owner || strcmp(a->name, name) || a->slot_size != slot_size)
			continue;
		/* A name outlives its owner until swept, and a pid can come
		 * back: the name must still be the file we mapped. */
		char path[SHUNT_PATH_MAX];
		struct stat now;
		if (arena_path(path, sizeof path, name) || stat(path, &now) < 0 ||
		    now.st_dev != a->dev || now.st_ino != a->ino)
			break;
		int kfd = a->slotfd[k];
		if (kfd >= 0 && a->slotpid[k] == shunt_pid() &&
		    slot_lock(kfd, off, F_RDLCK, F_OFD_SETLK) == 0) {
			a->users++;
			pthread_mutex_unlock(&arena_mu);
			s->arena = a;
			s->hdr = (struct shm_hdr *)(a->base + off);
			s->len = slot_size;
			s->lockfd = kfd;
			return 0;
		}
		break;
	}
	pthread_mutex_unlock(&arena_mu);
	*why = SHUNT_R_NO_PEER_SHIM;
	int fd = hold(name, off);
	if (fd < 0)
		return -1;
	struct stat st;
	*why = SHUNT_R_PEER_CRED;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !shm_offer_uid_ok(st.st_uid, st.st_gid))
		goto fail;
	*why = SHUNT_R_BAD_OFFER;
	if ((uint64_t)st.st_size < off + slot_size ||
	    (uint64_t)st.st_size > (uint64_t)SHM_ARENA_SLOTS * (SHM_HDR_SIZE + 2ull * SHM_MAX_RING))
		goto fail;
	pthread_mutex_lock(&arena_mu);
	struct shm_arena *a = lookup(st.st_dev, st.st_ino);
	if (a && (a->len != (size_t)st.st_size || a->slot_size != slot_size)) {
		pthread_mutex_unlock(&arena_mu);
		goto fail;
	}
	if (!a) {
		unmap_idle_beyond(SHM_ARENA_IDLE_MAX - 1);
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			pthread_mutex_unlock(&arena_mu);
			*why = SHUNT_R_RING_ALLOC;
			goto fail;
		}
		a = entry_for_map();
		if (!a) {
			/* No room to keep it: this connection's own mapping. */
			pthread_mutex_unlock(&arena_mu);
			s->arena = NULL;
			s->map = m;
			s->map_len = (size_t)st.st_size;
			s->hdr = (struct shm_hdr *)((uint8_t *)m + off);
			s->len = slot_size;
			s->lockfd = fd;
			return 0;
		}
		entry_init(a);
		a->dev = st.st_dev;
		a->ino = st.st_ino;
		a->base = m;
		a->len = (size_t)st.st_size;
		a->slot_size = slot_size;
		a->fd = -1;
		snprintf(a->name, sizeof a->name, "%s", name);
	}
	a->users++;
	if (a->slotfd[k] < 0 || a->slotpid[k] != shunt_pid()) {
		a->slotfd[k] = fd;
		a->slotpid[k] = shunt_pid();
	}
	pthread_mutex_unlock(&arena_mu);
	s->arena = a;
	s->hdr = (struct shm_hdr *)(a->base + off);
	s->len = slot_size;
	s->lockfd = fd;
	return 0;
fail:
	shunt_fd_release(fd);
	return -1;
}

void shm_arena_release(struct shm_slot *s, int shared)
{
	if (s->lockfd < 0 && !s->hdr)
		return;
	int fd = s->lockfd, kept = 0;
	if (s->map) {
		munmap(s->map, s->map_len);
		s->map = NULL;
	} else if (s->arena) {
		pthread_mutex_lock(&arena_mu);
		struct shm_arena *a = s->arena;
		if (a->slotfd[s->slot] == fd && a->slotpid[s->slot] == shunt_pid()) {
			/* Shared by fork: the other process holds the same
			 * description, and its lock must outlive our use, so we
			 * let go of the description rather than the lock. */
			if (shared)
				a->slotfd[s->slot] = -1;
			else
				kept = 1;
		}
		/* A forked child releasing what its parent mapped: the table is
		 * its own copy, so the count is too. */
		if (a->users)
			a->users--;
		if (a->owner == shunt_pid())
			a->own_busy &= ~(1ull << s->slot);
		if (kept) {
			/* Last: once the lock is gone the owner may hand the
			 * slot out. */
			slot_lock(fd, (uint64_t)s->slot * a->slot_size, F_UNLCK, F_OFD_SETLK);
		}
		if (!a->owner && !a->users)
			unmap_idle_beyond(SHM_ARENA_IDLE_MAX);
		pthread_mutex_unlock(&arena_mu);
	}
	if (!kept)
		shunt_fd_release(fd);
	s->lockfd = -1;
	s->hdr = NULL;
	s->arena = NULL;
}

void shm_arena_exit(void)
{
	pthread_mutex_lock(&arena_mu);
	for (unsigned i = 0; i < narenas; i++) {
		char path[SHUNT_PATH_MAX];
		if (arenas[i].base && arenas[i].owner == shunt_pid() &&
		    !arena_path(path, sizeof path, arenas[i].name))
			unlink(path);
	}
	pthread_mutex_unlock(&arena_mu);
}
