/* The intake as a whole: made (every source's buffer, the connections'
 * queues, the timers) and ended, and what it shows of its sources. */
#include "intake.h"
#include "intake_internal.h"

#include "sys/clock.h"
#include "wire/frame.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool intake_over(const struct intake *in)
{
	for (size_t i = 0; i < in->count; i++)
		if (in->sources[i].state == INTAKE_WAITING ||
		    in->sources[i].state == INTAKE_STREAMING)
			return false;
	return true;
}

bool intake_failed(const struct intake *in)
{
	return in->failed;
}

size_t intake_source_count(const struct intake *in)
{
	return in->count;
}

void intake_view(const struct intake *in, size_t i, struct intake_view *v)
{
	const struct intake_source *s = &in->sources[i];
	v->id = s->id;
	v->state = s->state;
	v->held = s->held || s->blocked;
	v->holding_ns = s->held ? clk_monotonic_ns() - s->held_since_ns : 0;
	v->buffered_bytes = s->end - s->start;
	v->c = s->c;
	snprintf(v->peer, sizeof v->peer, "%s", s->peer);
}

bool intake_lookup(const struct intake *in, uint16_t id, struct intake_view *v)
{
	for (size_t i = 0; i < in->count; i++) {
		if (in->sources[i].id == id) {
			intake_view(in, i, v);
			return true;
		}
	}
	return false;
}

/* ---- creation ------------------------------------------------------------ */

static int intake_start_idle_timer(struct intake *in)
{
	/* Checked four times per limit, at most every 250 ms. */
	uint64_t every_us = in->opt->source_idle_timeout_ms * 250u;
	if (every_us > 250000u)
		every_us = 250000u;
	struct timeval tv = { (time_t)(every_us / 1000000u), (suseconds_t)(every_us % 1000000u) };
	in->ev_idle = event_new(in->base, -1, EV_PERSIST, intake_on_idle_timer, in);
	if (in->ev_idle == NULL)
		return -ENOMEM;
	return event_add(in->ev_idle, &tv) == 0 ? 0 : -EINVAL;
}

struct intake *intake_create(struct event_base *base, const struct rdr_options *opt,
			     const struct intake_events *ev, void *arg)
{
	struct intake *in = calloc(1, sizeof *in);
	if (in == NULL)
		return NULL;
	in->base = base;
	in->opt = opt;
	in->ev = *ev;
	in->arg = arg;
	/* Hold everything until the builder's first CREDIT says how far to go. */
	in->credit_limit = 0;
	in->count = opt->source_count;
	in->sources = calloc(opt->source_count, sizeof *in->sources);
	if (in->sources == NULL)
		goto fail;
	/* After compaction a cut frame (at most one whole frame) sits at the
	 * start and a full batch still fits behind it. */
	size_t cap = (size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES;
	for (size_t i = 0; i < opt->source_count; i++) {
		struct intake_source *s = &in->sources[i];
		s->in = in;
		s->index = (uint16_t)i;
		s->id = opt->sources[i];
		s->fd = -1;
		s->cap = cap;
		s->buf = malloc(cap);
		if (s->buf == NULL)
			goto fail;
		frm_decoder_init(&s->decoder, opt->run_id, opt->max_fragment_bytes);
	}
	if (intake_route_create(in) < 0)
		goto fail;
	in->ev_retry = event_new(base, -1, 0, intake_on_retry, in);
	if (in->ev_retry == NULL)
		goto fail;
	if (opt->source_idle_timeout_ms > 0 && intake_start_idle_timer(in) < 0)
		goto fail;
	return in;
fail:
	intake_destroy(in);
	return NULL;
}

void intake_destroy(struct intake *in)
{
	if (in == NULL)
		return;
	if (in->ev_idle)
		event_free(in->ev_idle);
	if (in->ev_retry != NULL)
		event_free(in->ev_retry);
	if (in->sources != NULL) {
		for (size_t i = 0; i < in->count; i++) {
			struct intake_source *s = &in->sources[i];
			if (s->ev_read)
				event_free(s->ev_read);
			if (s->fd >= 0)
				close(s->fd);
			free(s->buf);
		}
	}
	intake_route_destroy(in);
	free(in->sources);
	free(in);
}
