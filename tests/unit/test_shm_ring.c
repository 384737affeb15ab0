/* The shared-memory SPSC byte ring (shm/shm_ring.c): exact bytes across
 * wraparound, iovec scatter/gather with skip, peek, full and empty, the
 * replay spans, used/space accounting, a hostile peer, two threads, two
 * processes, and the lock.
 *
 * Data areas are malloc'd with exactly the ring size and destination buffers
 * with exactly the requested length, so under -fsanitize=address any access
 * outside them is reported.
 *
 * The suite "ring_fixed" at the end holds tests that fail against the
 * current ring; they are disabled unless built with -DSHUNT_RING_BUG_TESTS. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/shm_ring.h"

#define RSIZE 4096u


/* ---- helpers ------------------------------------------------------------ */

/* The two ends of one ring in this process. */
struct pair {
	struct shm_ring_ctl *ctl;
	uint8_t *data;
	uint64_t size;
	struct shm_ring w; /* producer end */
	struct shm_ring r; /* consumer end */
};

static void pair_init(struct pair *p, uint64_t size)
{
	p->ctl = aligned_alloc(SHM_CACHELINE, sizeof(*p->ctl));
	p->data = malloc(size); /* exactly size bytes: ASan guards both sides */
	cr_assert(p->ctl && p->data);
	memset(p->ctl, 0, sizeof(*p->ctl));
	memset(p->data, 0xee, size);
	p->size = size;
	shm_ring_init(&p->w, p->ctl, p->data, size);
	shm_ring_init(&p->r, p->ctl, p->data, size);
}

static void pair_fini(struct pair *p)
{
	free(p->ctl);
	free(p->data);
}

/* splitmix64: a stateless hash and a small PRNG. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return mix64(*s);
}

/* The reference byte stream: byte at position pos of stream `seed`. */
static void stream_fill(uint8_t *buf, uint64_t seed, uint64_t pos, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t p = pos + i;
		buf[i] = (uint8_t)(mix64(seed ^ (p >> 3)) >> ((p & 7) * 8));
	}
}

/* Index of the first byte of buf that differs from the stream, or -1. */
static long stream_diff(const uint8_t *buf, uint64_t seed, uint64_t pos, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t p = pos + i;
		if (buf[i] != (uint8_t)(mix64(seed ^ (p >> 3)) >> ((p & 7) * 8)))
			return (long)i;
	}
	return -1;
}

/* One buffer each way, by the iovec calls and by the one-buffer calls
 * (shm_ring_put/get, what read() and write() take) in turn: every test
 * below holds for both. */
static unsigned turn;

static size_t wr1(struct shm_ring *r, const void *buf, size_t len)
{
	if (turn++ & 1)
		return shm_ring_put(r, buf, len);
	struct iovec iov = { (void *)buf, len };
	return shm_ring_write(r, &iov, 1, 0);
}

static size_t rd1(struct shm_ring *r, void *buf, size_t len, int peek)
{
	if (!peek && (turn++ & 1))
		return shm_ring_get(r, buf, len);
	struct iovec iov = { buf, len };
	return shm_ring_read(r, &iov, 1, peek);
}

/* Cut [buf, buf+len) into 1..4 contiguous iovecs (some possibly empty). */
static size_t split(uint8_t *buf, size_t len, struct iovec iov[4], uint64_t *rng)
{
	size_t cnt = 1 + (size_t)(rnd(rng) % 4), off = 0;
	for (size_t i = 0; i + 1 < cnt; i++) {
		size_t l = (size_t)(rnd(rng) % (len - off + 1));
		iov[i].iov_base = buf + off;
		iov[i].iov_len = l;
		off += l;
	}
	iov[cnt - 1].iov_base = buf + off;
	iov[cnt - 1].iov_len = len - off;
	return cnt;
}

/* Pass n bytes through the (empty) ring, moving both counters by n. */
static void advance_empty(struct pair *p, uint64_t n)
{
	uint8_t *tmp = malloc(p->size);
	cr_assert_not_null(tmp);
	while (n) {
		size_t k = n < p->size ? (size_t)n : (size_t)p->size;
		size_t w = wr1(&p->w, tmp, k);
		cr_assert_gt(w, 0);
		cr_assert_eq(rd1(&p->r, tmp, w, 0), w);
		n -= w;
	}
	free(tmp);
	cr_assert_eq(shm_ring_used(&p->r), 0);
}

/* Write all of buf, or until the ring is full. */
static size_t wr_all(struct shm_ring *r, const void *buf, size_t len)
{
	size_t done = 0, n;
	while (done < len && (n = wr1(r, (const uint8_t *)buf + done, len - done)) > 0)
		done += n;
	return done;
}

/* Write until the ring is full (a write may stop short of the free space
 * when the producer's cached tail is stale); returns the bytes written. */
static size_t fill(struct shm_ring *w, uint8_t byte)
{
	uint8_t *buf = malloc(RSIZE);
	memset(buf, byte, RSIZE);
	size_t total = 0, n;
	while ((n = wr1(w, buf, RSIZE)) > 0)
		total += n;
	free(buf);
	return total;
}

/* ---- single-threaded behaviour ----------------------------------------- */

Test(ring, empty_returns_zero)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t *b = malloc(16);
	cr_expect_eq(rd1(&p.r, b, 16, 0), 0);
	cr_expect_eq(rd1(&p.r, b, 16, 1), 0);
	cr_expect_eq(shm_ring_used(&p.r), 0);
	cr_expect_eq(shm_ring_space(&p.w), RSIZE);
	cr_expect(shm_ring_sane(&p.r));
	/* and again once bytes have passed through */
	cr_assert_eq(wr1(&p.w, "0123456789", 10), 10);
	cr_assert_eq(rd1(&p.r, b, 16, 0), 10);
	cr_expect_eq(rd1(&p.r, b, 16, 0), 0);
	cr_expect_eq(rd1(&p.r, b, 16, 1), 0);
	/* nothing to write: zero-length and empty iovec arrays */
	cr_expect_eq(wr1(&p.w, b, 0), 0);
	cr_expect_eq(shm_ring_write(&p.w, NULL, 0, 0), 0);
	cr_expect_eq(shm_ring_read(&p.r, NULL, 0, 0), 0);
	free(b);
	pair_fini(&p);
}

