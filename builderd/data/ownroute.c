#include "data/ownroute.h"

#include "core/evm.h"
#include "core/ownids.h"
#include "core/route.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct ownroute {
	struct evm_plan plan;
	uint32_t self;
	struct route *route;
	struct ownids *own;
};

struct ownroute *ownroute_create(const struct ctl_routing *r, uint32_t builders, uint32_t self,
		       uint32_t window, char *why, size_t why_size)
{
	if (r->builders != builders || self >= r->builders) {
		snprintf(why, why_size,
			 "the hub's routing has %" PRIu32 " builders, but this is builder %" PRIu32
			 " of --builders %" PRIu32,
			 r->builders, self, builders);
		return NULL;
	}
	struct ownroute *w = calloc(1, sizeof *w);
	if (w == NULL) {
		snprintf(why, why_size, "out of memory");
		return NULL;
	}
	w->self = self;
	w->plan = (struct evm_plan){ .builders = r->builders, .first_event = r->first_event,
				     .events = r->events, .batch = r->batch,
				     .window_batches = r->window_batches };
	w->route = route_create(&w->plan);
	/* Own runs enough to cover twice the core's window and a batch: an ID
	 * of mine the ring forgot lies more than a window below the core's
	 * base (its tokens let no more than a window be assigned past it),
	 * where the core calls any fragment late. Short runs are only the
	 * run's first and last batch. */
	uint64_t runs = 2u * (uint64_t)window / r->batch + 4u;
	if (runs > OWNIDS_MAX_CAPACITY)
		runs = OWNIDS_MAX_CAPACITY;
	w->own = ownids_create((uint32_t)runs);
	if (w->route == NULL || w->own == NULL) {
		snprintf(why, why_size, "the hub's routing (first event %" PRIu64 ", %" PRIu64
			 " events, batch %" PRIu32 ", window of %" PRIu32 " batches) cannot be set up",
			 r->first_event, r->events, r->batch, r->window_batches);
		ownroute_destroy(w);
		return NULL;
	}
	return w;
}

void ownroute_destroy(struct ownroute *w)
{
	if (w == NULL)
		return;
	route_destroy(w->route);
	ownids_destroy(w->own);
	free(w);
}

int ownroute_assign(struct ownroute *w, const struct ctl_assign *a, bool *mine, char *why,
	       size_t why_size)
{
	struct evm_assignment rec = { .first = a->first, .count = a->count, .builder = a->builder };
	*mine = false;
	int rc = route_assign(w->route, &rec, a->retired_below, why, why_size);
	if (rc < 0 || a->builder != w->self)
		return rc;
	*mine = true;
	/* route_assign took it in order, so it cannot go back here. */
	return ownids_add(w->own, a->first, a->count);
}

int ownroute_lose(struct ownroute *w, uint32_t b)
{
	return route_lose(w->route, b);
}

enum ownroute_verdict ownroute_map(const struct ownroute *w, uint64_t global, uint64_t *local,
			 uint32_t *owner)
{
	*owner = UINT32_MAX;
	switch (route_lookup(w->route, global, owner)) {
	case ROUTE_HOLD:
		return OWNROUTE_HOLD;
	case ROUTE_INVALID:
		return OWNROUTE_INVALID;
	case ROUTE_SEND:
	case ROUTE_LOST:
		if (*owner != w->self)
			return OWNROUTE_MISROUTED;
		break;
	case ROUTE_LATE:
		*owner = UINT32_MAX;
		break;
	}
	switch (ownids_to_local(w->own, global, local)) {
	case OWNIDS_MINE:
		return OWNROUTE_BUILD;
	case OWNIDS_FORGOTTEN:
		return OWNROUTE_LATE;
	case OWNIDS_OTHER:
	case OWNIDS_AHEAD:
		break;
	}
	return OWNROUTE_MISROUTED;
}

uint64_t ownroute_to_global(const struct ownroute *w, uint64_t local)
{
	uint64_t global;
	return ownids_to_global(w->own, local, &global) ? global : UINT64_MAX;
}

uint64_t ownroute_assigned(const struct ownroute *w)
{
	return ownids_count(w->own);
}

uint64_t ownroute_decided_below(const struct ownroute *w, uint64_t decided)
{
	uint64_t global;
	if (decided < ownids_count(w->own) && ownids_to_global(w->own, decided, &global))
		return global;
	return route_assigned_end(w->route);
}

uint64_t ownroute_first_event(const struct ownroute *w)
{
	return w->plan.first_event;
}

uint32_t ownroute_batch(const struct ownroute *w)
{
	return w->plan.batch;
}

uint64_t ownroute_assigned_end(const struct ownroute *w)
{
	return route_assigned_end(w->route);
}

size_t ownroute_memory_bytes(const struct ownroute *w)
{
	return sizeof *w + route_memory_bytes(w->route) + ownids_memory_bytes(w->own);
}
