/* A reader's side of several builders (docs/BUILDERS.md): which builder
 * each event ID goes to, learnt from the hub's assignments. What each
 * destination holds unsent, and its bound, is the reader's (readoutd/outq).
 * Pure: no I/O, no clock, nothing allocated after route_create().
 *
 * The table. The hub publishes every assignment (core/evm.h) in ID order
 * with its retired_below, so what a reader must know is exactly the live
 * IDs, [retired_below, assigned_end), at most window_batches aligned
 * batches: one builder id per batch in a ring indexed by event_id / batch.
 * An ID at or past assigned_end is not assigned yet: the reader holds its
 * fragment (this is the admission limit, per builder: the hub assigns a
 * builder only the events it has tokens for). An ID below retired_below
 * was decided by its builder or lost with it: its fragment is late. An
 * assignment out of order (a gap, or an ID assigned twice), of the wrong
 * size, or that would not fit the table is refused and changes nothing: the
 * hub and the reader disagree on the run's plan, and the reader says so.
 * With each batch the table keeps its lane phase (core/rails.h): its
 * ordinal among the batches assigned to its builder, modulo
 * RAILS_PHASE_MODULUS, so the reader deals a link's batches to its rails in
 * turn as the builder, counting its own IDs, expects them.
 * Memory: 3 bytes per window batch plus 2 per builder. */
#ifndef ES_CORE_ROUTE_H
#define ES_CORE_ROUTE_H

#include "core/evm.h"
#include "core/rails.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to do with a fragment of an event ID. */
enum route_verdict {
	ROUTE_SEND,      /* to *builder */
	ROUTE_HOLD,      /* not assigned yet: hold it */
	ROUTE_LATE,      /* below retired_below: its builder has decided it */
	ROUTE_LOST,      /* its builder (*builder) is dead: nowhere to send it */
	ROUTE_INVALID,   /* not an ID of the run */
};

/* "send", "hold", "late", "lost", "invalid". */
const char *route_verdict_name(enum route_verdict v);

struct route;

/* The table of a run's plan (the hub's, from its ROUTING message). NULL with
 * errno EINVAL (a plan evm_plan_valid() refuses) or ENOMEM. */
struct route *route_create(const struct evm_plan *plan);
void route_destroy(struct route *rt);

/* The hub's assignment a, sent with its retired_below. -EINVAL: a does not
 * start at assigned_end, has another count than its batch, names no builder
 * of the run, or retired_below went back or past the new assigned_end;
 * -ENOSPC: the live IDs would span more than window_batches batches. why
 * (why_size bytes, may be 0) gets a sentence for the log on a refusal. */
int route_assign(struct route *rt, const struct evm_assignment *a, uint64_t retired_below,
		 char *why, size_t why_size);

/* Builder b is dead (the hub said so): its IDs are ROUTE_LOST from now on.
 * -ENOENT: no such builder. */
int route_lose(struct route *rt, uint32_t b);

/* Where a fragment of event_id goes. O(1). */
enum route_verdict route_lookup(const struct route *rt, uint64_t event_id, uint32_t *builder);
/* route_lookup(), and with ROUTE_SEND the lane phase of event_id's batch
 * (0 .. RAILS_PHASE_MODULUS-1): its rail is rails_lane(*phase, rails). */
enum route_verdict route_lookup_lane(const struct route *rt, uint64_t event_id,
				     uint32_t *builder, uint32_t *phase);

/* The IDs below it are assigned (the plan's first_event at first). */
uint64_t route_assigned_end(const struct route *rt);
/* The IDs below it are late. */
uint64_t route_retired_below(const struct route *rt);

/* Bytes route_create() allocated. */
size_t route_memory_bytes(const struct route *rt);

#endif
