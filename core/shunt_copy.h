/* Bulk copies between an application's buffer and a ring (or a spill). */
#ifndef SHUNT_COPY_H
#define SHUNT_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* glibc copies 2112 bytes and more with `rep movsb` on x86 CPUs that have
 * it fast (ERMS/FSRM).  On AMD EPYC that instruction runs at a sixth of its
 * speed or less (64 KiB copies: 5.5 against 45 GB/s in one process; 23
 * against 140-290 Gbit/s through a ring) when destination and source lie 1
 * to 31 bytes apart modulo 4 KiB.  Here that is common: malloc puts large
 * buffers 16 bytes past a page boundary, and a stream of 64 KiB writes
 * keeps the ring's positions on one, or 16 past one after a 16-byte
 * header.  glibc's vector loop, which copies smaller pieces, runs at 85-130
 * Gbit/s at those distances, so a large copy within 64 bytes of that
 * alignment, not on it, goes in pieces below the threshold.  On it (a
 * distance of 0 modulo 4 KiB) `rep movsb` is at full speed, and faster
 * than the loop between CPUs: one memcpy, as everywhere else. */
#define SHUNT_COPY_PIECE 2048u
#define SHUNT_COPY_ALIAS 64u

/* memcpy(dst, src, n) for buffers that do not overlap. */
static inline void shunt_copy(void *dst, const void *src, size_t n)
{
	uintptr_t d = ((uintptr_t)dst - (uintptr_t)src) & 4095u;
	if (n <= SHUNT_COPY_PIECE || d == 0 ||
	    (d >= SHUNT_COPY_ALIAS && d <= 4096u - SHUNT_COPY_ALIAS)) {
		memcpy(dst, src, n);
		return;
	}
	uint8_t *o = dst;
	const uint8_t *i = src;
	while (n > SHUNT_COPY_PIECE) {
		memcpy(o, i, SHUNT_COPY_PIECE);
		o += SHUNT_COPY_PIECE;
		i += SHUNT_COPY_PIECE;
		n -= SHUNT_COPY_PIECE;
	}
	memcpy(o, i, n);
}

/* Streaming (non-temporal) stores: a bulk writer's other copy into a ring.
 * They write to memory and leave no line in the writer's cache.  Where the
 * reader's CPU reaches the writer's cache slowly (another core complex:
 * cross-CPU reads at 7 GB/s here, memory at twice that) they double a
 * stream; where it reaches it fast (a shared cache, one CPU) they halve
 * it.  Which holds is a matter of where the two ends run, so a writer
 * measures (core/shunt_bulk.h).  SSE2 is in every x86-64 CPU; 16-byte
 * streaming stores run as fast here as 32-byte ones.  Elsewhere a memcpy. */
#define SHUNT_COPY_NT_MIN 1024u

/* Copy n bytes to dst with streaming stores (n below SHUNT_COPY_NT_MIN:
 * shunt_copy).  shunt_copy_nt_fence() before the copy is published. */
static inline void shunt_copy_nt(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (n >= SHUNT_COPY_NT_MIN) {
		uint8_t *d = dst;
		const uint8_t *s = src;
		size_t lead = (size_t)(-(uintptr_t)d & 15u);
		memcpy(d, s, lead);
		d += lead;
		s += lead;
		n -= lead;
		for (; n >= 64; n -= 64, d += 64, s += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)s);
			__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
			__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
			_mm_stream_si128((__m128i *)d, a);
			_mm_stream_si128((__m128i *)(d + 16), b);
			_mm_stream_si128((__m128i *)(d + 32), c);
			_mm_stream_si128((__m128i *)(d + 48), e);
		}
		memcpy(d, s, n);
		return;
	}
#endif
	shunt_copy(dst, src, n);
}

/* Streaming stores are weakly ordered: this orders them before the stores
 * that follow (the release of the ring's head). */
static inline void shunt_copy_nt_fence(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

#endif
