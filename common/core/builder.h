/* The builder core: correlation, dedup, timeouts, the window and the filter
 * of one run, with no sockets, timers or clock reads. builderd feeds it
 * fragments with the time they arrived; it answers through callbacks.
 *
 * Event IDs are tracked in a window of `window` consecutive IDs starting at
 * the lowest undecided ID (base). A fragment W or more IDs beyond base slides
 * the window: pending events that fall out are expired ("window"), IDs that
 * fall out unseen are counted as never observed. An event at base whose
 * missing sources have all sent later IDs is expired ("skipped") a skip
 * timeout after its first fragment, before its full timeout: sources send
 * in ID order, so those fragments were omitted (or delayed, and arrive
 * late). Retired IDs are remembered
 * for one more window so a late duplicate is recognised; anything older is a
 * late drop. Memory, all allocated by bld_create(): per window slot, 8 bytes
 * per source (payload length and CRC) plus 8 bytes per 64 sources (present
 * bitmap) plus 40 bytes of event state, and 1 byte per ID for 2 x window IDs,
 * plus 43 bytes per source (its progress on each of RAILS_MAX lanes among
 * them): window x (8 x sources + 8 x ceil(sources / 64) + 42) + 43 x sources
 * bytes in all, e.g. 2.2 MiB for 64 sources and a window of 4096.
 *
 * Lanes (core/rails.h): a source whose fragments come over several
 * connections (rails) is in ID order on each, not across them. Its
 * progress is kept per lane, and "a later ID" of the skip rule is one on
 * the lane that carries the event: relative ID rel (event ID - first_event)
 * is on lane rails_lane((rel + lane_offset) / lane_span, the source's
 * lanes). With one lane (the default) the rule is the plain one.
 *
 * Callbacks run inside bld_add(), bld_expire() and bld_finish() and must not
 * call back into the same builder. */
#ifndef ES_CORE_BUILDER_H
#define ES_CORE_BUILDER_H

#include "wire/counters.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLD_MAX_SOURCES 1024u
#define BLD_MAX_WINDOW (1u << 22)

struct bld_config {
	uint32_t run_id;
	uint16_t sources;        /* S: source IDs 0 .. S-1, 1 .. BLD_MAX_SOURCES */
	uint32_t window;         /* W: 1 .. BLD_MAX_WINDOW */
	uint64_t timeout_ns;     /* an event pending this long after its first fragment expires; 0 = never */
	uint64_t skip_timeout_ns; /* the same for an event at base whose missing sources all
				   * sent later IDs; 0 = wait for timeout_ns */
	uint32_t filter_modulo;  /* accept when filter CRC % modulo == 0; >= 1 */
	uint64_t first_event;    /* lowest event ID of the run */
	uint64_t events;         /* number of IDs of the run; 0 = not known in advance */
	uint64_t lane_span;      /* consecutive IDs of one lane span; 0 is taken as 1 */
	uint64_t lane_offset;    /* added to a relative ID before it is cut into spans */
};

/* One verified fragment, reduced to what building needs: the payload itself
 * is never stored, only its CRC and length. */
struct bld_fragment {
	uint32_t run_id;
	uint16_t source_id;
	uint64_t event_id;
	uint64_t timestamp_ns;   /* source clock */
	uint32_t payload_len;
	uint32_t payload_crc;    /* CRC-32 of the payload alone */
};

/* A complete event, valid during the callback. */
struct bld_event {
	uint32_t run_id;
	uint64_t event_id;
	uint32_t filter_crc;         /* CRC-32 of the payloads in source order */
	uint64_t bytes;              /* payload bytes of the event */
	uint64_t earliest_timestamp_ns;
	uint16_t earliest_source;    /* source whose timestamp is earliest */
	uint32_t slot;               /* its window slot, as on_unique named it */
	bool accepted;
};

enum bld_expiry_reason {
	BLD_EXPIRED_TIMEOUT,
	BLD_EXPIRED_WINDOW,
	BLD_EXPIRED_END_OF_RUN,
	BLD_EXPIRED_SKIPPED,
};

/* "timeout", "window", "end_of_run", "skipped". */
const char *bld_expiry_reason_name(enum bld_expiry_reason reason);

/* An event retired incomplete, valid during the callback. */
struct bld_expired {
	uint32_t run_id;
	uint64_t event_id;
	enum bld_expiry_reason reason;
	uint16_t present;            /* unique fragments it held */
	uint32_t slot;               /* its window slot, as on_unique named it */
	uint16_t missing_count;
	const uint16_t *missing;     /* source IDs absent, ascending */
};

struct bld_sink {
	void (*on_complete)(void *ctx, const struct bld_event *event);
	void (*on_expired)(void *ctx, const struct bld_expired *expired);
	/* Optional: a unique fragment taken into window slot `slot` (0 ..
	 * window - 1), called before its event can complete, so a caller that
	 * keeps the fragments' bytes (core/fragstore.h) has them all by
	 * on_complete. A slot holds one pending event at a time. */
	void (*on_unique)(void *ctx, uint32_t slot, const struct bld_fragment *fragment);
	void *ctx;
};

