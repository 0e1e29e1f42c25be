/* Where a builder's records go: the output seam. The output (data/output.c)
 * decides when records are written and what each event's latency is; a
 * sink only formats and writes them, in batches it bounds itself. A second
 * format (docs/RECORDING.md) is a second sink in a file of its own, made in
 * recsink_open(); nothing else changes. Private to builderd. */
#ifndef ES_BD_RECSINK_H
#define ES_BD_RECSINK_H

#include "core/builder.h"

#include <stdbool.h>
#include <stdint.h>

/* An accepted event as the output hands it over at a flush. */
struct recsink_event {
	uint32_t run_id;
	uint64_t event_id;
	uint32_t crc;              /* the filter checksum (spec §3) */
	uint64_t bytes;            /* payload bytes of the event */
	uint64_t latency_ns;       /* to this flush, on the builder's clock */
	int64_t uncertainty_ns;    /* of latency_ns; < 0 when not known */
	uint64_t written_ns;       /* the flush's realtime */
};

struct recsink_stats {
	uint64_t events;           /* records of accepted events written */
	uint64_t expired;          /* records of expired events written */
	uint64_t write_calls;
	uint64_t buffer_bytes;     /* memory its batches hold at most */
	bool failed;               /* a write failed (named in the log once) */
};

struct recsink_ops {
	const char *format;        /* "jsonl" */
	/* Queue a record; a full batch is written first. */
	void (*add_event)(void *self, const struct recsink_event *e);
	void (*add_expired)(void *self, const struct bld_expired *x);
	/* Write every queued record. 0 or -errno. */
	int (*flush)(void *self);
	/* A fenced builder: drop what is queued, close, write nothing more;
	 * returns the records dropped. */
	uint64_t (*seal)(void *self);
	/* Flush, close and free; false if a write failed at any time. */
	bool (*close)(void *self);
	void (*stats)(const void *self, struct recsink_stats *out);
};

struct recsink {
	const struct recsink_ops *ops;
	void *self;
};

/* The sink of format (NULL: "jsonl") writing into dir, with batches of
 * up to batch_events records for up to `sources` sources. false (logged)
 * on an unknown format or a file that cannot be made. */
bool recsink_open(struct recsink *out, const char *format, const char *dir, uint32_t batch_events,
	      uint16_t sources);

/* The JSON-lines sink: events.jsonl and expired.jsonl (data/recsink_jsonl.c). */
bool recsink_jsonl_open(struct recsink *out, const char *dir, uint32_t batch_events,
		    uint16_t sources);

#endif
