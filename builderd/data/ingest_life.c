/* The ingest's life: made with its builder core, its output and its
 * recorder (data/record.h), driven by the owner's tick, cut, fenced,
 * finished and destroyed; the core's answers (an event complete, expired,
 * a unique fragment) handed to the output. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "data/link.h"
#include "data/output.h"
#include "data/ownroute.h"
#include "data/record.h"

#include "core/builder.h"
#include "core/rails.h"
#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void ingest_on_complete(void *ctx, const struct bld_event *e)
{
	struct ingest *g = ctx;
	g->last_complete_ns = clk_monotonic_ns();
	if (g->opt.filter_cost_us)
		clk_burn_us(g->opt.filter_cost_us);
	if (!e->accepted) {
		output_forget(g->out, e->slot);
		return;
	}
	if (g->plan == NULL) {
		output_add_event(g->out, e);
		return;
	}
	/* The core counts in local IDs; the records carry the run's. */
	struct bld_event global = *e;
	global.event_id = ownroute_to_global(g->plan, e->event_id);
	output_add_event(g->out, &global);
}

static void ingest_on_unique(void *ctx, uint32_t slot, const struct bld_fragment *f)
{
	struct ingest *g = ctx;
	struct ingest_in_place *kept = g->in_place;
	if (output_keep(g->out, slot, f->source_id, g->taking, g->taking_bytes, f->payload_crc,
			kept != NULL) && kept != NULL)
		*kept = (struct ingest_in_place){ .kept = true, .slot = slot, .src = f->source_id };
}

static void ingest_on_expired(void *ctx, const struct bld_expired *x)
{
	struct ingest *g = ctx;
	if (g->plan == NULL) {
		output_add_expired(g->out, x);
		return;
	}
	struct bld_expired global = *x;
	global.event_id = ownroute_to_global(g->plan, x->event_id);
	output_add_expired(g->out, &global);
}

void ingest_cut(struct ingest *g, uint32_t r)
{
	struct ingest_reader *rd = &g->readers[r];
	if (rd->state == INGEST_DATA_WAITING || rd->state == INGEST_DATA_STREAMING)
		ingest_close(rd, INGEST_DATA_FAILED);
}

uint64_t ingest_fence(struct ingest *g)
{
	for (uint32_t r = 0; r < g->opt.readers; r++)
		ingest_cut(g, r);
	return output_seal(g->out);
}

void ingest_tick(struct ingest *g, uint64_t now)
{
	bld_expire(g->core, now);
	output_flush(g->out);
	for (unsigned i = 0; i < g->link_count && !g->over; i++)
		if (g->links[i].ops->tick != NULL)
			g->links[i].ops->tick(g->links[i].listener, now);
}

int ingest_finish(struct ingest *g, uint64_t events_generated)
{
	g->over = true;
	for (uint32_t r = 0; r < g->opt.readers; r++)
		if (g->readers[r].state == INGEST_DATA_STREAMING)
			ingest_close(&g->readers[r], INGEST_DATA_FAILED);
	bld_finish(g->core, events_generated);
	int rc = output_flush(g->out);
	char why[512];
	if (!output_end_data(g->out, why, sizeof why))
		ingest_error(g, "Recording the events' data failed: %s", why);
	return rc;
}

bool ingest_close_output(struct ingest *g)
{
	bool ok = output_close(g->out);
	g->out = NULL;
	return ok;
}

int ingest_add_link(struct ingest *g, const struct link_listener_ops *ops, void *listener)
{
	if (g->link_count == INGEST_MAX_LISTENERS)
		return -ENOSPC;
	g->links[g->link_count].ops = ops;
	g->links[g->link_count].listener = listener;
	g->link_count++;
	return 0;
}

static int ingest_alloc(struct ingest *g)
{
	uint16_t S = g->opt.sources;
	uint32_t N = g->opt.readers;
	g->readers = calloc(N + 1, sizeof *g->readers);
	g->reader_of_source = malloc((S + 1) * sizeof *g->reader_of_source);
	g->end_frame_events = calloc(S + 1, sizeof *g->end_frame_events);
	g->end_frame_seen = calloc(S + 1, sizeof *g->end_frame_seen);
	g->end_frame_rails = calloc(S + 1, sizeof *g->end_frame_rails);
	if (!g->readers || !g->reader_of_source || !g->end_frame_events || !g->end_frame_seen ||
	    !g->end_frame_rails)
		return -ENOMEM;
	for (uint16_t s = 0; s < S; s++)
		g->reader_of_source[s] = -1;
	for (uint32_t r = 0; r < N; r++) {
		struct ingest_reader *rd = &g->readers[r];
		rd->ing = g;
		rd->id = r;
		rd->rails = 1;
		for (uint32_t k = 0; k < CTL_MAX_RAILS; k++)
			frm_decoder_init(&rd->decoder[k], g->opt.run_id, g->opt.max_fragment_bytes);
	}
	return 0;
}

