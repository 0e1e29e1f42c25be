/* The intake's connections: each source read into its buffer, every frame
 * verified, a frame not admitted held (its reads pause), the inactivity
 * limit; where a verified frame goes is intake_route.c's. */
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

void intake_resume(struct intake_source *s)
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
	intake_dispatch_end(s, frame_bytes);
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
void intake_progress(struct intake_source *s)
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
void intake_compact(struct intake_source *s)
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
static void intake_on_idle_timer(evutil_socket_t fd, short what, void *arg)
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

bool intake_admitted(const struct intake *in, uint64_t event_id)
{
	if (in->opt->routing)
		return in->route != NULL && event_id < route_assigned_end(in->route);
	return event_id < in->credit_limit;
}

uint64_t intake_limit(const struct intake *in)
{
	if (in->opt->routing)
		return in->route != NULL ? route_assigned_end(in->route) : 0;
	return in->credit_limit;
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

bool intake_over(const struct intake *in)
{
	for (size_t i = 0; i < in->count; i++)
		if (in->sources[i].state == INTAKE_WAITING ||
		    in->sources[i].state == INTAKE_STREAMING)
			return false;
	return true;
}

bool intake_failed(const struct intake *in)
{
	return in->failed;
}

size_t intake_source_count(const struct intake *in)
{
	return in->count;
}

void intake_view(const struct intake *in, size_t i, struct intake_view *v)
{
	const struct intake_source *s = &in->sources[i];
	v->id = s->id;
	v->state = s->state;
	v->held = s->held || s->blocked;
	v->holding_ns = s->held ? clk_monotonic_ns() - s->held_since_ns : 0;
	v->buffered_bytes = s->end - s->start;
	v->c = s->c;
	snprintf(v->peer, sizeof v->peer, "%s", s->peer);
}

bool intake_lookup(const struct intake *in, uint16_t id, struct intake_view *v)
{
	for (size_t i = 0; i < in->count; i++) {
		if (in->sources[i].id == id) {
			intake_view(in, i, v);
			return true;
		}
	}
	return false;
}

/* ---- creation ------------------------------------------------------------ */

static int intake_start_idle_timer(struct intake *in)
{
	/* Checked four times per limit, at most every 250 ms. */
	uint64_t every_us = in->opt->source_idle_timeout_ms * 250u;
	if (every_us > 250000u)
		every_us = 250000u;
	struct timeval tv = { (time_t)(every_us / 1000000u), (suseconds_t)(every_us % 1000000u) };
	in->ev_idle = event_new(in->base, -1, EV_PERSIST, intake_on_idle_timer, in);
	if (in->ev_idle == NULL)
		return -ENOMEM;
	return event_add(in->ev_idle, &tv) == 0 ? 0 : -EINVAL;
}

struct intake *intake_create(struct event_base *base, const struct rdr_options *opt,
			     const struct intake_events *ev, void *arg)
{
	struct intake *in = calloc(1, sizeof *in);
	if (in == NULL)
		return NULL;
	in->base = base;
	in->opt = opt;
	in->ev = *ev;
	in->arg = arg;
	/* Hold everything until the builder's first CREDIT says how far to go. */
	in->credit_limit = 0;
	in->count = opt->source_count;
	in->sources = calloc(opt->source_count, sizeof *in->sources);
	if (in->sources == NULL)
		goto fail;
	/* After compaction a cut frame (at most one whole frame) sits at the
	 * start and a full batch still fits behind it. */
	size_t cap = (size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES;
	for (size_t i = 0; i < opt->source_count; i++) {
		struct intake_source *s = &in->sources[i];
		s->in = in;
		s->index = (uint16_t)i;
		s->id = opt->sources[i];
		s->fd = -1;
		s->cap = cap;
		s->buf = malloc(cap);
		if (s->buf == NULL)
			goto fail;
		frm_decoder_init(&s->decoder, opt->run_id, opt->max_fragment_bytes);
	}
	if (intake_route_create(in) < 0)
		goto fail;
	if (opt->source_idle_timeout_ms > 0 && intake_start_idle_timer(in) < 0)
		goto fail;
	return in;
fail:
	intake_destroy(in);
	return NULL;
}

void intake_destroy(struct intake *in)
{
	if (in == NULL)
		return;
	if (in->ev_idle)
		event_free(in->ev_idle);
	if (in->sources != NULL) {
		for (size_t i = 0; i < in->count; i++) {
			struct intake_source *s = &in->sources[i];
			if (s->ev_read)
				event_free(s->ev_read);
			if (s->fd >= 0)
				close(s->fd);
			free(s->buf);
		}
	}
	intake_route_destroy(in);
	free(in->sources);
	free(in);
}
