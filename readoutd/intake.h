/* The reader's intake: each source's data connection (welcomed at the data
 * port, door.c) read into its own buffer, verifying every frame as it
 * arrives, and holding a fragment at or beyond the admission limit (the
 * source's reads pause, so TCP pushes back on that source alone). Verified
 * frames wait in the buffers until a forwarder takes them (intake_feed()).
 * The per-frame path allocates nothing: each source's buffer is allocated
 * once, at intake_create(). */
#ifndef ES_READOUTD_INTAKE_H
#define ES_READOUTD_INTAKE_H

#include "forward.h"
#include "config.h"
#include "outq.h"

#include "core/route.h"
#include "wire/control.h"
#include "wire/counters.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* Counters kept per source and summed for the reader, from their list
 * (wire/counters.h). */
struct rdr_counters {
#define RDR_FIELD(name) uint64_t name;
	CNT_LIST_READER_SOURCE(RDR_FIELD)
#undef RDR_FIELD
};

enum intake_state { INTAKE_WAITING, INTAKE_STREAMING, INTAKE_ENDED, INTAKE_FAILED };

/* What the rest of the reader may know of one source: a copy. */
struct intake_view {
	uint16_t id;
	enum intake_state state;
	bool held;                 /* a verified frame waits for the admission limit
				    * or for its destination's queue to drain */
	uint64_t holding_ns;       /* how long the current hold has lasted; 0 if none */
	uint64_t buffered_bytes;   /* received, not yet forwarded */
	char peer[CTL_MAX_TEXT];   /* where its connection came from; "" while waiting */
	struct rdr_counters c;
};

/* What the intake tells the reader. */
struct intake_events {
	/* Frames were verified or a source's state changed: forward, and see
	 * whether the run is over. */
	void (*on_progress)(void *arg);
	/* The inactivity limit gave a source up after idle_ms without a
	 * complete frame (already closed and counted as err_idle). */
	void (*on_given_up)(void *arg, uint16_t source, uint64_t idle_ms);
};

/* One builder link, or one data connection (rail) of it: what went to it,
 * what it holds. A link's view sums its connections', but for the peaks,
 * the most any one connection held (each has its own limit). */
struct intake_link_view {
	uint32_t id;                 /* the builder */
	bool closed;                 /* lost (intake_lose) or never to be written again */
	uint64_t frames_forwarded;   /* whole frames written, END frames aside */
	uint64_t end_frames;
	uint64_t frames_lost;        /* queued for it when it was lost */
	struct outq_view q;          /* its pending queue (outq) */
};

struct intake;

/* Allocates every source's buffer and starts the inactivity timer. Holds
 * everything until intake_admit() says how far to go. opt must outlive it. */
struct intake *intake_create(struct event_base *base, const struct rdr_options *opt,
			     const struct intake_events *ev, void *arg);
void intake_destroy(struct intake *in);

/* Streams source id from fd, a connection the data port welcomed (tests
 * hand in one end of a socketpair). Takes fd.
 * -ENOENT: no such source; -EBUSY: the source is not waiting. */
int intake_adopt(struct intake *in, uint16_t id, int fd, const char *peer);

/* The admission limit: event IDs below limit may be forwarded. Releases the
 * held frames it passes. */
void intake_admit(struct intake *in, uint64_t limit);
uint64_t intake_limit(const struct intake *in);

/* Routing (--builder B=URL): the hub's plan, once. 0; -EEXIST a second
 * one; -EINVAL a plan core/route refuses or whose builders are not the
 * reader's links; -ENOMEM. why gets a sentence on a refusal. */
int intake_plan(struct intake *in, const struct evm_plan *plan, char *why, size_t why_size);
bool intake_planned(const struct intake *in);
/* The hub's next assignment (route_assign); releases the frames it
 * passes. -EPROTO before the plan; else route_assign()'s refusals. */
int intake_assign(struct intake *in, const struct evm_assignment *a, uint64_t retired_below,
		  char *why, size_t why_size);
/* Builder b is lost: its IDs are dropped as frames_lost_builder from now
 * on, and what it had queued is counted so. -ENOENT: no such builder,
 * -EPROTO: no plan yet. *frames: what it had queued. */
int intake_lose(struct intake *in, uint32_t b, uint64_t *frames);

uint32_t intake_link_count(const struct intake *in);
void intake_link_view(const struct intake *in, uint32_t b, struct intake_link_view *v);
/* Frames routed to link b are still to be written. */
bool intake_link_unsent(const struct intake *in, uint32_t b);

/* The data connections: link b's rails (rdr_link_rails()), its rail k the
 * feed's destination intake_connection(in, b, k); every link's in turn,
 * intake_connection_count() in all. A frame goes to the connection of its
 * event's lane (core/rails.h); a source's END to every one. */
uint32_t intake_link_rails(const struct intake *in, uint32_t b);
uint32_t intake_connection(const struct intake *in, uint32_t b, uint32_t k);
uint32_t intake_connection_count(const struct intake *in);
void intake_rail_view(const struct intake *in, uint32_t b, uint32_t k,
		      struct intake_link_view *v);
/* Frames routed to destination d are still to be written. */
bool intake_connection_unsent(const struct intake *in, uint32_t d);

/* The builder gave up on source id: closes it as failed, counted as
 * err_dropped. False when it is not waiting or streaming. */
bool intake_drop(struct intake *in, uint16_t id, const char *reason);

/* Closes every source still waiting or streaming, as failed, unlogged. */
void intake_close_all(struct intake *in);

/* Stops checking inactivity: the run is over. */
void intake_finish(struct intake *in);

/* Every source has ended or failed. */
bool intake_over(const struct intake *in);
/* Verified frames are still in the buffers. */
bool intake_unsent(const struct intake *in);
/* A source failed or sent bytes after its END: the run's status is 1. */
bool intake_failed(const struct intake *in);

/* Settles the books at the end: the hold in progress counts in held_ns, and
 * frames_held_at_end is filled in. */
void intake_close_books(struct intake *in);

size_t intake_source_count(const struct intake *in);
void intake_view(const struct intake *in, size_t i, struct intake_view *v);
/* The view of source id; false when the reader does not serve it. */
bool intake_lookup(const struct intake *in, uint16_t id, struct intake_view *v);

/* The verified frames as forwarders take them. */
struct fwd_feed intake_feed(struct intake *in);

#endif