/* What became of one fragment. */
enum bld_outcome {
	BLD_UNIQUE,      /* first of its (event, source): stored */
	BLD_DUPLICATE,   /* (event, source) seen before, pending or retired */
	BLD_LATE,        /* its event already retired incomplete (an expired event
			  * keeps no per-source record, so even a copy of a
			  * fragment it held counts here), unobserved, or
			  * forgotten; or the run has finished */
	BLD_INVALID,     /* other run, source >= S, or ID outside the run (below
			  * first_event, at or past first_event + events, or
			  * within 2 x window of 2^64 past first_event) */
};

/* Counters of the core, from their list (wire/counters.h): the names
 * are metrics.json's. */
struct bld_counters {
#define BLD_COUNTER_FIELD(name) uint64_t name;
	CNT_LIST_BUILDER_CORE(BLD_COUNTER_FIELD)
#undef BLD_COUNTER_FIELD
};

struct bld;

/* Allocates every table of the run. NULL with errno set on a bad config
 * (EINVAL) or no memory (ENOMEM). */
struct bld *bld_create(const struct bld_config *config, const struct bld_sink *sink);

/* Frees it; NULL is allowed. */
void bld_destroy(struct bld *b);

/* Source src's fragments come on lanes lanes (1 .. RAILS_MAX; every
 * source starts with 1). Set it before the source's first fragment: what
 * was received before stays on the lanes of the time. -EINVAL for a source
 * or a count out of range. */
int bld_set_source_lanes(struct bld *b, uint16_t src, uint32_t lanes);

/* The lanes' spans when they are known only after bld_create() (a
 * builder of several learns its batch from the hub): as the config's
 * lane_span (0 taken as 1) and lane_offset. Before any fragment. */
void bld_set_lane_span(struct bld *b, uint64_t span, uint64_t offset);

/* The lane that carries event_id (as bld_fragment's) of source src: 0 ..
 * its lanes - 1; 0 for an ID outside the run. */
uint32_t bld_lane_of(const struct bld *b, uint16_t src, uint64_t event_id);

/* Takes one fragment that arrived at now_ns (a monotonic clock of the
 * caller's). May call on_complete for its event and on_expired for events
 * the window pushed out. Never allocates. */
enum bld_outcome bld_add(struct bld *b, const struct bld_fragment *fragment, uint64_t now_ns);

/* Expires every event whose first fragment arrived at or before
 * now_ns - timeout_ns, i.e. whose deadline (bld_next_deadline_ns) is at or
 * before now_ns; then, while the event at base was created at or before
 * now_ns - skip_timeout_ns and each of its missing sources has sent a later
 * ID on the event's lane, expires it as skipped (an ID at base that nobody sent is given up the
 * same way once every source has sent a later one). Cost is proportional to
 * the number expired, plus the sources for the check at base: pending
 * events are kept in arrival order. Call it about once a millisecond. */
void bld_expire(struct bld *b, uint64_t now_ns);

/* When the oldest pending event times out, an ID unseen at base is given
 * up (see bld_admission_limit), or base is skipped as things stand (a later
 * fragment can make that earlier); UINT64_MAX when none can happen. */
uint64_t bld_next_deadline_ns(const struct bld *b);

/* The admission limit: readers forward only event IDs below it. It is the
 * lowest undecided ID (the oldest pending event, or an ID not seen yet below
 * it) + window, so a reader that honours it can never push a pending event
 * out of the window, and the limit never moves back. An ID still unseen at
 * that point a timeout after a later ID arrived is given up as never
 * observed (counted in ids_given_up too), so an ID that every source omitted
 * cannot hold the limit for ever. O(1). */
uint64_t bld_admission_limit(const struct bld *b);

/* The lowest undecided event ID: every ID of the run below it is decided
 * (complete, expired or never observed). O(1). */
uint64_t bld_decided_below(const struct bld *b);

/* Oldest pending event ID, or UINT64_MAX when nothing is pending. Scans the
 * window's ID states from a lower bound kept on the fly: usually a few bytes,
 * at worst window bytes (memchr), so call it about once a millisecond, not
 * per fragment. */
uint64_t bld_oldest_pending(const struct bld *b);

/* Number of events pending. */
uint32_t bld_pending(const struct bld *b);

/* Ends the run: every pending event expires ("end_of_run"), in ID order, and
 * every ID of [first_event, first_event + events_generated) never observed is
 * counted in events_unobserved. events_generated comes from the sources.
 * Later calls do nothing; later fragments are late (or invalid). */
void bld_finish(struct bld *b, uint64_t events_generated);

const struct bld_counters *bld_counters(const struct bld *b);

/* Unique fragments received from one source so far: what the books can
 * still say of a source that died before reporting. */
uint64_t bld_unique_from(const struct bld *b, uint16_t source);

/* Bytes of every table bld_create() allocated: the core's memory bound. */
size_t bld_memory_bytes(const struct bld *b);

#endif
