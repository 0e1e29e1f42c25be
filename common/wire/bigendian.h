/* Fixed-width big-endian access, shared by every byte format of wire/
 * (docs/fragment-format.md, docs/event-file-format.md). */
#ifndef ES_WIRE_BIGENDIAN_H
#define ES_WIRE_BIGENDIAN_H

#include <stdint.h>
#include <string.h>

/* Through memcpy: one load and one byte swap each, whatever the alignment,
 * where a byte loop cost a tenth of a reader's time. */
static inline void be_put(uint8_t *p, uint64_t v, unsigned int bytes)
{
	switch (bytes) {
	case 8: { uint64_t x = __builtin_bswap64(v); memcpy(p, &x, 8); return; }
	case 4: { uint32_t x = __builtin_bswap32((uint32_t)v); memcpy(p, &x, 4); return; }
	case 2: { uint16_t x = __builtin_bswap16((uint16_t)v); memcpy(p, &x, 2); return; }
	default:
		while (bytes-- > 0) {
			p[bytes] = (uint8_t)v;
			v >>= 8;
		}
	}
}

static inline uint64_t be_get(const uint8_t *p, unsigned int bytes)
{
	switch (bytes) {
	case 8: { uint64_t x; memcpy(&x, p, 8); return __builtin_bswap64(x); }
	case 4: { uint32_t x; memcpy(&x, p, 4); return __builtin_bswap32(x); }
	case 2: { uint16_t x; memcpy(&x, p, 2); return __builtin_bswap16(x); }
	default: {
		uint64_t v = 0;
		for (unsigned int i = 0; i < bytes; i++)
			v = v << 8 | p[i];
		return v;
	}
	}
}

#endif
