/* The hub's event manager (--role hub, docs/BUILDERS.md): core/evm behind
 * the control messages. Each reader and builder gets `routing` right after
 * its WELCOME; a builder's first `token` joins it, every later one returns
 * what it decided; from START on, every record evm_next() makes goes out as
 * `assign`, in order, to every reader and builder alike. A builder given up
 * (control link lost, stalled, no tokens while it holds events) is dead to
 * the manager: its loss is named and `lost` goes to everyone. It decides
 * and sends; the hub says when (hooks). Private to builderd. */
#ifndef ES_BD_MANAGER_H
#define ES_BD_MANAGER_H

#include "options.h"
#include "peer.h"

#include "core/evm.h"
#include "wire/control.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct manager_hooks {
	void *ctx;
	/* An error of the run (logged, listed, the run fails). */
	void (*error)(void *ctx, const char *text);
	/* Sends m to p (whose connection is up). */
	void (*send)(void *ctx, struct peer *p, const struct ctl_msg *m);
	/* A builder joined or sent a token: the run makes progress, it may start. */
	void (*progress)(void *ctx, uint64_t now);
};

struct manager;
struct snapshot;

/* The manager of opt's plan (--builders, --first-event, --events,
 * --batch, --window-batches, --routing); low water one batch, high water
 * four. NULL with the reason logged. */
struct manager *manager_create(const struct options *opt, struct peer_table *peers,
		       const struct manager_hooks *hooks);
void manager_destroy(struct manager *m);

/* p was welcomed: a reader or builder gets `routing`. */
void manager_welcomed(struct manager *m, struct peer *p);

/* Builder p's TOKEN at now: joins it (the first) or returns what it
 * decided; a refused one is an error of the run naming it. */
void manager_token(struct manager *m, struct peer *p, const struct ctl_token *t, uint64_t now);

/* Every builder has joined (or is dead). */
bool manager_all_joined(const struct manager *m);

/* START went out at now (monotonic): assignment begins. */
void manager_start(struct manager *m, uint64_t now);

/* When assignment began and the last token arrived (monotonic; 0 before
 * START): the span the builders' rates are over. */
void manager_span(const struct manager *m, uint64_t *start_ns, uint64_t *last_token_ns);

/* Makes and sends every assignment that can be made now (after START). */
void manager_pump(struct manager *m);

/* The operator's drained stop after last_event: the batches up to the one
 * holding it are still assigned (its frames wait at the readers for them),
 * none past it, so that every ASSIGN leaves before the sources' END. */
void manager_drain(struct manager *m, uint64_t last_event);

/* A stop for a fault: nothing more is assigned; the IDs not assigned yet
 * are counted as the stop's (manager_ids_cut_unassigned). */
void manager_cut(struct manager *m);

/* The event IDs a drained stop left unassigned (the run's end past the
 * assignments), 0 without one: the books' bucket beside the assigned. */
uint64_t manager_ids_cut_unassigned(const struct manager *m);

/* Builder b is given up (why follows "Builder N (...)"): dead to the
 * manager, its loss logged by name, `lost` to every reader and builder.
 * Nothing for one already dead. */
void manager_builder_gone(struct manager *m, uint32_t b, const char *why);

/* A builder holding events whose tokens stopped for the stall timeout:
 * its index, or -1. The silence counts from its last token, START, or
 * the last call that saw it hold nothing, whichever is latest; call it on
 * a tick. */
int32_t manager_stalled_builder(struct manager *m, uint64_t now, uint64_t stall_ns);

/* Builder b as the manager sees it. */
bool manager_builder_view(const struct manager *m, uint32_t b, struct evm_builder_view *v);

/* The run's event IDs assigned in all, and whether every one is. */
struct evm_totals manager_totals(const struct manager *m);

/* metrics.json's "routing", "manager" and "builders" sections (each
 * builder's rate over manager_span). */
/* The manager's part of a report's snapshot: each builder's view, the
 * assignment backlog, the span of the tokens, its metrics.json sections
 * (the three below). */
void manager_snapshot(const struct manager *m, struct snapshot *s);

json_t *manager_json_routing(const struct manager *m);
json_t *manager_json_manager(const struct manager *m);
json_t *manager_json_builders(const struct manager *m);

#endif
