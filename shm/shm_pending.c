/* Announced offers: a client's offer is named by the connection's 4-tuple,
 * which is only known once connect() has picked the source port.  Binding
 * a port first (to know it before the SYN) makes the kernel search the
 * bind table for every connection, and a bound socket cannot take over a
 * port in TIME_WAIT as connect() does: a client making connections in a
 * loop ran out of ports where plain TCP did not.  So the client connects
 * as it would without shunt and names its offer right after; until then
 * it holds a lock that tells an accept() looking for the offer to wait for
 * it (docs/ARCHITECTURE.md, "Offer and commit").
 *
 * <rundir>/o/.pending, one page: a bucket per hash of the destination
 * (address, port, and the network namespace for loopback), 64 bytes each,
 * with a sequence number bumped when an offer of that bucket is named or
 * dropped.  The announcement is a read lock on the bucket's byte of the
 * file (an open file description's lock: it dies with the process, so a
 * client killed between its connect and its offer does not hold servers
 * up), taken once per process however many of its threads connect there.
 * An accept() that finds no offer waits only while such a lock is held: a
 * client without shunt never makes a server wait. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/shunt_forklock.h"
#include "core/shunt_ownfd.h"
#include "core/shunt_real.h"
#include "core/shunt_registry.h"
#include "core/shunt_rundir_open.h"
#include "core/shunt_tuple.h"
#include "shm_internal.h"

#define PEND_NAME ".pending"
#define PEND_BUCKETS 64

struct pend_bucket {
	uint32_t seq;     /* bumped when an offer is named or dropped */
	uint32_t waiters; /* accept()s asleep on seq */
	uint8_t pad[56];  /* a cache line each */
};

_Static_assert(sizeof(struct pend_bucket) == 64, "one line per bucket");

static struct shunt_map_once pend_once;

/* This process's announcements: its description of the file (a child's
 * is its own, or its locks would be the parent's), and how many connects
 * of its threads each bucket has in flight.  A byte lock, taken with a
 * bounded try: a connect() from a signal handler that interrupted this
 * thread inside it does without an announcement rather than wait. */
static int pend_fd = -1;
static pid_t pend_pid;
static uint32_t pend_count[PEND_BUCKETS];
static uint8_t pend_lock;
__attribute__((constructor)) static void pend_lock_register(void)
{
	shunt_fork_bytelock(&pend_lock, SHUNT_RANK_SHM_PENDING, __FILE__ ":pend_lock");
}

static struct pend_bucket *pend_get(void)
{
	return shm_map_once(&pend_once, PEND_NAME, PEND_BUCKETS * sizeof(struct pend_bucket));
}

int shm_pending_bucket(const uint8_t addr[16], uint16_t port)
{
	/* Loopback names a different place in each network namespace
	 * (as the registry's names do); the hash needs only to spread. */
	uint64_t h = 1469598103934665603ull ^ port;
	if (shunt_addr16_loopback(addr))
		h ^= (uint64_t)shunt_netns() << 17;
	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 1099511628211ull;
	return (int)((h ^ (h >> 29)) % PEND_BUCKETS);
}

static int byte_lock(int fd, int b, short type, int cmd)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = b, .l_len = 1};
	if (REAL(fcntl)(fd, cmd, &fl) < 0)
		return -1;
	return cmd == F_OFD_GETLK ? fl.l_type != F_UNLCK : 0;
}

static int take(void)
{
	for (int i = 0; i < 64; i++) {
		if (!__atomic_exchange_n(&pend_lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		sched_yield();
	}
	return 0;
}

static void give(void)
{
	__atomic_store_n(&pend_lock, 0, __ATOMIC_RELEASE);
}

/* This process's description of the file (pend_lock held). */
static int own_fd(void)
{
	pid_t me = shunt_pid();
	if (pend_fd >= 0 && pend_pid == me)
		return pend_fd;
	/* A parent's description and counts are not ours. */
	memset(pend_count, 0, sizeof pend_count);
	pend_fd = -1;
	char path[SHUNT_PATH_MAX];
	if (shm_path(path, sizeof path, PEND_NAME, ""))
		return -1;
	int fd = shunt_rundir_open(path, O_RDWR, 0, S_IFREG, SHUNT_ANY_OWNER, NULL);
	if (fd < 0)
		return -1;
	pend_fd = shunt_fd_own(fd, NULL);
	pend_pid = me;
	return pend_fd;
}

void shm_pending_prepare(void)
{
	if (!pend_get() || !take())
		return;
	(void)own_fd();
	give();
}

int shm_pending_begin(const struct sockaddr *dst)
{
	uint8_t a[16];
	uint16_t port;
	if (!pend_get() || shunt_addr16(dst, a, &port) < 0 || !take())
		return -1;
	int b = shm_pending_bucket(a, port);
	int fd = own_fd();
	if (fd < 0 || (pend_count[b] == 0 && byte_lock(fd, b, F_RDLCK, F_OFD_SETLK) < 0))
		b = -1;
	else
		pend_count[b]++;
	give();
	return b;
}

void shm_pending_end(int b)
{
	struct pend_bucket *map = shunt_map_once_peek(&pend_once);
	if (b < 0 || b >= PEND_BUCKETS || !map)
		return;
	/* Taken unconditionally: a count left high would announce offers
	 * that never come, each accept() of a plain client waiting. */
	while (__atomic_exchange_n(&pend_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	if (pend_pid == shunt_pid() && pend_count[b] > 0 && --pend_count[b] == 0)
		byte_lock(pend_fd, b, F_UNLCK, F_OFD_SETLK);
	give();
	struct pend_bucket *p = &map[b];
	__atomic_add_fetch(&p->seq, 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->waiters, __ATOMIC_RELAXED))
		REAL(syscall)(SYS_futex, &p->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

uint32_t shm_pending_seq(int b)
{
	struct pend_bucket *p = pend_get();
	return p ? __atomic_load_n(&p[b].seq, __ATOMIC_ACQUIRE) : 0;
}

int shm_pending_held(int b)
{
	if (!pend_get())
		return 0;
	/* Our own threads' announcements first: the lock test through our
	 * description does not see our own locks. */
	int held = 0, fd = -1;
	if (take()) {
		fd = own_fd();
		held = pend_pid == shunt_pid() && pend_count[b] > 0;
		give();
	}
	if (held)
		return 1;
	return fd >= 0 && byte_lock(fd, b, F_WRLCK, F_OFD_GETLK) == 1;
}

void shm_pending_sleep(int b, uint32_t seq, int timeout_ms)
{
	struct pend_bucket *p = pend_get();
	if (!p || timeout_ms <= 0)
		return;
	/* A client killed before its offer releases its lock but bumps
	 * nothing: the sleep is bounded, to look at the lock again. */
	if (timeout_ms > 10)
		timeout_ms = 10;
	struct timespec ts = {0, (long)timeout_ms * 1000000L};
	p += b;
	__atomic_add_fetch(&p->waiters, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) == seq)
		REAL(syscall)(SYS_futex, &p->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
	__atomic_sub_fetch(&p->waiters, 1, __ATOMIC_RELAXED);
}
