#include "source.h"

#include "sys/clock.h"
#include "wire/control.h"
#include "wire/counters.h"
#include "io/ctlclient.h"
#include "wire/frame.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "sys/opt.h"
#include "io/net.h"
#include "sys/procstat.h"
#include "io/prom.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The counters a source reports, from their list (wire/counters.h). */
struct src_counters {
#define SRC_FIELD(name) uint64_t name;
	CNT_LIST_SOURCE(SRC_FIELD)
#undef SRC_FIELD
};

/* A fragment held back by the delay fault: only its identity and the time
 * it was generated, the payload is regenerated when it goes out. */
struct src_delayed {
	uint64_t event_id;
	uint64_t timestamp_ns;
	uint64_t due_ns;
};

enum src_state { SRC_CONNECTING, SRC_WAITING_START, SRC_SENDING, SRC_DRAINING, SRC_REPORTING, SRC_DONE };

struct src {
	struct event_base *base;
	struct src_options opt;
	enum src_state state;
	int status;
	struct ctllink *ctl;
	bool ctl_ready;
	struct greet_dial *dial;       /* the data connection, until welcomed */
	int fd;
	char peer[272];
	struct event *ev_write;
	struct event *ev_pace;
	struct event *ev_progress;
	struct event *ev_stall;        /* --stall dribble: one byte per 10 ms */
	bool data_stalled;             /* --stall: the stream delivers no more */

	uint8_t *out;          /* send buffer, allocated once */
	size_t out_cap;
	size_t out_len;
	size_t out_sent;

	uint64_t next_index;   /* position in the send order */
	uint64_t stamp_ns;     /* last clock read for timestamps */
	uint32_t stamp_uses;
	uint64_t sequence;
	uint64_t start_ns;
	uint64_t end_ns;

	struct src_delayed *delayed;   /* FIFO: the delay is the same for all */
	uint32_t delayed_head;
	uint32_t delayed_count;

	bool end_queued;
	bool stop_requested;
	struct src_counters c;
	struct prom_server *prom;      /* --metrics-listen */
	struct ctl_msg report;
};

bool src_parse_stall(const char *arg, enum src_stall *kind, uint64_t *after)
{
	static const char *const names[] = { "dribble", "blackhole" };
	size_t k;
	if (!opt_kind_at(arg, names, 2, &k, after))
		return false;
	*kind = k == 0 ? SRC_STALL_DRIBBLE : SRC_STALL_BLACKHOLE;
	return true;
}

bool src_parse_inject(const char *arg, enum src_inject *kind, uint64_t *after)
{
	static const char *const names[] = { "crc", "magic", "version", "flags",
					     "length", "run", "truncate", "noend" };
	static const enum src_inject kinds[] = { SRC_INJECT_CRC, SRC_INJECT_MAGIC,
						 SRC_INJECT_VERSION, SRC_INJECT_FLAGS,
						 SRC_INJECT_LENGTH, SRC_INJECT_RUN,
						 SRC_INJECT_TRUNCATE, SRC_INJECT_NOEND };
	size_t k;
	if (!opt_kind_at(arg, names, sizeof names / sizeof names[0], &k, after))
		return false;
	*kind = kinds[k];
	return true;
}

static void src_pump(struct src *s);
static void src_begin(struct src *s);
static void src_finish_data(struct src *s);

static uint64_t src_frame_bytes(const struct src *s)
{
	return FRM_HEADER_BYTES + s->opt.payload_bytes;
}

