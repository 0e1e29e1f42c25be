#include "hub/dataview.h"

/* ---- the view of this process's ingest ---------------------------------- */

static enum bd_data_state ingv_reader_state(const void *ctx, uint32_t r)
{
	return ing_reader_state(ctx, r);
}

static uint64_t ingv_reader_frames(const void *ctx, uint32_t r)
{
	return ing_reader_frames(ctx, r);
}

static const uint16_t *ingv_reader_sources(const void *ctx, uint32_t r, size_t *count)
{
	return ing_reader_sources(ctx, r, count);
}

static int32_t ingv_reader_of_source(const void *ctx, uint16_t s)
{
	return ing_reader_of_source(ctx, s);
}

static void ingv_cut(void *ctx, uint32_t r)
{
	ing_cut(ctx, r);
}

static bool ingv_end_frame(const void *ctx, uint16_t s, uint64_t *events)
{
	return ing_end_frame(ctx, s, events);
}

static uint64_t ingv_unique_from(const void *ctx, uint16_t s)
{
	return ing_unique_from(ctx, s);
}

static uint64_t ingv_frames_received(const void *ctx)
{
	return ing_frames_received(ctx);
}

static const struct bld_counters *ingv_counters(const void *ctx)
{
	return ing_counters(ctx);
}

static uint32_t ingv_reader_rails(const void *ctx, uint32_t r, const struct bd_rail **rail)
{
	return ing_reader_rails(ctx, r, rail);
}

static const struct bd_data_ops ing_view_ops = {
	.reader_state = ingv_reader_state,
	.reader_frames = ingv_reader_frames,
	.reader_sources = ingv_reader_sources,
	.reader_of_source = ingv_reader_of_source,
	.cut = ingv_cut,
	.end_frame = ingv_end_frame,
	.unique_from = ingv_unique_from,
	.frames_received = ingv_frames_received,
	.counters = ingv_counters,
	.reader_rails = ingv_reader_rails,
};

void bdd_from_ing(struct bd_data *d, struct ing *g)
{
	*d = (struct bd_data){ .ops = &ing_view_ops, .ctx = g };
}
