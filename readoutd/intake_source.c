/* The intake's connections: each source read into its buffer, every frame
 * verified and intake_route.c's verdict on it applied (queued for its
 * connection, dropped and counted, or held: not admitted, or its
 * connection's queue full; its reads pause), the held frames released
 * when an assignment, a credit or a drain lets them go, the inactivity
 * limit. */
#include "intake.h"
#include "intake_internal.h"

#include "sys/clock.h"
#include "sys/log.h"
#include "wire/control.h"
#include "wire/frame.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void intake_pause(struct intake_source *s)
{
	if (s->reading) {
		event_del(s->ev_read);
		s->reading = false;
	}
}

static void intake_resume(struct intake_source *s)
{
	if (!s->reading && s->state == INTAKE_STREAMING && !s->eof && !s->held && !s->blocked) {
		event_add(s->ev_read, NULL);
		s->reading = true;
		/* Time the reader did not read is not the source's silence. */
		s->idle_since_ns = clk_monotonic_ns();
	}
}

static void intake_close(struct intake_source *s, enum intake_state state)
{
	intake_pause(s);
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
	s->state = state;
}

static void intake_fail(struct intake_source *s, const char *what, uint64_t *counter)
{
	struct intake *in = s->in;
	log_error("Reader %u: source %u (%s): %s; closing its connection after %" PRIu64
		  " verified frames", in->opt->id, s->id, s->peer, what, s->c.frames_verified);
	if (counter != NULL)
		(*counter)++;
	in->failed = true;
	/* Unverified bytes are the bad frame and what followed it: gone. */
	s->end = s->checked;
	intake_close(s, INTAKE_FAILED);
}

static uint64_t *intake_error_counter(struct intake_source *s, enum frm_status st)
{
	switch (st) {
	case FRM_ERR_MAGIC: return &s->c.err_magic;
	case FRM_ERR_VERSION: return &s->c.err_version;
	case FRM_ERR_FLAGS: return &s->c.err_flags;
	case FRM_ERR_LENGTH: return &s->c.err_length;
	case FRM_ERR_CRC: return &s->c.err_crc;
	case FRM_ERR_RUN: return &s->c.err_run;
	default: return NULL;
	}
}

static void intake_hold(struct intake_source *s, uint64_t event_id)
{
	s->held = true;
	s->held_event = event_id;
	s->held_since_ns = clk_monotonic_ns();
	s->c.held_count++;
}

/* An ID no builder owns: rejected, counted, the stream goes on. */
static void intake_invalid(struct intake_source *s, uint64_t event_id)
{
	struct intake *in = s->in;
	s->c.frames_rejected++;
	s->c.err_event_id++;
	in->failed = true;
	if (!s->logged_invalid)
		log_error("Reader %u: source %u (%s) sent event %" PRIu64 ", outside the run's IDs %" PRIu64
			  " .. %" PRIu64 "; its frames of such IDs are rejected (err_event_id)",
			  in->opt->id, s->id, s->peer, event_id, in->route_first, in->route_end - 1);
	s->logged_invalid = true;
}

/* Applies the verdict on the verified frame at s's checked position
 * (header h, frame_bytes long): true when it went (queued or dropped,
 * checked past it), false when it is held (admission) or blocked (its
 * connection's queue is full). */
static bool intake_dispatch(struct intake_source *s, const struct frm_header *h,
			    size_t frame_bytes, bool first_sight)
{
	struct intake *in = s->in;
	uint32_t d;
	enum route_verdict v = intake_route_frame(in, h->event_id, &d);
	if (first_sight) {
		s->c.frames_received++;
		if (v != ROUTE_INVALID)
			s->c.frames_verified++;
	} else if (v == ROUTE_INVALID) {
		/* Held before the plan came, counted verified then. */
		s->c.frames_verified--;
	}
	switch (v) {
	case ROUTE_HOLD:
		intake_hold(s, h->event_id);
		return false;
	case ROUTE_INVALID:
		intake_invalid(s, h->event_id);
		break;
	case ROUTE_LATE:
		s->c.frames_late++;
		break;
	case ROUTE_LOST:
		s->c.frames_lost_builder++;
		break;
	case ROUTE_SEND:
		if (outq_push(in->outq, s->index, d, s->base + s->checked, (uint32_t)frame_bytes) ==
		    -ENOBUFS) {
			s->blocked = true;
			s->blocked_dest = d;
			in->blocked_sources++;
			return false;
		}
		break;
	}
	s->checked += frame_bytes;
	return true;
}

