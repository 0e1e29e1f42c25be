/* The builder's records: accepted events and expired ones, handed to a
 * sink (data/recsink.h: the format, today events.jsonl and expired.jsonl)
 * in batches of flush_every, each batch one write per file; an event's
 * latency is measured at that flush, so it covers everything up to the
 * record leaving the process. Each
 * latency is put on the builder's clock with the offset of the source whose
 * timestamp was earliest, and carries that offset's uncertainty
 * (docs/CLOCKS.md). */
#ifndef ES_OUTPUT_H
#define ES_OUTPUT_H

#include "core/builder.h"
#include "core/hist.h"

#include <stdbool.h>
#include <stdint.h>

struct output;
struct record;
struct record_stats;

/* A bound that is not known. */
#define OUTPUT_UNBOUNDED INT64_C(-1)

/* How one source's timestamps are put on the builder's clock. */
struct output_clock {
	int64_t offset_ns;   /* subtracted from the source's timestamps: its
			      * clock minus the builder's as applied */
	int64_t bound_ns;    /* |true offset - offset_ns| at at_ns;
			      * OUTPUT_UNBOUNDED when not known */
	int64_t at_ns;       /* builder clock (clk_realtime_ns) of bound_ns */
	double drift_ppm;    /* the bound grows by drift_ppm * |now - at_ns| */
};

/* Uncertainty of the latencies written so far. */
struct output_uncertainty {
	uint64_t bounded;    /* records whose uncertainty is known */
	uint64_t unbounded;  /* records whose source's offset had no bound */
	int64_t max_ns;      /* largest known uncertainty; 0 when none */
};

/* Opens DIR/events.jsonl and DIR/expired.jsonl. flush_every bounds the
 * records held before a write. source_offsets_ns[source] (NULL: 0) are the
 * starting offsets, with no bound until output_set_clock() gives one.
 * data (NULL: none) records the accepted events' fragments
 * (data/record.h); the output owns it from here, even when it fails. */
struct output *output_open(const char *dir, uint32_t flush_every, uint16_t sources,
		     const int64_t *source_offsets_ns, struct record *data);

/* When recording: a unique fragment of the event in window slot `slot`
 * (core/builder.h's on_unique), kept until its event is written; a slot
 * still held by an earlier event is written first. in_place: referred to
 * where it lies (data/record.h's record_keep); true when it was. */
bool output_keep(struct output *o, uint32_t slot, uint16_t source, const uint8_t *frame,
		 uint32_t frame_bytes, uint32_t payload_crc, bool in_place);

/* A frame kept in place: whether slot's cell of source still refers to
 * it, and a copy of it into the cell when its place must be handed back. */
bool output_refers(const struct output *o, uint32_t slot, uint16_t source, const uint8_t *frame);
void output_own(struct output *o, uint32_t slot, uint16_t source);

/* The slot's event was decided and will not be written (filtered out). */
void output_forget(struct output *o, uint32_t slot);

/* The run's end for the event files (data/record.h's record_end): false,
 * with *why, when not every record written has its data written. */
bool output_end_data(struct output *o, char *why, size_t why_size);

/* The recorder's figures; false when not recording. */
bool output_record_stats(const struct output *o, struct record_stats *out);

/* Sets how later records of source are corrected; takes effect at the next
 * flush. */
void output_set_clock(struct output *o, uint16_t source, const struct output_clock *clock);

/* Queues an accepted event's record; writes when flush_every are queued. */
void output_add_event(struct output *o, const struct bld_event *event);

/* Queues an expired event's record. */
void output_add_expired(struct output *o, const struct bld_expired *expired);

/* Writes every queued record; latencies are taken now. Returns 0 or -errno. */
int output_flush(struct output *o);

/* Latency histogram of the records written so far. */
const struct hist *output_latency(const struct output *o);

/* The uncertainty of every record written whose uncertainty is known. */
const struct hist *output_uncertainty_hist(const struct output *o);

/* Over every record written, and over those whose earliest timestamp came
 * from source. A percentile of latencies each within U of the truth is
 * itself within U of the true percentile (docs/CLOCKS.md). */
struct output_uncertainty output_uncertainty(const struct output *o);
struct output_uncertainty output_source_uncertainty(const struct output *o, uint16_t source);

/* Records written, records whose corrected latency came out negative
 * (clamped to 0: a clock offset larger than its estimate), write calls. */
uint64_t output_events_written(const struct output *o);
uint64_t output_negative_latencies(const struct output *o);
uint64_t output_write_calls(const struct output *o);

/* Memory held by the output buffers. */
uint64_t output_buffer_bytes(const struct output *o);

/* A fenced builder (docs/BUILDERS.md): drops the records queued and not
 * yet written, closes both files, and from here on writes nothing, adding
 * and flushing being no-ops. Returns the records dropped. */
uint64_t output_seal(struct output *o);

/* Flushes and closes; false if a write failed at any time. */
bool output_close(struct output *o);

#endif