Test(ring, full_returns_zero)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t *src = malloc(RSIZE + 1), *dst = malloc(RSIZE);
	stream_fill(src, 1, 0, RSIZE + 1);
	cr_assert_eq(wr1(&p.w, src, RSIZE + 1), RSIZE, "a write stops at the size");
	cr_expect_eq(wr1(&p.w, src + RSIZE, 1), 0);
	cr_expect_eq(shm_ring_space(&p.w), 0);
	cr_expect_eq(shm_ring_used(&p.r), RSIZE);
	cr_expect(shm_ring_sane(&p.r));
	/* one byte out, one byte in */
	cr_assert_eq(rd1(&p.r, dst, 1, 0), 1);
	cr_expect_eq(wr1(&p.w, src + RSIZE, 2), 1);
	cr_expect_eq(wr1(&p.w, src + RSIZE, 1), 0);
	cr_assert_eq(rd1(&p.r, dst + 1, RSIZE - 1, 0), RSIZE - 1);
	cr_expect_eq(stream_diff(dst, 1, 0, RSIZE), -1);
	cr_expect_eq(rd1(&p.r, dst, 1, 0), 1);
	cr_expect_eq(dst[0], src[RSIZE]);
	free(src);
	free(dst);
	pair_fini(&p);
}

/* Many odd-size writes and reads, interleaved at random, against the
 * reference stream; every byte crosses the wrap point many times. */
Test(ring, exact_bytes_across_wraparound)
{
	struct pair p;
	pair_init(&p, RSIZE);
	static const size_t odd[] = { 1, 3, 7, 13, 61, 63, 64, 65, 127, 509, 1021,
				      2047, 4093, 4095, 4096, 4097, 6143, 8191 };
	const uint64_t seed = 42, total = 8u << 20;
	uint64_t rng = 7, wpos = 0, rpos = 0;
	uint8_t *buf = malloc(3 * RSIZE);
	unsigned writes = 0, reads = 0;
	while (rpos < total) {
		size_t len = (rnd(&rng) & 1) ? odd[rnd(&rng) % (sizeof(odd) / sizeof(*odd))]
					      : 1 + (size_t)(rnd(&rng) % (2 * RSIZE));
		if (rnd(&rng) % 2 && wpos < total) {
			if (len > total - wpos)
				len = (size_t)(total - wpos);
			uint64_t space = shm_ring_space(&p.w);
			stream_fill(buf, seed, wpos, len);
			size_t n = wr1(&p.w, buf, len);
			cr_assert_leq(n, len);
			cr_assert_leq(n, space);
			cr_assert(n > 0 || space == 0, "write returned 0 with %lu free",
				  (unsigned long)space);
			wpos += n;
			writes++;
		} else {
			uint64_t used = shm_ring_used(&p.r);
			uint8_t *dst = malloc(len);
			size_t n = rd1(&p.r, dst, len, 0);
			cr_assert_leq(n, len);
			cr_assert_leq(n, used);
			cr_assert(n > 0 || used == 0, "read returned 0 with %lu used",
				  (unsigned long)used);
			long bad = stream_diff(dst, seed, rpos, n);
			cr_assert_eq(bad, -1, "byte %lu differs", (unsigned long)(rpos + (uint64_t)bad));
			free(dst);
			rpos += n;
			reads++;
		}
		cr_assert_eq(shm_ring_used(&p.r), wpos - rpos);
		cr_assert(shm_ring_sane(&p.r));
	}
	cr_expect_gt(writes, 1000);
	cr_expect_gt(reads, 1000);
	free(buf);
	pair_fini(&p);
}

Test(ring, iovec_scatter_gather_with_skip)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t src[64];
	stream_fill(src, 3, 0, sizeof(src));
	/* 5 + 0 (NULL base) + 11 + 20 + 28 = 64 bytes */
	struct iovec in[] = {
		{ src, 5 }, { NULL, 0 }, { src + 5, 11 }, { src + 16, 20 }, { src + 36, 28 },
	};
	/* skip inside the first iovec, at an iovec edge, and inside a later one */
	static const size_t skips[] = { 0, 3, 5, 16, 17, 36, 63 };
	for (size_t s = 0; s < sizeof(skips) / sizeof(*skips); s++) {
		size_t k = skips[s];
		cr_assert_eq(shm_ring_write(&p.w, in, 5, k), 64 - k, "skip %zu", k);
		/* gather into 3 + 0 + 10 + rest */
		uint8_t a[3], c[10], *d = malloc(100);
		struct iovec out[] = { { a, 3 }, { d, 0 }, { c, 10 }, { d, 100 } };
		size_t n = shm_ring_read(&p.r, out, 4, 0);
		cr_assert_eq(n, 64 - k, "skip %zu", k);
		uint8_t got[64];
		size_t g = 0;
		for (size_t i = 0; i < 4 && g < n; i++) {
			size_t l = out[i].iov_len < n - g ? out[i].iov_len : n - g;
			memcpy(got + g, out[i].iov_base, l);
			g += l;
		}
		cr_assert_arr_eq(got, src + k, n, "skip %zu", k);
		free(d);
	}
	/* skip at or past the total writes nothing */
	cr_expect_eq(shm_ring_write(&p.w, in, 5, 64), 0);
	cr_expect_eq(shm_ring_write(&p.w, in, 5, 1000), 0);
	cr_expect_eq(shm_ring_used(&p.r), 0);
	pair_fini(&p);
}