/* Appends one fragment (and its duplicate) to the send buffer. */
static void src_append_fragment(struct src *s, uint64_t event_id, uint64_t timestamp_ns)
{
	uint8_t *frame = s->out + s->out_len;
	struct frm_header h = {
		.source_id = (uint16_t)s->opt.id,
		.run_id = s->opt.run_id,
		.event_id = event_id,
		.sequence = s->sequence++,
		.timestamp_ns = timestamp_ns,
		.payload_len = s->opt.payload_bytes,
	};
	gen_payload(frame + FRM_HEADER_BYTES, s->opt.payload_bytes, s->opt.seed, s->opt.run_id,
		    event_id, (uint16_t)s->opt.id);
	size_t n = frm_encode_in_place(frame, &h);
	s->out_len += n;
	s->c.frags_sent++;
	s->c.frames_wire++;
	s->c.bytes_wire += n;
	if (gen_is_duplicated(&s->opt.faults, s->opt.seed, s->opt.run_id, event_id,
			      (uint16_t)s->opt.id)) {
		uint8_t *copy = s->out + s->out_len;
		memcpy(copy + FRM_HEADER_BYTES, frame + FRM_HEADER_BYTES, s->opt.payload_bytes);
		h.sequence = s->sequence++;
		n = frm_encode_in_place(copy, &h);
		s->out_len += n;
		s->c.frags_duplicated++;
		s->c.frames_wire++;
		s->c.bytes_wire += n;
	}
}

/* Appends the deliberately bad frame and ends the stream after it. */
static void src_append_injected(struct src *s)
{
	uint8_t *frame = s->out + s->out_len;
	uint64_t event_id = s->opt.first_event;
	struct frm_header h = {
		.source_id = (uint16_t)s->opt.id,
		.run_id = s->opt.run_id,
		.event_id = event_id,
		.sequence = s->sequence++,
		.timestamp_ns = clk_realtime_ns(),
		.payload_len = s->opt.payload_bytes,
	};
	gen_payload(frame + FRM_HEADER_BYTES, s->opt.payload_bytes, s->opt.seed, s->opt.run_id,
		    event_id, (uint16_t)s->opt.id);
	size_t n;
	switch (s->opt.inject) {
	case SRC_INJECT_RUN:
		h.run_id = s->opt.run_id + 1;
		n = frm_encode_in_place(frame, &h);
		break;
	case SRC_INJECT_LENGTH:
		h.payload_len = FRM_MAX_PAYLOAD_BYTES + 1;
		frm_encode_in_place(frame, &h);
		n = FRM_HEADER_BYTES;
		break;
	default:
		n = frm_encode_in_place(frame, &h);
		break;
	}
	switch (s->opt.inject) {
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
	s->out_len += n;
	s->c.frames_wire++;
	s->c.frames_bad_injected++;
	s->c.bytes_wire += n;
	log_info("Source %u injected a %s frame after %" PRIu64 " good frames", s->opt.id,
		 s->opt.inject == SRC_INJECT_TRUNCATE ? "truncated" : "corrupt",
		 s->c.frames_wire - 1);
}

static void src_append_end(struct src *s)
{
	struct frm_header h = {
		.flags = FRM_FLAG_END,
		.source_id = (uint16_t)s->opt.id,
		.run_id = s->opt.run_id,
		.event_id = s->opt.events,
		.sequence = s->sequence++,
		.timestamp_ns = clk_realtime_ns(),
		.payload_len = 0,
	};
	s->out_len += frm_encode(s->out + s->out_len, &h, NULL);
	s->end_queued = true;
}

/* Writes what the buffer holds. Returns 0 when all is written, -EAGAIN when
 * the socket is full (a write event is armed), or another -errno. */
static int src_flush(struct src *s)
{
	while (s->out_sent < s->out_len) {
		size_t chunk = s->out_len - s->out_sent;
		if (s->opt.dribble)
			chunk = 1;
		ssize_t n = send(s->fd, s->out + s->out_sent, chunk, MSG_NOSIGNAL);
		s->c.write_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				s->c.write_blocked++;
				event_add(s->ev_write, NULL);
				return -EAGAIN;
			}
			return -errno;
		}
		s->out_sent += (size_t)n;
		if (s->opt.dribble && s->out_sent < s->out_len) {
			/* Let the reader see this byte on its own. */
			event_add(s->ev_write, NULL);
			return -EAGAIN;
		}
	}
	s->out_len = 0;
	s->out_sent = 0;
	return 0;
}

