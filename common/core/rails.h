/* Rails: a reader's link to a builder on another host is one TCP connection
 * per rail (network) both hosts have, and the link's frames are spread over
 * them in lanes so that the rails fill evenly while each connection still
 * carries a source's fragments in ID order (docs/BUILDERS.md, "Rails").
 * Reader and builder compute the same lane from the event ID, so the
 * builder knows on which connection every fragment comes, and its skip rule
 * ("a source that sent a later ID skipped this one") looks at the source's
 * progress on that connection only. Pure, header only.
 *
 * The lanes are spans of consecutive events, dealt to the rails in turn:
 *   - several builders (routing): the span is the hub's batch, and the k-th
 *     batch assigned to builder b goes on rail k mod rails of every link to
 *     b. The builder's own IDs (core/ownids) number its batches the same
 *     way: its local ID L is in its batch L / batch.
 *   - one builder (CREDIT): the span is RAILS_SPAN_EVENTS consecutive
 *     global IDs; event e goes on rail (e / RAILS_SPAN_EVENTS) mod rails. */
#ifndef ES_CORE_RAILS_H
#define ES_CORE_RAILS_H

#include "wire/control.h"

#include <stdint.h>

#define RAILS_MAX CTL_MAX_RAILS

/* Events per lane span with one builder: large enough that a span of
 * typical fragments fills a writev, small enough that the rails take
 * turns many times a second. */
#define RAILS_SPAN_EVENTS 64u

/* The lane phase a reader keeps per batch: the batch's ordinal among its
 * builder's, modulo 12, which every rail count 1 .. 4 divides, so one byte
 * holds it. */
#define RAILS_PHASE_MODULUS 12u

/* The rail of span number span (counted from 0) of a link of rails rails. */
static inline uint32_t rails_lane(uint64_t span, uint32_t rails)
{
	return rails <= 1 ? 0 : (uint32_t)(span % rails);
}

#endif