/* A large vector into a ring with less room: the write stops inside an
 * iovec, and calls with skip = bytes done resume exactly there, across the
 * wrap point. */
Test(ring, iovec_partial_write_resumes_with_skip)
{
	struct pair p;
	pair_init(&p, RSIZE);
	advance_empty(&p, RSIZE - 1000); /* data offset 3096: wraps soon */
	size_t total = 3 * RSIZE + 77;
	uint8_t *src = malloc(total), *dst = malloc(total);
	stream_fill(src, 5, 0, total);
	struct iovec in[] = { { src, 1500 }, { src + 1500, 3000 }, { src + 4500, 17 },
			      { src + 4517, total - 4517 } };
	size_t done = 0, got = 0;
	unsigned calls = 0;
	while (got < total) {
		size_t n = shm_ring_write(&p.w, in, 4, done);
		done += n;
		cr_assert(shm_ring_sane(&p.r));
		/* drain an odd amount */
		size_t m = rd1(&p.r, dst + got, total - got < 2333 ? total - got : 2333, 0);
		got += m;
		cr_assert(n || m, "no progress");
		cr_assert_leq(++calls, 100);
	}
	cr_expect_eq(done, total);
	cr_assert_arr_eq(dst, src, total);
	free(src);
	free(dst);
	pair_fini(&p);
}

/* A bulk send's streaming copy (core/shunt_copy.h): the same bytes as the
 * cached one, across the wrap and at odd offsets, pieces large and small. */
Test(ring, streaming_write_gives_the_same_bytes)
{
	struct pair p;
	pair_init(&p, RSIZE);
	advance_empty(&p, RSIZE - 1003); /* odd offset, wraps soon */
	size_t total = 5 * RSIZE + 333;
	uint8_t *src = malloc(total), *dst = malloc(total);
	cr_assert(src && dst);
	stream_fill(src, 9, 0, total);
	uint64_t rng = 3;
	size_t done = 0, got = 0;
	unsigned calls = 0;
	while (got < total) {
		size_t want = 1 + (size_t)(rnd(&rng) % (RSIZE + 100));
		if (want > total - done)
			want = total - done;
		struct iovec in[4];
		size_t cnt = split(src + done, want, in, &rng);
		done += shm_ring_write_bulk(&p.w, in, cnt, 0, 1);
		cr_assert(shm_ring_sane(&p.r));
		size_t m = rd1(&p.r, dst + got, total - got, 0);
		got += m;
		cr_assert_leq(++calls, 100000);
	}
	cr_expect_eq(done, total);
	cr_assert_eq(stream_diff(dst, 9, 0, total), -1);
	free(src);
	free(dst);
	pair_fini(&p);
}

Test(ring, peek_leaves_bytes)
{
	struct pair p;
	pair_init(&p, RSIZE);
	advance_empty(&p, RSIZE - 30); /* the next 100 bytes wrap */
	uint8_t src[100], a[50], b[100], c[200];
	stream_fill(src, 9, 0, sizeof(src));
	cr_assert_eq(wr_all(&p.w, src, 100), 100);
	cr_assert_eq(rd1(&p.r, a, 50, 1), 50);
	cr_expect_arr_eq(a, src, 50);
	cr_expect_eq(shm_ring_used(&p.r), 100);
	cr_assert_eq(rd1(&p.r, b, 100, 1), 100);
	cr_expect_arr_eq(b, src, 100);
	/* peek through a vector */
	uint8_t x[7], *y = malloc(93);
	struct iovec v[] = { { x, 7 }, { y, 93 } };
	cr_assert_eq(shm_ring_read(&p.r, v, 2, 1), 100);
	cr_expect_arr_eq(x, src, 7);
	cr_expect_arr_eq(y, src + 7, 93);
	free(y);
	cr_expect_eq(shm_ring_used(&p.r), 100);
	cr_expect_eq(shm_ring_space(&p.w), RSIZE - 100);
	/* the real read gets the same bytes, then nothing is left */
	cr_assert_eq(rd1(&p.r, c, sizeof(c), 0), 100);
	cr_expect_arr_eq(c, src, 100);
	cr_expect_eq(rd1(&p.r, c, sizeof(c), 1), 0);
	cr_expect_eq(shm_ring_used(&p.r), 0);
	pair_fini(&p);
}

