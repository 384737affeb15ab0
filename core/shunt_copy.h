/* Bulk copies between an application's buffer and a ring. */
#ifndef SHUNT_COPY_H
#define SHUNT_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* glibc copies 2112 bytes and more with `rep movsb` on x86 CPUs that have
 * it fast (ERMS/FSRM).  On AMD EPYC that instruction runs at an eighth of
 * its speed (64 KiB copies in cache: 5.5 against 45 GB/s) when destination
 * and source lie less than 32 bytes apart modulo 4 KiB, and that is the
 * common case here: malloc returns buffers 16 bytes past a page boundary,
 * and a stream of 64 KiB writes keeps the ring's positions on one.  A 64 KiB
 * stream then ran at TCP's speed, or at four times it, with where malloc
 * and the partial reads happened to put things.  glibc's vector loop, which
 * copies smaller pieces, is as fast at every distance; so within 64 bytes
 * of that alignment a large copy goes in pieces below the threshold. */
#define SHUNT_COPY_PIECE 2048u
#define SHUNT_COPY_ALIAS 64u

/* memcpy(dst, src, n) for buffers that do not overlap. */
static inline void shunt_copy(void *dst, const void *src, size_t n)
{
	uintptr_t d = ((uintptr_t)dst - (uintptr_t)src) & 4095u;
	if (n <= SHUNT_COPY_PIECE || (d >= SHUNT_COPY_ALIAS && d <= 4096u - SHUNT_COPY_ALIAS)) {
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
