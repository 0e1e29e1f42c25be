/* What intake_source.c (the connections, verification, each frame's
 * verdict applied, holds) and intake_route.c (the verdict on where each
 * verified frame goes, the destinations' queues, the feed, the books)
 * and intake_whole.c (making and ending the whole, its views) share; nothing
 * else includes it. intake_source.c calls intake_route.c, never the other
 * way. */
#ifndef ES_READOUTD_INTAKE_INTERNAL_H
#define ES_READOUTD_INTAKE_INTERNAL_H

#include "intake.h"
#include "outq.h"

#include "core/route.h"
#include "wire/frame.h"

#include <event2/util.h>
#include <sys/uio.h>

struct intake_source {
	struct intake *in;
	uint16_t index;            /* in the intake's table and the queues */
	uint16_t id;
	enum intake_state state;
	int fd;
	struct event *ev_read;
	bool reading;
	char peer[CTL_MAX_TEXT];
	/* buf[start, checked) holds verified frames not yet written to all
	 * their destinations (and frames dropped among them), buf[checked,
	 * end) bytes not yet verified. buf[0] is the stream's byte base. */
	uint8_t *buf;
	size_t cap;
	size_t start, checked, end;
	uint64_t base;
	struct frm_decoder decoder;
	bool eof;
	/* A verified frame waiting for the admission limit to pass it. */
	bool held;
	size_t held_bytes;
	uint64_t held_event;
	uint64_t held_since_ns;
	/* A verified frame whose connection's queue was full: reads pause
	 * until that connection drains. */
	bool blocked;
	uint32_t blocked_dest;
	bool logged_invalid;       /* the first ID outside the run is logged */
	/* Inactivity limit: frames seen at the last check, and since when the
	 * reader has been reading this source without a new one. */
	uint64_t idle_frames_seen;
	uint64_t idle_since_ns;
	struct rdr_counters c;
};

struct intake {
	struct event_base *base;
	const struct rdr_options *opt;
	struct intake_events ev;
	void *arg;
	struct event *ev_idle;           /* checks the sources' inactivity limit */
	uint64_t credit_limit;           /* forward event IDs below this (one builder) */
	bool failed;
	size_t count;
	struct intake_source *sources;
	/* Where frames go: one destination per data connection, the links'
	 * rails in turn: link b's rail k is destination link_first[b] + k. */
	uint32_t nlinks;
	uint32_t dests;
	uint32_t *link_first;            /* [nlinks + 1]; link_first[nlinks] = dests */
	struct route *route;             /* routing: the hub's plan; NULL before it */
	uint64_t route_first, route_end; /* the run's IDs, for the log */
	struct outq *outq;               /* what each connection has to write, bounded */
	struct intake_link_view *conns;  /* [dests]: their counters */
	struct outq_span *spans;         /* [IOV_MAX]: a gather's runs */
	struct event *ev_retry;          /* blocked sources retried after a drain */
	uint32_t blocked_sources;        /* sources with blocked set */
};


/* The verdict on a frame of event_id and, to send, its connection d: the
 * hub's table and the lane phase of the event's batch, or the credit limit
 * of the one builder (link 0) and the event's span of RAILS_SPAN_EVENTS. */
enum route_verdict intake_route_frame(const struct intake *in, uint64_t event_id, uint32_t *d);
/* Whether event_id is admitted now (below the credit limit, or assigned). */
bool intake_admitted(const struct intake *in, uint64_t event_id);
/* The table's part of intake_assign() and intake_lose(): the plan
 * changed, a lost builder's connections closed and what they held counted
 * lost; the caller releases the sources it frees. */
int intake_route_assign(struct intake *in, const struct evm_assignment *a,
			uint64_t retired_below, char *why, size_t why_size);
int intake_route_lose(struct intake *in, uint32_t b, uint64_t *frames);
/* The feed's gather and consumed (struct fwd_feed). */
int intake_feed_gather(void *arg, uint32_t d, struct iovec *iov, int max);
void intake_feed_consumed(void *arg, uint32_t d, size_t bytes);
/* Moves s's start up to its oldest frame not yet written everywhere. */
void intake_reclaim(struct intake_source *s);
/* The event callbacks intake_whole.c sets up (intake_source.c): the inactivity
 * limit's check, and the retry of the sources blocked on a drained queue. */
void intake_on_idle_timer(evutil_socket_t fd, short what, void *arg);
void intake_on_retry(evutil_socket_t fd, short what, void *arg);
/* The connections and their queues; 0 or -ENOMEM. */
int intake_route_create(struct intake *in);
void intake_route_destroy(struct intake *in);

#endif
