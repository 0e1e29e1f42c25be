/* The admission limit as CREDIT messages to the readers (docs/PROTOCOL.md):
 * when a reader is due a new limit, and sending it. Private to builderd. */
#ifndef ES_BD_CREDITS_H
#define ES_BD_CREDITS_H

#include "peer.h"

#include <stdbool.h>
#include <stdint.h>

/* At most one CREDIT per reader this often. */
#define CREDITS_MIN_INTERVAL_NS 1000000u

/* Whether reader p is due limit now. Updates are coalesced to at most one
 * per reader per CREDITS_MIN_INTERVAL_NS and, between ticks, to advances of
 * window/8; the tick sends any advance at all, so no reader waits on a
 * stale limit for more than a tick. */
bool credits_due(const struct peer *p, uint64_t limit, uint32_t window, bool tick,
		 uint64_t now);

/* Sends p the limit on its control link; true when it went out. */
bool credits_send(struct peer *p, uint64_t limit, uint64_t now);

/* Sends every reader that is due one; returns how many were sent. */
uint64_t credits_publish(struct peer_table *t, uint64_t limit, uint32_t window, bool tick,
			 uint64_t now);

#endif
