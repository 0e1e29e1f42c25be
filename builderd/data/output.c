#include "data/output.h"
#include "data/recsink.h"

#include "sys/clock.h"

#include <math.h>
#include <stdlib.h>

struct out_pending {
	uint64_t event_id;
	uint64_t bytes;
	uint64_t earliest_timestamp_ns;
	uint32_t crc;
	uint32_t run_id;
	uint16_t earliest_source;
};

struct out {
	struct rec_sink sink;                  /* where the records go: their format */
	bool sink_open;
	uint32_t flush_every;
	uint16_t sources;
	struct out_clock *clocks;              /* [sources] */
	struct out_uncertainty uncertainty;
	struct out_uncertainty *source_uncertainty;  /* [sources] */
	struct out_pending *pending;
	uint32_t pending_count;
	struct hist latency;
	struct hist uncertainty_hist;   /* per-record uncertainty, bounded ones */
	uint64_t written;
	uint64_t negative;
	bool sealed;                    /* out_seal: nothing more is written */
};

struct out *out_open(const char *dir, uint32_t flush_every, uint16_t sources,
		     const int64_t *source_offsets_ns)
{
	struct out *o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	o->flush_every = flush_every;
	o->sources = sources;
	hist_reset(&o->latency);
	hist_reset(&o->uncertainty_hist);
	o->clocks = calloc(sources, sizeof *o->clocks);
	o->source_uncertainty = calloc(sources, sizeof *o->source_uncertainty);
	o->pending = calloc(flush_every, sizeof *o->pending);
	if (o->clocks == NULL || o->source_uncertainty == NULL || o->pending == NULL) {
		out_close(o);
		return NULL;
	}
	for (uint16_t s = 0; s < sources; s++) {
		o->clocks[s].offset_ns = source_offsets_ns ? source_offsets_ns[s] : 0;
		o->clocks[s].bound_ns = OUT_UNBOUNDED;
	}
	o->sink_open = rec_open(&o->sink, NULL, dir, flush_every, sources);
	if (!o->sink_open) {
		out_close(o);
		return NULL;
	}
	return o;
}

/* How far the applied offset may be from the truth at now: the bound
 * widened by drift since it was taken (either way: a clock stepped back
 * still drifted). */
static int64_t out_bound_at(const struct out_clock *c, uint64_t now)
{
	if (c->bound_ns < 0)
		return OUT_UNBOUNDED;
	if (c->drift_ppm <= 0.0)
		return c->bound_ns;
	int64_t at = c->at_ns;
	uint64_t age = (int64_t)now >= at ? now - (uint64_t)at : (uint64_t)at - now;
	double widen = ceil(c->drift_ppm * (double)age / 1e6);
	int64_t bound;
	if (!(widen < 9.2e18) || __builtin_add_overflow(c->bound_ns, (int64_t)widen, &bound))
		return INT64_MAX;
	return bound;
}

static void out_count_uncertainty(struct out_uncertainty *u, int64_t bound)
{
	if (bound < 0) {
		u->unbounded++;
		return;
	}
	u->bounded++;
	if (bound > u->max_ns)
		u->max_ns = bound;
}

int out_flush(struct out *o)
{
	if (o->sealed)
		return 0;
	if (o->pending_count > 0) {
		uint64_t now = clk_realtime_ns();
		for (uint32_t i = 0; i < o->pending_count; i++) {
			const struct out_pending *p = &o->pending[i];
			const struct out_clock *c = &o->clocks[p->earliest_source];
			/* The source's timestamp on the builder's clock. */
			uint64_t origin = p->earliest_timestamp_ns - (uint64_t)c->offset_ns;
			uint64_t latency = 0;
			if (now >= origin)
				latency = now - origin;
			else
				o->negative++;
			hist_add(&o->latency, latency);
			int64_t bound = out_bound_at(c, now);
			out_count_uncertainty(&o->uncertainty, bound);
			if (bound >= 0)
				hist_add(&o->uncertainty_hist, (uint64_t)bound);
			out_count_uncertainty(&o->source_uncertainty[p->earliest_source], bound);
			const struct rec_event r = { .run_id = p->run_id, .event_id = p->event_id,
						     .crc = p->crc, .bytes = p->bytes,
						     .latency_ns = latency, .uncertainty_ns = bound,
						     .written_ns = now };
			o->sink.ops->add_event(o->sink.self, &r);
		}
		o->written += o->pending_count;
		o->pending_count = 0;
	}
	return o->sink.ops->flush(o->sink.self);
}

void out_add_event(struct out *o, const struct bld_event *e)
{
	if (o->sealed)
		return;
	o->pending[o->pending_count++] = (struct out_pending){
		.event_id = e->event_id,
		.bytes = e->bytes,
		.earliest_timestamp_ns = e->earliest_timestamp_ns,
		.crc = e->filter_crc,
		.run_id = e->run_id,
		.earliest_source = e->earliest_source,
	};
	if (o->pending_count == o->flush_every)
		out_flush(o);
}

void out_add_expired(struct out *o, const struct bld_expired *x)
{
	if (!o->sealed)
		o->sink.ops->add_expired(o->sink.self, x);
}

void out_set_clock(struct out *o, uint16_t source, const struct out_clock *clock)
{
	if (source < o->sources)
		o->clocks[source] = *clock;
}

struct out_uncertainty out_uncertainty(const struct out *o)
{
	return o->uncertainty;
}

struct out_uncertainty out_source_uncertainty(const struct out *o, uint16_t source)
{
	struct out_uncertainty none = { 0 };
	return source < o->sources ? o->source_uncertainty[source] : none;
}

const struct hist *out_latency(const struct out *o)
{
	return &o->latency;
}

const struct hist *out_uncertainty_hist(const struct out *o)
{
	return &o->uncertainty_hist;
}

uint64_t out_events_written(const struct out *o)
{
	return o->written;
}

uint64_t out_negative_latencies(const struct out *o)
{
	return o->negative;
}

uint64_t out_write_calls(const struct out *o)
{
	struct rec_sink_stats st;
	o->sink.ops->stats(o->sink.self, &st);
	return st.write_calls;
}

uint64_t out_buffer_bytes(const struct out *o)
{
	struct rec_sink_stats st;
	o->sink.ops->stats(o->sink.self, &st);
	return (uint64_t)o->flush_every * sizeof *o->pending + st.buffer_bytes +
	       (uint64_t)o->sources * (sizeof *o->clocks + sizeof *o->source_uncertainty);
}

uint64_t out_seal(struct out *o)
{
	uint64_t dropped = o->pending_count + o->sink.ops->seal(o->sink.self);
	o->pending_count = 0;
	o->sealed = true;
	return dropped;
}

bool out_close(struct out *o)
{
	if (o == NULL)
		return true;
	bool ok = true;
	if (o->sink_open) {
		out_flush(o);
		ok = o->sink.ops->close(o->sink.self);
	}
	free(o->pending);
	free(o->clocks);
	free(o->source_uncertainty);
	free(o);
	return ok;
}
