/* A source's data stream to its reader: frames encoded in place into one
 * send buffer, allocated once, and written in batches on the welcomed data
 * connection. The stream counts what it puts on the wire (frags_sent,
 * frags_duplicated, frames_wire, bytes_wire, write_calls, write_blocked)
 * and, when the connection fails or the source stops, what it never did
 * (frames_unsent). Nothing here allocates once created. */
#ifndef ES_SOURCED_STREAM_H
#define ES_SOURCED_STREAM_H

#include "options.h"
#include "report.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct src_stream;

/* A buffer of opt->batch_bytes, but never less than a fragment, its
 * duplicate and the END frame. NULL when out of memory. */
struct src_stream *stream_create(const struct src_options *opt, struct src_counters *c);

/* Closes the connection if open; NULL is allowed. */
void stream_destroy(struct src_stream *st);

/* The welcomed data connection; on_writable(arg) runs when a write that
 * found the socket full may go on. Returns 0, or -ENOMEM with fd closed. */
int stream_attach(struct src_stream *st, struct event_base *base, int fd,
		  event_callback_fn on_writable, void *arg);

/* Whether the connection is open. */
bool stream_open(const struct src_stream *st);

/* Room for one more fragment, its duplicate and the END frame. */
bool stream_has_room(const struct src_stream *st);

/* Appends the fragment of event_id stamped timestamp_ns, and its duplicate
 * when the seed's faults duplicate it. */
void stream_append_fragment(struct src_stream *st, uint64_t event_id, uint64_t timestamp_ns);

/* Appends the fragment of event_id with a payload given (--replay: as a
 * run recorded it, at most the configured payload size): its one copy in
 * this process. */
void stream_append_payload(struct src_stream *st, uint64_t event_id, uint64_t timestamp_ns,
			   const uint8_t *payload, uint32_t len);

/* Appends the END frame (its event ID the run's event count). */
void stream_append_end(struct src_stream *st);
bool stream_end_queued(const struct src_stream *st);

/* A frame written by the caller: where it goes (room for a fragment, as
 * stream_has_room() says), the sequence number it takes, and its n bytes
 * committed. The caller counts it. */
uint8_t *stream_space(struct src_stream *st);
uint64_t stream_take_sequence(struct src_stream *st);
void stream_commit(struct src_stream *st, size_t n);

/* Writes what the buffer holds. Returns 0 when all is written, -EAGAIN
 * when the socket is full (the write event is armed, or the dribble of
 * --dribble waits a turn), or another -errno. */
int stream_flush(struct src_stream *st);

/* The connection failed or the source stopped: the whole frames not yet
 * written count as unsent (the fragments among them as abandoned, by the
 * source's books), and the buffer is emptied. */
void stream_count_unsent(struct src_stream *st);

/* No more writes: the write event is dropped. */
void stream_pause(struct src_stream *st);

/* Shuts the connection down and closes it; again is a no-op. */
void stream_close(struct src_stream *st);

/* --stall dribble: only the first frame of the buffer stays (a fragment
 * without its duplicate); stream_send_byte() then sends one more byte of
 * it, never the last. It returns 1 when a byte went, 0 when the socket is
 * full, and -1 when there is nothing more to send or the reader gave up. */
void stream_keep_first_frame(struct src_stream *st);
int stream_send_byte(struct src_stream *st);

#endif
