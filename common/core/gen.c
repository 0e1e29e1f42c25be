#include "core/gen.h"

#include <endian.h>
#include <string.h>

#define GEN_SPLITMIX_STEP 0x9E3779B97F4A7C15ULL

/* Static inline so the per-word loop of gen_payload() keeps it in registers. */
static inline uint64_t gen_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

uint64_t gen_mix64(uint64_t z)
{
	return gen_mix(z);
}

uint64_t gen_key(uint64_t seed, uint64_t salt, uint32_t run, uint64_t event, uint16_t source)
{
	uint64_t k = gen_mix(seed ^ salt);

	k = gen_mix(k ^ run);
	k = gen_mix(k ^ event);
	return gen_mix(k ^ source);
}

void gen_payload(uint8_t *dst, size_t len, uint64_t seed, uint32_t run, uint64_t event,
		 uint16_t source)
{
	uint64_t s = gen_key(seed, GEN_SALT_PAYLOAD, run, event, source);
	uint64_t w;
	size_t i;

	/* Each word depends on s only through an addition, so the multiplies
	 * of successive words overlap in the pipeline. memcpy of a fixed 8
	 * bytes compiles to one unaligned store; htole64 is free on
	 * little-endian hosts and keeps the bytes right elsewhere. */
	for (i = 0; len - i >= 8; i += 8) {
		s += GEN_SPLITMIX_STEP;
		w = htole64(gen_mix(s));
		memcpy(dst + i, &w, 8);
	}
	if (i < len) {
		s += GEN_SPLITMIX_STEP;
		w = htole64(gen_mix(s));
		memcpy(dst + i, &w, len - i);
	}
}

static bool gen_hits(uint64_t every, uint64_t seed, uint64_t salt, uint32_t run, uint64_t event,
		     uint16_t source)
{
	return every != 0 && gen_key(seed, salt, run, event, source) % every == 0;
}

bool gen_is_omitted(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		    uint16_t source)
{
	return gen_hits(f->missing_every, seed, GEN_SALT_MISSING, run, event, source);
}

bool gen_is_duplicated(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		       uint16_t source)
{
	/* A fragment that is never sent cannot be sent twice. */
	return gen_hits(f->duplicate_every, seed, GEN_SALT_DUPLICATE, run, event, source) &&
	       !gen_is_omitted(f, seed, run, event, source);
}

bool gen_is_delayed(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		    uint16_t source)
{
	return gen_hits(f->delay_every, seed, GEN_SALT_DELAY, run, event, source);
}

uint64_t gen_event_at(uint64_t first, uint64_t count, uint64_t index, bool reorder)
{
	/* Pairs are (0,1), (2,3), …: flipping bit 0 swaps within a pair. The
	 * partner of an odd count's last index would be index count, out of
	 * the run, so that ID stays where it is, last. */
	if (reorder && (index ^ 1) < count)
		index ^= 1;
	return first + index;
}
