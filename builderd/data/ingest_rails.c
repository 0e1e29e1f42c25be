/* The data side's rails (core/rails.h): each reader's TCP link is one
 * connection per rail, greeted apart, each with its lane of the events. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include "core/builder.h"
#include "io/handshake.h"

#include <inttypes.h>
#include <string.h>

uint32_t ingest_rails_of(const struct ctl_hello *h)
{
	return h->rails != 0 ? h->rails : 1;
}

/* A HELLO's rail against the reader's earlier connections and the
 * builder's listeners (it came to listener on; each rail's URL is the
 * listener of that rail): true when it may be welcomed. */
bool ingest_rail_free(struct ingest *g, int fd, const struct ctl_hello *h, const char *peer,
		   uint32_t listeners, uint32_t on)
{
	const struct ingest_reader *rd = &g->readers[h->id];
	bool streaming = rd->state == INGEST_DATA_STREAMING;
	uint32_t rails = ingest_rails_of(h);
	if (rails > listeners || h->rail >= rails)
		greet_reply_error(fd, peer, "bad_rail",
				  "reader %u greeted rail %u of %u, but the builder listens on %u address%s",
				  h->id, h->rail, h->rails, listeners, listeners == 1 ? "" : "es");
	else if (streaming && rails != rd->rails)
		greet_reply_error(fd, peer, "bad_rail",
				  "reader %u greeted rail %u of %u, but its earlier connections said %u rail%s",
				  h->id, h->rail, h->rails, rd->rails, rd->rails == 1 ? "" : "s");
	else if (streaming && rd->rails > 1 && (rd->rails_greeted >> h->rail) & 1u)
		greet_reply_error(fd, peer, "duplicate_id",
				  "reader %u's rail %u of %u is already connected from %s", h->id,
				  h->rail, h->rails, rd->rail[h->rail].address);
	else if (listeners > 1 && h->rail != on)
		greet_reply_error(fd, peer, "bad_rail",
				  "reader %u greeted rail %u of %u on the builder's rail %u address: its rails' URLs are crossed",
				  h->id, h->rail, h->rails, on);
	else
		return true;
	return false;
}

/* A later rail names the sources its first did. */
bool ingest_same_sources(const struct ingest_reader *rd, const struct ctl_hello *h)
{
	return h->source_count == rd->source_count &&
	       memcmp(h->sources, rd->sources, rd->source_count * sizeof rd->sources[0]) == 0;
}

/* A source's END frame on rail: its stream here is over once every rail
 * of its reader's link delivered one. */
void ingest_end_of(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h)
{
	struct ingest *g = rd->ing;
	rd->end_frames++;
	if (h->source_id >= g->opt.sources)
		return;
	uint16_t s = h->source_id;
	if (g->end_frame_rails[s] != 0 && g->end_frame_events[s] != h->event_id)
		ingest_error(g, "Reader %u's END frames of source %u disagree: %" PRIu64
			  " events on rail %u, %" PRIu64 " on an earlier one",
			  rd->id, s, h->event_id, rail, g->end_frame_events[s]);
	g->end_frame_rails[s] |= (uint8_t)(1u << rail);
	g->end_frame_events[s] = h->event_id;
	uint32_t every = rd->rails > 1 ? (1u << rd->rails) - 1u : 1u;
	if ((g->end_frame_rails[s] & every) == every)
		g->end_frame_seen[s] = true;
}

/* A fragment on another rail than its lane's: counted, and an error. */
void ingest_check_lane(struct ingest_reader *rd, uint32_t rail, const struct frm_header *h,
		    uint64_t event_id)
{
	struct ingest *g = rd->ing;
	uint32_t lane = bld_lane_of(g->core, h->source_id, event_id);
	if (lane == rail)
		return;
	rd->rail[rail].frames_wrong_rail++;
	if (g->wrong_rail++ == 0)
		ingest_error(g, "Reader %u sent a fragment of event %" PRIu64 " (source %u) on rail %u of %u, but its lane is rail %u: reader and builder disagree on the lanes (frames_wrong_rail)",
			  rd->id, h->event_id, h->source_id, rail, rd->rails, lane);
}

uint32_t ingest_reader_rails(const struct ingest *g, uint32_t r, const struct snapshot_rail **rail)
{
	const struct ingest_reader *rd = &g->readers[r];
	*rail = rd->rail;
	return rd->rails > 1 ? rd->rails : 0;
}
