/* The ingest's face to its own files, the links and the hub: its error
 * report, the accessors of its state, what the hub reads of the data side
 * and the snapshot it fills. It calls none of the other ingest files, so
 * they all stand on it. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "data/link.h"
#include "data/output.h"
#include "data/record.h"
#include "snapshot.h"

#include "core/builder.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

void ingest_error(struct ingest *g, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	g->hooks.error(g->hooks.ctx, text);
}

void ingest_refused(struct ingest *g)
{
	g->refused++;
}

const struct options *ingest_options(const struct ingest *g)
{
	return &g->opt;
}

struct event_base *ingest_base(const struct ingest *g)
{
	return g->base;
}

struct output *ingest_output(const struct ingest *g)
{
	return g->out;
}

bool ingest_running(const struct ingest *g)
{
	return !g->over;
}

struct ingest_reader *ingest_reader_at(const struct ingest *g, uint32_t r)
{
	return &g->readers[r];
}

enum ingest_data_state ingest_reader_state(const struct ingest *g, uint32_t r)
{
	return g->readers[r].state;
}

uint64_t ingest_reader_frames(const struct ingest *g, uint32_t r)
{
	return g->readers[r].frames_received;
}

const uint16_t *ingest_reader_sources(const struct ingest *g, uint32_t r, size_t *count)
{
	*count = g->readers[r].source_count;
	return g->readers[r].sources;
}

int32_t ingest_reader_of_source(const struct ingest *g, uint16_t s)
{
	return s < g->opt.sources ? g->reader_of_source[s] : -1;
}

bool ingest_done(const struct ingest *g)
{
	for (uint32_t r = 0; r < g->opt.readers; r++)
		if (g->readers[r].state == INGEST_DATA_WAITING || g->readers[r].state == INGEST_DATA_STREAMING)
			return false;
	return true;
}

uint64_t ingest_admission_limit(const struct ingest *g)
{
	return g->opt.no_admission ? UINT64_MAX : bld_admission_limit(g->core);
}

const struct bld_counters *ingest_counters(const struct ingest *g)
{
	return bld_counters(g->core);
}

uint32_t ingest_pending(const struct ingest *g)
{
	return bld_pending(g->core);
}

uint64_t ingest_oldest_pending(const struct ingest *g)
{
	return bld_oldest_pending(g->core);
}

const struct hist *ingest_latency(const struct ingest *g)
{
	return g->out != NULL ? output_latency(g->out) : NULL;
}

bool ingest_end_frame(const struct ingest *g, uint16_t s, uint64_t *events)
{
	*events = g->end_frame_events[s];
	return g->end_frame_seen[s];
}

uint64_t ingest_unique_from(const struct ingest *g, uint16_t s)
{
	return bld_unique_from(g->core, s);
}

uint64_t ingest_frames_received(const struct ingest *g)
{
	return g->frames_received;
}

void ingest_snapshot(const struct ingest *g, struct snapshot *s)
{
	s->frames_read = g->frames_received;
	s->first_fragment_ns = g->first_fragment_ns;
	s->last_complete_ns = g->last_complete_ns;
	s->builder = *bld_counters(g->core);
	s->pending = bld_pending(g->core);
	s->admission_limit = g->opt.no_admission ? 0 : bld_admission_limit(g->core);
	s->oldest_pending = bld_oldest_pending(g->core);
	s->decided_below = bld_decided_below(g->core);
	s->core_memory_bytes = (uint64_t)bld_memory_bytes(g->core);
	s->refused_connections += g->refused;
	for (unsigned i = 0; i < g->link_count; i++)
		g->links[i].ops->report(g->links[i].listener, s);
	if (g->out != NULL) {
		s->latency = output_latency(g->out);
		s->events_written = output_events_written(g->out);
		s->record_writes = output_write_calls(g->out);
		s->negative_latencies = output_negative_latencies(g->out);
		s->output_bytes = output_buffer_bytes(g->out);
		struct record_stats rs;
		if (output_record_stats(g->out, &rs)) {
			s->data_format = rs.format;
			s->data_files = rs.files_closed;
			s->data_events_written = rs.events_written;
			s->data_events_in_files = rs.events_in_files;
			s->data_recording = 1;
			s->data_direct_bytes = rs.direct_bytes;
			s->data_frames_in_place = rs.frames_in_place;
			s->data_frames_copied_late = rs.frames_copied_late;
			s->data_bytes_written = rs.bytes_written;
			s->data_events_unwritten = rs.events_unwritten;
			s->data_events_unrecorded = rs.events_unrecorded;
			s->data_write_ns = rs.write_ns;
			s->data_sync_calls = rs.sync_calls;
			s->data_store_bytes = rs.store_bytes;
			s->data_free_bytes = rs.free_bytes;
		}
	}
	/* The links array is the snapshot's to fill: its owner gave room for
	 * every reader. */
	struct snapshot_link *links = (struct snapshot_link *)s->links;
	for (uint32_t r = 0; r < g->opt.readers; r++) {
		const struct ingest_reader *rd = &g->readers[r];
		links[r] = (struct snapshot_link){
			.transport = rd->state == INGEST_DATA_WAITING ? "none" : "tcp",
			.address = rd->address,
			.frames_received = rd->frames_received,
			.end_frames = rd->end_frames,
			.bytes_received = rd->bytes_received,
			.read_calls = rd->read_calls,
			.sources = rd->sources,
			.source_count = rd->source_count,
			.rails = rd->rails,
			.rail = rd->rail,
		};
		if (rd->link != NULL) {
			links[r].transport = rd->link->transport;
			rd->link->describe(rd, &links[r]);
		}
	}
}