/* Counts the whole frames a failed connection never took. */
static void src_count_unsent(struct src *s)
{
	size_t off = s->out_sent;
	/* A frame cut by the failure was partly on the wire; count from the
	 * next whole frame. Frames here are ours, so their headers are sound. */
	size_t pos = 0;
	uint64_t previous_event = UINT64_MAX;
	while (pos < s->out_len) {
		struct frm_header h;
		frm_parse_header(s->out + pos, &h);
		size_t len = FRM_HEADER_BYTES + (h.payload_len <= FRM_MAX_PAYLOAD_BYTES ? h.payload_len : 0);
		if (pos >= off && !(h.flags & FRM_FLAG_END)) {
			s->c.frames_unsent++;
			s->c.frames_wire--;
			/* A duplicate directly follows its original. */
			if (h.event_id == previous_event)
				s->c.frags_duplicated--;
			else
				s->c.frags_sent--;   /* counted as abandoned instead */
		}
		previous_event = h.event_id;
		pos += len;
	}
	s->out_len = s->out_sent = 0;
}

static void src_fail_data(struct src *s, int err)
{
	log_error("Source %u: data connection to reader %s failed: %s", s->opt.id, s->peer,
		  strerror(-err));
	s->status = 1;
	src_count_unsent(s);
	src_finish_data(s);
}

static bool src_stall_due(const struct src *s)
{
	return s->opt.stall != SRC_STALL_NONE && s->c.frames_wire >= s->opt.stall_after;
}

/* --stall dribble: one more byte of the stuck frame, never its last. */
static void src_on_stall_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct src *s = arg;
	if (s->fd < 0 || s->out_len - s->out_sent <= 1) {
		event_del(s->ev_stall);
		return;
	}
	ssize_t n = send(s->fd, s->out + s->out_sent, 1, MSG_NOSIGNAL);
	s->c.write_calls++;
	if (n == 1)
		s->out_sent++;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		event_del(s->ev_stall);   /* the reader gave up on us */
}

/* --stall: from now on the data stream delivers no complete frame, while
 * the event loop, and so the control link, goes on; the builder or the
 * reader has to give this source up. */
static void src_begin_stall(struct src *s)
{
	s->data_stalled = true;
	log_warn("Source %u: the data stream stalls after %" PRIu64 " frames (--stall %s); the control link goes on",
		 s->opt.id, s->c.frames_wire,
		 s->opt.stall == SRC_STALL_DRIBBLE ? "dribble" : "blackhole");
	if (s->opt.stall != SRC_STALL_DRIBBLE || s->next_index >= s->opt.events)
		return;
	uint64_t event_id = gen_event_at(s->opt.first_event, s->opt.events, s->next_index++,
					 s->opt.faults.reorder);
	src_append_fragment(s, event_id, clk_realtime_ns());
	if (s->out_len > src_frame_bytes(s)) {
		/* Only the fragment is dribbled, not its duplicate. */
		s->out_len = src_frame_bytes(s);
		s->c.frags_duplicated--;
		s->c.frames_wire--;
	}
	s->ev_stall = event_new(s->base, -1, EV_PERSIST, src_on_stall_tick, s);
	struct timeval tv = { 0, 10000 };
	if (s->ev_stall != NULL)
		event_add(s->ev_stall, &tv);
}

static bool src_inject_due(const struct src *s)
{
	return s->opt.inject != SRC_INJECT_NONE &&
	       s->c.frames_wire - s->c.frames_bad_injected >= s->opt.inject_after;
}

/* Fills the send buffer with what is due now and writes it; returns when
 * the socket is full, nothing more is due, or the run's fragments are out. */
