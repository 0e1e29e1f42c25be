/* The frames each destination (a data connection) has yet to write, how
 * many it holds against its limits, and where each source's oldest
 * unwritten frame starts. Frames stay in their
 * source's receive buffer: a queue holds only their stream positions and
 * lengths, so a frame is never copied to be queued. A frame goes to one
 * destination; a source's END frame to every destination still open.
 * Destinations write in any order against each other, so a source's
 * buffer is reclaimed up to its oldest frame not yet written to all of its
 * destinations (outq_oldest()).
 *
 * The limits. A destination holds at most limit_frames frames and
 * limit_bytes bytes (outq_set_limits()), a frame counted whole until its
 * last byte is written or it is dropped, END frames aside (every
 * destination has room for one per source beside them). At the limit a
 * push is refused (-ENOBUFS) and counted: the reader then leaves the frame
 * in its source's buffer and stops reading that source until the
 * destination drains, so a slow builder holds only the frames bound for it,
 * and then pushes back on the sources through TCP, never by dropping. An
 * empty queue takes any one frame, so a frame larger than the byte limit
 * still passes, alone.
 *
 * Pure: no I/O, and nothing is allocated after outq_create(). */
#ifndef ES_READOUTD_OUTQ_H
#define ES_READOUTD_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A run of whole frames (the first maybe begun) of one source, contiguous
 * in its stream. */
struct outq_span {
	uint16_t source;      /* the source's index */
	uint64_t pos;         /* stream position of its first byte */
	size_t len;
};

/* A frame whose last byte a destination wrote, or that it dropped. */
typedef void (*outq_done_fn)(void *arg, uint32_t dest, uint16_t source, uint32_t len, bool end);

struct outq;

/* sources sources, dests destinations, each destination holding at most
 * dest_frames frames and each source at most source_frames unwritten.
 * NULL without memory or with a zero count. */
struct outq *outq_create(uint16_t sources, uint32_t dests, uint32_t dest_frames,
			 uint32_t source_frames);
void outq_destroy(struct outq *q);

/* Every destination's limits (both >= 1; -EINVAL otherwise). Until set, a
 * destination is bounded by outq_create()'s dest_frames only. */
int outq_set_limits(struct outq *q, uint32_t limit_frames, uint64_t limit_bytes);

/* Bytes outq_create() allocated. */
size_t outq_memory_bytes(const struct outq *q);

/* A frame of source s at stream position pos for destination d. -ENOBUFS:
 * d is at its limits (counted: push it again once outq_room() says so);
 * -ENOSPC: d's or s's queue is full; -EPIPE: d is closed. */
int outq_push(struct outq *q, uint16_t s, uint32_t d, uint64_t pos, uint32_t len);
/* Source s's END frame, for every destination still open; -ENOSPC when
 * one of them is full (nothing queued). */
int outq_push_end(struct outq *q, uint16_t s, uint64_t pos, uint32_t len);

/* Up to max spans of d's unwritten bytes, in order: the first begins where
 * d's last write stopped, and adjacent frames of one source are one span.
 * It stops once the spans hold max_bytes or more (whole frames), so a
 * long queue is not walked for a write that takes a part of it. */
size_t outq_gather(const struct outq *q, uint32_t d, struct outq_span *spans, size_t max,
		   size_t max_bytes);
/* bytes of what outq_gather() gave were written to d, in order; done is
 * called for each frame whose last byte went. */
void outq_written(struct outq *q, uint32_t d, size_t bytes, outq_done_fn done, void *arg);

/* Destination d is gone: done is called for each frame it had queued (a
 * frame half written included), and it takes no more. */
void outq_close(struct outq *q, uint32_t d, outq_done_fn done, void *arg);
bool outq_closed(const struct outq *q, uint32_t d);

/* The stream position of source s's oldest frame not yet written to all of
 * its destinations; false when it has none. */
bool outq_oldest(struct outq *q, uint16_t s, uint64_t *pos);

/* Whether d's limits take a frame of len bytes now. */
bool outq_room(const struct outq *q, uint32_t d, uint32_t len);

/* What destination d holds against its limits (END frames aside) and has
 * held: for the reader's metrics. */
struct outq_view {
	uint64_t frames;          /* queued now, each until its last byte went */
	uint64_t bytes;
	uint64_t peak_frames;     /* the most queued at once */
	uint64_t peak_bytes;
	uint64_t pushed;          /* frames taken in all */
	uint64_t refused;         /* pushes refused at the limits */
};
void outq_view(const struct outq *q, uint32_t d, struct outq_view *v);

/* Frames queued for d (END frames included); its bytes not yet written. */
uint32_t outq_frames(const struct outq *q, uint32_t d);
uint64_t outq_bytes(const struct outq *q, uint32_t d);
/* Source s's frames not yet written to all their destinations, END frames
 * aside. */
uint32_t outq_source_unwritten(const struct outq *q, uint16_t s);

#endif
