#include "shm_ring.h"

#include <sched.h>
#include <string.h>

#include "core/shunt_clock.h"
#include "core/shunt_copy.h"

void shm_ring_init(struct shm_ring *r, struct shm_ring_ctl *ctl, void *data,
		   uint64_t size)
{
	r->ctl = ctl;
	r->data = data;
	r->size = size;
	/* Either end: "nothing known beyond tail" makes the first call load
	 * the other side's counter, whatever value the counters start at. */
	r->cached = __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
}

/* Copy len bytes between the ring at logical position pos and buf, in at
 * most two copies (the second when the span wraps). */
static void span_out(const struct shm_ring *r, uint64_t pos, uint8_t *buf, size_t len)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = len < r->size - off ? len : (size_t)(r->size - off);
	shunt_copy(buf, r->data + off, first);
	if (len > first)
		shunt_copy(buf + first, r->data, len - first);
}

static void span_in(struct shm_ring *r, uint64_t pos, const uint8_t *buf, size_t len,
		    int streaming)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = len < r->size - off ? len : (size_t)(r->size - off);
	if (streaming) {
		shunt_copy_nt(r->data + off, buf, first);
		if (len > first)
			shunt_copy_nt(r->data, buf + first, len - first);
		return;
	}
	shunt_copy(r->data + off, buf, first);
	if (len > first)
		shunt_copy(r->data, buf + first, len - first);
}

/* Free bytes from head, for a writer that wants want of them.  The
 * consumer's tail is reloaded only when the cached view is short of that:
 * one shared cache line read less on most calls.  0 when the peer
 * corrupted tail (the caller checks sanity). */
static inline uint64_t room(struct shm_ring *r, uint64_t head, size_t want)
{
	uint64_t space = r->size - (head - r->cached);
	if (head - r->cached > r->size || space < want) {
		r->cached = shm_load(&r->ctl->tail);
		if (head - r->cached > r->size)
			return 0;
		space = r->size - (head - r->cached);
	}
	return space;
}

/* Bytes readable from tail, for a reader that wants want of them; the
 * producer's head is reloaded in the same way.  0 when the peer corrupted
 * head. */
static inline uint64_t filled(struct shm_ring *r, uint64_t tail, size_t want)
{
	uint64_t avail = r->cached - tail;
	if (avail < want || avail > r->size) {
		r->cached = shm_load(&r->ctl->head);
		avail = r->cached - tail;
		if (avail > r->size)
			return 0;
	}
	return avail;
}

size_t shm_ring_put(struct shm_ring *r, const void *buf, size_t n)
{
	uint64_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_RELAXED);
	uint64_t space = room(r, head, n);
	if (n > space)
		n = (size_t)space;
	if (n) {
		span_in(r, head, buf, n, 0);
		__atomic_store_n(&r->ctl->head, head + n, __ATOMIC_RELEASE);
	}
	return n;
}

size_t shm_ring_get(struct shm_ring *r, void *buf, size_t n)
{
	uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED);
	uint64_t avail = filled(r, tail, n);
	if (n > avail)
		n = (size_t)avail;
	if (n) {
		span_out(r, tail, buf, n);
		__atomic_store_n(&r->ctl->tail, tail + n, __ATOMIC_RELEASE);
	}
	return n;
}

size_t shm_ring_write(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
		      size_t skip)
{
	return shm_ring_write_bulk(r, iov, iovcnt, skip, 0);
}

size_t shm_ring_write_bulk(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
			   size_t skip, int streaming)
{
	uint64_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_RELAXED);
	size_t want = 0;
	for (size_t i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	uint64_t space = room(r, head, want > skip ? want - skip : 0);
	size_t done = 0;
	for (size_t i = 0; i < iovcnt && space; i++) {
		size_t len = iov[i].iov_len;
		const uint8_t *base = iov[i].iov_base;
		if (skip >= len) {
			skip -= len;
			continue;
		}
		base += skip;
		len -= skip;
		skip = 0;
		if (len > space)
			len = (size_t)space;
		span_in(r, head + done, base, len, streaming);
		done += len;
		space -= len;
	}
	if (streaming)
		shunt_copy_nt_fence();
	if (done)
		__atomic_store_n(&r->ctl->head, head + done, __ATOMIC_RELEASE);
	return done;
}

