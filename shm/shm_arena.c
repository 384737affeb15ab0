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
 * Each process publishes a random tag as an OFD read lock on one byte of
 * every arena it has a description of (one per process and arena: the
 * owner's is the one it created the arena with), and an end holds its slot
 * by writing that tag into the header: the client's before it names the
 * offer, the server's by a CAS against the slot's use count (a server that
 * read a stale offer cannot claim the next connection's).  An end lets go
 * by a bit in the header (let_go).  So an end is held while its bit is
 * clear and some description still publishes its tag: a killed process's
 * lock dies with the last holder of its descriptions, in whatever PID
 * namespace, and a connection costs no system call to hold or let go of
 * its slot (per-connection locks cost four fcntl per connection, a tenth of
 * what shm added to a loopback connection).  The owner hands a slot out
 * again only when neither end holds it, and bumps the use count by CAS as
 * it does; the owner also holds flock(LOCK_SH) on the arena for its life,
 * so a sweeper knows when it is gone.
 *
 * fork shares a process's descriptions with the child, and its tag with
 * them: the parent could not tell the child's use of a slot from its own.
 * So before a fork each connection end marks its side in fork_locks and
 * takes an OFD read lock on the slot's first byte through a description of
 * its own, which only the child keeps (the parent closes its copy after
 * the fork): the child holds the slot by that lock, the parent by its tag,
 * and the slot stays taken while either uses it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/shunt_clock.h"
#include "core/shunt_forklock.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_reserve.h"
#include "core/shunt_rundir_open.h"
#include "core/shunt_stats.h"
#include "shm_internal.h"

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
	int fd;             /* owner: the description it made the arena with
			       (its flock, its tag, its F_OFD_GETLK) */
	int lfd;            /* this process's description publishing its tag: the
			       owner's fd, or one opened when mapping it */
	pid_t lfd_pid;      /* who opened lfd (a forked child opens its own) */
	unsigned users;     /* connection ends of this process using it */
	unsigned cursor;    /* owner: where the next free-slot search starts */
	unsigned nslots;
	uint64_t own_busy;  /* owner: slots an end in this process holds (no
			       need to ask the kernel about those) */
	uint64_t reserved;  /* owner: slots whose memory is reserved
			       (core/shunt_reserve.h), so no end can take a
			       SIGBUS from a full filesystem */
	char name[48];      /* a-<pid>-<n> */
};

static struct shm_arena arenas[SHM_ARENA_MAX];
static unsigned narenas;
static unsigned arena_seq;
/* Bytes of clients' arenas mapped for one connection each (no room in the
 * table): a fork copies them, and this count, to the child. */
static uint64_t single_mapped;
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
SHUNT_FORK_MUTEX(arena_mu, SHUNT_RANK_SHM_ARENA)

/* What this process holds for rings, for shunt stat (arena_mu held): the
 * slots it reserved in arenas it made (its memory in the rundir's
 * filesystem), and the other arenas mapped here, a forked child's copies
 * of its parent's included.  From the table, so a child counts right. */
static void publish_rings(void)
{
	uint64_t res = 0, map = single_mapped;
	pid_t me = shunt_pid();
	for (unsigned i = 0; i < narenas; i++) {
		const struct shm_arena *a = &arenas[i];
		if (!a->base)
			continue;
		if (a->owner == me)
			res += (uint64_t)__builtin_popcountll(a->reserved) * a->slot_size;
		else
			map += a->len;
	}
	shunt_stats_rings(res, map);
}

/* For a counters file just made: that may happen under any of shunt's
 * locks, this one included (and in this very thread), so only if the table
 * is free now; a holder that changes it publishes anyway, and the file now
 * exists for it. */
static void publish_rings_locked(void)
{
	if (pthread_mutex_trylock(&arena_mu) != 0)
		return;
	publish_rings();
	pthread_mutex_unlock(&arena_mu);
}

__attribute__((constructor)) static void rings_hook(void)
{
	shunt_stats_rings_hook(publish_rings_locked);
}

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

/* Each process publishes its lock tag (shm_ring.h) as a read lock on one
 * byte far beyond any slot, through every description it has of an arena:
 * an end whose ring lock stays held asks whether any description still
 * holds the holder's byte.  Descriptions die with the last process holding
 * them, in whatever PID namespace, so a dead holder is seen without pids. */
#define SHM_TAG_BASE (1ull << 40)

static uint32_t proc_tag;
static pid_t proc_tag_pid;

/* This process's tag (a fresh one in a forked child): random, nonzero. */
static uint32_t my_tag(void)
{
	pid_t me = shunt_pid();
	if (proc_tag && proc_tag_pid == me)
		return proc_tag;
	uint32_t t = 0;
	while (!t) {
		if (getrandom(&t, sizeof t, GRND_NONBLOCK) != (ssize_t)sizeof t) {
			uint64_t x = shunt_now_ns() ^ ((uint64_t)me << 32) ^ (uintptr_t)&t;
			x *= 0x9e3779b97f4a7c15ull;
			t = (uint32_t)(x >> 32);
		}
	}
	proc_tag = t;
	proc_tag_pid = me;
	return t;
}

static int tag_lock(int fd, uint32_t tag)
{
	return slot_lock(fd, SHM_TAG_BASE + tag, F_RDLCK, F_OFD_SETLK);
}

/* 0 only when no description of the arena publishes tag (asked through
 * fd, which publishes only ours: a process's own locks are not reported
 * to it, so our own tag is alive by definition). */
static int tag_alive(int fd, uint32_t tag)
{
	if (tag == my_tag() || fd < 0)
		return 1;
	return slot_lock(fd, SHM_TAG_BASE + tag, F_WRLCK, F_OFD_GETLK) != 0;
}

/* Whether an end of side holds the slot at h (offset off), asked through
 * fd.  Tags first; forked children's slot locks only where one was taken
 * (a write probe conflicts with any other description's read lock). */
static int held(const struct shm_hdr *h, int side, int fd, uint64_t off)
{
	uint32_t lg = __atomic_load_n(&h->let_go, __ATOMIC_ACQUIRE);
	uint32_t tag = side == SHM_CLIENT
			       ? __atomic_load_n(&h->ctag, __ATOMIC_ACQUIRE)
			       : (uint32_t)__atomic_load_n(&h->use, __ATOMIC_ACQUIRE);
	if (!(lg & (1u << side)) && tag && tag_alive(fd, tag))
		return 1;
	if (!(__atomic_load_n(&h->fork_locks, __ATOMIC_ACQUIRE) & (1u << side)))
		return 0;
	if (fd < 0)
		return 1; /* cannot tell: assume alive */
	return slot_lock(fd, off, F_WRLCK, F_OFD_GETLK) != 0;
}

/* This process's description of a, its tag published (arena_mu held). */
static int lock_fd(struct shm_arena *a)
{
	pid_t me = shunt_pid();
	if (a->lfd >= 0 && a->lfd_pid == me)
		return a->lfd;
	/* Inherited from a parent: its locks, not ours. */
	int fd = shm_arena_open(a->name);
	if (fd < 0)
		return -1;
	if (tag_lock(fd, my_tag()) < 0) {
		REAL(close)(fd);
		return -1;
	}
	a->lfd = shunt_fd_own(fd, NULL);
	a->lfd_pid = me;
	return a->lfd;
}

static void entry_init(struct shm_arena *a)
{
	memset(a, 0, sizeof *a);
	a->fd = a->lfd = -1;
}

static struct shm_arena *arena_new_own(uint64_t slot_size)
{
	if (narenas == SHM_ARENA_MAX)
		return NULL;
	struct shm_arena *a = &arenas[narenas];
	entry_init(a);
	snprintf(a->name, sizeof a->name, "a-%d-%u", (int)shunt_pid(), arena_seq++);
	char path[SHUNT_PATH_MAX], tmp[SHUNT_PATH_MAX];
	if (arena_path(path, sizeof path, a->name) ||
	    shunt_rundir_path(tmp, sizeof tmp, shunt_rundir(), SHUNT_ROOM_OFFER, "t-%s", a->name))
		return NULL;
	unsigned owned = 0;
	for (unsigned i = 0; i < narenas; i++)
		owned += arenas[i].owner == shunt_pid() && arenas[i].base;
	a->nslots = owned < 2 ? 4 : owned < 4 ? 16 : SHM_ARENA_SLOTS;
	size_t len = (size_t)slot_size * a->nslots;
	/* Made under another name and locked before it is named: a sweeper
	 * (any process's first use of shm) that found the arena under its
	 * name before our lock would take it for a dead process's and remove
	 * it, and every offer naming it would then go unanswered. */
	int fd = shunt_rundir_open(tmp, O_RDWR | O_CREAT | O_EXCL, 0600, S_IFREG, SHUNT_ANY_OWNER,
				   NULL);
	if (fd < 0 && errno == EEXIST) {
		/* A dead process of ours with a recycled pid. */
		unlink(tmp);
		fd = shunt_rundir_open(tmp, O_RDWR | O_CREAT | O_EXCL, 0600, S_IFREG,
				       SHUNT_ANY_OWNER, NULL);
	}
	if (fd < 0)
		return NULL;
	shm_share_fd(fd); /* the server maps it read-write */
	struct stat st;
	void *m = MAP_FAILED;
	/* (The rename replaces what a dead process of ours with a recycled
	 * pid left under the name; its peers keep their mappings.) */
	if (ftruncate(fd, (off_t)len) == 0 && flock(fd, LOCK_SH) == 0 &&
	    tag_lock(fd, my_tag()) == 0 && fstat(fd, &st) == 0 &&
	    rename(tmp, path) == 0)
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		REAL(close)(fd);
		unlink(tmp);
		unlink(path);
		return NULL;
	}
	a->fd = a->lfd = shunt_fd_own(fd, NULL);
	a->lfd_pid = shunt_pid();
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
			/* Never handed out: nobody can know it.  Otherwise
			 * neither end may hold it (our own end does not: it
			 * is not busy), and the use count moves on, so a
			 * server that found a stale offer naming it cannot
			 * claim it any more. */
			struct shm_hdr *h = (struct shm_hdr *)(a->base + (uint64_t)s * slot_size);
			uint64_t off = (uint64_t)s * slot_size;
			uint64_t use = __atomic_load_n(&h->use, __ATOMIC_ACQUIRE);
			int free_ = !(a->reserved & (1ull << s)) ||
				    (!held(h, SHM_CLIENT, a->fd, off) && !held(h, SHM_SERVER, a->fd, off) &&
				     __atomic_compare_exchange_n(&h->use, &use, ((use >> 32) + 1) << 32, 0,
								 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
			if (free_) {
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

/* Decimal v at p; the end. */
static char *put_dec(char *p, uint64_t v)
{
	char d[20];
	int n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = d[--n];
	return p;
}

/* "<name>:<slot>:<ring>:<inode>" into t (room for the name and three
 * numbers); its length.  By hand: snprintf was a visible part of a
 * connection's user time. */
static size_t target_put(char *t, const char *name, unsigned slot, uint64_t ring, uint64_t ino)
{
	size_t l = strlen(name);
	memcpy(t, name, l);
	char *p = t + l;
	*p++ = ':';
	p = put_dec(p, slot);
	*p++ = ':';
	p = put_dec(p, ring);
	*p++ = ':';
	p = put_dec(p, ino);
	*p = 0;
	return (size_t)(p - t);
}

int shm_arena_alloc(uint64_t ring, struct shm_slot *s, char *target, size_t tlen)
{
	uint64_t slot_size = SHM_HDR_SIZE + 2 * ring;
	unsigned k = 0;
	int rc = -1;
	pthread_mutex_lock(&arena_mu);
	struct shm_arena *a = find_free(slot_size, &k);
	if (a && !(a->reserved & (1ull << k))) {
		/* Both ends will touch every page of the slot (a ring is used
		 * round and round): all of it now, or no connection. */
		if (shunt_reserve(a->fd, (off_t)((uint64_t)k * slot_size), (off_t)slot_size) == 0) {
			a->reserved |= 1ull << k;
			publish_rings();
		} else {
			a = NULL;
		}
	}
	if (a) {
		uint64_t off = (uint64_t)k * slot_size;
		char t[sizeof a->name + 3 * 21];
		size_t n = target_put(t, a->name, k, ring, (uint64_t)a->ino);
		if (n < tlen) {
			memcpy(target, t, n + 1);
			*s = (struct shm_slot){.hdr = (struct shm_hdr *)(a->base + off),
					       .len = slot_size, .lockfd = a->fd, .fork_fd = -1,
					       .slot = k, .side = SHM_CLIENT, .held = 1,
					       .arena = a, .tag = my_tag()};
			a->users++;
			a->own_busy |= 1ull << k;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&arena_mu);
	if (rc == 0) {
		/* Nobody else can see the slot until the offer names it; the
		 * state goes last (OFFERED, by the caller).  The use count
		 * stays: a server holding a stale offer compares it. */
		uint8_t *h = (uint8_t *)s->hdr;
		size_t u = offsetof(struct shm_hdr, use), ue = u + sizeof s->hdr->use;
		memset(h, 0, u);
		memset(h + ue, 0, SHM_HDR_SIZE - ue);
		__atomic_store_n(&s->hdr->ctag, s->tag, __ATOMIC_RELEASE);
	}
	return rc;
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

/* Clients' arenas no end of ours uses, beyond keep: unmapped, and their
 * description closed (which drops any lock a forked connection left). */
static void unmap_idle_beyond(unsigned keep)
{
	unsigned idle = 0;
	int gone = 0;
	for (unsigned i = narenas; i-- > 0;) {
		struct shm_arena *a = &arenas[i];
		if (!a->base || a->owner || a->users)
			continue;
		if (++idle > keep) {
			munmap(a->base, a->len);
			a->base = NULL;
			if (a->lfd >= 0 && a->lfd_pid == shunt_pid())
				shunt_fd_release(a->lfd);
			a->lfd = -1;
			gone = 1;
		}
	}
	if (gone)
		publish_rings();
}

int shm_arena_attach(const char *target, int sock, struct shm_slot *s, enum shunt_reason *why)
{
	char name[48];
	unsigned k;
	uint64_t ring, ino;
	*why = SHUNT_R_BAD_OFFER;
	if (shm_target_parse(target, name, sizeof name, &k, &ring, &ino) < 0)
		return -1;
	uint64_t slot_size = SHM_HDR_SIZE + 2 * ring, off = (uint64_t)k * slot_size;
	*s = (struct shm_slot){.lockfd = -1, .fork_fd = -1, .slot = k, .len = slot_size,
			       .side = SHM_SERVER, .tag = my_tag()};
	/* The arena already mapped here (by name: a name is never reused
	 * while its owner lives, and the sweeper removes it once the owner is
	 * gone): no system call. */
	pthread_mutex_lock(&arena_mu);
	for (unsigned i = 0; i < narenas; i++) {
		struct shm_arena *a = &arenas[i];
		if (!a->base || a->owner || strcmp(a->name, name) || a->slot_size != slot_size)
			continue;
		/* A name outlives its owner until swept, and a pid can come
		 * back: the name must still be the file we mapped.  The offer
		 * says which file it names (its inode); an offer that does not
		 * is checked by path. */
		char path[SHUNT_PATH_MAX];
		struct stat now;
		if (ino ? ino != (uint64_t)a->ino
			: (arena_path(path, sizeof path, name) || stat(path, &now) < 0 ||
			   now.st_dev != a->dev || now.st_ino != a->ino))
			break;
		int fd = lock_fd(a);
		if (fd >= 0) {
			a->users++;
			pthread_mutex_unlock(&arena_mu);
			s->arena = a;
			s->hdr = (struct shm_hdr *)(a->base + off);
			s->lockfd = fd;
			return 0;
		}
		break;
	}
	pthread_mutex_unlock(&arena_mu);
	*why = SHUNT_R_NO_PEER_SHIM;
	/* A process that dropped privileges gets the file from its broker,
	 * which checked its owner as this process would have before. */
	int brokered = shm_broker_active();
	int fd = brokered ? shm_broker_open(target, sock, why) : shm_arena_open(name);
	if (fd < 0)
		return -1;
	struct stat st;
	*why = SHUNT_R_PEER_CRED;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (!brokered && !shm_offer_uid_ok(st.st_uid, st.st_gid)))
		goto fail;
	*why = SHUNT_R_BAD_OFFER;
	if ((ino && (uint64_t)st.st_ino != ino) || (uint64_t)st.st_size < off + slot_size ||
	    (uint64_t)st.st_size > (uint64_t)SHM_ARENA_SLOTS * (SHM_HDR_SIZE + 2ull * SHM_MAX_RING))
		goto fail;
	if (tag_lock(fd, s->tag) < 0)
		goto fail;
	fd = shunt_fd_own(fd, NULL);
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
			/* No room to keep it: this connection's own mapping and
			 * description. */
			single_mapped += (uint64_t)st.st_size;
			publish_rings();
			pthread_mutex_unlock(&arena_mu);
			s->map = m;
			s->map_len = (size_t)st.st_size;
			s->hdr = (struct shm_hdr *)((uint8_t *)m + off);
			s->lockfd = fd;
			s->own_fd = 1;
			return 0;
		}
		entry_init(a);
		a->dev = st.st_dev;
		a->ino = st.st_ino;
		a->base = m;
		a->len = (size_t)st.st_size;
		a->slot_size = slot_size;
		snprintf(a->name, sizeof a->name, "%s", name);
		publish_rings();
	}
	if (a->owner == shunt_pid()) {
		/* A connection to ourselves: this end keeps the description it
		 * opened, so that a fork lock of the other end is told apart
		 * from its own. */
		s->lockfd = fd;
		s->own_fd = 1;
	} else if (a->lfd < 0 || a->lfd_pid != shunt_pid()) {
		/* This description (with our tag) becomes the process's for
		 * this arena. */
		a->lfd = fd;
		a->lfd_pid = shunt_pid();
		s->lockfd = fd;
	} else {
		/* Already one: it publishes our tag; drop this one. */
		shunt_fd_release(fd);
		s->lockfd = a->lfd;
	}
	a->users++;
	pthread_mutex_unlock(&arena_mu);
	s->arena = a;
	s->hdr = (struct shm_hdr *)(a->base + off);
	return 0;
fail:
	shunt_fd_release(fd);
	return -1;
}

int shm_arena_claim(struct shm_slot *s, uint64_t use)
{
	/* Claimed only against the use the caller read before it checked the
	 * header: if the owner handed the slot out since, the CAS fails. */
	if ((uint32_t)use || !__atomic_compare_exchange_n(&s->hdr->use, &use, use | s->tag, 0,
							   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	s->held = 1;
	return 1;
}

int shm_arena_side_held(const struct shm_slot *s, int side)
{
	return held(s->hdr, side, s->lockfd, (uint64_t)s->slot * s->len);
}

int shm_arena_tag_alive(void *arg, uint32_t tag)
{
	const struct shm_slot *s = arg;
	if (tag == s->tag || s->lockfd < 0)
		return 1; /* another thread of this end; or cannot tell */
	/* A write probe conflicts with any other description's read lock on
	 * the tag's byte (our own description holds only our tag). */
	return slot_lock(s->lockfd, SHM_TAG_BASE + tag, F_WRLCK, F_OFD_GETLK) != 0;
}

int shm_arena_fork(struct shm_slot *s)
{
	if (s->fork_fd >= 0 || s->lockfd < 0)
		return 0;
	char name[48];
	pthread_mutex_lock(&arena_mu);
	if (s->arena)
		snprintf(name, sizeof name, "%s", s->arena->name);
	pthread_mutex_unlock(&arena_mu);
	if (!s->arena)
		return 0; /* its own description already (own_fd): shared as is */
	int fd = shm_arena_open(name);
	if (fd < 0)
		return -1;
	/* Marked first: whoever asks about this side from now on asks the
	 * lock too. */
	__atomic_or_fetch(&s->hdr->fork_locks, 1u << s->side, __ATOMIC_SEQ_CST);
	if (slot_lock(fd, (uint64_t)s->slot * s->len, F_RDLCK, F_OFD_SETLK) < 0) {
		REAL(close)(fd);
		return -1;
	}
	s->fork_fd = shunt_fd_own(fd, NULL);
	return 0;
}

void shm_arena_forked(struct shm_slot *s, int child)
{
	if (s->fork_fd < 0)
		return;
	if (child) {
		/* The child's own lock: released with its end.  Its own tag
		 * too, published there; without it the child keeps the
		 * parent's (never taken for gone while the parent's
		 * description lives, here as well). */
		s->lockfd = s->fork_fd;
		s->own_fd = 1;
		s->by_lock = 1;
		uint32_t t = my_tag();
		if (tag_lock(s->lockfd, t) == 0)
			s->tag = t;
	} else {
		shunt_fd_release(s->fork_fd);
	}
	s->fork_fd = -1;
}

void shm_arena_release(struct shm_slot *s)
{
	if (s->lockfd < 0 && !s->hdr)
		return;
	/* The last touch of the slot: after it the owner may hand it out. */
	if (s->by_lock && s->lockfd >= 0)
		slot_lock(s->lockfd, (uint64_t)s->slot * s->len, F_UNLCK, F_OFD_SETLK);
	else if (s->held && s->hdr)
		__atomic_or_fetch(&s->hdr->let_go, 1u << s->side, __ATOMIC_RELEASE);
	if (s->own_fd)
		shunt_fd_release(s->lockfd);
	if (s->fork_fd >= 0)
		shunt_fd_release(s->fork_fd);
	if (s->map) {
		munmap(s->map, s->map_len);
		pthread_mutex_lock(&arena_mu);
		single_mapped -= single_mapped < s->map_len ? single_mapped : s->map_len;
		publish_rings();
		pthread_mutex_unlock(&arena_mu);
		s->map = NULL;
	} else if (s->arena) {
		pthread_mutex_lock(&arena_mu);
		struct shm_arena *a = s->arena;
		/* A forked child releasing what its parent mapped: the table is
		 * its own copy, so the count is too. */
		if (a->users)
			a->users--;
		if (a->owner == shunt_pid() && !s->own_fd)
			a->own_busy &= ~(1ull << s->slot);
		if (!a->owner && !a->users)
			unmap_idle_beyond(SHM_ARENA_IDLE_MAX);
		pthread_mutex_unlock(&arena_mu);
	}
	*s = (struct shm_slot){.lockfd = -1, .fork_fd = -1};
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
