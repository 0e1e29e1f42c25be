/* What the hub's modules (books, watchdog, peerlink) know of the data side:
 * each reader's data path, which reader serves which source, what the
 * builders received and made of it. In --role both it is this process's
 * ingest (dataview_from_ingest); in --role hub it is the builders' END reports
 * (fleet.h), since the hub receives no data. Private to builderd. */
#ifndef ES_BD_DATAVIEW_H
#define ES_BD_DATAVIEW_H

#include "data/ingest.h"

#include "core/acct.h"
#include "core/builder.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dataview_ops {
	enum ingest_data_state (*reader_state)(const void *ctx, uint32_t r);
	/* Frames the builder side received from reader r. */
	uint64_t (*reader_frames)(const void *ctx, uint32_t r);
	const uint16_t *(*reader_sources)(const void *ctx, uint32_t r, size_t *count);
	/* -1 when no reader is known to serve s. */
	int32_t (*reader_of_source)(const void *ctx, uint16_t s);
	/* Cuts reader r's data path if this side holds one. */
	void (*cut)(void *ctx, uint32_t r);
	/* Source s's END frame, when one arrived: the event count it announced. */
	bool (*end_frame)(const void *ctx, uint16_t s, uint64_t *events);
	uint64_t (*unique_from)(const void *ctx, uint16_t s);
	uint64_t (*frames_received)(const void *ctx);
	const struct bld_counters *(*counters)(const void *ctx);
	/* Reader r's link of two rails or more: its connections' counters in
	 * *rail, their count returned; 0 otherwise. NULL: this side has none
	 * (--role hub, where the builders' END reports say it). */
	uint32_t (*reader_rails)(const void *ctx, uint32_t r, const struct snapshot_rail **rail);
	/* This process's recording, when it records: its books' figures.
	 * NULL: this side has none (--role hub, where each builder's END
	 * report says it). */
	bool (*recording)(const void *ctx, struct acct_recording *out);
};

struct dataview {
	const struct dataview_ops *ops;
	void *ctx;
};

/* The view of this process's ingest. */
void dataview_from_ingest(struct dataview *d, struct ingest *g);

static inline enum ingest_data_state dataview_reader_state(const struct dataview *d, uint32_t r)
{
	return d->ops->reader_state(d->ctx, r);
}

static inline uint64_t dataview_reader_frames(const struct dataview *d, uint32_t r)
{
	return d->ops->reader_frames(d->ctx, r);
}

static inline const uint16_t *dataview_reader_sources(const struct dataview *d, uint32_t r,
						 size_t *count)
{
	return d->ops->reader_sources(d->ctx, r, count);
}

static inline uint32_t dataview_reader_rails(const struct dataview *d, uint32_t r,
					const struct snapshot_rail **rail)
{
	return d->ops->reader_rails != NULL ? d->ops->reader_rails(d->ctx, r, rail) : 0;
}

static inline int32_t dataview_reader_of_source(const struct dataview *d, uint16_t s)
{
	return d->ops->reader_of_source(d->ctx, s);
}

static inline void dataview_cut(const struct dataview *d, uint32_t r)
{
	d->ops->cut(d->ctx, r);
}

static inline bool dataview_end_frame(const struct dataview *d, uint16_t s, uint64_t *events)
{
	return d->ops->end_frame(d->ctx, s, events);
}

static inline uint64_t dataview_unique_from(const struct dataview *d, uint16_t s)
{
	return d->ops->unique_from(d->ctx, s);
}

static inline uint64_t dataview_frames_received(const struct dataview *d)
{
	return d->ops->frames_received(d->ctx);
}

static inline const struct bld_counters *dataview_counters(const struct dataview *d)
{
	return d->ops->counters(d->ctx);
}

static inline bool dataview_recording(const struct dataview *d, struct acct_recording *out)
{
	return d->ops->recording != NULL && d->ops->recording(d->ctx, out);
}

#endif
