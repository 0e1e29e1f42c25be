/* The links' side of the ingest: each reader's greeting checked against
 * the run and the other readers, its data path started and ended, every
 * frame taken from a link into the builder core. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "data/link.h"
#include "data/output.h"
#include "data/ownroute.h"

#include "core/builder.h"
#include "core/rails.h"
#include "io/handshake.h"
#include "sys/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			 size_t *frame_bytes, uint64_t now, struct ingest_in_place *in_place)
{
	struct ingest *g = rd->ing;
	if (in_place != NULL)
		in_place->kept = false;
	g->in_place = in_place;
	enum frm_status st = ingest_take_rail(rd, 0, buf, avail, exact, frame_bytes, now);
	g->in_place = NULL;
	return st;
}

bool ingest_keeps_in_place(const struct ingest *g)
{
	return g->opt.record_format != OPTIONS_RECORD_NONE && g->opt.record_keep == OPTIONS_KEEP_IN_PLACE;
}

bool ingest_refers(const struct ingest *g, const struct ingest_in_place *kept, const uint8_t *frame)
{
	return output_refers(g->out, kept->slot, kept->src, frame);
}

void ingest_own(struct ingest *g, const struct ingest_in_place *kept)
{
	output_own(g->out, kept->slot, kept->src);
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
	if (g->hooks.progress != NULL)
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

void ingest_claim(struct ingest *g, const struct ctl_hello *h)
{
	struct ingest_reader *rd = &g->readers[h->id];
	uint16_t bad;
	if (rd->state != INGEST_DATA_WAITING || rd->source_count != 0 || !ingest_sources_free(g, h, &bad))
		return;
	ingest_set_sources(g, rd, h);
}