static void src_pump(struct src *s)
{
	if (s->state != SRC_SENDING || s->data_stalled)
		return;
	uint64_t rounds = 0;
	for (;;) {
		uint64_t now = clk_monotonic_ns();
		s->stamp_uses = 0;   /* a fresh read for the first fragment of a pass */
		uint64_t due_positions = s->opt.events;
		if (s->opt.rate > 0) {
			/* Position i is due at start + i / rate. The pace timer
			 * is in whole microseconds and may fire a little before
			 * start: that is no time elapsed, not 2^64 ns. */
			unsigned __int128 elapsed = now > s->start_ns ? now - s->start_ns : 0;
			unsigned __int128 due = elapsed * s->opt.rate / 1000000000u + 1;
			if (due < due_positions)
				due_positions = (uint64_t)due;
		}
		bool blocked = false;
		while (s->out_cap - s->out_len >= 2 * src_frame_bytes(s) + FRM_HEADER_BYTES) {
			if (src_stall_due(s))
				break;
			if (src_inject_due(s)) {
				if (s->opt.inject != SRC_INJECT_NOEND)
					src_append_injected(s);
				s->stop_requested = true;
				break;
			}
			if (s->delayed_count > 0 && s->delayed[s->delayed_head].due_ns <= now) {
				struct src_delayed *d = &s->delayed[s->delayed_head];
				src_append_fragment(s, d->event_id, d->timestamp_ns);
				s->delayed_head = (s->delayed_head + 1) % s->opt.max_delayed;
				s->delayed_count--;
				continue;
			}
			if (s->stop_requested || s->next_index >= due_positions)
				break;
			if (s->delayed_count == s->opt.max_delayed) {
				blocked = true;  /* wait for the oldest delayed to go out */
				break;
			}
			uint64_t event_id = gen_event_at(s->opt.first_event, s->opt.events,
							 s->next_index, s->opt.faults.reorder);
			s->next_index++;
			uint16_t sid = (uint16_t)s->opt.id;
			if (gen_is_omitted(&s->opt.faults, s->opt.seed, s->opt.run_id, event_id, sid)) {
				s->c.frags_omitted++;
				continue;
			}
			/* The clock is read before the payloads it stamps are made,
			 * once per 16 fragments: a read costs as much as making a
			 * 64 B payload and moves by under a microsecond meanwhile. */
			if ((s->stamp_uses++ & 15u) == 0)
				s->stamp_ns = clk_realtime_ns();
			uint64_t ts = s->stamp_ns;
			if (gen_is_delayed(&s->opt.faults, s->opt.seed, s->opt.run_id, event_id, sid)) {
				uint32_t tail = (s->delayed_head + s->delayed_count) % s->opt.max_delayed;
				s->delayed[tail] = (struct src_delayed){
					.event_id = event_id,
					.timestamp_ns = ts,
					.due_ns = now + (uint64_t)s->opt.faults.delay_ms * 1000000u,
				};
				s->delayed_count++;
				s->c.frags_delayed++;
				continue;
			}
			src_append_fragment(s, event_id, ts);
		}
		bool all_out = s->stop_requested ||
			       (s->next_index >= s->opt.events && s->delayed_count == 0);
		if (all_out && !s->end_queued && s->opt.inject != SRC_INJECT_NOEND &&
		    s->c.frames_bad_injected == 0)
			src_append_end(s);
		int rc = src_flush(s);
		if (rc == -EAGAIN)
			return;   /* the write event resumes us */
		if (rc < 0) {
			src_fail_data(s, rc);
			return;
		}
		if (all_out) {
			src_finish_data(s);
			return;
		}
		if (src_stall_due(s)) {
			src_begin_stall(s);
			return;
		}
		bool more_due = s->next_index < due_positions && !blocked;
		if (!more_due) {
			/* Sleep until the next position or delayed fragment is due,
			 * rounded up to the run's pacing grid (start + k x tick, the
			 * same for every source): a paced source batches a tick's
			 * frames per write, and every source wakes at the same moments,
			 * so the fragments of one event still leave together. */
			uint64_t wake = UINT64_MAX;
			if (s->opt.rate > 0 && s->next_index < s->opt.events)
				wake = s->start_ns + (uint64_t)((unsigned __int128)s->next_index *
								1000000000u / s->opt.rate);
			if (s->delayed_count > 0 && s->delayed[s->delayed_head].due_ns < wake)
				wake = s->delayed[s->delayed_head].due_ns;
			/* The first grid point at or after that, and after now.
			 * Clamping to now + tick before rounding up, as this once
			 * did, skipped a grid point whenever the source woke a little
			 * after one: sources then woke every other tick, some on even
			 * ticks and some on odd ones, and an event's fragments left a
			 * tick apart. */
			uint64_t tick = (uint64_t)s->opt.pace_tick_us * 1000u;
			if (wake <= now)
				wake = now + 1;
			if (wake != UINT64_MAX && wake > s->start_ns && tick > 0)
				wake = s->start_ns + (wake - s->start_ns + tick - 1) / tick * tick;
			uint64_t wait = wake > now ? wake - now : 0;
			struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
					      .tv_usec = (suseconds_t)(wait % 1000000000u) / 1000 };
			evtimer_add(s->ev_pace, &tv);
			return;
		}
		/* Unpaced: give the loop a turn now and then for control traffic. */
		if (++rounds == 64) {
			struct timeval zero = { 0, 0 };
			evtimer_add(s->ev_pace, &zero);
			return;
		}
	}
}

