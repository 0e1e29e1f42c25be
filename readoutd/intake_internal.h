/* What intake_source.c (the connections, verification, holds) and
 * intake_route.c (where each verified frame goes, the destinations'
 * queues, the feed, the books) share; nothing else includes it. */
#ifndef ES_READOUTD_INTAKE_INTERNAL_H
#define ES_READOUTD_INTAKE_INTERNAL_H

#include "intake.h"
#include "outq.h"

#include "core/route.h"
#include "wire/frame.h"

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
	struct route_queues *queues;     /* what each connection holds, bounded */
	uint32_t limit_frames;           /* their limits */
	uint64_t limit_bytes;
	struct outq *outq;               /* the frames each connection has to write */
	struct intake_link_view *conns;  /* [dests]: their counters */
	struct outq_span *spans;         /* [IOV_MAX]: a gather's runs */
	struct event *ev_retry;          /* blocked sources retried after a drain */
	uint32_t blocked_sources;        /* sources with blocked set */
};


/* Routes and takes the verified frame at s's checked position (header h,
 * frame_bytes long): true when it went (queued or dropped, checked past
 * it), false when it is held (admission) or blocked (its queue is full). */
bool intake_dispatch(struct intake_source *s, const struct frm_header *h, size_t frame_bytes,
		     bool first_sight);
/* The source's END frame for every destination. */
void intake_dispatch_end(struct intake_source *s, size_t frame_bytes);
/* Whether event_id is admitted now (below the credit limit, or assigned). */
bool intake_admitted(const struct intake *in, uint64_t event_id);
void intake_progress(struct intake_source *s);
void intake_resume(struct intake_source *s);
void intake_compact(struct intake_source *s);
/* Moves s's start up to its oldest frame not yet written everywhere. */
void intake_reclaim(struct intake_source *s);
/* The queues and the retry event; 0 or -ENOMEM. */
int intake_route_create(struct intake *in);
void intake_route_destroy(struct intake *in);

#endif
