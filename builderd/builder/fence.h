/* A fenced builder's record files cut back to its fence (docs/BUILDERS.md,
 * "A given-up builder is fenced"): the records of events at or past the ID
 * below which its last TOKEN said every one of its events was decided are
 * removed, and each file is replaced whole through the one atomic writer
 * (sys/afile). What stays is what the hub's books count as decided; the
 * rest the books count as lost. Private to builderd. */
#ifndef ES_BD_FENCE_H
#define ES_BD_FENCE_H

#include <stdint.h>

struct fence_cut {
	uint64_t kept;      /* records below the fence */
	uint64_t removed;   /* records at or past it (or without an event) */
};

/* Cuts DIR/events.jsonl and DIR/expired.jsonl back to the events below
 * `below`, counting into *events and *expired. A file that is absent is
 * left so. 0, or -errno with the failure logged by path. */
int fence_cut_records(const char *dir, uint64_t below, struct fence_cut *events,
		      struct fence_cut *expired);

/* A fenced builder's end: where its fence is and what it holds. */
struct fence_at {
	const char *dir;      /* its --out */
	uint32_t builder, run;
	uint64_t below;       /* its last TOKEN's decided_below */
	uint64_t decided;     /* that TOKEN's decided */
	uint64_t unwritten;   /* events dropped unwritten at the fence */
};

/* Cuts the records back to the fence, names it in an error line (what and
 * why it was fenced) and writes builder.json with status fenced. */
void fence_apply(const struct fence_at *at, const char *what, const char *why);

#endif