/* --record: the recorder of the events' fragments (data/record.h), or
 * none; false (logged, naming the problem) when it cannot record. */
static bool ingest_open_record(const struct options *opt, struct record **out)
{
	*out = NULL;
	if (opt->record_format == OPTIONS_RECORD_NONE)
		return true;
	struct record_config c = {
		.format = opt->record_format,
		.dir = opt->record_dir[0] != '\0' ? opt->record_dir : opt->out_dir,
		.run = opt->run_id,
		.builder_id = opt->role == ROLE_BUILDER ? (uint16_t)opt->builder_id : 0,
		.sources = opt->sources,
		.window = opt->max_inflight,
		.max_payload = opt->record_max_payload,
		.max_file_bytes = opt->record_max_file_bytes,
		.sync = (enum evw_sync)opt->record_sync,
		.direct = opt->record_io == OPTIONS_IO_DIRECT,
		.slice_ns = opt->record_slice_ms * 1000000u,
		.slice_events = opt->record_slice_events,
	};
	for (size_t i = 0; opt->config_sha256[0] != '\0' && i < sizeof c.config_sha256; i++)
		sscanf(opt->config_sha256 + 2 * i, "%2hhx", &c.config_sha256[i]);
	char why[512];
	if (!record_open(out, &c, why, sizeof why)) {
		log_error("Cannot record the events: %s", why);
		return false;
	}
	return true;
}

struct ingest *ingest_create(struct event_base *base, const struct options *opt,
		       const int64_t *source_offsets_ns, const struct ingest_hooks *hooks)
{
	struct ingest *g = calloc(1, sizeof *g);
	if (g == NULL)
		return NULL;
	g->base = base;
	g->opt = *opt;
	g->hooks = *hooks;
	if (ingest_alloc(g) < 0)
		goto fail;
	if (mkdir(opt->out_dir, 0755) < 0 && errno != EEXIST) {
		log_error("Cannot create the output folder %s: %s", opt->out_dir, strerror(errno));
		goto fail;
	}
	struct bld_config bc = {
		.run_id = opt->run_id,
		.sources = opt->sources,
		.window = opt->max_inflight,
		.timeout_ns = opt->timeout_ms * 1000000u,
		.skip_timeout_ns = opt->skip_timeout_ms * 1000000u,
		.filter_modulo = opt->filter_modulo,
		/* --role builder: the core counts the builder's own local IDs,
		 * from 0, how many known only at the end (ownroute.h). */
		.first_event = opt->role == ROLE_BUILDER ? 0 : opt->first_event,
		.events = opt->role == ROLE_BUILDER ? 0 : opt->events,
		/* One builder: a reader deals the run's global IDs to its rails
		 * in spans of RAILS_SPAN_EVENTS; a builder of several learns its
		 * batch from the hub (ingest_set_plan). */
		.lane_span = RAILS_SPAN_EVENTS,
		.lane_offset = opt->role == ROLE_BUILDER ? 0 : opt->first_event,
	};
	struct bld_sink sink = { .on_complete = ingest_on_complete, .on_expired = ingest_on_expired,
				 .on_unique = opt->record_format != OPTIONS_RECORD_NONE ? ingest_on_unique : NULL,
				 .ctx = g };
	g->core = bld_create(&bc, &sink);
	if (g->core == NULL) {
		log_error("Cannot create the builder core (window %u, %u sources): %s",
			  opt->max_inflight, opt->sources, strerror(errno));
		goto fail;
	}
	struct record *data = NULL;
	if (!ingest_open_record(opt, &data))
		goto fail;
	g->out = output_open(opt->out_dir, opt->flush_every, opt->sources, source_offsets_ns, data);
	if (g->out == NULL)
		goto fail;
	return g;
fail:
	ingest_destroy(g);
	return NULL;
}

void ingest_destroy(struct ingest *g)
{
	if (g == NULL)
		return;
	for (uint32_t i = 0; g->readers && i < g->opt.readers; i++) {
		ingest_close(&g->readers[i], INGEST_DATA_CLOSED);
	}
	for (unsigned i = g->link_count; i-- > 0;)
		g->links[i].ops->stop(g->links[i].listener);
	output_close(g->out);
	bld_destroy(g->core);
	ownroute_destroy(g->plan);
	free(g->readers);
	free(g->reader_of_source);
	free(g->end_frame_events);
	free(g->end_frame_seen);
	free(g->end_frame_rails);
	free(g);
}
