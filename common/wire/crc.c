#include "wire/crc.h"

#include <libdeflate.h>
#include <zlib.h>

uint32_t crc_update(uint32_t crc, const void *data, size_t n)
{
	return libdeflate_crc32(crc, data, n);
}

uint32_t crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}

uint32_t crc_combine_cached(struct crc_shift_cache *cache, uint32_t crc_a, uint32_t crc_b,
			    uint64_t len_b)
{
	if (!cache->valid || cache->len != len_b) {
		cache->op = (uint32_t)crc32_combine_gen((z_off_t)len_b);
		cache->len = len_b;
		cache->valid = true;
	}
	return (uint32_t)crc32_combine_op(crc_a, crc_b, cache->op);
}

uint32_t crc_split_suffix(uint32_t crc_ab, uint32_t crc_a, uint64_t len_b)
{
	/* crc(A||B) = shift(crc(A), len B) ^ crc(B), and shift(crc(A)) is what
	 * combining crc(A) with a zero CRC of the same length yields. */
	return crc_ab ^ (uint32_t)crc32_combine(crc_a, 0, (z_off_t)len_b);
}
