#include "data/output.h"
#include "data/record.h"
#include "data/recsink.h"

#include "sys/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct output_pending {
	uint64_t event_id;
	uint64_t bytes;
	uint64_t earliest_timestamp_ns;
	uint32_t crc;
	uint32_t run_id;
	uint32_t slot;                  /* its window slot: its fragments, when recording */
	uint16_t earliest_source;
};

struct output {
	struct recsink sink;                  /* where the records go: their format */
	bool sink_open;
	struct record *data;                  /* the events' fragments; NULL: not recorded */
	uint32_t flush_every;
	uint16_t sources;
	struct output_clock *clocks;              /* [sources] */
	struct output_uncertainty uncertainty;
	struct output_uncertainty *source_uncertainty;  /* [sources] */
	struct output_pending *pending;
	uint32_t pending_count;
	struct hist latency;
	struct hist uncertainty_hist;   /* per-record uncertainty, bounded ones */
	uint64_t written;
	uint64_t negative;
	bool sealed;                    /* output_seal: nothing more is written */
};

struct output *output_open(const char *dir, uint32_t flush_every, uint16_t sources,
		     const int64_t *source_offsets_ns, struct record *data)
{
	struct output *o = calloc(1, sizeof *o);
	if (o == NULL) {
		record_close(data);
		return NULL;
	}
	o->data = data;
	o->flush_every = flush_every;
	o->sources = sources;
	hist_reset(&o->latency);
	hist_reset(&o->uncertainty_hist);
	o->clocks = calloc(sources, sizeof *o->clocks);
	o->source_uncertainty = calloc(sources, sizeof *o->source_uncertainty);
	o->pending = calloc(flush_every, sizeof *o->pending);
	if (o->clocks == NULL || o->source_uncertainty == NULL || o->pending == NULL) {
		output_close(o);
		return NULL;
	}
	for (uint16_t s = 0; s < sources; s++) {
		o->clocks[s].offset_ns = source_offsets_ns ? source_offsets_ns[s] : 0;
		o->clocks[s].bound_ns = OUTPUT_UNBOUNDED;
	}
	o->sink_open = recsink_open(&o->sink, NULL, dir, flush_every, sources);
	if (!o->sink_open) {
		output_close(o);
		return NULL;
	}
	return o;
}

/* How far the applied offset may be from the truth at now: the bound
 * widened by drift since it was taken (either way: a clock stepped back
 * still drifted). */
