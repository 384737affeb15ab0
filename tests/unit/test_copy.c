/* shunt_copy: exact bytes at every distance near the 4 KiB alignment it
 * copies in pieces, across the piece size, and nothing written beyond. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/shunt_copy.h"

#define AREA (80u * 1024u)

static uint8_t *src_area, *dst_area;

static void setup(void)
{
	src_area = aligned_alloc(4096, AREA);
	dst_area = aligned_alloc(4096, AREA);
	cr_assert(src_area && dst_area);
	for (size_t i = 0; i < AREA; i++)
		src_area[i] = (uint8_t)(i * 131u + (i >> 8));
}

static void teardown(void)
{
	free(src_area);
	free(dst_area);
}

static void check(size_t soff, size_t doff, size_t n)
{
	memset(dst_area, 0xa5, AREA);
	shunt_copy(dst_area + doff, src_area + soff, n);
	cr_assert(memcmp(dst_area + doff, src_area + soff, n) == 0,
		  "copy of %zu bytes, source +%zu, destination +%zu", n, soff, doff);
	for (size_t i = 0; i < doff; i++)
		cr_assert_eq(dst_area[i], 0xa5, "byte before the copy written");
	for (size_t i = doff + n; i < doff + n + 64 && i < AREA; i++)
		cr_assert_eq(dst_area[i], 0xa5, "byte after the copy written");
}

Test(copy, exact_at_every_distance_near_the_page_alignment, .init = setup, .fini = teardown)
{
	const size_t sizes[] = {0, 1, 63, SHUNT_COPY_PIECE - 1, SHUNT_COPY_PIECE,
				SHUNT_COPY_PIECE + 1, 3 * SHUNT_COPY_PIECE + 17, 65536, 65536 + 13};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		for (size_t d = 0; d < 2 * SHUNT_COPY_ALIAS + 8; d++) {
			/* destination just past, and just before, the source's
			 * offset in its page */
			check(16, 16 + d, sizes[s]);
			check(16 + d, 16, sizes[s]);
			check(4096 - 8, 4096 - 8 + d, sizes[s]);
		}
		check(0, 2048, sizes[s]); /* far from the alignment: one memcpy */
	}
}

/* shunt_copy_nt: exact bytes whatever the destination's alignment (a
 * cached head up to 16 bytes, 64-byte streaming blocks, a cached tail),
 * and nothing written beyond. */
static void check_nt(size_t soff, size_t doff, size_t n)
{
	memset(dst_area, 0xa5, AREA);
	shunt_copy_nt(dst_area + doff, src_area + soff, n);
	shunt_copy_nt_fence();
	cr_assert(memcmp(dst_area + doff, src_area + soff, n) == 0,
		  "streaming copy of %zu bytes, source +%zu, destination +%zu", n, soff, doff);
	for (size_t i = 0; i < doff; i++)
		cr_assert_eq(dst_area[i], 0xa5, "byte before the copy written");
	for (size_t i = doff + n; i < doff + n + 64 && i < AREA; i++)
		cr_assert_eq(dst_area[i], 0xa5, "byte after the copy written");
}

Test(copy, streaming_exact_at_every_alignment, .init = setup, .fini = teardown)
{
	const size_t sizes[] = {0, 1, 15, SHUNT_COPY_NT_MIN - 1, SHUNT_COPY_NT_MIN,
				SHUNT_COPY_NT_MIN + 1, SHUNT_COPY_NT_MIN + 63, 4096 + 17, 65536};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (size_t d = 0; d < 40; d++) {
			check_nt(16, 16 + d, sizes[s]);
			check_nt(16 + d, 16, sizes[s]);
			check_nt(7, 4096 - d, sizes[s]);
		}
}
