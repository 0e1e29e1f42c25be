#include "crc.h"

#include <zlib.h>

uint32_t crc_update(uint32_t crc, const void *data, size_t n)
{
	/* zlib takes uInt lengths; feed large buffers in pieces. */
	const unsigned char *p = data;
	while (n > 0) {
		uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
		crc = (uint32_t)crc32(crc, p, chunk);
		p += chunk;
		n -= chunk;
	}
	return crc;
}

uint32_t crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}

uint32_t crc_split_suffix(uint32_t crc_ab, uint32_t crc_a, uint64_t len_b)
{
	/* crc(A||B) = shift(crc(A), len B) ^ crc(B), and shift(crc(A)) is what
	 * combining crc(A) with a zero CRC of the same length yields. */
	return crc_ab ^ (uint32_t)crc32_combine(crc_a, 0, (z_off_t)len_b);
}
