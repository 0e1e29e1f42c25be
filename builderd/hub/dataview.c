#include "hub/dataview.h"

#include "data/output.h"
#include "data/record.h"

/* ---- the view of this process's ingest ---------------------------------- */

static enum ingest_data_state ingv_reader_state(const void *ctx, uint32_t r)
{
	return ingest_reader_state(ctx, r);
}

static uint64_t ingv_reader_frames(const void *ctx, uint32_t r)
{
	return ingest_reader_frames(ctx, r);
}

static const uint16_t *ingv_reader_sources(const void *ctx, uint32_t r, size_t *count)
{
	return ingest_reader_sources(ctx, r, count);
}

static int32_t ingv_reader_of_source(const void *ctx, uint16_t s)
{
	return ingest_reader_of_source(ctx, s);
}

static void ingv_cut(void *ctx, uint32_t r)
{
	ingest_cut(ctx, r);
}

static bool ingv_end_frame(const void *ctx, uint16_t s, uint64_t *events)
{
	return ingest_end_frame(ctx, s, events);
}

static uint64_t ingv_unique_from(const void *ctx, uint16_t s)
{
	return ingest_unique_from(ctx, s);
}

static uint64_t ingv_frames_received(const void *ctx)
{
	return ingest_frames_received(ctx);
}

static const struct bld_counters *ingv_counters(const void *ctx)
{
	return ingest_counters(ctx);
}

static uint32_t ingv_reader_rails(const void *ctx, uint32_t r, const struct snapshot_rail **rail)
{
	return ingest_reader_rails(ctx, r, rail);
}

static bool ingv_recording(const void *ctx, struct acct_recording *out)
{
	struct record_stats rs;
	const struct output *o = ingest_output(ctx);
	if (o == NULL || !output_record_stats(o, &rs))
		return false;
	*out = (struct acct_recording){
		.builder = 0,
		.accepted = ingest_counters(ctx)->events_accepted,
		.written = rs.events_written,
		.unwritten = rs.events_unwritten,
		.unrecorded = rs.events_unrecorded,
		.in_files = rs.events_in_files,
	};
	return true;
}

static const struct dataview_ops ing_view_ops = {
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
	.recording = ingv_recording,
};

void dataview_from_ingest(struct dataview *d, struct ingest *g)
{
	*d = (struct dataview){ .ops = &ing_view_ops, .ctx = g };
}