/* The held or blocked frame, routed again: true when it went. */
static bool intake_retry_held(struct intake_source *s)
{
	if (s->held) {
		if (!intake_admitted(s->in, s->held_event))
			return false;
		s->c.held_ns += clk_monotonic_ns() - s->held_since_ns;
		s->held = false;
	}
	if (s->blocked) {
		s->blocked = false;
		s->in->blocked_sources--;
	}
	struct frm_header h;
	frm_parse_header(s->buf + s->checked, &h);
	return intake_dispatch(s, &h, s->held_bytes, false);
}

/* A frame the decoder or the source check refused: the connection goes. */
static void intake_reject(struct intake_source *s, enum frm_status st, const struct frm_header *h)
{
	const struct rdr_options *opt = s->in->opt;
	char what[160];
	s->c.frames_received++;
	s->c.frames_rejected++;
	if (st == FRM_OK)
		snprintf(what, sizeof what, "frame claims source %u", h->source_id);
	else if (st == FRM_ERR_RUN)
		snprintf(what, sizeof what, "frame of run %u, expected run %u", h->run_id,
			 opt->run_id);
	else if (st == FRM_ERR_LENGTH)
		snprintf(what, sizeof what, "%s: payload_len %u exceeds the limit of %u bytes",
			 frm_status_name(st), h->payload_len, opt->max_fragment_bytes);
	else
		snprintf(what, sizeof what, "%s", frm_status_name(st));
	intake_fail(s, what, st == FRM_OK ? NULL : intake_error_counter(s, st));
}

/* The source's END frame: anything after it is an error. */
static void intake_ended(struct intake_source *s, size_t frame_bytes)
{
	s->c.end_frames++;
	/* Room is kept for it: every connection holds one END per source. */
	outq_push_end(s->in->outq, s->index, s->base + s->checked, (uint32_t)frame_bytes);
	s->checked += frame_bytes;
	s->state = INTAKE_ENDED;
	if (s->checked < s->end) {
		s->c.err_after_end++;
		log_error("Reader %u: source %u (%s) sent %zu bytes after its END frame",
			  s->in->opt->id, s->id, s->peer, s->end - s->checked);
		s->in->failed = true;
		s->end = s->checked;
	}
}

/* Verifies the frames received so far, up to a held one. */
static void intake_verify(struct intake_source *s)
{
	if ((s->held || s->blocked) && !intake_retry_held(s))
		return;
	while (s->checked < s->end && s->state == INTAKE_STREAMING) {
		struct frm_header h;
		size_t frame_bytes, need;
		enum frm_status st = frm_decoder_next(&s->decoder, s->buf + s->checked,
						      s->end - s->checked, &h, &frame_bytes, &need);
		if (st == FRM_NEED_MORE)
			break;
		if (st != FRM_OK) {
			/* Header errors are found with the 42 header bytes present. */
			frm_parse_header(s->buf + s->checked, &h);
			intake_reject(s, st, &h);
			return;
		}
		if (h.source_id != s->id) {
			intake_reject(s, FRM_OK, &h);
			return;
		}
		if (h.flags & FRM_FLAG_END) {
			intake_ended(s, frame_bytes);
			break;
		}
		s->held_bytes = frame_bytes;
		if (!intake_dispatch(s, &h, frame_bytes, true)) {
			intake_pause(s);
			break;
		}
	}
}

/* Verifies what arrived and settles a connection that has closed. */
static void intake_progress(struct intake_source *s)
{
	intake_verify(s);
	if (s->eof && s->state == INTAKE_STREAMING && !s->held && !s->blocked) {
		if (s->checked < s->end) {
			char what[128];
			snprintf(what, sizeof what, "connection closed inside a frame (%zu bytes of it)",
				 s->end - s->checked);
			s->c.frames_received++;
			s->c.frames_rejected++;
			intake_fail(s, what, &s->c.err_truncated);
		} else {
			intake_fail(s, "connection closed without an END frame", &s->c.err_no_end);
		}
	} else if (s->state == INTAKE_ENDED && s->fd >= 0) {
		intake_close(s, INTAKE_ENDED);
	}
}

