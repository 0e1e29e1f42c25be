/* Where each verified frame goes, as a verdict intake_source.c applies:
 * the admission limit of one builder, or the hub's assignments over
 * several (core/route), and on a link of several rails the connection of
 * its event's lane (core/rails.h). The connections' pending queues (outq,
 * bounded: a full one blocks the source, never drops), the feed the
 * forwarders write from, the books at the end. Calls nothing of
 * intake_source.c: what it changes for the sources (a release, a drain)
 * the caller acts on. */
#include "intake.h"
#include "intake_internal.h"

#include "core/rails.h"
#include "sys/clock.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes one gather gives a forwarder at most: a writev seldom takes more. */
#define RDR_GATHER_BYTES (1u << 20)

/* The connection of lane span of link b. */
static uint32_t intake_lane(const struct intake *in, uint32_t b, uint64_t span)
{
	return in->link_first[b] + rails_lane(span, in->link_first[b + 1] - in->link_first[b]);
}

enum route_verdict intake_route_frame(const struct intake *in, uint64_t event_id, uint32_t *d)
{
	*d = 0;
	if (!in->opt->routing) {
		if (event_id >= in->credit_limit)
			return ROUTE_HOLD;
		*d = intake_lane(in, 0, event_id / RAILS_SPAN_EVENTS);
		return ROUTE_SEND;
	}
	if (in->route == NULL)
		return ROUTE_HOLD;   /* no plan yet: nothing is assigned */
	uint32_t b, phase;
	enum route_verdict v = route_lookup_lane(in->route, event_id, &b, &phase);
	if (v == ROUTE_SEND)
		*d = intake_lane(in, b, phase);
	return v;
}

bool intake_admitted(const struct intake *in, uint64_t event_id)
{
	if (in->opt->routing)
		return in->route != NULL && event_id < route_assigned_end(in->route);
	return event_id < in->credit_limit;
}

uint64_t intake_limit(const struct intake *in)
{
	if (in->opt->routing)
		return in->route != NULL ? route_assigned_end(in->route) : 0;
	return in->credit_limit;
}

/* ---- the hub's plan ----------------------------------------------------- */

int intake_plan(struct intake *in, const struct evm_plan *plan, char *why, size_t why_size)
{
	if (in->route != NULL) {
		snprintf(why, why_size, "a second routing message; the plan is given once");
		return -EEXIST;
	}
	if (plan->builders != in->nlinks) {
		snprintf(why, why_size, "the run has %u builders but this reader has --builder links to %u (0 .. %u)",
			 plan->builders, in->nlinks, in->nlinks - 1);
		return -EINVAL;
	}
	in->route = route_create(plan);
	if (in->route == NULL) {
		int err = errno;
		snprintf(why, why_size, "%s", err == EINVAL ? "the routing plan is not valid" :
					      "no memory for the routing table");
		return -err;
	}
	in->route_first = plan->first_event;
	in->route_end = plan->first_event + plan->events;
	return 0;
}

bool intake_planned(const struct intake *in)
{
	return in->route != NULL;
}

int intake_route_assign(struct intake *in, const struct evm_assignment *a,
			uint64_t retired_below, char *why, size_t why_size)
{
	if (in->route == NULL) {
		snprintf(why, why_size, "an assignment before the routing plan");
		return -EPROTO;
	}
	return route_assign(in->route, a, retired_below, why, why_size);
}

/* A frame dropped with its lost destination. */
static void intake_on_lost_frame(void *arg, uint32_t d, uint16_t source, uint32_t len, bool end)
{
	(void)len;
	struct intake *in = arg;
	if (end)
		return;
	in->sources[source].c.frames_lost_builder++;
	in->conns[d].frames_lost++;
}

int intake_route_lose(struct intake *in, uint32_t b, uint64_t *frames)
{
	*frames = 0;
	if (in->route == NULL)
		return -EPROTO;
	int rc = route_lose(in->route, b);
	if (rc < 0)
		return rc;
	for (uint32_t d = in->link_first[b]; d < in->link_first[b + 1]; d++) {
		if (outq_closed(in->outq, d))
			continue;
		uint64_t before = in->conns[d].frames_lost;
		outq_close(in->outq, d, intake_on_lost_frame, in);
		in->conns[d].closed = true;
		*frames += in->conns[d].frames_lost - before;
	}
	return 0;
}

/* ---- links and their connections --------------------------------------- */

uint32_t intake_link_count(const struct intake *in)
{
	return in->nlinks;
}

uint32_t intake_link_rails(const struct intake *in, uint32_t b)
{
	return in->link_first[b + 1] - in->link_first[b];
}

uint32_t intake_connection(const struct intake *in, uint32_t b, uint32_t k)
{
	return in->link_first[b] + k;
}

uint32_t intake_connection_count(const struct intake *in)
{
	return in->dests;
}

void intake_rail_view(const struct intake *in, uint32_t b, uint32_t k,
		      struct intake_link_view *v)
{
	uint32_t d = in->link_first[b] + k;
	*v = in->conns[d];
	outq_view(in->outq, d, &v->q);
}

