/* Bulk copies between an application's buffer and a ring (or a spill). */
#ifndef SHUNT_COPY_H
#define SHUNT_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

#endif