Test(ring, unread_spans_and_consume)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t src[300], *dst = malloc(300);
	stream_fill(src, 11, 0, sizeof(src));
	struct iovec sp[2];

	/* empty: no bytes, two empty spans */
	cr_expect_eq(shm_ring_unread(&p.r, sp), 0);
	cr_expect_eq(sp[0].iov_len + sp[1].iov_len, 0);

	/* not wrapped: one span at the start of the data */
	cr_assert_eq(wr_all(&p.w, src, 100), 100);
	cr_assert_eq(shm_ring_unread(&p.r, sp), 100);
	cr_expect_eq(sp[0].iov_base, p.data);
	cr_expect_eq(sp[0].iov_len, 100);
	cr_expect_eq(sp[1].iov_len, 0);
	cr_expect_arr_eq(sp[0].iov_base, src, 100);
	/* unread does not consume */
	cr_expect_eq(shm_ring_used(&p.r), 100);
	shm_ring_consume(&p.r, 40);
	cr_expect_eq(shm_ring_used(&p.r), 60);
	cr_assert_eq(shm_ring_unread(&p.r, sp), 60);
	cr_expect_eq(sp[0].iov_base, p.data + 40);
	cr_expect_arr_eq(sp[0].iov_base, src + 40, 60);
	/* reading continues after the consumed bytes */
	cr_assert_eq(rd1(&p.r, dst, 300, 0), 60);
	cr_expect_arr_eq(dst, src + 40, 60);

	/* wrapped: tail at offset 4000, 200 bytes -> 96 + 104 */
	advance_empty(&p, 4000 - (p.ctl->tail & (RSIZE - 1))); /* to offset 4000 */
	cr_assert_eq(p.ctl->tail & (RSIZE - 1), 4000);
	cr_assert_eq(wr_all(&p.w, src, 200), 200);
	cr_assert_eq(shm_ring_unread(&p.r, sp), 200);
	cr_expect_eq(sp[0].iov_base, p.data + 4000);
	cr_expect_eq(sp[0].iov_len, 96);
	cr_expect_eq(sp[1].iov_base, p.data);
	cr_expect_eq(sp[1].iov_len, 104);
	cr_expect_arr_eq(sp[0].iov_base, src, 96);
	cr_expect_arr_eq(sp[1].iov_base, src + 96, 104);
	/* consume exactly the first span: the rest is one span at offset 0 */
	shm_ring_consume(&p.r, 96);
	cr_assert_eq(shm_ring_unread(&p.r, sp), 104);
	cr_expect_eq(sp[0].iov_base, p.data);
	cr_expect_eq(sp[0].iov_len, 104);
	cr_expect_eq(sp[1].iov_len, 0);
	/* consume across nothing more: all gone, producer sees the space */
	shm_ring_consume(&p.r, 104);
	cr_expect_eq(shm_ring_unread(&p.r, sp), 0);
	cr_expect_eq(shm_ring_used(&p.r), 0);
	cr_expect_eq(shm_ring_space(&p.w), RSIZE);
	cr_expect_eq(rd1(&p.r, dst, 300, 0), 0);

	/* a full ring that wraps: spans cover the whole data area */
	advance_empty(&p, 17);
	uint8_t *big = malloc(RSIZE);
	stream_fill(big, 12, 0, RSIZE);
	cr_assert_eq(wr_all(&p.w, big, RSIZE), RSIZE);
	cr_assert_eq(shm_ring_unread(&p.r, sp), RSIZE);
	cr_expect_eq(sp[0].iov_len + sp[1].iov_len, RSIZE);
	cr_expect_arr_eq(sp[0].iov_base, big, sp[0].iov_len);
	cr_expect_arr_eq(sp[1].iov_base, big + sp[0].iov_len, sp[1].iov_len);
	/* consume part of the first span and read the rest through the ring */
	shm_ring_consume(&p.r, 10);
	uint8_t *rest = malloc(RSIZE - 10);
	size_t got = 0, n;
	while ((n = rd1(&p.r, rest + got, RSIZE - 10 - got, 0)) > 0)
		got += n;
	cr_expect_eq(got, RSIZE - 10);
	cr_expect_arr_eq(rest, big + 10, RSIZE - 10);
	free(rest);
	free(big);
	free(dst);
	pair_fini(&p);
}

Test(ring, used_and_space_accounting)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t *buf = malloc(RSIZE);
	memset(buf, 1, RSIZE);
	uint64_t rng = 99, used = 0;
	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)(rnd(&rng) % (RSIZE / 2 + 1));
		if (rnd(&rng) & 1) {
			size_t n = wr1(&p.w, buf, len);
			used += n;
		} else {
			size_t n = rd1(&p.r, buf, len, 0);
			used -= n;
		}
		cr_assert_eq(shm_ring_used(&p.r), used);
		cr_assert_eq(shm_ring_space(&p.w), RSIZE - used);
		cr_assert_eq(shm_ring_used(&p.w) + shm_ring_space(&p.w), RSIZE);
		cr_assert_eq(p.ctl->head - p.ctl->tail, used);
		cr_assert(shm_ring_sane(&p.r) && shm_ring_sane(&p.w));
	}
	free(buf);
	pair_fini(&p);
}

/* Free-running 64-bit counters that pass 2^64 (never in practice, but the
 * arithmetic is modular and the offsets masked). */
Test(ring, counters_wrap_at_2_pow_64)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint64_t base = UINT64_MAX - 5000;
	p.ctl->head = p.ctl->tail = base;
	p.w.cached = p.r.cached = base; /* as if the ends had seen them */
	uint8_t *src = malloc(3 * RSIZE), *dst = malloc(3 * RSIZE);
	stream_fill(src, 13, 0, 3 * RSIZE);
	size_t put = 0, got = 0;
	while (got < 3 * RSIZE) {
		put += wr1(&p.w, src + put, 3 * RSIZE - put < 1111 ? 3 * RSIZE - put : 1111);
		got += rd1(&p.r, dst + got, 3 * RSIZE - got < 777 ? 3 * RSIZE - got : 777, 0);
		cr_assert(shm_ring_sane(&p.r));
		cr_assert_eq(shm_ring_used(&p.r), put - got);
	}
	cr_expect_lt(p.ctl->head, base, "the counter passed 2^64");
	cr_expect_arr_eq(dst, src, 3 * RSIZE);
	free(src);
	free(dst);
	pair_fini(&p);
}

/* ---- a hostile or corrupted peer --------------------------------------- */

/* Every operation of both ends; the results must stay within the buffers
 * given and the ring size (ASan checks the memory, this the counts). */