static int64_t output_bound_at(const struct output_clock *c, uint64_t now)
{
	if (c->bound_ns < 0)
		return OUTPUT_UNBOUNDED;
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

static void output_count_uncertainty(struct output_uncertainty *u, int64_t bound)
{
	if (bound < 0) {
		u->unbounded++;
		return;
	}
	u->bounded++;
	if (bound > u->max_ns)
		u->max_ns = bound;
}

int output_flush(struct output *o)
{
	if (o->sealed)
		return 0;
	if (o->data != NULL) {
		/* The data first: an event's latency ends when its data, not
		 * its summary line, has left the process. */
		for (uint32_t i = 0; i < o->pending_count; i++)
			record_add(o->data, o->pending[i].slot, o->pending[i].event_id,
				   o->pending[i].earliest_timestamp_ns);
		/* A failure of the data is named at the end (output_end_data),
		 * apart from the records'. */
		record_flush(o->data, clk_monotonic_ns());
	}
	if (o->pending_count > 0) {
		uint64_t now = clk_realtime_ns();
		for (uint32_t i = 0; i < o->pending_count; i++) {
			const struct output_pending *p = &o->pending[i];
			const struct output_clock *c = &o->clocks[p->earliest_source];
			/* The source's timestamp on the builder's clock. */
			uint64_t origin = p->earliest_timestamp_ns - (uint64_t)c->offset_ns;
			uint64_t latency = 0;
			if (now >= origin)
				latency = now - origin;
			else
				o->negative++;
			hist_add(&o->latency, latency);
			int64_t bound = output_bound_at(c, now);
			output_count_uncertainty(&o->uncertainty, bound);
			if (bound >= 0)
				hist_add(&o->uncertainty_hist, (uint64_t)bound);
			output_count_uncertainty(&o->source_uncertainty[p->earliest_source], bound);
			const struct recsink_event r = { .run_id = p->run_id, .event_id = p->event_id,
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

bool output_keep(struct output *o, uint32_t slot, uint16_t source, const uint8_t *frame,
		 uint32_t frame_bytes, uint32_t payload_crc, bool in_place)
{
	if (o->data == NULL || o->sealed)
		return false;
	/* The slot's last event is queued or in the writer's batch: it is
	 * written before its cells are reused. */
	if (record_held(o->data, slot))
		output_flush(o);
	return record_keep(o->data, slot, source, frame, frame_bytes, payload_crc, in_place);
}

bool output_refers(const struct output *o, uint32_t slot, uint16_t source, const uint8_t *frame)
{
	return o != NULL && o->data != NULL && record_refers(o->data, slot, source, frame);
}

void output_own(struct output *o, uint32_t slot, uint16_t source)
{
	if (o != NULL && o->data != NULL)
		record_own(o->data, slot, source);
}

void output_forget(struct output *o, uint32_t slot)
{
	if (o->data != NULL)
		record_forget(o->data, slot);
}

bool output_end_data(struct output *o, char *why, size_t why_size)
{
	if (o->data == NULL || o->sealed)
		return true;
	if (!record_end(o->data, clk_monotonic_ns(), why, why_size))
		return false;
	struct record_stats st;
	record_stats(o->data, &st);
	if (st.events_written != o->written) {
		snprintf(why, why_size, "%llu events written to the event files, %llu records written",
			 (unsigned long long)st.events_written, (unsigned long long)o->written);
		return false;
	}
	return true;
}

bool output_record_stats(const struct output *o, struct record_stats *out)
{
	if (o->data == NULL)
		return false;
	record_stats(o->data, out);
	return true;
}

void output_add_event(struct output *o, const struct bld_event *e)
{
	if (o->sealed)
		return;
	o->pending[o->pending_count++] = (struct output_pending){
		.event_id = e->event_id,
		.bytes = e->bytes,
		.earliest_timestamp_ns = e->earliest_timestamp_ns,
		.crc = e->filter_crc,
		.run_id = e->run_id,
		.slot = e->slot,
		.earliest_source = e->earliest_source,
	};
	if (o->data != NULL)
		record_hold(o->data, e->slot);
	if (o->pending_count == o->flush_every)
		output_flush(o);
}

void output_add_expired(struct output *o, const struct bld_expired *x)
{
	if (!o->sealed)
		o->sink.ops->add_expired(o->sink.self, x);
	if (o->data != NULL) {
		record_expired(o->data);
		record_forget(o->data, x->slot);
	}
}

void output_set_clock(struct output *o, uint16_t source, const struct output_clock *clock)
{
	if (source < o->sources)
		o->clocks[source] = *clock;
}

struct output_uncertainty output_uncertainty(const struct output *o)
{
	return o->uncertainty;
}

struct output_uncertainty output_source_uncertainty(const struct output *o, uint16_t source)
{
	struct output_uncertainty none = { 0 };
	return source < o->sources ? o->source_uncertainty[source] : none;
}

const struct hist *output_latency(const struct output *o)
{
	return &o->latency;
}

const struct hist *output_uncertainty_hist(const struct output *o)
{
	return &o->uncertainty_hist;
}

uint64_t output_events_written(const struct output *o)
{
	return o->written;
}

uint64_t output_negative_latencies(const struct output *o)
{
	return o->negative;
}

uint64_t output_write_calls(const struct output *o)
{
	struct recsink_stats st;
	o->sink.ops->stats(o->sink.self, &st);
	return st.write_calls;
}

uint64_t output_buffer_bytes(const struct output *o)
{
	struct recsink_stats st;
	o->sink.ops->stats(o->sink.self, &st);
	return (uint64_t)o->flush_every * sizeof *o->pending + st.buffer_bytes +
	       (uint64_t)o->sources * (sizeof *o->clocks + sizeof *o->source_uncertainty);
}

uint64_t output_seal(struct output *o)
{
	uint64_t dropped = o->pending_count + o->sink.ops->seal(o->sink.self);
	o->pending_count = 0;
	if (o->data != NULL)
		record_seal(o->data);
	o->sealed = true;
	return dropped;
}

bool output_close(struct output *o)
{
	if (o == NULL)
		return true;
	bool ok = true;
	if (o->sink_open) {
		output_flush(o);
		ok = o->sink.ops->close(o->sink.self);
	}
	if (!record_close(o->data))
		ok = false;
	free(o->pending);
	free(o->clocks);
	free(o->source_uncertainty);
	free(o);
	return ok;
}
