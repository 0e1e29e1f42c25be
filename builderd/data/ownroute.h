/* The builder role's view of the run's plan (docs/BUILDERS.md, "The
 * builders"): the hub's routing and every assign, kept as a reader keeps
 * them (core/route: what is assigned, to whom, and what is not yet), and the
 * builder's own IDs numbered densely (core/ownids: its k-th assigned ID is
 * local ID k). The per-frame question, "what do I do with a fragment of
 * this global ID", is owr_map(); records go back to the global ID with
 * owr_to_global(). Pure, private to builderd. */
#ifndef ES_BD_OWNROUTE_H
#define ES_BD_OWNROUTE_H

#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to do with a fragment. */
enum owr_verdict {
	OWR_BUILD,      /* one of mine: *local */
	OWR_HOLD,       /* not assigned yet: hold it in the link until an assign */
	OWR_MISROUTED,  /* another builder's (*owner when known, else UINT32_MAX) */
	OWR_LATE,       /* too old for the map to know: late, whoever's it was */
	OWR_INVALID,    /* not an ID of the run */
};

struct owr;

/* The plan of the hub's routing for builder self with a core window of
 * window local IDs. NULL with a sentence in why: a plan that is not this
 * builder's (--builders differs, self not a builder of it), a plan core/evm
 * refuses, no memory. */
struct owr *owr_create(const struct ctl_routing *r, uint32_t builders, uint32_t self,
		       uint32_t window, char *why, size_t why_size);
void owr_destroy(struct owr *w);

/* The hub's next assign. 0, or -errno with a sentence in why (the hub and
 * this builder disagree on the plan: an error of the run). *mine says
 * whether it was this builder's. */
int owr_assign(struct owr *w, const struct ctl_assign *a, bool *mine, char *why,
	       size_t why_size);

/* The hub gave builder b up. -ENOENT: no such builder. */
int owr_lose(struct owr *w, uint32_t b);

enum owr_verdict owr_map(const struct owr *w, uint64_t global, uint64_t *local,
			 uint32_t *owner);

/* The global ID of a local one the core still holds (UINT64_MAX if
 * forgotten, which the ring's size rules out for the core's window). */
uint64_t owr_to_global(const struct owr *w, uint64_t local);

/* IDs assigned to this builder in all (its local IDs 0 .. n-1). */
uint64_t owr_assigned(const struct owr *w);

/* A TOKEN's decided_below for decided local IDs decided: the global ID of
 * the first undecided one, or the assigned end when all are. */
uint64_t owr_decided_below(const struct owr *w, uint64_t decided);

/* The plan's first event and batch, and the IDs below which assignments
 * were heard. */
uint64_t owr_first_event(const struct owr *w);
uint32_t owr_batch(const struct owr *w);
uint64_t owr_assigned_end(const struct owr *w);

size_t owr_memory_bytes(const struct owr *w);

#endif
