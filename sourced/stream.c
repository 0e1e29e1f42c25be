#include "stream.h"

#include "core/gen.h"
#include "sys/clock.h"
#include "wire/frame.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct src_stream {
	const struct src_options *opt;
	struct src_counters *c;
	int fd;
	struct event *ev_write;
	uint8_t *out;
	size_t cap;
	size_t len;
	size_t sent;
	uint64_t sequence;
	bool end_queued;
};

static size_t stream_frame_bytes(const struct src_stream *st)
{
	return FRM_HEADER_BYTES + st->opt->payload_bytes;
}

struct src_stream *stream_create(const struct src_options *opt, struct src_counters *c)
{
	struct src_stream *st = calloc(1, sizeof *st);
	if (st == NULL)
		return NULL;
	st->opt = opt;
	st->c = c;
	st->fd = -1;
	size_t least = 2 * stream_frame_bytes(st) + FRM_HEADER_BYTES;
	st->cap = opt->batch_bytes > least ? opt->batch_bytes : least;
	st->out = malloc(st->cap);
	if (st->out == NULL) {
		free(st);
		return NULL;
	}
	return st;
}

void stream_destroy(struct src_stream *st)
{
	if (st == NULL)
		return;
	if (st->ev_write != NULL)
		event_free(st->ev_write);
	if (st->fd >= 0)
		close(st->fd);
	free(st->out);
	free(st);
}

int stream_attach(struct src_stream *st, struct event_base *base, int fd,
		  event_callback_fn on_writable, void *arg)
{
	st->ev_write = event_new(base, fd, EV_WRITE, on_writable, arg);
	if (st->ev_write == NULL) {
		close(fd);
		return -ENOMEM;
	}
	st->fd = fd;
	return 0;
}

bool stream_open(const struct src_stream *st)
{
	return st->fd >= 0;
}

bool stream_has_room(const struct src_stream *st)
{
	return st->cap - st->len >= 2 * stream_frame_bytes(st) + FRM_HEADER_BYTES;
}

void stream_append_payload(struct src_stream *st, uint64_t event_id, uint64_t timestamp_ns,
			   const uint8_t *payload, uint32_t len)
{
	struct frm_header h = { .source_id = (uint16_t)st->opt->id, .run_id = st->opt->run_id,
				.event_id = event_id, .sequence = st->sequence++,
				.timestamp_ns = timestamp_ns, .payload_len = len };
	size_t n = frm_encode(st->out + st->len, &h, payload);

	st->len += n;
	st->c->frags_sent++;
	st->c->frames_wire++;
	st->c->bytes_wire += n;
}

void stream_append_fragment(struct src_stream *st, uint64_t event_id, uint64_t timestamp_ns)
{
	const struct src_options *o = st->opt;
	uint16_t sid = (uint16_t)o->id;
	uint8_t *frame = st->out + st->len;
	struct frm_header h = {
		.source_id = sid,
		.run_id = o->run_id,
		.event_id = event_id,
		.sequence = st->sequence++,
		.timestamp_ns = timestamp_ns,
		.payload_len = o->payload_bytes,
	};
	gen_payload(frame + FRM_HEADER_BYTES, o->payload_bytes, o->seed, o->run_id, event_id, sid);
	size_t n = frm_encode_in_place(frame, &h);
	st->len += n;
	st->c->frags_sent++;
	st->c->frames_wire++;
	st->c->bytes_wire += n;
	if (gen_is_duplicated(&o->faults, o->seed, o->run_id, event_id, sid)) {
		uint8_t *copy = st->out + st->len;
		memcpy(copy + FRM_HEADER_BYTES, frame + FRM_HEADER_BYTES, o->payload_bytes);
		h.sequence = st->sequence++;
		n = frm_encode_in_place(copy, &h);
		st->len += n;
		st->c->frags_duplicated++;
		st->c->frames_wire++;
		st->c->bytes_wire += n;
	}
}

void stream_append_end(struct src_stream *st)
{
	struct frm_header h = {
		.flags = FRM_FLAG_END,
		.source_id = (uint16_t)st->opt->id,
		.run_id = st->opt->run_id,
		.event_id = st->opt->events,
		.sequence = st->sequence++,
		.timestamp_ns = clk_realtime_ns(),
		.payload_len = 0,
	};
	st->len += frm_encode(st->out + st->len, &h, NULL);
	st->end_queued = true;
}

bool stream_end_queued(const struct src_stream *st)
{
	return st->end_queued;
}

uint8_t *stream_space(struct src_stream *st)
{
	return st->out + st->len;
}

uint64_t stream_take_sequence(struct src_stream *st)
{
	return st->sequence++;
}

void stream_commit(struct src_stream *st, size_t n)
{
	st->len += n;
}

int stream_flush(struct src_stream *st)
{
	while (st->sent < st->len) {
		size_t chunk = st->opt->dribble ? 1 : st->len - st->sent;
		ssize_t n = send(st->fd, st->out + st->sent, chunk, MSG_NOSIGNAL);
		st->c->write_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				st->c->write_blocked++;
				event_add(st->ev_write, NULL);
				return -EAGAIN;
			}
			return -errno;
		}
		st->sent += (size_t)n;
		if (st->opt->dribble && st->sent < st->len) {
			/* Let the reader see this byte on its own. */
			event_add(st->ev_write, NULL);
			return -EAGAIN;
		}
	}
	st->len = 0;
	st->sent = 0;
	return 0;
}

void stream_count_unsent(struct src_stream *st)
{
	/* A frame cut by the failure was partly on the wire; count from the
	 * next whole frame. Frames here are ours, so their headers are sound. */
	size_t pos = 0;
	uint64_t previous_event = UINT64_MAX;
	while (pos < st->len) {
		struct frm_header h;
		frm_parse_header(st->out + pos, &h);
		size_t len = FRM_HEADER_BYTES + (h.payload_len <= FRM_MAX_PAYLOAD_BYTES ? h.payload_len : 0);
		if (pos >= st->sent && !(h.flags & FRM_FLAG_END)) {
			st->c->frames_unsent++;
			st->c->frames_wire--;
			/* A duplicate directly follows its original. */
			if (h.event_id == previous_event)
				st->c->frags_duplicated--;
			else
				st->c->frags_sent--;   /* counted as abandoned instead */
		}
		previous_event = h.event_id;
		pos += len;
	}
	st->len = st->sent = 0;
}

void stream_pause(struct src_stream *st)
{
	if (st->ev_write != NULL)
		event_del(st->ev_write);
}

void stream_close(struct src_stream *st)
{
	if (st->fd < 0)
		return;
	stream_pause(st);
	shutdown(st->fd, SHUT_WR);
	close(st->fd);
	st->fd = -1;
}

void stream_keep_first_frame(struct src_stream *st)
{
	if (st->len <= stream_frame_bytes(st))
		return;
	st->len = stream_frame_bytes(st);
	st->c->frags_duplicated--;
	st->c->frames_wire--;
}

int stream_send_byte(struct src_stream *st)
{
	if (st->fd < 0 || st->len - st->sent <= 1)
		return -1;
	ssize_t n = send(st->fd, st->out + st->sent, 1, MSG_NOSIGNAL);
	st->c->write_calls++;
	if (n == 1) {
		st->sent++;
		return 1;
	}
	return n < 0 && errno != EAGAIN && errno != EINTR ? -1 : 0;
}
