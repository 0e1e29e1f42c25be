/* What builder_events.c and builder_lanes.c share, and nothing else may include:
 * the core's state. Private to core/builder. */
#ifndef ES_CORE_BUILDER_INTERNAL_H
#define ES_CORE_BUILDER_INTERNAL_H

#include "core/builder.h"
#include "core/rails.h"
#include "wire/crc.h"

#include <stdbool.h>
#include <stdint.h>

/* What is known of one event ID. UNSEEN is 0 so calloc() starts every ID
 * there. */
enum bld_id_state {
	BLD_ID_UNSEEN = 0,
	BLD_ID_PENDING,
	BLD_ID_COMPLETE,
	BLD_ID_EXPIRED,
	BLD_ID_UNOBSERVED,
};

#define BLD_NIL UINT32_MAX

/* One pending event. Its slot is event % window: the window holds at most
 * window undecided IDs, so two pending events never share a slot. */
struct bld_slot {
	uint64_t rel_id;           /* event ID - first_event */
	uint64_t created_ns;       /* arrival of its first fragment, caller's clock */
	uint64_t earliest_ts_ns;
	uint32_t prev;             /* timeout FIFO, slot indices, BLD_NIL at the ends */
	uint32_t next;
	uint16_t present;
	uint16_t earliest_source;
};

/* builder.h states the memory bound with this size. */
_Static_assert(sizeof(struct bld_slot) == 40, "update the memory figure in builder.h");

/* Only what the filter needs: the payload CRCs fold into the event's CRC
 * without the payloads. The earliest timestamp is kept per event, not per
 * source, since nothing else reads source timestamps. */
struct bld_frag {
	uint32_t payload_len;
	uint32_t payload_crc;
};

struct bld {
	struct bld_config cfg;
	struct bld_sink sink;
	struct bld_counters c;

	/* IDs are kept relative to first_event so the ring arithmetic below
	 * never wraps; relative IDs at or above rel_limit are invalid. */
	uint64_t window;
	uint64_t span;             /* 2 x window: IDs with a state entry */
	uint64_t rel_limit;
	uint64_t base;             /* lowest undecided relative ID */
	uint64_t highest;          /* highest relative ID that created an event */
	bool seen_any;
	bool finished;
	uint64_t oldest_hint;      /* at or below every pending ID */
	bool base_waiting;         /* base is unseen while a later ID has arrived */
	uint64_t base_waiting_since_ns;
	uint64_t last_now_ns;      /* keeps the FIFO sorted if the clock steps back */

	uint32_t pending;
	uint32_t head;             /* oldest created */
	uint32_t tail;
	uint32_t present_words;    /* 64-bit words of a slot's present bitmap */

	uint8_t *states;           /* span entries, ID % span */
	struct bld_slot *slots;    /* window entries, ID % window */
	struct bld_frag *frags;    /* window x sources */
	uint64_t *present;         /* window x present_words */
	struct crc_shift_cache shift;
	uint16_t *missing;         /* sources: the list on_expired gets */
	uint64_t *unique_from;     /* sources: unique fragments received */
	/* sources x RAILS_MAX, source-major: on each lane, the highest
	 * relative ID received + 1; 0 = none. */
	uint64_t *next_from;
	uint8_t *lanes;            /* sources: lanes of each, 1 .. RAILS_MAX */
	uint64_t lane_span;        /* cfg.lane_span, 0 taken as 1 */
};

static inline uint8_t *bld_state(struct bld *b, uint64_t rel)
{
	return &b->states[rel % b->span];
}

/* The lane of relative ID rel for source src (core/rails.h). */
static inline uint32_t bld_lane(const struct bld *b, uint16_t src, uint64_t rel)
{
	uint32_t lanes = b->lanes[src];
	return lanes <= 1 ? 0 : rails_lane((rel + b->cfg.lane_offset) / b->lane_span, lanes);
}

/* Source src's progress on the lane of rel: its highest relative ID
 * received there + 1, 0 when none. */
static inline uint64_t *bld_progress(const struct bld *b, uint16_t src, uint64_t rel)
{
	return &b->next_from[(size_t)src * RAILS_MAX + bld_lane(b, src, rel)];
}

/* Whether every source absent from present (NULL: every source) has sent
 * an ID above rel on the lane that carries rel (builder_lanes.c). */
bool bld_absent_sources_passed(const struct bld *b, uint64_t rel, const uint64_t *present);

#endif