/* Makes room at the end of a source's buffer, and keeps the data near its
 * start: once past the first batch, what is not yet forwarded moves back
 * whenever it is no more than what was forwarded before it (so a byte is
 * moved at most about once), and the pages further on are touched only
 * when fragments are held or very large. */
static void intake_compact(struct intake_source *s)
{
	if (s->start == s->end) {
		s->base += s->start;
		s->start = s->checked = s->end = 0;
		return;
	}
	size_t batch = s->in->opt->batch_bytes;
	size_t room = s->cap - s->end;
	size_t unsent = s->end - s->start;
	if (s->start > 0 && (room < batch || (s->end > batch && unsent <= s->start))) {
		/* Only what is not yet forwarded moves: usually part of one frame. */
		memmove(s->buf, s->buf + s->start, s->end - s->start);
		s->base += s->start;
		s->checked -= s->start;
		s->end -= s->start;
		s->start = 0;
	}
}

/* A connection that closed before a byte came: the slot is free again. */
static void intake_vacate(struct intake_source *s)
{
	/* Not a byte came: a peer that took the source's slot and left took
	 * nothing from the run, and the source may still come. */
	log_warn("Reader %u: source %u's connection from %s closed; it carried nothing, so the slot is free for source %u again",
		 s->in->opt->id, s->id, s->peer, s->id);
	intake_close(s, INTAKE_WAITING);
	event_free(s->ev_read);
	s->ev_read = NULL;
	s->peer[0] = '\0';
}

static void intake_on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct intake_source *s = arg;
	struct intake *in = s->in;
	/* Frames dropped (late, lost, outside the run) leave room too. */
	intake_reclaim(s);
	intake_compact(s);
	size_t room = s->cap - s->end;
	if (room > in->opt->batch_bytes)
		room = in->opt->batch_bytes;
	if (room == 0) {
		/* Full of frames the builder has not taken yet: TCP pushes back. */
		intake_pause(s);
		return;
	}
	ssize_t n = read(fd, s->buf + s->end, room);
	s->c.read_calls++;
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		char text[128];
		snprintf(text, sizeof text, "read failed: %s", strerror(errno));
		intake_fail(s, text, NULL);
		in->ev.on_progress(in->arg);
		return;
	}
	if (n == 0 && s->c.bytes_received == 0) {
		intake_vacate(s);
		return;
	}
	if (n == 0) {
		s->eof = true;
		intake_pause(s);
	} else {
		s->end += (size_t)n;
		s->c.bytes_received += (uint64_t)n;
	}
	intake_progress(s);
	in->ev.on_progress(in->arg);
}

static struct intake_source *intake_find(struct intake *in, uint32_t id)
{
	for (size_t i = 0; i < in->count; i++)
		if (in->sources[i].id == id)
			return &in->sources[i];
	return NULL;
}

/* Gives source s up when it has been read without a complete frame for
 * limit_ns; true when it did. */
static bool intake_check_idle(struct intake_source *s, bool live, uint64_t now, uint64_t limit_ns)
{
	uint64_t seen = s->c.frames_received + s->c.end_frames;
	if (s->state != INTAKE_STREAMING || !s->reading || !live || seen != s->idle_frames_seen) {
		s->idle_frames_seen = seen;
		s->idle_since_ns = now;
		return false;
	}
	if (now - s->idle_since_ns < limit_ns)
		return false;
	uint64_t idle_ms = (now - s->idle_since_ns) / 1000000u;
	char what[160];
	snprintf(what, sizeof what,
		 "no complete frame for %" PRIu64 " ms (%zu bytes of a frame pending); given up as lost",
		 idle_ms, s->end - s->checked);
	intake_fail(s, what, &s->c.err_idle);
	s->in->ev.on_given_up(s->in->arg, s->id, idle_ms);
	return true;
}

/* The inactivity limit, checked a few times per limit: a source the reader
 * is reading (not held, not paused on a full buffer) that delivers no
 * complete frame for the limit while the run is live (a frame has come
 * from one of this reader's sources) is given up as lost: stuck inside a
 * frame, or its data path blackholed while its control link lives on. The
 * builder is told at once, so the books close with it named as lost. */