static void poke_all(struct pair *p, size_t *rd, size_t *pk, size_t *wr, size_t *un)
{
	uint8_t *dst = malloc(RSIZE + 1), *src = malloc(RSIZE + 1);
	memset(src, 0x5a, RSIZE + 1);
	struct iovec sp[2];
	*pk = rd1(&p->r, dst, RSIZE + 1, 1);
	*un = shm_ring_unread(&p->r, sp);
	cr_assert_leq(sp[0].iov_len + sp[1].iov_len, RSIZE);
	cr_assert_eq(sp[0].iov_len + sp[1].iov_len, *un);
	if (sp[0].iov_len)
		cr_assert(sp[0].iov_base >= (void *)p->data &&
			  (uint8_t *)sp[0].iov_base + sp[0].iov_len <= p->data + RSIZE);
	if (sp[1].iov_len)
		cr_assert_eq(sp[1].iov_base, p->data);
	/* Each kind of call in turn (rd1 and wr1 alternate): the second of
	 * each pair finds what the first left. */
	*rd = rd1(&p->r, dst, RSIZE + 1, 0);
	*rd += rd1(&p->r, dst, RSIZE + 1, 0);
	*wr = wr1(&p->w, src, RSIZE + 1);
	*wr += wr1(&p->w, src, RSIZE + 1);
	cr_assert_leq(*pk, RSIZE);
	cr_assert_leq(*rd, RSIZE);
	cr_assert_leq(*wr, RSIZE);
	free(dst);
	free(src);
}

Test(ring, hostile_head_beyond_size)
{
	/* (head behind tail is hostile_tail_ahead_of_head) */
	static const uint64_t bad_delta[] = { RSIZE + 1, RSIZE + 2, 2 * RSIZE, 1ull << 32,
					      1ull << 63, UINT64_MAX - RSIZE };
	for (size_t i = 0; i < sizeof(bad_delta) / sizeof(*bad_delta); i++) {
		struct pair p;
		pair_init(&p, RSIZE);
		advance_empty(&p, 1000 + 37 * i); /* both ends have seen real counters */
		uint64_t tail = p.ctl->tail;
		p.ctl->head = tail + bad_delta[i];
		cr_expect_not(shm_ring_sane(&p.r), "delta %#lx", (unsigned long)bad_delta[i]);
		cr_expect_not(shm_ring_sane(&p.w));
		cr_expect_eq(shm_ring_used(&p.r), RSIZE + 1);
		cr_expect_eq(shm_ring_space(&p.w), 0);
		size_t rd, pk, wr, un;
		poke_all(&p, &rd, &pk, &wr, &un);
		cr_expect_eq(rd, 0, "delta %#lx: read %zu", (unsigned long)bad_delta[i], rd);
		cr_expect_eq(pk, 0);
		cr_expect_eq(wr, 0, "delta %#lx: write %zu", (unsigned long)bad_delta[i], wr);
		cr_expect_eq(un, 0);
		cr_expect_eq(p.ctl->tail, tail, "tail moved");
		cr_expect_eq(p.ctl->head, tail + bad_delta[i], "head moved");
		/* once the peer behaves again, the ring works again */
		p.ctl->head = tail;
		cr_expect(shm_ring_sane(&p.r));
		uint8_t b[5];
		cr_expect_eq(wr_all(&p.w, "hello", 5), 5);
		cr_expect_eq(rd1(&p.r, b, 5, 0), 5);
		cr_expect_arr_eq(b, "hello", 5);
		pair_fini(&p);
	}
}

Test(ring, hostile_tail_ahead_of_head)
{
	for (uint64_t ahead = 1; ahead < (1ull << 62); ahead = ahead * 7 + 3) {
		struct pair p;
		pair_init(&p, RSIZE);
		advance_empty(&p, 500);
		/* fill the ring, so the producer must look at the tail again */
		cr_assert_eq(fill(&p.w, 7), RSIZE);
		uint64_t head = p.ctl->head;
		p.ctl->tail = head + ahead;
		cr_expect_not(shm_ring_sane(&p.r), "ahead %lu", (unsigned long)ahead);
		cr_expect_eq(shm_ring_space(&p.w), 0);
		size_t rd, pk, wr, un;
		poke_all(&p, &rd, &pk, &wr, &un);
		cr_expect_eq(rd, 0, "ahead %lu: read %zu", (unsigned long)ahead, rd);
		cr_expect_eq(pk, 0);
		cr_expect_eq(wr, 0, "ahead %lu: write %zu", (unsigned long)ahead, wr);
		cr_expect_eq(un, 0);
		cr_expect_eq(p.ctl->head, head, "head moved");
		pair_fini(&p);
	}
}

Test(ring, hostile_tail_too_far_behind)
{
	struct pair p;
	pair_init(&p, RSIZE);
	advance_empty(&p, 3 * RSIZE + 5);
	uint8_t *buf = malloc(RSIZE);
	memset(buf, 7, RSIZE);
	cr_assert_eq(fill(&p.w, 7), RSIZE); /* full: the writer re-reads tail */
	p.ctl->tail = p.ctl->head - RSIZE - 1;
	cr_expect_not(shm_ring_sane(&p.w));
	cr_expect_eq(wr1(&p.w, buf, RSIZE), 0);
	cr_expect_eq(wr1(&p.w, buf, 1), 0);
	size_t rd, pk, wr, un;
	poke_all(&p, &rd, &pk, &wr, &un);
	cr_expect_eq(wr, 0);
	free(buf);
	pair_fini(&p);
}

/* Random head/tail pairs near every edge, with whatever the ends have
 * cached from the previous round: counts stay bounded, memory stays inside
 * (ASan), sanity is reported exactly, and unread (which always loads both
 * counters) offers nothing from a bad ring.  Read and write may still move
 * bytes on a bad ring while their cached view looks fine (shm_ring.h:
 * callers check sanity when a call returns 0). */
