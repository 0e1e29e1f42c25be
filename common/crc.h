/* CRC-32/IEEE (zlib's crc32) and the algebra the builder uses to avoid
 * touching payloads twice. */
#ifndef ES_CRC_H
#define ES_CRC_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32/IEEE over n bytes; start with crc = 0. */
uint32_t crc_update(uint32_t crc, const void *data, size_t n);

/* CRC of the concatenation A||B from crc(A), crc(B) and len(B). */
uint32_t crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* CRC of B alone from crc(A||B), crc(A) and len(B): lets the builder learn a
 * payload's CRC from the frame CRC it already verified, without a second
 * pass over the payload. */
uint32_t crc_split_suffix(uint32_t crc_ab, uint32_t crc_a, uint64_t len_b);

#endif
