/* Deterministic generation of docs/fragment-format.md §2: SplitMix64 keys,
 * payloads and the seed's fault decisions. Pure functions of their
 * arguments; sources, tests and analysis/refbuild.py agree on every bit. */
#ifndef ES_CORE_GEN_H
#define ES_CORE_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "payload!", "missing!", "duplicat", "delay!!!" read big-endian. */
#define GEN_SALT_PAYLOAD 0x7061796C6F616421ULL
#define GEN_SALT_MISSING 0x6D697373696E6721ULL
#define GEN_SALT_DUPLICATE 0x6475706C69636174ULL
#define GEN_SALT_DELAY 0x64656C6179212121ULL

uint64_t gen_mix64(uint64_t z);

/* key(seed, salt, run, event, source) of the spec. */
uint64_t gen_key(uint64_t seed, uint64_t salt, uint32_t run, uint64_t event, uint16_t source);

/* Fills dst with the len payload bytes of (event, source). */
void gen_payload(uint8_t *dst, size_t len, uint64_t seed, uint32_t run, uint64_t event,
		 uint16_t source);

/* Fault settings of one source; 0 disables a fault. */
struct gen_faults {
	uint64_t missing_every;
	uint64_t duplicate_every;
	uint64_t delay_every;
	uint32_t delay_ms;
	bool reorder;
};

/* Fault decisions for one (event, source). duplicated and delayed follow the
 * spec exactly: an omitted fragment is never duplicated. */
bool gen_is_omitted(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		    uint16_t source);
bool gen_is_duplicated(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		       uint16_t source);
bool gen_is_delayed(const struct gen_faults *f, uint64_t seed, uint32_t run, uint64_t event,
		    uint16_t source);

/* The event ID a source sends in position index (0 <= index < count) of a
 * run of count IDs from first; with reorder, IDs go in swapped pairs and an
 * unpaired last ID goes last. */
uint64_t gen_event_at(uint64_t first, uint64_t count, uint64_t index, bool reorder);

#endif