Test(ring, hostile_random_counters)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint64_t rng = 1234;
	static const uint64_t edges[] = { 0, 1, RSIZE - 1, RSIZE, RSIZE + 1, 2 * RSIZE,
					  1ull << 63, UINT64_MAX, UINT64_MAX - RSIZE };
	const size_t ne = sizeof(edges) / sizeof(*edges);
	for (int i = 0; i < 20000; i++) {
		uint64_t base = rnd(&rng);
		if (i & 1)
			base = edges[rnd(&rng) % ne];
		uint64_t delta = edges[rnd(&rng) % ne];
		if (rnd(&rng) & 1)
			delta += rnd(&rng) % 3;
		if (rnd(&rng) & 1)
			delta = -delta;
		p.ctl->tail = base;
		p.ctl->head = base + delta;
		if (rnd(&rng) % 4 == 0) /* a fresh end has cached nothing */
			p.w.cached = p.r.cached = 0;
		int sane = delta <= RSIZE;
		cr_assert_eq(shm_ring_sane(&p.r), sane);
		size_t rd, pk, wr, un;
		poke_all(&p, &rd, &pk, &wr, &un);
		if (!sane)
			cr_assert_eq(un, 0);
		else
			cr_assert_eq(un, delta);
	}
	pair_fini(&p);
}

/* ---- two threads --------------------------------------------------------- */

#define STRESS_TOTAL (64ull << 20)

struct side {
	struct shm_ring *ring;
	uint64_t size, total, seed, rng;
	uint64_t bad_at;  /* consumer: stream offset of the first bad byte */
	int insane;       /* saw shm_ring_sane() fail */
	pid_t peer;       /* process test: give up when it has died */
	int *stop;        /* thread test: set by the side that gives up */
};

static int peer_gone(struct side *s)
{
	int st;
	if (s->stop && __atomic_load_n(s->stop, __ATOMIC_ACQUIRE))
		return 1;
	return s->peer > 0 && waitpid(s->peer, &st, WNOHANG) == s->peer;
}

static void give_up(struct side *s)
{
	if (s->stop)
		__atomic_store_n(s->stop, 1, __ATOMIC_RELEASE);
}

/* Write the stream in chunks of 1 B .. 3 x size, each cut into 1..4
 * iovecs, resuming partial writes with skip. */
static void *producer(void *arg)
{
	struct side *s = arg;
	size_t cap = (size_t)(3 * s->size);
	uint8_t *buf = malloc(cap);
	uint64_t pos = 0;
	unsigned idle = 0;
	while (pos < s->total) {
		size_t len = 1 + (size_t)(rnd(&s->rng) % cap);
		if (len > s->total - pos)
			len = (size_t)(s->total - pos);
		stream_fill(buf, s->seed, pos, len);
		struct iovec iov[4];
		size_t cnt = split(buf, len, iov, &s->rng), done = 0;
		/* A quarter of the chunks as write() sends them. */
		int one = rnd(&s->rng) % 4 == 0;
		while (done < len) {
			size_t n = one ? shm_ring_put(s->ring, buf + done, len - done)
				       : shm_ring_write(s->ring, iov, cnt, done);
			if (n) {
				done += n;
				idle = 0;
				continue;
			}
			if (!shm_ring_sane(s->ring)) {
				s->insane = 1;
				give_up(s);
				goto out;
			}
			if ((++idle & 0xff) == 0 && peer_gone(s))
				goto out;
			sched_yield();
		}
		pos += len;
	}
out:
	free(buf);
	return NULL;
}

/* Read random sizes into 1..4 iovecs, sometimes peeking first, and compare
 * with the stream. */
static void *consumer(void *arg)
{
	struct side *s = arg;
	size_t cap = (size_t)(3 * s->size);
	uint8_t *buf = malloc(cap), *pk = malloc(cap);
	uint64_t pos = 0;
	unsigned idle = 0;
	s->bad_at = UINT64_MAX;
	while (pos < s->total) {
		size_t want = 1 + (size_t)(rnd(&s->rng) % cap);
		struct iovec iov[4];
		size_t cnt = split(buf, want, iov, &s->rng);
		size_t p = 0;
		if (rnd(&s->rng) % 8 == 0) {
			p = rd1(s->ring, pk, want, 1);
			long bad = stream_diff(pk, s->seed, pos, p);
			if (bad >= 0) {
				s->bad_at = pos + (uint64_t)bad;
				break;
			}
		}
		size_t n = rnd(&s->rng) % 4 == 0 ? shm_ring_get(s->ring, buf, want)
						 : shm_ring_read(s->ring, iov, cnt, 0);
		if (!n) {
			if (!shm_ring_sane(s->ring)) {
				s->insane = 1;
				break;
			}
			if ((++idle & 0xff) == 0 && peer_gone(s))
				break;
			sched_yield();
			continue;
		}
		idle = 0;
		if (n < p) { /* a read returns at least what a peek showed */
			s->bad_at = pos + n;
			break;
		}
		/* the iovecs are consecutive pieces of buf */
		long bad = stream_diff(buf, s->seed, pos, n);
		if (bad >= 0) {
			s->bad_at = pos + (uint64_t)bad;
			break;
		}
		pos += n;
	}
	if (pos == s->total && shm_ring_used(s->ring) != 0)
		s->bad_at = pos; /* bytes beyond the end of the stream */
	if (pos < s->total)
		give_up(s);
	free(buf);
	free(pk);
	return NULL;
}

Test(ring, two_threads_64MiB_stream, .timeout = 240)
{
	struct pair p;
	pair_init(&p, RSIZE);
	int stop = 0;
	struct side prod = { .ring = &p.w, .size = RSIZE, .total = STRESS_TOTAL,
			     .seed = 0xabcdef, .rng = 1, .stop = &stop };
	struct side cons = { .ring = &p.r, .size = RSIZE, .total = STRESS_TOTAL,
			     .seed = 0xabcdef, .rng = 2, .stop = &stop };
	pthread_t tp, tc;
	cr_assert_eq(pthread_create(&tc, NULL, consumer, &cons), 0);
	cr_assert_eq(pthread_create(&tp, NULL, producer, &prod), 0);
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	cr_expect_not(prod.insane);
	cr_expect_not(cons.insane);
	cr_expect_eq(cons.bad_at, UINT64_MAX, "stream differs at byte %lu",
		     (unsigned long)cons.bad_at);
	cr_expect_eq(p.ctl->head, STRESS_TOTAL);
	cr_expect_eq(p.ctl->tail, STRESS_TOTAL);
	pair_fini(&p);
}

