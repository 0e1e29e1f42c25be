#include "core/route.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct route {
	struct evm_plan plan;
	uint64_t end;             /* first_event + events */
	uint64_t assigned_end;
	uint64_t retired_below;
	uint16_t *ring;           /* [window_batches]: batch k's builder at k mod window */
	uint8_t *phase;           /* [window_batches]: batch k's lane phase, beside it */
	uint8_t *lost;            /* [builders] */
	uint8_t *next_phase;      /* [builders]: the phase of its next batch */
};

const char *route_verdict_name(enum route_verdict v)
{
	switch (v) {
	case ROUTE_SEND: return "send";
	case ROUTE_HOLD: return "hold";
	case ROUTE_LATE: return "late";
	case ROUTE_LOST: return "lost";
	case ROUTE_INVALID: return "invalid";
	}
	return "unknown";
}

struct route *route_create(const struct evm_plan *plan)
{
	if (!evm_plan_valid(plan)) {
		errno = EINVAL;
		return NULL;
	}
	struct route *rt = calloc(1, sizeof *rt);
	if (rt == NULL)
		goto fail;
	rt->plan = *plan;
	rt->end = plan->first_event + plan->events;
	rt->assigned_end = rt->retired_below = plan->first_event;
	rt->ring = calloc(plan->window_batches, sizeof *rt->ring);
	rt->phase = calloc(plan->window_batches, sizeof *rt->phase);
	rt->lost = calloc(plan->builders, sizeof *rt->lost);
	rt->next_phase = calloc(plan->builders, sizeof *rt->next_phase);
	if (rt->ring == NULL || rt->phase == NULL || rt->lost == NULL || rt->next_phase == NULL)
		goto fail;
	return rt;
fail:
	route_destroy(rt);
	errno = ENOMEM;
	return NULL;
}

void route_destroy(struct route *rt)
{
	if (rt == NULL)
		return;
	free(rt->ring);
	free(rt->phase);
	free(rt->lost);
	free(rt->next_phase);
	free(rt);
}

#define ROUTE_WHY(...)                                            \
	do {                                                      \
		if (why_size > 0)                                 \
			snprintf(why, why_size, __VA_ARGS__);     \
	} while (0)

/* The checks of route_assign() on a and retired_below; 0 or -errno with why
 * written. */
static int route_check(const struct route *rt, const struct evm_assignment *a,
		       uint64_t retired_below, char *why, size_t why_size)
{
	const struct evm_plan *p = &rt->plan;
	uint64_t k = a->first / p->batch, first;
	uint32_t count;
	evm_plan_batch(p, k, &first, &count);
	if (a->first != rt->assigned_end) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " to builder %" PRIu32
			  " does not start at %" PRIu64 ", where the assigned IDs end: %s",
			  a->first, a->count, a->builder, rt->assigned_end,
			  a->first < rt->assigned_end ? "IDs assigned twice" : "a gap");
		return -EINVAL;
	}
	if (a->first >= rt->end) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " starts past the run's"
			  " last ID %" PRIu64, a->first, a->count, rt->end - 1);
		return -EINVAL;
	}
	if (count == 0 || a->count != count) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " does not cover its batch"
			  " of %" PRIu32 " IDs (batch %" PRIu32 ", run %" PRIu64 "..+%" PRIu64 ")",
			  a->first, a->count, count, p->batch, p->first_event, p->events);
		return -EINVAL;
	}
	if (a->builder >= p->builders) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " names builder %" PRIu32
			  " but the run has %" PRIu32, a->first, a->count, a->builder, p->builders);
		return -EINVAL;
	}
	uint64_t new_end = a->first + a->count;
	if (retired_below < rt->retired_below || retired_below > new_end) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " says retired below %" PRIu64
			  ", outside %" PRIu64 " .. %" PRIu64, a->first, a->count, retired_below,
			  rt->retired_below, new_end);
		return -EINVAL;
	}
	uint64_t live = retired_below < new_end ? k + 1 - retired_below / p->batch : 0;
	if (live > p->window_batches) {
		ROUTE_WHY("assignment of events %" PRIu64 "..+%" PRIu32 " makes %" PRIu64
			  " batches live from %" PRIu64 ", more than the window of %" PRIu32,
			  a->first, a->count, live, retired_below, p->window_batches);
		return -ENOSPC;
	}
	return 0;
}

int route_assign(struct route *rt, const struct evm_assignment *a, uint64_t retired_below,
		 char *why, size_t why_size)
{
	int rc = route_check(rt, a, retired_below, why, why_size);
	if (rc < 0)
		return rc;
	size_t slot = (a->first / rt->plan.batch) % rt->plan.window_batches;
	rt->ring[slot] = (uint16_t)a->builder;
	rt->phase[slot] = rt->next_phase[a->builder];
	rt->next_phase[a->builder] = (uint8_t)((rt->phase[slot] + 1u) % RAILS_PHASE_MODULUS);
	rt->assigned_end = a->first + a->count;
	rt->retired_below = retired_below;
	return 0;
}

int route_lose(struct route *rt, uint32_t b)
{
	if (b >= rt->plan.builders)
		return -ENOENT;
	rt->lost[b] = 1;
	return 0;
}

enum route_verdict route_lookup_lane(const struct route *rt, uint64_t event_id,
				     uint32_t *builder, uint32_t *phase)
{
	if (event_id < rt->plan.first_event || event_id >= rt->end)
		return ROUTE_INVALID;
	if (event_id >= rt->assigned_end)
		return ROUTE_HOLD;
	if (event_id < rt->retired_below)
		return ROUTE_LATE;
	size_t slot = (event_id / rt->plan.batch) % rt->plan.window_batches;
	*builder = rt->ring[slot];
	*phase = rt->phase[slot];
	return rt->lost[*builder] ? ROUTE_LOST : ROUTE_SEND;
}

enum route_verdict route_lookup(const struct route *rt, uint64_t event_id, uint32_t *builder)
{
	uint32_t phase;
	return route_lookup_lane(rt, event_id, builder, &phase);
}

uint64_t route_assigned_end(const struct route *rt)
{
	return rt->assigned_end;
}

uint64_t route_retired_below(const struct route *rt)
{
	return rt->retired_below;
}

size_t route_memory_bytes(const struct route *rt)
{
	return sizeof *rt + rt->plan.window_batches * (sizeof *rt->ring + sizeof *rt->phase) +
	       rt->plan.builders * (sizeof *rt->lost + sizeof *rt->next_phase);
}