void intake_link_view(const struct intake *in, uint32_t b, struct intake_link_view *v)
{
	intake_rail_view(in, b, 0, v);
	for (uint32_t k = 1; k < intake_link_rails(in, b); k++) {
		struct intake_link_view r;
		intake_rail_view(in, b, k, &r);
		v->frames_forwarded += r.frames_forwarded;
		v->end_frames += r.end_frames;
		v->frames_lost += r.frames_lost;
		v->q.frames += r.q.frames;
		v->q.bytes += r.q.bytes;
		v->q.pushed += r.q.pushed;
		v->q.refused += r.q.refused;
		if (r.q.peak_frames > v->q.peak_frames)
			v->q.peak_frames = r.q.peak_frames;
		if (r.q.peak_bytes > v->q.peak_bytes)
			v->q.peak_bytes = r.q.peak_bytes;
	}
}

bool intake_connection_unsent(const struct intake *in, uint32_t d)
{
	return outq_frames(in->outq, d) > 0;
}

bool intake_link_unsent(const struct intake *in, uint32_t b)
{
	for (uint32_t d = in->link_first[b]; d < in->link_first[b + 1]; d++)
		if (outq_frames(in->outq, d) > 0)
			return true;
	return false;
}

bool intake_unsent(const struct intake *in)
{
	for (uint32_t d = 0; d < in->dests; d++)
		if (outq_frames(in->outq, d) > 0)
			return true;
	return false;
}

void intake_close_books(struct intake *in)
{
	for (size_t i = 0; i < in->count; i++) {
		struct intake_source *s = &in->sources[i];
		if (s->held)
			s->c.held_ns += clk_monotonic_ns() - s->held_since_ns;
		s->c.frames_held_at_end = outq_source_unwritten(in->outq, s->index) +
					  (s->held || s->blocked ? 1 : 0);
	}
}

/* ---- the feed the forwarders take frames from ---------------------------- */

int intake_feed_gather(void *arg, uint32_t d, struct iovec *iov, int max)
{
	struct intake *in = arg;
	if (max > IOV_MAX)
		max = IOV_MAX;
	size_t n = outq_gather(in->outq, d, in->spans, (size_t)max, RDR_GATHER_BYTES);
	for (size_t k = 0; k < n; k++) {
		const struct intake_source *s = &in->sources[in->spans[k].source];
		iov[k].iov_base = s->buf + (in->spans[k].pos - s->base);
		iov[k].iov_len = in->spans[k].len;
	}
	return (int)n;
}

/* A frame whose last byte went to d: a source blocked on a full queue may
 * go on (in->ev_retry, run outside the forwarder's flush). */
static void intake_on_written(void *arg, uint32_t d, uint16_t source, uint32_t len, bool end)
{
	(void)len;
	struct intake *in = arg;
	if (end) {
		in->conns[d].end_frames++;
		return;
	}
	in->sources[source].c.frames_forwarded++;
	in->conns[d].frames_forwarded++;
	if (in->blocked_sources > 0)
		event_active(in->ev_retry, EV_TIMEOUT, 0);
}

void intake_feed_consumed(void *arg, uint32_t d, size_t bytes)
{
	struct intake *in = arg;
	outq_written(in->outq, d, bytes, intake_on_written, in);
}

void intake_reclaim(struct intake_source *s)
{
	uint64_t pos;
	s->start = outq_oldest(s->in->outq, s->index, &pos) ? (size_t)(pos - s->base) : s->checked;
}

/* ---- creation ------------------------------------------------------------ */

/* Each link's connections, in turn. */
static int intake_connections(struct intake *in)
{
	const struct rdr_options *opt = in->opt;
	in->nlinks = opt->link_count > 0 ? opt->link_count : 1;
	in->link_first = calloc(in->nlinks + 1, sizeof *in->link_first);
	if (in->link_first == NULL)
		return -ENOMEM;
	for (uint32_t b = 0; b < in->nlinks; b++)
		in->link_first[b + 1] = in->link_first[b] + rdr_link_rails(opt, b);
	in->dests = in->link_first[in->nlinks];
	in->conns = calloc(in->dests, sizeof *in->conns);
	if (in->conns == NULL)
		return -ENOMEM;
	for (uint32_t b = 0; b < in->nlinks; b++)
		for (uint32_t d = in->link_first[b]; d < in->link_first[b + 1]; d++)
			in->conns[d].id = b;
	return 0;
}

int intake_route_create(struct intake *in)
{
	const struct rdr_options *opt = in->opt;
	if (intake_connections(in) < 0)
		return -ENOMEM;
	uint32_t frames = opt->pending_frames > 0 ? opt->pending_frames : RDR_PENDING_FRAMES_DEFAULT;
	uint64_t bytes = opt->pending_bytes > 0 ? opt->pending_bytes : RDR_PENDING_BYTES_DEFAULT;
	/* Each connection: its frames, and one END per source beside them. */
	in->outq = outq_create((uint16_t)in->count, in->dests, frames + (uint32_t)in->count,
			       rdr_source_frames(opt));
	in->spans = calloc(IOV_MAX, sizeof *in->spans);
	if (in->outq == NULL || in->spans == NULL)
		return -ENOMEM;
	return outq_set_limits(in->outq, frames, bytes) < 0 ? -EINVAL : 0;
}

void intake_route_destroy(struct intake *in)
{
	route_destroy(in->route);
	outq_destroy(in->outq);
	free(in->link_first);
	free(in->conns);
	free(in->spans);
}