static void src_on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct src *s = arg;
	if (s->state == SRC_SENDING)
		src_pump(s);
}

static void src_on_pace(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	src_pump(arg);
}

static void src_send_report(struct src *s)
{
	struct ctl_msg *m = &s->report;
	memset(m, 0, sizeof *m);
	m->type = CTL_END;
	m->u.report.status = s->status;
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
#define SRC_SET(name) ctl_group_set(g, CNT_SOURCE(name), s->c.name);
	CNT_LIST_SOURCE(SRC_SET)
#undef SRC_SET
	procstat_report(&m->u.report);
	if (ctllink_send(s->ctl, m) < 0) {
		log_error("Source %u could not send its final counters", s->opt.id);
		s->status = 1;
		event_base_loopexit(s->base, NULL);
	}
}

/* The data stream is over (END sent, failed, or stopped): close it and
 * report to the builder; BYE ends the daemon. */
static void src_finish_data(struct src *s)
{
	if (s->state >= SRC_REPORTING)
		return;
	s->end_ns = clk_monotonic_ns();
	if (s->fd >= 0) {
		shutdown(s->fd, SHUT_WR);
		close(s->fd);
		s->fd = -1;
	}
	s->c.frags_abandoned = s->c.events - s->c.frags_omitted - s->c.frags_sent;
	s->c.sending_ns = s->start_ns ? s->end_ns - s->start_ns : 0;
	double secs = (double)(s->end_ns - s->start_ns) / 1e9;
	if (!s->opt.quiet)
		log_info("Source %u sent %" PRIu64 " fragments (%" PRIu64 " omitted, %" PRIu64
			 " duplicated, %" PRIu64 " abandoned) in %.3f s, %" PRIu64 " writes",
			 s->opt.id, s->c.frags_sent, s->c.frags_omitted, s->c.frags_duplicated,
			 s->c.frags_abandoned, secs, s->c.write_calls);
	s->state = SRC_REPORTING;
	if (s->ctl_ready)
		src_send_report(s);
}

static void src_maybe_start(struct src *s)
{
	if (s->state != SRC_CONNECTING || !s->ctl_ready || s->fd < 0)
		return;
	s->state = SRC_WAITING_START;
	if (s->start_ns != 0)
		src_begin(s);
}

/* The builder's START: every peer is up. */
static void src_on_start(uint64_t start_mono_ns, void *arg)
{
	struct src *s = arg;
	s->start_ns = start_mono_ns;
	if (s->state == SRC_WAITING_START)
		src_begin(s);
}

static void src_begin(struct src *s)
{
	s->state = SRC_SENDING;
	uint64_t now = clk_monotonic_ns();
	log_info("Source %u streaming %" PRIu64 " events of %u B to reader %s at %s", s->opt.id,
		 s->opt.events, s->opt.payload_bytes, s->peer,
		 s->opt.rate ? "a paced rate" : "full speed");
	/* A source that heard START late catches up rather than shifting
	 * its events against the others'. */
	uint64_t wait = s->start_ns > now ? s->start_ns - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u) / 1000 };
	evtimer_add(s->ev_pace, &tv);
}