/* ---- two processes ------------------------------------------------------- */

struct shared_ring {
	struct shm_ring_ctl ctl;
	uint8_t data[RSIZE] __attribute__((aligned(SHM_CACHELINE)));
};

Test(ring, two_processes_64MiB_stream, .timeout = 240)
{
	struct shared_ring *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	pid_t parent = getpid();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* child: the consumer; exit 0 when the stream was exact */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(3);
		struct shm_ring r;
		shm_ring_init(&r, &sh->ctl, sh->data, RSIZE);
		struct side cons = { .ring = &r, .size = RSIZE, .total = STRESS_TOTAL,
				     .seed = 0x5eed, .rng = 3 };
		consumer(&cons);
		_exit(cons.bad_at == UINT64_MAX && !cons.insane ? 0 : 1);
	}
	struct shm_ring w;
	shm_ring_init(&w, &sh->ctl, sh->data, RSIZE);
	struct side prod = { .ring = &w, .size = RSIZE, .total = STRESS_TOTAL,
			     .seed = 0x5eed, .rng = 4, .peer = pid };
	producer(&prod);
	int st = 0;
	pid_t got = waitpid(pid, &st, 0);
	if (got != pid) { /* peer_gone() reaped it already */
		cr_expect_eq(__atomic_load_n(&sh->ctl.head, __ATOMIC_RELAXED), STRESS_TOTAL,
			     "consumer died early");
		cr_expect(0, "consumer process exited before the end of the stream");
	} else {
		cr_expect(WIFEXITED(st), "consumer killed by signal %d", WTERMSIG(st));
		cr_expect_eq(WEXITSTATUS(st), 0, "consumer saw a bad stream");
	}
	cr_expect_not(prod.insane);
	cr_expect_eq(sh->ctl.head, STRESS_TOTAL);
	cr_expect_eq(sh->ctl.tail, STRESS_TOTAL);
	munmap(sh, sizeof(*sh));
}

/* ---- the lock ------------------------------------------------------------- */

#define LOCK_THREADS 4
#define LOCK_TOTAL 1000000

static uint32_t test_lock, lockers_ready;
static volatile unsigned long locked_counter;

/* Every thread of one end shares its tag; nobody else is ever asked
 * about (the test fails if a live holder were broken). */
static int never_dead(void *arg, uint32_t tag)
{
	(void)arg;
	(void)tag;
	return 1;
}
static const struct shm_lock_owner one_end = {0x51, never_dead, NULL};

/* A racy read-modify-write, with a pause inside to widen the window. */
static void locked_increment(uint32_t *lock, volatile unsigned long *counter)
{
	shm_lock(lock, &one_end);
	unsigned long v = *counter;
	shm_cpu_relax();
	*counter = v + 1;
	shm_unlock(lock);
}

static void *locker(void *arg)
{
	unsigned long n = (unsigned long)(uintptr_t)arg;
	/* start together, so that the threads really contend */
	__atomic_add_fetch(&lockers_ready, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&lockers_ready, __ATOMIC_ACQUIRE) < LOCK_THREADS)
		sched_yield();
	for (unsigned long i = 0; i < n; i++)
		locked_increment(&test_lock, &locked_counter);
	return NULL;
}

Test(ring, lock_excludes_threads, .timeout = 120)
{
	pthread_t t[LOCK_THREADS];
	for (int i = 0; i < LOCK_THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, locker,
					    (void *)(uintptr_t)(LOCK_TOTAL / LOCK_THREADS)), 0);
	for (int i = 0; i < LOCK_THREADS; i++)
		pthread_join(t[i], NULL);
	cr_expect_eq(locked_counter, LOCK_TOTAL);
	cr_expect_eq(test_lock, 0, "lock left held");
}

/* Liveness as shm_arena.c would answer it, from a table; counts askings. */
static uint32_t live_tag;
static unsigned asked;
static int alive_if_live(void *arg, uint32_t tag)
{
	(void)arg;
	__atomic_add_fetch(&asked, 1, __ATOMIC_RELAXED);
	return tag == __atomic_load_n(&live_tag, __ATOMIC_ACQUIRE);
}

Test(ring, lock_holds_tag)
{
	uint32_t l = 0;
	struct shm_lock_owner o = {0x1234, alive_if_live, NULL};
	shm_lock(&l, &o);
	cr_expect_eq(l, 0x1234u, "the word names the holder");
	shm_unlock(&l);
	cr_expect_eq(l, 0u);
}

/* Issue 14 item 6: a holder that died inside the lock (or a value nobody
 * wrote as a holder) no longer parks the other threads forever. */
Test(ring, lock_breaks_dead_holder, .timeout = 30)
{
	uint32_t l = 0xdead;
	live_tag = 0;
	asked = 0;
	struct shm_lock_owner o = {0x1234, alive_if_live, NULL};
	shm_lock(&l, &o);
	cr_expect_eq(l, 0x1234u, "taken over from the dead holder");
	cr_expect_geq(asked, 1u, "the holder was asked about");
	shm_unlock(&l);
}

/* A live holder is never broken: the waiter gets the lock when it lets go. */
struct holder_arg {
	uint32_t *l;
	uint32_t go;
};

