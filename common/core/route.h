/* A reader's side of several builders (docs/BUILDERS.md): which builder
 * each event ID goes to, learnt from the hub's assignments, and how much
 * each destination holds unsent. Pure: no I/O, no clock, nothing allocated
 * after the create calls.
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
 * Memory: 3 bytes per window batch plus 2 per builder.
 *
 * The pending queues. Frames verified and routed but not yet handed to
 * their builder's link are counted per destination, in frames and bytes,
 * each with a limit. At the limit a push is refused (-ENOBUFS): the reader
 * then leaves the frame in its source's buffer and stops reading that
 * source until the destination drains, so a slow builder holds only the
 * fragments bound for it until its bound is reached, and then pushes back
 * on the sources through TCP, never by dropping. An empty queue takes any
 * one frame, so a frame larger than the byte limit still passes, alone. */
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

/* ---- pending queues, one per destination ------------------------------- */

struct route_queue_view {
	uint64_t frames;          /* queued now */
	uint64_t bytes;
	uint64_t peak_frames;     /* the most queued at once */
	uint64_t peak_bytes;
	uint64_t pushed;          /* frames taken in all */
	uint64_t refused;         /* pushes refused at the limit */
};

struct route_queues;

/* Destinations a set of queues may have: one per connection of every link. */
#define ROUTE_MAX_DESTINATIONS (EVM_MAX_BUILDERS * RAILS_MAX)

/* destinations queues (1 .. ROUTE_MAX_DESTINATIONS), each of at most limit_frames
 * frames and limit_bytes bytes (both >= 1). NULL with errno EINVAL or ENOMEM. */
struct route_queues *route_queues_create(uint32_t destinations, uint32_t limit_frames,
					 uint64_t limit_bytes);
void route_queues_destroy(struct route_queues *q);

/* A frame of bytes for destination d. 0: queued; -ENOBUFS: d is at its
 * limit (counted; hold the frame and push it again after a pop); -ENOENT:
 * no such destination. */
int route_queue_push(struct route_queues *q, uint32_t d, uint32_t bytes);

/* A frame of bytes for d has left (whole: its last byte was written).
 * -ENOENT: no such destination; -ERANGE: more than d holds (nothing changes). */
int route_queue_pop(struct route_queues *q, uint32_t d, uint32_t bytes);

/* Destination d; false when there is none. */
bool route_queue_view(const struct route_queues *q, uint32_t d, struct route_queue_view *v);

#endif