static void src_on_data_greeted(int fd, const struct ctl_msg *reply, void *arg)
{
	struct src *s = arg;
	s->dial = NULL;
	if (fd < 0) {
		log_error("Source %u: the reader at %s did not accept us: %s (%s)", s->opt.id, s->peer,
			  reply->u.error.reason, reply->u.error.code);
		s->status = 1;
		s->state = SRC_REPORTING;
		if (s->ctl_ready)
			src_send_report(s);
		else
			event_base_loopexit(s->base, NULL);
		return;
	}
	s->fd = fd;
	s->ev_write = event_new(s->base, fd, EV_WRITE, src_on_writable, s);
	src_maybe_start(s);
}

static void src_on_ctl_ready(void *arg)
{
	struct src *s = arg;
	s->ctl_ready = true;
	if (s->state == SRC_REPORTING)
		src_send_report(s);
	else
		src_maybe_start(s);
}

static void src_on_bye(int32_t status, void *arg)
{
	struct src *s = arg;
	if (s->state != SRC_REPORTING) {
		log_warn("Source %u: the builder ended the run (status %d) before we finished",
			 s->opt.id, status);
		s->stop_requested = true;
		s->status = s->status ? s->status : 1;
	}
	s->state = SRC_DONE;
	event_base_loopexit(s->base, NULL);
}

static void src_on_ctl_lost(const char *reason, void *arg)
{
	struct src *s = arg;
	if (s->state == SRC_DONE)
		return;
	log_error("Source %u lost the builder's control connection: %s", s->opt.id, reason);
	s->status = 1;
	s->state = SRC_DONE;
	event_base_loopexit(s->base, NULL);
}

/* The builder has given up on our reader (dead or stalled): whatever is
 * not yet on the wire stays here, and the run's books are closed now. */
static void src_on_stop(uint32_t source, const char *reason, void *arg)
{
	struct src *s = arg;
	(void)source;
	if (s->state >= SRC_REPORTING)
		return;
	log_warn("Source %u stopping at the builder's request: %s", s->opt.id, reason);
	s->stop_requested = true;
	s->status = 1;
	if (s->state == SRC_SENDING) {
		src_count_unsent(s);
		if (s->ev_write != NULL)
			event_del(s->ev_write);
	}
	src_finish_data(s);
}

static const struct ctllink_ops src_ctl_ops = {
	.on_ready = src_on_ctl_ready,
	.on_start = src_on_start,
	.on_bye = src_on_bye,
	.on_stop = src_on_stop,
	.on_lost = src_on_ctl_lost,
};

/* One family of /metrics per counter of the END report. Prometheus names a
 * counter *_total and a duration in seconds: events is the configured
 * number (--events), a gauge es_source_events; sending_ns, the time from the
 * first frame to the last, set once sending ends, a gauge
 * es_source_sending_seconds; every other one a counter es_source_<its
 * metrics.json name>_total. */
static void src_prom_counter(struct evbuffer *out, enum cnt_source counter, uint64_t value)
{
	const char *field = cnt_source_names[counter];
	char name[96], help[128];
	if (counter == CNT_SOURCE_events) {
		prom_family(out, "es_source_events", "gauge", "event IDs this source is to generate a fragment for (--events)");
		prom_sample_u64(out, "es_source_events", NULL, value);
	} else if (counter == CNT_SOURCE_sending_ns) {
		prom_family(out, "es_source_sending_seconds", "gauge",
			    "time from the first frame sent to the last, once sending has ended (sending_ns)");
		prom_sample_f64(out, "es_source_sending_seconds", NULL, (double)value / 1e9);
	} else {
		snprintf(name, sizeof name, "es_source_%s_total", field);
		snprintf(help, sizeof help, "source: %s of metrics.json source.N", field);
		prom_family(out, name, "counter", help);
		prom_sample_u64(out, name, NULL, value);
	}
}

