#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "data/link.h"
#include "data/output.h"
#include "data/record.h"
#include "data/ownroute.h"
#include "snapshot.h"

#include "core/builder.h"
#include "core/rails.h"
#include "io/handshake.h"
#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
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
	if (!e->accepted)
		return;
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
	output_keep(g->out, slot, f->source_id, g->taking, g->taking_bytes, f->payload_crc);
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

/* ---- the links' side ---------------------------------------------------- */

/* The checks every HELLO on a data path gets before its reader's. */
static bool ingest_check_hello(struct ingest *g, int fd, const struct ctl_hello *h, const char *peer)
{
	/* The protocol version is checked with the greeting (common/io/handshake.c),
	 * by every listener alike. */
	if (h->run_id != g->opt.run_id) {
		greet_reply_error(fd, peer, "wrong_run", "%s %u is in run %u but the builder is in run %u",
				  ctl_role_name(h->role), h->id, h->run_id, g->opt.run_id);
	} else if (h->channel != CTL_CHANNEL_DATA) {
		greet_reply_error(fd, peer, "wrong_channel", "%s %u greeted the data port as a %s connection",
				  ctl_role_name(h->role), h->id, ctl_channel_name(h->channel));
	} else if (g->over) {
		greet_reply_error(fd, peer, "run_over", "run %u is over", g->opt.run_id);
	} else if ((h->role != CTL_ROLE_SOURCE || h->id >= g->opt.sources) &&
		   (h->role != CTL_ROLE_READER || h->id >= g->opt.readers)) {
		greet_reply_error(fd, peer, "unknown_peer",
				  "%s %u is not part of run %u (%u sources, %u readers)",
				  ctl_role_name(h->role), h->id, g->opt.run_id, g->opt.sources,
				  g->opt.readers);
	} else if (h->role != CTL_ROLE_READER) {
		greet_reply_error(fd, peer, "wrong_role",
				  "the builder's data port takes readers, not a %s", ctl_role_name(h->role));
	} else {
		return true;
	}
	g->refused++;
	return false;
}

/* A source list a reader may claim: in the run, and no other reader's. */
static bool ingest_sources_free(const struct ingest *g, const struct ctl_hello *h, uint16_t *bad)
{
	for (uint32_t i = 0; i < h->source_count; i++) {
		uint16_t s = h->sources[i];
		if (s >= g->opt.sources ||
		    (g->reader_of_source[s] >= 0 && g->reader_of_source[s] != (int32_t)h->id)) {
			*bad = s;
			return false;
		}
	}
	return true;
}

struct ingest_reader *ingest_admit(struct ingest *g, int fd, const struct ctl_hello *h, const char *peer)
{
	return ingest_admit_rail(g, fd, h, peer, 1, 0);
}

struct ingest_reader *ingest_admit_rail(struct ingest *g, int fd, const struct ctl_hello *h,
				 const char *peer, uint32_t listeners, uint32_t on)
{
	if (!ingest_check_hello(g, fd, h, peer))
		return NULL;
	if (!ingest_rail_free(g, fd, h, peer, listeners, on)) {
		g->refused++;
		return NULL;
	}
	struct ingest_reader *rd = &g->readers[h->id];
	uint16_t s;
	if (rd->state == INGEST_DATA_STREAMING && rd->rails > 1 && !ingest_same_sources(rd, h)) {
		greet_reply_error(fd, peer, "bad_sources",
				  "reader %u's rail %u names other sources than its earlier connections",
				  h->id, h->rail);
	} else if (rd->state == INGEST_DATA_STREAMING && rd->rails > 1) {
		return rd;
	} else if (rd->state == INGEST_DATA_STREAMING) {
		greet_reply_error(fd, peer, "duplicate_id", "reader %u already has a data connection from %s",
				  h->id, rd->address);
	} else if (rd->state != INGEST_DATA_WAITING) {
		/* What it carried is in the books: a second stream would be
		 * counted twice. */
		greet_reply_error(fd, peer, "stream_over",
				  "reader %u's data connection from %s has %s after %" PRIu64
				  " frames; a reader streams once per run",
				  h->id, rd->address, rd->state == INGEST_DATA_CLOSED ? "ended" : "failed",
				  rd->frames_received);
	} else if (!ingest_sources_free(g, h, &s)) {
		greet_reply_error(fd, peer, "bad_sources", "reader %u claims source %u, which %s", h->id,
				  s, s >= g->opt.sources ? "is not in this run" : "another reader serves");
	} else {
		return rd;
	}
	g->refused++;
	return NULL;
}

static void ingest_set_sources(struct ingest *g, struct ingest_reader *rd, const struct ctl_hello *h)
{
	for (uint32_t i = 0; i < h->source_count; i++)
		g->reader_of_source[h->sources[i]] = (int32_t)h->id;
	rd->source_count = h->source_count;
	memcpy(rd->sources, h->sources, h->source_count * sizeof h->sources[0]);
}

void ingest_started(struct ingest_reader *rd, const struct link_ops *link, const struct ctl_hello *h,
		 const char *peer)
{
	struct ingest *g = rd->ing;
	uint32_t rails = ingest_rails_of(h);
	rd->rails_greeted |= 1u << h->rail;
	snprintf(rd->rail[h->rail].address, sizeof rd->rail[h->rail].address, "%s", peer);
	if (rd->state == INGEST_DATA_STREAMING)
		return;   /* a later rail of the link */
	ingest_set_sources(g, rd, h);
	rd->rails = rails;
	/* Each source's fragments come in ID order on each rail, not
	 * across them: its progress is the core's per lane. */
	for (uint32_t i = 0; i < h->source_count; i++)
		bld_set_source_lanes(g->core, h->sources[i], rails);
	rd->link = link;
	rd->state = INGEST_DATA_STREAMING;
	rd->pid = h->pid;
	snprintf(rd->address, sizeof rd->address, "%s", peer);
	g->hooks.data_started(g->hooks.ctx);
}

