/* --role hub: a source's clock as a builder applies it (the `clock`
 * message, docs/PROTOCOL.md). The hub measures every peer against its own
 * clock; for source s and builder b the offset is off(s) − off(b), its
 * bound the sum of both bounds (each grown by its drift since it was
 * measured), unknown when either is. Pure: time passed in. Private to
 * builderd. */
#ifndef ES_BD_CLOCKFAN_H
#define ES_BD_CLOCKFAN_H

#include "data/output.h"

#include "wire/control.h"

#include <stdint.h>

/* m from the source's and the builder's clocks as the hub applies them
 * (struct output_clock: offset against the hub's clock, bound at at_ns),
 * now_ns on the hub's realtime clock. */
void clockfan_message(struct ctl_clock *m, uint16_t source, const struct output_clock *src,
		      const struct output_clock *bld, int64_t now_ns);

#endif