/* /metrics and /status: the source's counters and where it is in its run. */
static void src_fill_metrics(struct evbuffer *out, bool json, void *arg)
{
	const struct src *s = arg;
	if (json) {
		evbuffer_add_printf(out, "{\"source\": %u, \"run\": %u, \"state\": %d, \"position\": %" PRIu64
				    ", \"%s\": %" PRIu64 ", \"%s\": %" PRIu64 ", \"delayed_held\": %u}\n",
				    s->opt.id, s->opt.run_id, (int)s->state, s->next_index,
				    CNT_SOURCE(events), s->opt.events, CNT_SOURCE(frames_wire),
				    s->c.frames_wire, s->delayed_count);
		return;
	}
#define SRC_PROM(f) src_prom_counter(out, CNT_SOURCE_##f, s->c.f);
	CNT_LIST_SOURCE(SRC_PROM)
#undef SRC_PROM
	prom_family(out, "es_source_position", "gauge", "send positions done of the run's events");
	prom_sample_u64(out, "es_source_position", NULL, s->next_index);
	prom_family(out, "es_source_delayed_held", "gauge", "fragments held back by the delay fault");
	prom_sample_u64(out, "es_source_delayed_held", NULL, s->delayed_count);
}

struct src *src_create(struct event_base *base, const struct src_options *opt)
{
	struct src *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->base = base;
	s->opt = *opt;
	s->fd = -1;
	s->c.events = opt->events;
	uint64_t frame = FRM_HEADER_BYTES + opt->payload_bytes;
	/* Room for a fragment, its duplicate and the END frame whatever the
	 * batch size asked for. */
	s->out_cap = opt->batch_bytes > 2 * frame + FRM_HEADER_BYTES ? opt->batch_bytes
								     : 2 * frame + FRM_HEADER_BYTES;
	s->out = malloc(s->out_cap);
	s->delayed = calloc(opt->max_delayed ? opt->max_delayed : 1, sizeof *s->delayed);
	s->ev_pace = evtimer_new(base, src_on_pace, s);
	if (s->out == NULL || s->delayed == NULL || s->ev_pace == NULL) {
		src_destroy(s);
		return NULL;
	}
	snprintf(s->peer, sizeof s->peer, "%s:%u", opt->data_host, (unsigned)opt->data_port);
	if (opt->metrics_host[0] != '\0') {
		uint16_t port;
		s->prom = prom_server_start(base, opt->metrics_host, opt->metrics_port, src_fill_metrics,
					    s, &port);
		if (s->prom == NULL) {
			src_destroy(s);
			return NULL;
		}
		printf("listening metrics %s:%u\n", opt->metrics_host, (unsigned)port);
		fflush(stdout);
	}
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_SOURCE, opt->id, CTL_CHANNEL_CONTROL, opt->run_id, NULL, 0);
	s->ctl = ctllink_start(base, opt->control_host, opt->control_port, &hello,
			       opt->connect_timeout_ms, &src_ctl_ops, s);
	hello.channel = CTL_CHANNEL_DATA;
	s->dial = greet_dial_start(base, "the reader's data port", opt->data_host, opt->data_port,
				   false, &hello, opt->connect_timeout_ms, 0, src_on_data_greeted, s);
	if (s->ctl == NULL || s->dial == NULL) {
		src_destroy(s);
		return NULL;
	}
	return s;
}

void src_stop(struct src *s)
{
	if (s->state == SRC_SENDING) {
		log_info("Source %u stopping: unsent events count as abandoned", s->opt.id);
		s->stop_requested = true;
		src_pump(s);
	} else if (s->state == SRC_CONNECTING || s->state == SRC_WAITING_START) {
		s->status = 1;
		event_base_loopexit(s->base, NULL);
	}
}

int src_exit_status(const struct src *s)
{
	return s->status;
}

void src_destroy(struct src *s)
{
	if (s == NULL)
		return;
	prom_server_stop(s->prom);
	ctllink_free(s->ctl);
	greet_dial_cancel(s->dial);
	if (s->ev_write)
		event_free(s->ev_write);
	if (s->ev_pace)
		event_free(s->ev_pace);
	if (s->ev_stall)
		event_free(s->ev_stall);
	if (s->fd >= 0)
		close(s->fd);
	free(s->out);
	free(s->delayed);
	free(s);
}