static void *hold_until_asked(void *p)
{
	struct holder_arg *h = p;
	/* Let go only after the waiter asked about us at least twice: it had
	 * every chance to break a live hold. */
	while (__atomic_load_n(&asked, __ATOMIC_RELAXED) < 2)
		sched_yield();
	__atomic_store_n(&h->go, 1, __ATOMIC_RELEASE);
	shm_unlock(h->l);
	return NULL;
}

Test(ring, lock_waits_for_live_holder, .timeout = 30)
{
	uint32_t l = 0;
	live_tag = 0x77;
	asked = 0;
	struct shm_lock_owner other = {0x77, alive_if_live, NULL};
	struct shm_lock_owner o = {0x1234, alive_if_live, NULL};
	shm_lock(&l, &other);
	struct holder_arg h = {&l, 0};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, hold_until_asked, &h), 0);
	shm_lock(&l, &o);
	cr_expect_eq(__atomic_load_n(&h.go, __ATOMIC_ACQUIRE), 1u,
		     "took the lock while its live holder still had it");
	cr_expect_eq(l, 0x1234u);
	shm_unlock(&l);
	pthread_join(t, NULL);
}

/* The other side's lock is only looked at: free, dead holder, or a holder
 * of our own end (never broken, never waited into a deadlock by itself). */
Test(ring, lock_wait_free, .timeout = 30)
{
	uint32_t l = 0;
	live_tag = 0;
	asked = 0;
	struct shm_lock_owner o = {0x1234, alive_if_live, NULL};
	shm_lock_wait_free(&l, &o);
	cr_expect_eq(asked, 0u, "a free lock needs no asking");
	l = 0xbad;
	shm_lock_wait_free(&l, &o);
	cr_expect_eq(l, 0xbadu, "looked at, never written");
	cr_expect_geq(asked, 1u);
	live_tag = 0x77;
	asked = 0;
	struct shm_lock_owner other = {0x77, alive_if_live, NULL};
	l = 0;
	shm_lock(&l, &other);
	struct holder_arg h = {&l, 0};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, hold_until_asked, &h), 0);
	shm_lock_wait_free(&l, &o);
	cr_expect_eq(__atomic_load_n(&h.go, __ATOMIC_ACQUIRE), 1u,
		     "returned while a live holder had the lock");
	pthread_join(t, NULL);
}

Test(ring, lock_excludes_processes, .timeout = 120)
{
	struct {
		uint32_t lock, ready;
		volatile unsigned long counter;
	} *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	const unsigned long per = LOCK_TOTAL / 2;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* start together, so that the two really contend */
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) < 2)
		sched_yield();
	for (unsigned long i = 0; i < per; i++)
		locked_increment(&sh->lock, &sh->counter);
	if (pid == 0)
		_exit(0);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_expect_eq(sh->counter, 2 * per);
	cr_expect_eq(sh->lock, 0);
	munmap(sh, 4096);
}

/* ---- regressions -------------------------------------------------------- */

/* readv() accepts {NULL, 0} entries; the ring passes them to memcpy, which
 * is undefined (glibc declares the arguments nonnull): UBSan aborts with
 * "null pointer passed as argument 1".  Passes without sanitizers. */
Test(ring_fixed, read_zero_length_null_iovec)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t b[8];
	cr_assert_eq(wr1(&p.w, "abcdefgh", 8), 8);
	struct iovec v[] = { { NULL, 0 }, { b, 8 } };
	cr_expect_eq(shm_ring_read(&p.r, v, 2, 0), 8);
	cr_expect_arr_eq(b, "abcdefgh", 8);
	pair_fini(&p);
}

/* The producer re-reads tail only when its cached view shows no space at
 * all, so a write may move far fewer bytes than are free (here 1 of 4096). */
Test(ring_fixed, write_uses_all_free_space)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t *buf = malloc(RSIZE);
	memset(buf, 1, RSIZE);
	cr_assert_eq(wr1(&p.w, buf, RSIZE - 1), RSIZE - 1);
	cr_assert_eq(rd1(&p.r, buf, RSIZE, 0), RSIZE - 1);
	cr_assert_eq(shm_ring_space(&p.w), RSIZE);
	cr_expect_eq(wr1(&p.w, buf, RSIZE), RSIZE);
	free(buf);
	pair_fini(&p);
}

/* Likewise the consumer re-reads head only when its cached view is empty:
 * a read returns 1 byte while 101 are there. */
Test(ring_fixed, read_returns_all_available)
{
	struct pair p;
	pair_init(&p, RSIZE);
	uint8_t src[102], dst[200];
	stream_fill(src, 21, 0, sizeof(src));
	cr_assert_eq(wr1(&p.w, src, 2), 2);
	cr_assert_eq(rd1(&p.r, dst, 1, 0), 1);
	cr_assert_eq(wr1(&p.w, src + 2, 100), 100);
	cr_assert_eq(shm_ring_used(&p.r), 101);
	cr_expect_eq(rd1(&p.r, dst, sizeof(dst), 0), 101);
	cr_expect_arr_eq(dst, src + 1, 101);
	pair_fini(&p);
}

/* shm_ring_init() sets cached = 0, which is a valid view only while the
 * counters are below 2^64 - size: on an empty ring whose counters are
 * there, the consumer returns bytes that were never written.  (Counters
 * start at 0, but the peer can store any value; initialising cached from
 * ctl->tail is right for both ends.) */
Test(ring_fixed, init_trusts_zero_cache)
{
	struct pair p;
	pair_init(&p, RSIZE);
	p.ctl->head = p.ctl->tail = UINT64_MAX - 15; /* empty */
	struct shm_ring r;
	shm_ring_init(&r, p.ctl, p.data, RSIZE);
	uint8_t b[64];
	cr_expect_eq(rd1(&r, b, sizeof(b), 0), 0, "read bytes from an empty ring");
	pair_fini(&p);
}

