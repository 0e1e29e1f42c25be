/* CRC-32/IEEE and the algebra the builder uses to avoid touching payloads
 * twice. Checksums come from libdeflate (carry-less multiply where the CPU
 * has it: about 10x zlib's speed on a 106-byte frame); combining comes from
 * zlib. */
#ifndef ES_WIRE_CRC_H
#define ES_WIRE_CRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32/IEEE over n bytes; start with crc = 0. */
uint32_t crc_update(uint32_t crc, const void *data, size_t n);

/* CRC of the concatenation A||B from crc(A), crc(B) and len(B). */
uint32_t crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* The same with the shift operator for len(B) remembered between calls:
 * payloads of a run mostly share one length, and deriving the operator is
 * most of a combine's cost. */
struct crc_shift_cache {
	bool valid;
	uint64_t len;
	uint32_t op;
};
uint32_t crc_combine_cached(struct crc_shift_cache *cache, uint32_t crc_a, uint32_t crc_b,
			    uint64_t len_b);

/* CRC of B alone from crc(A||B), crc(A) and len(B). */
uint32_t crc_split_suffix(uint32_t crc_ab, uint32_t crc_a, uint64_t len_b);

#endif