size_t shm_ring_read(struct shm_ring *r, const struct iovec *iov, size_t iovcnt,
		     int peek)
{
	uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED);
	size_t want = 0;
	for (size_t i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	uint64_t avail = filled(r, tail, want);
	size_t done = 0;
	for (size_t i = 0; i < iovcnt && avail; i++) {
		size_t len = iov[i].iov_len < avail ? iov[i].iov_len : (size_t)avail;
		if (!len)
			continue; /* readv allows {NULL, 0} */
		span_out(r, tail + done, iov[i].iov_base, len);
		done += len;
		avail -= len;
	}
	if (done && !peek)
		__atomic_store_n(&r->ctl->tail, tail + done, __ATOMIC_RELEASE);
	return done;
}

size_t shm_ring_unread(struct shm_ring *r, struct iovec out[2])
{
	uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED);
	uint64_t head = shm_load(&r->ctl->head);
	uint64_t used = head - tail;
	if (used > r->size)
		used = 0;
	uint64_t off = tail & (r->size - 1);
	size_t first = used < r->size - off ? (size_t)used : (size_t)(r->size - off);
	out[0].iov_base = r->data + off;
	out[0].iov_len = first;
	out[1].iov_base = r->data;
	out[1].iov_len = (size_t)used - first;
	return (size_t)used;
}

void shm_ring_consume(struct shm_ring *r, uint64_t n)
{
	uint64_t tail = __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED);
	uint64_t used = shm_load(&r->ctl->head) - tail;
	if (n > used)
		n = used <= r->size ? used : 0;
	__atomic_store_n(&r->ctl->tail, tail + n, __ATOMIC_RELEASE);
}

/* Wait with *l held by someone else, then: 1 once the holder seen is gone
 * (the caller may break it), 0 once the word changed (try again). */
static int contend(const uint32_t *l, const struct shm_lock_owner *o, uint32_t seen)
{
	unsigned spins = 0;
	uint64_t t0 = 0;
	for (;;) {
		uint32_t now = __atomic_load_n(l, __ATOMIC_SEQ_CST);
		if (now != seen)
			return 0;
		/* Held across a memcpy at most: spin briefly, then let the
		 * holder run (it may share our CPU). */
		if (++spins < 64) {
			shm_cpu_relax();
			continue;
		}
		sched_yield();
		if ((spins & 63) != 0)
			continue;
		uint64_t t = shunt_now_ns();
		if (!t0) {
			t0 = t;
			continue;
		}
		if (t - t0 < SHM_LOCK_ASK_NS)
			continue;
		/* Another thread of this end holds it: it lives. */
		if (seen != o->tag && o->alive && !o->alive(o->arg, seen))
			return 1;
		t0 = t;
	}
}

void shm_lock(uint32_t *l, const struct shm_lock_owner *o)
{
	for (;;) {
		uint32_t seen = 0;
		if (__atomic_compare_exchange_n(l, &seen, o->tag, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return;
		if (contend(l, o, seen) &&
		    __atomic_compare_exchange_n(l, &seen, o->tag, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return; /* broken: its holder is gone */
	}
}

void shm_unlock(uint32_t *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

void shm_unlock_fence(uint32_t *l)
{
#if defined(__x86_64__) || defined(__i386__)
	/* A locked instruction orders all loads and stores around it; as an
	 * acquire-release operation it also keeps the compiler from moving
	 * the ring's stores after it or the wake check's loads before it. */
	(void)__atomic_exchange_n(l, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

void shm_lock_wait_free(const uint32_t *l, const struct shm_lock_owner *o)
{
	for (;;) {
		uint32_t seen = __atomic_load_n(l, __ATOMIC_SEQ_CST);
		if (!seen || contend(l, o, seen))
			return;
	}
}
