/* What a source tells others: its counters (the list CNT_LIST_SOURCE of
 * wire/counters.h, which every module of the source adds to), the END
 * report the builder's books read, and the live /metrics and /status. */
#ifndef ES_SOURCED_REPORT_H
#define ES_SOURCED_REPORT_H

#include "wire/control.h"
#include "wire/counters.h"

#include <stdbool.h>
#include <stdint.h>

struct evbuffer;

struct src_counters {
#define SRC_FIELD(name) uint64_t name;
	CNT_LIST_SOURCE(SRC_FIELD)
#undef SRC_FIELD
};

/* Where the source is, for /status and /metrics. */
struct report_live {
	uint32_t id;
	uint32_t run_id;
	int state;                 /* the source's state, as a number */
	uint64_t position;         /* send positions done */
	uint64_t events;           /* --events */
	uint32_t delayed_held;     /* fragments held back by the delay fault */
};

/* m becomes the END report: every counter in the group "", the process
 * group, and status (0, or the source's error count). */
void report_end(struct ctl_msg *m, const struct src_counters *c, int status);

/* m becomes the STATS the source sends its hub at every whole second of
 * the run while it sends (CNT_LIST_SOURCE_STATS): that second, its send
 * positions done and the event ID of the last of them. */
void report_stats(struct ctl_msg *m, uint64_t run_second, uint64_t send_positions,
		  uint64_t last_event_sent);

/* /status (json) or /metrics: the counters and where the source is. */
void report_live(struct evbuffer *out, bool json, const struct src_counters *c,
		 const struct report_live *live);

#endif
