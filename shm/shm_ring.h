/* A single-producer single-consumer byte ring in shared memory.
 *
 * head and tail are free-running 64-bit byte counts (they never wrap in the
 * life of a connection); the data offset is count & (size - 1).  Each is
 * written by one side only, on its own cache line, with release stores read
 * by acquire loads, so the bytes behind a published head are visible to the
 * consumer and space behind a published tail is free for the producer.
 *
 * Nothing in the ring is trusted: the peer can write any value into head,
 * tail or the flags.  Every length is clamped to the ring size and every
 * offset masked, so a hostile or corrupted peer can make a connection fail
 * (shm_ring_sane() says so) but never make this side touch memory outside
 * the mapping.  A call on a corrupted ring may still move bytes (it trusts
 * its cached view of the peer's counter); callers check shm_ring_sane()
 * whenever a call returns 0. */
#ifndef SHM_RING_H
#define SHM_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SHM_CACHELINE 64

static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Waiting (shm_wake.c): a thread that finds nothing to do counts itself in
 * (a sleeper on a futex word of the ring, or a poll/epoll waiter armed on a
 * wake socket), looks once more, then sleeps; the other end, after it
 * moved a counter, looks at the counts and wakes only what sleeps.  Each
 * word is written by one side only. */
struct shm_ring_ctl {
	/* Producer's published line: the consumer polls it. */
	uint64_t head __attribute__((aligned(SHM_CACHELINE)));
	uint32_t wr_shut;        /* producer will write no more: shutdown(SHUT_WR) */
	uint32_t closed_hint;    /* producer closed its fd; TCP FIN tells if it
				    was the last holder */
	uint32_t data_seq;       /* futex word consumers sleep on: the producer
				    moves it after new data or a new state */
	/* Consumer's published line: the producer reads it when its cached
	 * tail says the ring is full. */
	uint64_t tail __attribute__((aligned(SHM_CACHELINE)));
	uint32_t space_seq;      /* futex word producers sleep on: the consumer
				    moves it after freeing space */
	/* The locks, each on a line of its own that only its side touches
	 * (the other side looks at it only while it demotes).  Every
	 * transfer takes one, and a locked instruction must own its line:
	 * on the line the peer polls (head) it waited for the peer's copy
	 * to be invalidated, a cross-CPU round trip before every write
	 * could be published. */
	uint32_t wlock __attribute__((aligned(SHM_CACHELINE))); /* taken by every write */
	uint32_t rlock __attribute__((aligned(SHM_CACHELINE))); /* taken by every read */
	/* Sleepers' line.  Each side reads the other's counts after every
	 * transfer, but they change only when a thread goes to sleep or
	 * wakes: on a line of their own, those reads hit the cache while
	 * nobody sleeps, instead of missing on the line the other side
	 * writes with every head or tail. */
	uint32_t reader_sleep __attribute__((aligned(SHM_CACHELINE)));
				 /* consumers asleep on data_seq (count) */
	uint32_t reader_fd;      /* consumers armed on a wake socket (count) */
	uint32_t writer_sleep;   /* producers asleep on space_seq (count) */
	uint32_t writer_fd;      /* producers armed on a wake socket (count) */
};

/* One end's view of a ring: the shared control block and data area, plus a
 * private cache of the other side's counter (saves a cache-line transfer
 * on most calls). */
struct shm_ring {
	struct shm_ring_ctl *ctl;
	uint8_t *data;
	uint64_t size; /* power of two */
	uint64_t cached; /* producer: last tail seen; consumer: last head seen */
};

void shm_ring_init(struct shm_ring *r, struct shm_ring_ctl *ctl, void *data,
		   uint64_t size);

static inline uint64_t shm_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Bytes readable now (consumer side).  A peer that claims more than the
 * ring holds yields size + 1, which shm_ring_sane() reports. */
static inline uint64_t shm_ring_used(struct shm_ring *r)
{
	uint64_t head = shm_load(&r->ctl->head);
	uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED);
	uint64_t used = head - tail;
	return used > r->size ? r->size + 1 : used;
}

/* Bytes writable now (producer side). */
static inline uint64_t shm_ring_space(struct shm_ring *r)
{
	uint64_t tail = shm_load(&r->ctl->tail);
	uint64_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_RELAXED);
	uint64_t used = head - tail;
	return used > r->size ? 0 : r->size - used;
}

static inline int shm_ring_sane(struct shm_ring *r)
{
	return shm_ring_used(r) <= r->size;
}

/* Copy up to the total iovec length into the ring; returns bytes written
 * (0 when full).  Producer only. */
size_t shm_ring_write(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
		      size_t skip);
/* shm_ring_write; streaming: with streaming stores (core/shunt_copy.h),
 * fenced before the head moves. */
size_t shm_ring_write_bulk(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
			   size_t skip, int streaming);

/* Copy up to the iovec length out of the ring.  peek leaves the bytes there.
 * Consumer only. */
size_t shm_ring_read(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
		     int peek);

/* shm_ring_write and shm_ring_read (not peeking) for one buffer: the
 * calls most reads and writes make, without the iovec walk. */
size_t shm_ring_put(struct shm_ring *r, const void *buf, size_t n);
size_t shm_ring_get(struct shm_ring *r, void *buf, size_t n);

/* Unconsumed bytes [tail, head) for replay over TCP: up to two spans. */
size_t shm_ring_unread(struct shm_ring *r, struct iovec out[2]);

/* Drop n bytes (consumer), after they have been replayed elsewhere. */
void shm_ring_consume(struct shm_ring *r, uint64_t n);

/* The transfer locks (wlock, rlock): a word in shared memory that holds 0
 * when free, else the tag of the holder (an end's tag: shm_arena.c keeps
 * one per process and publishes it as a lock on the arena file, so its
 * liveness can be asked without a pid).  Uncontended, taking one is one
 * compare-and-swap.  A holder held for long is asked about: a dead one (or
 * a value no live end wrote) is broken, so a killed process or a hostile
 * peer cannot park the other end forever. */
struct shm_lock_owner {
	uint32_t tag;                        /* ours, nonzero */
	int (*alive)(void *arg, uint32_t tag); /* 0 only when no end with
						  that tag is alive */
	void *arg;
};

/* How long a lock is waited for before its holder is asked about, and
 * again between two askings (one fcntl each). */
#define SHM_LOCK_ASK_NS 1000000ull

/* Take *l as o->tag; breaks the hold of a holder o->alive says is gone. */
void shm_lock(uint32_t *l, const struct shm_lock_owner *o);
void shm_unlock(uint32_t *l);
/* shm_unlock, then a full fence (every store before it is seen before any
 * load after it: what a wake check needs, shm_wake.c), in the one locked
 * exchange where the architecture's is a full barrier (x86). */
void shm_unlock_fence(uint32_t *l);
/* Return once *l was seen free, or held by a holder that is gone: the lock
 * of the other side of a ring, which this side never takes.  SEQ_CST on
 * both sides of the handshake (demoter: state then lock; consumer: lock
 * then state), so at least one of them sees the other. */
void shm_lock_wait_free(const uint32_t *l, const struct shm_lock_owner *o);

#endif
