/* When a source's fragments are due. Sources pace event position i at
 * start + i / rate (a common start keeps an event's fragments together as a
 * common trigger would) and sleep on a grid of ticks from the start, the
 * same for every source, so that a paced source batches a tick's frames per
 * write and the fragments of one event still leave together. Pure: time is
 * passed in. */
#ifndef ES_SOURCED_PACE_H
#define ES_SOURCED_PACE_H

#include <stdint.h>

struct pace {
	uint64_t start_ns;   /* monotonic time of position 0 */
	uint64_t rate;       /* positions per second; 0 = all at once */
	uint64_t events;     /* positions in the run */
	uint64_t tick_ns;    /* the wake-up grid; 0 = none */
};

/* How many positions are due at now_ns (at most p->events). */
uint64_t pace_due(const struct pace *p, uint64_t now_ns);

/* How long to sleep from now_ns: until the position next_index is due or
 * the first delayed fragment is (delayed_due_ns, UINT64_MAX for none),
 * whichever is first, rounded up to the first grid point after now. */
uint64_t pace_wait(const struct pace *p, uint64_t now_ns, uint64_t next_index,
		   uint64_t delayed_due_ns);

#endif