bool ingest_release(struct ingest_reader *rd, const char *why)
{
	struct ingest *g = rd->ing;
	if (rd->state != INGEST_DATA_STREAMING || rd->bytes_received != 0 || rd->frames_received != 0 ||
	    g->over || g->hooks.reader_holds_slot(g->hooks.ctx, rd->id, rd->pid))
		return false;
	log_warn("Reader %u's data connection from %s %s; it carried nothing, so the slot is free for reader %u again",
		 rd->id, rd->address, why, rd->id);
	ingest_close(rd, INGEST_DATA_WAITING);
	for (uint16_t s = 0; s < g->opt.sources; s++)
		if (g->reader_of_source[s] == (int32_t)rd->id)
			g->reader_of_source[s] = -1;
	rd->source_count = 0;
	rd->address[0] = '\0';
	rd->rails = 1;
	rd->rails_greeted = 0;
	return true;
}

enum frm_status ingest_take(struct ingest_reader *rd, const uint8_t *buf, size_t avail, bool exact,
			 size_t *frame_bytes, uint64_t now)
{
	return ingest_take_rail(rd, 0, buf, avail, exact, frame_bytes, now);
}

enum frm_status ingest_take_rail(struct ingest_reader *rd, uint32_t rail, const uint8_t *buf,
			      size_t avail, bool exact, size_t *frame_bytes, uint64_t now)
{
	struct ingest *g = rd->ing;
	struct frm_header h;
	size_t need;
	enum frm_status st = frm_decoder_next(&rd->decoder[rail], buf, avail, &h, frame_bytes, &need);
	if (exact && (st == FRM_NEED_MORE || (st == FRM_OK && *frame_bytes != avail))) {
		/* The reader verified this frame; a record that disagrees with
		 * its own frame's length was damaged in the ring. */
		ingest_error(g, "Reader %u (%s) put a record of %zu bytes in its ring that does not hold exactly one frame (%zu bytes); closing its data path",
			  rd->id, rd->address, avail, st == FRM_OK ? *frame_bytes : need);
		return FRM_ERR_LENGTH;
	}
	if (st == FRM_NEED_MORE)
		return st;
	if (st != FRM_OK) {
		ingest_error(g, "Reader %u (%s) sent a bad frame: %s; closing its data %s", rd->id,
			  rd->address, frm_status_name(st), exact ? "ring" : "connection");
		return st;
	}
	if (h.source_id < g->opt.sources && g->reader_of_source[h.source_id] != (int32_t)rd->id)
		ingest_error(g, "Reader %u forwarded a frame of source %u, which it does not serve",
			  rd->id, h.source_id);
	if (h.flags & FRM_FLAG_END) {
		ingest_end_of(rd, rail, &h);
		return FRM_OK;
	}
	uint64_t event_id = h.event_id;
	bool assigned = g->opt.role != ROLE_BUILDER;
	if (g->opt.role == ROLE_BUILDER && !ingest_map(rd, rail, &h, &event_id, &assigned))
		return rd->held ? FRM_NEED_MORE : FRM_OK;
	rd->frames_received++;
	rd->rail[rail].frames_received++;
	g->frames_received++;
	if (g->first_fragment_ns == 0)
		g->first_fragment_ns = now;
	if (rd->rails > 1 && assigned)
		ingest_check_lane(rd, rail, &h, event_id);
	struct bld_fragment f = {
		.run_id = h.run_id,
		.source_id = h.source_id,
		.event_id = event_id,
		.timestamp_ns = h.timestamp_ns,
		.payload_len = h.payload_len,
		.payload_crc = h.payload_crc,   /* the decoder summed it apart */
	};
	g->taking = buf;
	g->taking_bytes = (uint32_t)*frame_bytes;
	bld_add(g->core, &f, now);
	return FRM_OK;
}

bool ingest_may_take(struct ingest *g, uint64_t now)
{
	return g->hooks.may_take == NULL || g->hooks.may_take(g->hooks.ctx, now);
}

void ingest_progress(struct ingest *g, uint64_t now)
{
	g->hooks.progress(g->hooks.ctx, now);
}

void ingest_close(struct ingest_reader *rd, enum ingest_data_state state)
{
	if (rd->link != NULL)
		rd->link->close(rd);
	rd->state = state;
}

void ingest_after_frames(struct ingest *g)
{
	output_flush(g->out);
	g->hooks.after_frames(g->hooks.ctx);
}

/* ---- the hub's side ----------------------------------------------------- */

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

void ingest_claim(struct ingest *g, const struct ctl_hello *h)
{
	struct ingest_reader *rd = &g->readers[h->id];
	uint16_t bad;
	if (rd->state != INGEST_DATA_WAITING || rd->source_count != 0 || !ingest_sources_free(g, h, &bad))
		return;
	ingest_set_sources(g, rd, h);
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

void ingest_snapshot(const struct ingest *g, struct snapshot *s)
{
	s->frames_read = g->frames_received;
	s->first_fragment_ns = g->first_fragment_ns;
	s->last_complete_ns = g->last_complete_ns;
	s->builder = *bld_counters(g->core);
	s->pending = bld_pending(g->core);
	s->admission_limit = g->opt.no_admission ? 0 : bld_admission_limit(g->core);
	s->oldest_pending = bld_oldest_pending(g->core);
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

/* ---- life --------------------------------------------------------------- */

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
