#include "shunt_stats.h"
#include "shunt_sweep.h"
#include "shunt_tuple.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shunt_core.h"
#include "shunt_conn.h"
#include "shunt_log.h"
#include "shunt_real.h"
#include "shunt_ownfd.h"
#include "shunt_reserve.h"
#include "shunt_rundir.h"
#include "shunt_rundir_open.h"

#define FILE_BYTES (sizeof(struct shunt_stats_file) + \
		    SHUNT_STATS_SLOTS * sizeof(struct shunt_stat_slot))

static struct shunt_stats_file *file;
static pid_t file_pid;
static int file_state; /* 0 not tried, 1 mapped, -1 unavailable */
static struct shunt_stat_slot dummy;
static int lock_fd = -1; /* holds the flock that says we are alive */
static int busy;         /* a thread is creating the file */
/* Slots whose pages are reserved (core/shunt_reserve.h): only those are
 * touched, the rest of the file stays a hole until needed. */
static unsigned reserved;
#define RESERVE_FIRST 64u
/* Asked to publish the ring memory figures into a new file. */
static void (*rings_hook)(void);

static size_t slots_end(unsigned n)
{
	return offsetof(struct shunt_stats_file, slots) + (size_t)n * sizeof(struct shunt_stat_slot);
}

/* At least n slots of the file reserved: 0, or -1 (the filesystem is
 * full: no more slots, the counters of later connections are skipped). */
