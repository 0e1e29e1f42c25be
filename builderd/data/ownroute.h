/* The builder role's view of the run's plan (docs/BUILDERS.md, "The
 * builders"): the hub's routing and every assign, kept as a reader keeps
 * them (core/route: what is assigned, to whom, and what is not yet), and the
 * builder's own IDs numbered densely (core/ownids: its k-th assigned ID is
 * local ID k). The per-frame question, "what do I do with a fragment of
 * this global ID", is ownroute_map(); records go back to the global ID with
 * ownroute_to_global(). Pure, private to builderd. */
#ifndef ES_BD_OWNROUTE_H
#define ES_BD_OWNROUTE_H

#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to do with a fragment. */
enum ownroute_verdict {
	OWNROUTE_BUILD,      /* one of mine: *local */
	OWNROUTE_HOLD,       /* not assigned yet: hold it in the link until an assign */
	OWNROUTE_MISROUTED,  /* another builder's (*owner when known, else UINT32_MAX) */
	OWNROUTE_LATE,       /* too old for the map to know: late, whoever's it was */
	OWNROUTE_INVALID,    /* not an ID of the run */
};

struct ownroute;

/* The plan of the hub's routing for builder self with a core window of
 * window local IDs. NULL with a sentence in why: a plan that is not this
 * builder's (--builders differs, self not a builder of it), a plan core/evm
 * refuses, no memory. */
struct ownroute *ownroute_create(const struct ctl_routing *r, uint32_t builders, uint32_t self,
		       uint32_t window, char *why, size_t why_size);
void ownroute_destroy(struct ownroute *w);

/* The hub's next assign. 0, or -errno with a sentence in why (the hub and
 * this builder disagree on the plan: an error of the run). *mine says
 * whether it was this builder's. */
int ownroute_assign(struct ownroute *w, const struct ctl_assign *a, bool *mine, char *why,
	       size_t why_size);

/* The hub gave builder b up. -ENOENT: no such builder. */
int ownroute_lose(struct ownroute *w, uint32_t b);

enum ownroute_verdict ownroute_map(const struct ownroute *w, uint64_t global, uint64_t *local,
			 uint32_t *owner);

/* The global ID of a local one the core still holds (UINT64_MAX if
 * forgotten, which the ring's size rules out for the core's window). */
uint64_t ownroute_to_global(const struct ownroute *w, uint64_t local);

/* IDs assigned to this builder in all (its local IDs 0 .. n-1). */
uint64_t ownroute_assigned(const struct ownroute *w);

/* A TOKEN's decided_below for decided local IDs decided: the global ID of
 * the first undecided one, or the assigned end when all are. */
uint64_t ownroute_decided_below(const struct ownroute *w, uint64_t decided);

/* The plan's first event and batch, and the IDs below which assignments
 * were heard. */
uint64_t ownroute_first_event(const struct ownroute *w);
uint32_t ownroute_batch(const struct ownroute *w);
uint64_t ownroute_assigned_end(const struct ownroute *w);

size_t ownroute_memory_bytes(const struct ownroute *w);

#endif
