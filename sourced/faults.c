#include "faults.h"

#include "core/gen.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/frame.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>

/* Where payload_len is in a frame's header (docs/fragment-format.md). */
#define FAULT_LENGTH_OFFSET 34u

bool fault_inject_due(const struct src_options *o, const struct src_counters *c)
{
	return o->inject != SRC_INJECT_NONE && c->frames_wire - c->frames_bad_injected >= o->inject_after;
}

size_t fault_encode_bad(const struct src_options *o, uint64_t sequence, uint64_t timestamp_ns,
			uint8_t *frame)
{
	uint64_t event_id = o->first_event;
	struct frm_header h = {
		.source_id = (uint16_t)o->id,
		.run_id = o->run_id,
		.event_id = event_id,
		.sequence = sequence,
		.timestamp_ns = timestamp_ns,
		.payload_len = o->payload_bytes,
	};
	gen_payload(frame + FRM_HEADER_BYTES, o->payload_bytes, o->seed, o->run_id, event_id,
		    (uint16_t)o->id);
	size_t n;
	switch (o->inject) {
	case SRC_INJECT_RUN:
	case SRC_INJECT_OLD_RUN:
		h.run_id = o->inject == SRC_INJECT_RUN ? o->run_id + 1 : o->run_id - 1;
		n = frm_encode_in_place(frame, &h);
		break;
	case SRC_INJECT_LENGTH:
		/* A header that announces more than a frame may carry, and no
		 * payload: the reader refuses it on the length alone. Encoding
		 * that length would have the CRC read a megabyte past the
		 * buffer, so the header is made for none and the length put in
		 * after (big-endian at FAULT_LENGTH_OFFSET). */
		h.payload_len = 0;
		n = frm_encode_in_place(frame, &h);
		for (unsigned i = 0; i < 4; i++)
			frame[FAULT_LENGTH_OFFSET + i] = (uint8_t)((FRM_MAX_PAYLOAD_BYTES + 1u) >> (24 - 8 * i));
		break;
	default:
		n = frm_encode_in_place(frame, &h);
		break;
	}
	switch (o->inject) {
	case SRC_INJECT_CRC:
		frame[n - 1] ^= 0x5a;   /* last payload byte, or the CRC itself */
		break;
	case SRC_INJECT_MAGIC:
		frame[1] ^= 0xff;
		break;
	case SRC_INJECT_VERSION:
		frame[2] = 2;
		break;
	case SRC_INJECT_FLAGS:
		frame[3] = 0x80;
		break;
	case SRC_INJECT_TRUNCATE:
		n = n / 2;
		break;
	default:
		break;
	}
	return n;
}

void fault_inject(struct src_stream *st, const struct src_options *o, struct src_counters *c)
{
	size_t n = fault_encode_bad(o, stream_take_sequence(st), clk_realtime_ns(), stream_space(st));
	stream_commit(st, n);
	c->frames_wire++;
	c->frames_bad_injected++;
	c->bytes_wire += n;
	log_info("Source %u injected a %s frame after %" PRIu64 " good frames", o->id,
		 o->inject == SRC_INJECT_TRUNCATE ? "truncated" : "corrupt", c->frames_wire - 1);
}

bool fault_stall_due(const struct src_options *o, const struct src_counters *c)
{
	return o->stall != SRC_STALL_NONE && c->frames_wire >= o->stall_after;
}

struct fault_stall {
	struct src_stream *stream;
	struct event *ev;
};

/* One more byte of the stuck frame, never its last. */
static void fault_on_stall_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fault_stall *stall = arg;
	if (stream_send_byte(stall->stream) < 0)
		event_del(stall->ev);   /* nothing more to send, or the reader gave up on us */
}

struct fault_stall *fault_stall_start(struct event_base *base, const struct src_options *o,
				    struct src_stream *st, const struct src_counters *c,
				    bool has_next, uint64_t event_id)
{
	log_warn("Source %u: the data stream stalls after %" PRIu64 " frames (--stall %s); the control link goes on",
		 o->id, c->frames_wire, o->stall == SRC_STALL_DRIBBLE ? "dribble" : "blackhole");
	if (o->stall != SRC_STALL_DRIBBLE || !has_next)
		return NULL;
	stream_append_fragment(st, event_id, clk_realtime_ns());
	/* Only the fragment is dribbled, not its duplicate. */
	stream_keep_first_frame(st);
	struct fault_stall *stall = calloc(1, sizeof *stall);
	if (stall == NULL)
		return NULL;
	stall->stream = st;
	stall->ev = event_new(base, -1, EV_PERSIST, fault_on_stall_tick, stall);
	struct timeval tv = { 0, 10000 };
	if (stall->ev == NULL || event_add(stall->ev, &tv) != 0) {
		fault_stall_free(stall);
		return NULL;
	}
	return stall;
}

void fault_stall_free(struct fault_stall *stall)
{
	if (stall == NULL)
		return;
	if (stall->ev != NULL)
		event_free(stall->ev);
	free(stall);
}