void intake_on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct intake *in = arg;
	uint64_t now = clk_monotonic_ns();
	uint64_t limit_ns = in->opt->source_idle_timeout_ms * 1000000u;
	bool live = false;
	for (size_t i = 0; i < in->count; i++)
		live = live || in->sources[i].c.frames_received > 0;
	bool gave_up = false;
	for (size_t i = 0; i < in->count; i++)
		gave_up = intake_check_idle(&in->sources[i], live, now, limit_ns) || gave_up;
	if (gave_up)
		in->ev.on_progress(in->arg);
}

int intake_adopt(struct intake *in, uint16_t id, int fd, const char *peer)
{
	struct intake_source *s = intake_find(in, id);
	if (s == NULL || s->state != INTAKE_WAITING) {
		close(fd);
		return s == NULL ? -ENOENT : -EBUSY;
	}
	s->ev_read = event_new(in->base, fd, EV_READ | EV_PERSIST, intake_on_readable, s);
	if (s->ev_read == NULL) {
		close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	s->state = INTAKE_STREAMING;
	snprintf(s->peer, sizeof s->peer, "%s", peer);
	intake_resume(s);
	return 0;
}

void intake_admit(struct intake *in, uint64_t limit)
{
	if (limit <= in->credit_limit)
		return;
	in->credit_limit = limit;
	for (size_t i = 0; i < in->count; i++) {
		struct intake_source *s = &in->sources[i];
		if (!s->held || s->held_event >= limit)
			continue;
		intake_progress(s);
		intake_resume(s);
	}
}

/* Sources held or blocked get their frame routed again: held ones the
 * admission passes, blocked ones whose connection has room now. */
static void intake_retry_all(struct intake *in, bool held, bool blocked)
{
	for (size_t i = 0; i < in->count; i++) {
		struct intake_source *s = &in->sources[i];
		if ((held && s->held && intake_admitted(in, s->held_event)) ||
		    (blocked && s->blocked &&
		     outq_room(in->outq, s->blocked_dest, (uint32_t)s->held_bytes))) {
			intake_progress(s);
			intake_resume(s);
		}
	}
}

int intake_assign(struct intake *in, const struct evm_assignment *a, uint64_t retired_below,
		  char *why, size_t why_size)
{
	int rc = intake_route_assign(in, a, retired_below, why, why_size);
	if (rc == 0)
		intake_retry_all(in, true, false);
	return rc;
}

/* After frames left the buffers: reclaims each source's room up to its
 * oldest frame not yet written, whatever its destination, and reads again
 * from the sources that were paused on a full buffer. */
static void feed_moved(void *arg)
{
	struct intake *in = arg;
	for (size_t i = 0; i < in->count; i++) {
		struct intake_source *s = &in->sources[i];
		intake_reclaim(s);
		intake_compact(s);
		intake_resume(s);
	}
}

int intake_lose(struct intake *in, uint32_t b, uint64_t *frames)
{
	int rc = intake_route_lose(in, b, frames);
	if (rc < 0)
		return rc;
	intake_retry_all(in, false, true);
	/* Nothing of what it held will be written: its room is free. */
	feed_moved(in);
	return 0;
}

struct fwd_feed intake_feed(struct intake *in)
{
	return (struct fwd_feed){ .gather = intake_feed_gather, .consumed = intake_feed_consumed,
				  .moved = feed_moved, .arg = in };
}

/* A destination drained: the sources blocked on a full queue try again,
 * outside the forwarder's flush, and what they route is flushed. */
void intake_on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct intake *in = arg;
	if (in->blocked_sources == 0)
		return;
	intake_retry_all(in, false, true);
	in->ev.on_progress(in->arg);
}

bool intake_drop(struct intake *in, uint16_t id, const char *reason)
{
	struct intake_source *s = intake_find(in, id);
	if (s == NULL || (s->state != INTAKE_WAITING && s->state != INTAKE_STREAMING))
		return false;
	char what[CTL_MAX_TEXT + 32];
	snprintf(what, sizeof what, "dropped at the builder's request: %s", reason);
	intake_fail(s, what, &s->c.err_dropped);
	return true;
}

void intake_close_all(struct intake *in)
{
	for (size_t i = 0; i < in->count; i++) {
		struct intake_source *s = &in->sources[i];
		if (s->state == INTAKE_WAITING || s->state == INTAKE_STREAMING)
			intake_close(s, INTAKE_FAILED);
	}
}

void intake_finish(struct intake *in)
{
	if (in->ev_idle != NULL)
		event_del(in->ev_idle);
}
