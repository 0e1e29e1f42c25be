/* The builder's record files: events.jsonl (accepted events) and
 * expired.jsonl. Records are collected in fixed buffers and written with one
 * write() per file per flush; an event's latency is measured at that write,
 * so it covers everything up to the record leaving the process. */
#ifndef ES_OUTPUT_H
#define ES_OUTPUT_H

#include "builder.h"
#include "hist.h"

#include <stdbool.h>
#include <stdint.h>

struct out;

/* Opens DIR/events.jsonl and DIR/expired.jsonl. flush_every bounds the
 * records held before a write. source_offsets_ns[source] (may change during
 * the run) is subtracted from source timestamps: peer clock minus builder
 * clock, 0 on one host. */
struct out *out_open(const char *dir, uint32_t flush_every, uint16_t sources,
		     const int64_t *source_offsets_ns);

/* Queues an accepted event's record; writes when flush_every are queued. */
void out_add_event(struct out *o, const struct bld_event *event);

/* Queues an expired event's record. */
void out_add_expired(struct out *o, const struct bld_expired *expired);

/* Writes every queued record; latencies are taken now. Returns 0 or -errno. */
int out_flush(struct out *o);

/* Latency histogram of the records written so far. */
const struct hist *out_latency(const struct out *o);

/* Records written, records whose corrected latency came out negative
 * (clamped to 0: a clock offset larger than its estimate), write calls. */
uint64_t out_events_written(const struct out *o);
uint64_t out_negative_latencies(const struct out *o);
uint64_t out_write_calls(const struct out *o);

/* Memory held by the output buffers. */
uint64_t out_buffer_bytes(const struct out *o);

/* Flushes and closes; false if a write failed at any time. */
bool out_close(struct out *o);

#endif
