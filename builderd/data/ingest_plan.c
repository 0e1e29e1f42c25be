#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "data/link.h"
#include "data/ownroute.h"

#include "core/builder.h"

#include <inttypes.h>
#include <stdio.h>

bool ingest_map(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h, uint64_t *event_id,
	     bool *assigned)
{
	struct ingest *g = rd->ing;
	uint32_t owner;
	uint64_t local;
	/* Before the hub's routing nothing is assigned (a reader cannot have
	 * heard of an assign yet): held like any frame not yet assigned. */
	enum ownroute_verdict v = g->plan != NULL ? ownroute_map(g->plan, h->event_id, &local, &owner)
					     : OWNROUTE_HOLD;
	*assigned = false;
	switch (v) {
	case OWNROUTE_BUILD:
		*event_id = local;
		*assigned = true;
		return true;
	case OWNROUTE_HOLD:
		rd->held = true;
		g->held_unassigned++;
		return false;
	case OWNROUTE_LATE:
		/* Forgotten, so more than a window below the core's base: any
		 * local ID that far down is late to the core, local 0 too. */
		*event_id = 0;
		return true;
	case OWNROUTE_INVALID:
		/* Not of the run: the core counts it invalid. */
		*event_id = UINT64_MAX;
		return true;
	case OWNROUTE_MISROUTED:
		break;
	}
	rd->frames_received++;
	rd->rail[rail].frames_received++;
	g->frames_received++;
	if (g->misrouted++ == 0) {
		char whose[64] = "another builder";
		if (owner != UINT32_MAX)
			snprintf(whose, sizeof whose, "builder %u", owner);
		ingest_error(g, "Reader %u forwarded a fragment of event %" PRIu64 " (source %u) to builder %u, but the hub assigned that event to %s; misrouted fragments are counted (frags_misrouted) and not built",
			  rd->id, h->event_id, h->source_id, g->opt.builder_id, whose);
	}
	return false;
}

/* ---- the builder role's side ------------------------------------------- */

uint32_t ingest_builder_id(const struct ingest *g)
{
	return g->opt.role == ROLE_BUILDER ? g->opt.builder_id : 0;
}

void ingest_set_plan(struct ingest *g, struct ownroute *plan)
{
	ownroute_destroy(g->plan);
	g->plan = plan;
	/* The builder's k-th batch is on rail k mod rails: local ID L is in
	 * its batch L / batch (core/rails.h), or (L + first % batch) / batch
	 * when its first is the run's first, short batch (ingest_assign). */
	if (plan != NULL)
		bld_set_lane_span(g->core, ownroute_batch(plan), 0);
}

struct ownroute *ingest_plan(const struct ingest *g)
{
	return g->plan;
}

int ingest_assign(struct ingest *g, const struct ctl_assign *a, char *why, size_t why_size)
{
	bool mine;
	uint64_t before = ownroute_assigned(g->plan);
	int rc = ownroute_assign(g->plan, a, &mine, why, why_size);
	if (rc < 0)
		return rc;
	/* Batches are aligned to the batch but for the run's first: when that
	 * short one is this builder's first, its local IDs run that much
	 * behind the spans of its later batches (the lanes, core/rails.h).
	 * None of its frames reached the core yet: they were held. */
	if (mine && before == 0)
		bld_set_lane_span(g->core, ownroute_batch(g->plan), a->first % ownroute_batch(g->plan));
	/* Any assign may pass a held frame: the next one's event may be
	 * another builder's (misrouted, now known) or mine. */
	for (uint32_t r = 0; r < g->opt.readers && !g->over; r++) {
		struct ingest_reader *rd = &g->readers[r];
		if (!rd->held)
			continue;
		rd->held = false;
		if (rd->state == INGEST_DATA_STREAMING && rd->link != NULL && rd->link->resume != NULL)
			rd->link->resume(rd);
	}
	return 0;
}

uint64_t ingest_misrouted(const struct ingest *g)
{
	return g->misrouted;
}

uint64_t ingest_wrong_rail(const struct ingest *g)
{
	return g->wrong_rail;
}

uint64_t ingest_held_unassigned(const struct ingest *g)
{
	return g->held_unassigned;
}

uint64_t ingest_decided(const struct ingest *g)
{
	uint64_t assigned = g->plan != NULL ? ownroute_assigned(g->plan) : 0;
	uint64_t limit = bld_admission_limit(g->core);
	uint64_t decided = limit >= g->opt.max_inflight ? limit - g->opt.max_inflight : 0;
	return decided < assigned ? decided : assigned;
}

