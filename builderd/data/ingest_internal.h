/* What the ingest's files share (ingest_state.c, ingest_paths.c, ingest_plan.c,
 * ingest_rails.c), and nothing else may include: the data side's state.
 * Private to ingest. */
#ifndef ES_BD_INGEST_INTERNAL_H
#define ES_BD_INGEST_INTERNAL_H

#include "data/ingest.h"

#include <stdbool.h>
#include <stdint.h>

struct ingest {
	struct event_base *base;
	struct options opt;
	struct ingest_hooks hooks;
	struct bld *core;
	struct output *out;
	struct {
		const struct link_listener_ops *ops;
		void *listener;
	} links[INGEST_MAX_LISTENERS];       /* tcp.c, shm.c */
	unsigned link_count;
	struct ingest_reader *readers;        /* [readers] */
	int32_t *reader_of_source;        /* [sources], -1 when none */
	uint64_t *end_frame_events;       /* [sources], event count in END frames */
	bool *end_frame_seen;             /* [sources], every rail delivered its END */
	uint8_t *end_frame_rails;         /* [sources], bit K: rail K delivered it */
	uint64_t frames_received;
	uint64_t first_fragment_ns;
	uint64_t last_complete_ns;
	uint64_t refused;                 /* refusals of the links' greetings */
	const uint8_t *taking;            /* the frame bld_add is taking, for on_unique */
	uint32_t taking_bytes;
	struct ingest_in_place *in_place; /* the frame may be kept where it is: say so here */
	struct ownroute *plan;                 /* --role builder: global <-> local IDs */
	uint64_t misrouted;               /* frags_misrouted */
	uint64_t held_unassigned;         /* frames_held_unassigned */
	uint64_t wrong_rail;              /* frames_wrong_rail, every reader's */
	bool over;                        /* ingest_finish() was called */
};

/* --role builder: a fragment's global event ID to the core's local one
 * by the plan
 * (*event_id; *assigned when it is one of the builder's own, whose lane
 * tells its rail). false when the core is not to see it: held (rd->held set:
 * not assigned yet) or misrouted (counted, consumed, an error of the run). */
bool ingest_map(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h, uint64_t *event_id,
	     bool *assigned);

/* ingest_rails.c: a HELLO's rail against the reader's earlier connections
 * and the builder's listeners (true: it may be welcomed; else refused with
 * bad_rail or duplicate_id, not counted); a later rail names the sources
 * its first did; a source's END frame on rail (over once every rail of its
 * reader's link delivered one); a fragment's lane checked against its
 * connection's rail (frames_wrong_rail, an error of the run). */
uint32_t ingest_rails_of(const struct ctl_hello *h);   /* its rails, 1 if it said none */
bool ingest_rail_free(struct ingest *g, int fd, const struct ctl_hello *h, const char *peer,
		   uint32_t listeners, uint32_t on);
bool ingest_same_sources(const struct ingest_reader *rd, const struct ctl_hello *h);
void ingest_end_of(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h);
void ingest_check_lane(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h,
		    uint64_t event_id);

#endif