static int reserve_slots(struct shunt_stats_file *f, unsigned n)
{
	if (n > SHUNT_STATS_SLOTS)
		n = SHUNT_STATS_SLOTS;
	unsigned have = __atomic_load_n(&reserved, __ATOMIC_ACQUIRE);
	if (n <= have)
		return 0;
	if (shunt_reserve(lock_fd, 0, (off_t)slots_end(n)) < 0)
		return -1;
	while (have < n && !__atomic_compare_exchange_n(&reserved, &have, n, 1, __ATOMIC_ACQ_REL,
							  __ATOMIC_ACQUIRE))
		;
	/* Readers (shunt stat, shuntd) read this many: never a hole. */
	if (have < n)
		__atomic_store_n(&f->nslots, n, __ATOMIC_RELEASE);
	return 0;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Files of processes that died (their lock is gone) are removed by the next
 * process that creates its own: a bounded sweep, once per process. */
static int sweep_one(const char *path, const char *name, void *arg)
{
	int *removed = arg;
	if (name[0] == '.')
		return 0;
	int fd = shunt_rundir_open(path, O_RDONLY, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
	if (fd < 0)
		return 0;
	/* Free lock and a header: its owner died.  A file without a magic may
	 * be one another process is creating (it locks, then writes the
	 * header). */
	uint32_t magic = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
	    pread(fd, &magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
	    magic == SHUNT_STATS_MAGIC) {
		unlink(path);
		++*removed;
	}
	REAL(close)(fd);
	return *removed >= 64;
}

static void sweep(const char *rd)
{
	char dir[SHUNT_PATH_MAX];
	int removed = 0;
	if (shunt_rundir_path(dir, sizeof dir, rd, SHUNT_ROOM_STATS, NULL) == 0)
		shunt_sweep_dir(dir, ~0u, sweep_one, &removed);
}

/* The file of this process; a child after fork makes its own. */
static struct shunt_stats_file *mine(void)
{
	pid_t pid = shunt_pid();
	if (__atomic_load_n(&file_state, __ATOMIC_ACQUIRE) != 0 &&
	    __atomic_load_n(&file_pid, __ATOMIC_RELAXED) == pid)
		return file_state > 0 ? file : NULL;
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return NULL; /* another thread is creating it */
	const char *rd = shunt_rundir();
	struct shunt_stats_file *f = MAP_FAILED;
	char path[SHUNT_PATH_MAX];
	if (rd && shunt_rundir_path(path, sizeof path, rd, SHUNT_ROOM_STATS, "%d", (int)pid) == 0) {
		SHUNT_GUARD_ENTER();
		unlink(path); /* left by a dead process with our pid */
		int fd = shunt_rundir_open(path, O_RDWR | O_CREAT | O_EXCL, 0600, S_IFREG,
					   SHUNT_ANY_OWNER, NULL);
		/* The header and the first slots reserved before anything is
		 * touched; a full filesystem means no counters, not SIGBUS. */
		if (fd >= 0 && ftruncate(fd, FILE_BYTES) == 0 &&
		    shunt_reserve(fd, 0, (off_t)slots_end(RESERVE_FIRST)) == 0 &&
		    flock(fd, LOCK_SH) == 0)
			f = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		/* The lock lives as long as the fd: kept, above the low numbers. */
		if (fd >= 0 && f == MAP_FAILED) {
			REAL(close)(fd);
			unlink(path);
		} else if (fd >= 0) {
			shunt_fd_own(fd, &lock_fd);
			__atomic_store_n(&reserved, RESERVE_FIRST, __ATOMIC_RELEASE);
		}
		if (f != MAP_FAILED)
			sweep(rd);
		SHUNT_GUARD_LEAVE();
	}
	if (f != MAP_FAILED) {
		f->version = SHUNT_STATS_VERSION;
		f->pid = pid;
		f->uid = geteuid();
		snprintf(f->prog, sizeof f->prog, "%s", shunt_prog());
		f->start_ns = realtime_ns();
		f->nslots = RESERVE_FIRST; /* grown as slots are reserved */
		f->slot_size = sizeof(struct shunt_stat_slot);
		/* Last: readers take a free lock with a magic for a dead owner. */
		__atomic_store_n(&f->magic, SHUNT_STATS_MAGIC, __ATOMIC_RELEASE);
		file = f;
	}
	__atomic_store_n(&file_pid, pid, __ATOMIC_RELAXED);
	__atomic_store_n(&file_state, f != MAP_FAILED ? 1 : -1, __ATOMIC_RELEASE);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	/* Once the file is ours to publish in (a change racing with this
	 * publishes too, in order): a child after fork holds its parent's
	 * mappings, not what it made. */
	if (f != MAP_FAILED && rings_hook)
		rings_hook();
	return f != MAP_FAILED ? f : NULL;
}

void shunt_stats_prepare(void)
{
	(void)mine();
}

static void put_addr(const struct sockaddr *sa, uint8_t a[16], uint16_t *port)
{
	if (sa)
		shunt_addr16(sa, a, port);
}

/* The owner changes what a slot is between these two (a seqlock: readers
 * retry while gen is odd or has moved).  A free slot is left odd by its
 * close, so a reader never takes the old connection of a slot being
 * reused for a new one; gen 0 (never used) is skipped by readers too. */
static void slot_begin(struct shunt_stat_slot *s)
{
	__atomic_store_n(&s->gen, s->gen + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void slot_end(struct shunt_stat_slot *s)
{
	__atomic_store_n(&s->gen, s->gen + 1, __ATOMIC_RELEASE);
}

/* A free slot of f, marked used and open for changes (slot_begin). */
static struct shunt_stat_slot *slot_alloc(struct shunt_stats_file *f)
{
	for (unsigned i = 0; i < SHUNT_STATS_SLOTS; i++) {
		if (i >= __atomic_load_n(&reserved, __ATOMIC_ACQUIRE) && reserve_slots(f, 2 * i) < 0)
			return NULL;
		struct shunt_stat_slot *s = &f->slots[i];
		uint32_t free_ = 0;
		if (__atomic_load_n(&s->used, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&s->used, &free_, 1, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		if (!(s->gen & 1))
			slot_begin(s); /* never used: gen was 0 */
		/* Everything after used and gen, while gen is odd. */
		size_t keep = offsetof(struct shunt_stat_slot, fd);
		memset((char *)s + keep, 0, sizeof *s - keep);
		return s;
	}
	return NULL;
}

/* A slot of this process's current file (not the dummy, not the parent's
 * after fork). */
static int ours(const struct shunt_stat_slot *s)
{
	struct shunt_stats_file *f = file;
	return s && __atomic_load_n(&file_state, __ATOMIC_ACQUIRE) > 0 &&
	       __atomic_load_n(&file_pid, __ATOMIC_RELAXED) == shunt_pid() && f &&
	       s >= f->slots && s < f->slots + f->nslots;
}

struct shunt_stat_slot *shunt_stats_open(int fd, int role, int transport, int reason,
					 const struct sockaddr *peer, socklen_t plen,
					 const uint8_t *local16, uint16_t lport)
{
	struct shunt_stats_file *f = mine();
	(void)plen;
	if (!f)
		return &dummy;
	__atomic_add_fetch(&f->conns[transport % SHUNT_STATS_TRANSPORTS], 1, __ATOMIC_RELAXED);
	if (transport == SHUNT_TP_KERNEL && (unsigned)reason < SHUNT_STATS_REASONS)
		__atomic_add_fetch(&f->fallbacks[reason], 1, __ATOMIC_RELAXED);
	struct shunt_stat_slot *s = slot_alloc(f);
	if (!s)
		return &dummy;
	s->fd = fd;
	s->transport = (uint8_t)transport;
	s->role = (uint8_t)role;
	s->reason = (uint8_t)reason;
	/* Not for the kernel path: a getsockname() per connection would be
	 * the one system call shunt adds to a plain connect.  The reader
	 * finds that address in /proc (shunt_stats_read.c). */
	memset(s->local, 0, sizeof s->local);
	s->lport = 0;
	struct sockaddr_storage ls;
	socklen_t ll = sizeof ls;
	if (local16) {
		memcpy(s->local, local16, sizeof s->local);
		s->lport = lport;
	} else if (transport != SHUNT_TP_KERNEL &&
		   getsockname(fd, (struct sockaddr *)&ls, &ll) == 0) {
		put_addr((struct sockaddr *)&ls, s->local, &s->lport);
	}
	put_addr(peer, s->peer, &s->pport);
	s->opened_ns = realtime_ns();
	slot_end(s);
	return s;
}

void shunt_stats_close(struct shunt_stat_slot *s)
{
	if (!ours(s))
		return;
	struct shunt_stats_file *f = file;
	slot_begin(s);
	struct shunt_stat_sum *t = &f->closed[s->transport % SHUNT_STATS_TRANSPORTS];
	__atomic_add_fetch(&t->conns, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->bytes_in, __atomic_load_n(&s->bytes_in, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->bytes_out, __atomic_load_n(&s->bytes_out, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->calls_in, __atomic_load_n(&s->calls_in, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->calls_out, __atomic_load_n(&s->calls_out, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_store_n(&s->used, 0, __ATOMIC_RELEASE);
	/* gen stays odd until the slot's next connection is set up. */
}

void shunt_stats_demoted(struct shunt_stat_slot *s, int reason)
{
	if (!s || s == &dummy)
		return;
	int own = ours(s);
	if (own)
		slot_begin(s);
	s->transport = SHUNT_TP_KERNEL;
	s->reason = (uint8_t)reason;
	s->state = 1;
	if (own)
		slot_end(s);
	struct shunt_stats_file *f = mine();
	if (f && (unsigned)reason < SHUNT_STATS_REASONS)
		__atomic_add_fetch(&f->fallbacks[reason], 1, __ATOMIC_RELAXED);
}

void shunt_stats_after_fork_child(void)
{
	/* The inherited lock fd shares the parent's lock: closing it here
	 * leaves the lock to the parent alone, so the parent's file goes
	 * stale when the parent dies, whatever its children do. */
	if (lock_fd >= 0) {
		shunt_fd_release(lock_fd);
		lock_fd = -1;
	}
	file = NULL;
	__atomic_store_n(&busy, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&file_state, 0, __ATOMIC_RELEASE);
}

struct shunt_stat_slot *shunt_stats_inherit(struct shunt_stat_slot *p)
{
	if (!p || p == &dummy || ours(p))
		return p;
	struct shunt_stats_file *f = mine();
	struct shunt_stat_slot *s = f ? slot_alloc(f) : NULL;
	if (!s)
		return &dummy;
	s->fd = p->fd;
	s->transport = p->transport;
	s->role = p->role;
	s->reason = p->reason;
	s->state = p->state;
	s->lport = p->lport;
	s->pport = p->pport;
	memcpy(s->local, p->local, sizeof s->local);
	memcpy(s->peer, p->peer, sizeof s->peer);
	s->opened_ns = p->opened_ns;
	slot_end(s);
	return s;
}

void shunt_stats_rings(uint64_t res, uint64_t map)
{
	struct shunt_stats_file *f = file;
	if (!f || __atomic_load_n(&file_state, __ATOMIC_ACQUIRE) <= 0 ||
	    __atomic_load_n(&file_pid, __ATOMIC_RELAXED) != shunt_pid())
		return; /* no file yet: its creation asks (rings_hook) */
	__atomic_store_n(&f->ring_reserved, res, __ATOMIC_RELAXED);
	__atomic_store_n(&f->ring_mapped, map, __ATOMIC_RELAXED);
}

void shunt_stats_rings_hook(void (*publish)(void))
{
	rings_hook = publish;
}

/* Only the process that owns the file prints it: a child after fork has a
 * file of its own (or none, and prints nothing), an exec'd program starts
 * from zero with the library loaded anew; so no total is printed twice. */
void shunt_stats_summary(void)
{
	struct shunt_stats_file *f = file;
	if (__atomic_load_n(&file_state, __ATOMIC_ACQUIRE) <= 0 || !f ||
	    __atomic_load_n(&file_pid, __ATOMIC_RELAXED) != shunt_pid() ||
	    !shunt_log_on(SHUNT_LOG_INFO))
		return;
	uint64_t in = 0, out = 0;
	for (unsigned t = 0; t < SHUNT_STATS_TRANSPORTS; t++) {
		in += __atomic_load_n(&f->closed[t].bytes_in, __ATOMIC_RELAXED);
		out += __atomic_load_n(&f->closed[t].bytes_out, __ATOMIC_RELAXED);
	}
	for (unsigned i = 0; i < f->nslots; i++) {
		const struct shunt_stat_slot *s = &f->slots[i];
		if (!__atomic_load_n(&s->used, __ATOMIC_ACQUIRE))
			continue;
		in += __atomic_load_n(&s->bytes_in, __ATOMIC_RELAXED);
		out += __atomic_load_n(&s->bytes_out, __ATOMIC_RELAXED);
	}
	char fb[512];
	size_t n = 0;
	for (unsigned r = 1; r < SHUNT_STATS_REASONS && r < SHUNT_R_COUNT; r++) {
		uint64_t v = __atomic_load_n(&f->fallbacks[r], __ATOMIC_RELAXED);
		if (v && n < sizeof fb)
			n += (size_t)snprintf(fb + n, sizeof fb - n, " %s=%llu",
					      shunt_reason_name((enum shunt_reason)r),
					      (unsigned long long)v);
	}
	uint64_t decided = 0;
	for (unsigned t = 0; t < SHUNT_STATS_TRANSPORTS; t++)
		decided += __atomic_load_n(&f->conns[t], __ATOMIC_RELAXED);
	/* A fork child that only inherited connections and did not use them
	 * has nothing to say. */
	if (!decided && !in && !out)
		return;
	char tp[128];
	size_t m = 0;
	for (unsigned t = SHUNT_TP_SHM; t < SHUNT_STATS_TRANSPORTS && m < sizeof tp; t++)
		m += (size_t)snprintf(tp + m, sizeof tp - m, " %s=%llu",
				      shunt_transport_name((enum shunt_transport)t),
				      (unsigned long long)__atomic_load_n(&f->conns[t],
									  __ATOMIC_RELAXED));
	shunt_log(SHUNT_LOG_INFO, "summary: connections%s bytes in=%llu out=%llu fallbacks%s", tp,
		  (unsigned long long)in, (unsigned long long)out, n ? fb : " none");
}
