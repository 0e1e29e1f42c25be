#include "reader.h"

#include "sys/clock.h"
#include "wire/control.h"
#include "io/ctlclient.h"
#include "wire/frame.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "sys/opt.h"
#include "io/net.h"
#include "sys/procstat.h"
#include "io/prom.h"
#include "io/shmlink.h"
#include "io/shmring.h"

#include <errno.h>
#include <stdatomic.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Counters kept per source and summed for the reader; names as in
 * metrics.json. */
#define RDR_SOURCE_COUNTERS(X) \
	X(frames_received) X(frames_forwarded) X(frames_rejected) X(frames_held_at_end) \
	X(frames_verified) X(bytes_received) X(read_calls) X(held_count) X(held_ns) \
	X(end_frames) X(err_magic) X(err_version) X(err_flags) X(err_length) X(err_crc) \
	X(err_run) X(err_truncated) X(err_no_end) X(err_after_end) X(err_dropped) X(err_idle)

struct rdr_counters {
#define RDR_FIELD(name) uint64_t name;
	RDR_SOURCE_COUNTERS(RDR_FIELD)
#undef RDR_FIELD
};

enum rdr_source_state { RS_WAITING, RS_STREAMING, RS_ENDED, RS_FAILED };

struct rdr_source {
	struct rdr *reader;
	uint16_t id;
	enum rdr_source_state state;
	int fd;
	struct event *ev_read;
	bool reading;
	char peer[CTL_MAX_TEXT];
	/* buf[start, checked) holds verified frames not yet forwarded,
	 * buf[checked, end) bytes not yet verified. */
	uint8_t *buf;
	size_t cap;
	size_t start, checked, end;
	struct frm_decoder decoder;
	bool eof;
	/* A verified frame waiting for the admission limit to pass it. */
	bool held;
	size_t held_bytes;
	uint64_t held_event;
	uint64_t held_since_ns;
	/* Inactivity limit: frames seen at the last check, and since when the
	 * reader has been reading this source without a new one. */
	uint64_t idle_frames_seen;
	uint64_t idle_since_ns;
	struct rdr_counters c;
};

struct rdr {
	struct event_base *base;
	struct rdr_options opt;
	int status;
	int listen_fd;
	struct event *ev_accept;
	struct greet_door door;          /* the sources' greetings on listen_fd */
	struct ctllink *ctl;
	bool ctl_ready;
	struct greet_dial *dial;         /* the data path to the builder, until welcomed */
	int builder_fd;
	struct event *ev_builder_write;
	bool builder_blocked;        /* TCP: socket full; shm: ring full */
	bool builder_closed;
	char builder_peer[300];
	/* Shared-memory path (opt.builder_shm set): the Unix socket carries the
	 * greeting and the eventfds, then stays open as the liveness signal. */
	bool shm;
	int shm_sock;
	int data_efd, space_efd;     /* builder sleeps on data, we on space */
	struct event *ev_shm_sock, *ev_space;
	struct shr_ring ring;
	bool ring_attached;
	char segment[96];
	size_t next_source;          /* first source of the next ring flush: fairness */
	uint64_t ring_records;
	uint64_t ring_full_waits;
	bool ring_injected;          /* --shm-inject done: forward nothing more */
	bool forward_stalled;        /* --forward-stall reached: forward nothing more */
	int partial_source;          /* source index whose frame is half written, or -1 */
	uint64_t credit_limit;       /* forward event IDs below this */
	struct prom_server *prom;    /* --metrics-listen */
	struct event *ev_stats;      /* a STATS to the builder every second */
	struct event *ev_idle;       /* checks the sources' inactivity limit */
	struct ctl_msg stats;
	uint64_t credits_received;
	uint64_t writev_calls;
	uint64_t bytes_forwarded;
	uint64_t refused_connections;
	bool reported;
	bool done;
	struct rdr_source *sources;
	struct iovec *iov;
	struct ctl_msg report;
};

size_t rdr_buffer_bytes(const struct rdr_options *opt)
{
	return opt->source_count *
	       ((size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES);
}

static void rdr_flush(struct rdr *r);
static void rdr_maybe_finish(struct rdr *r);
static void rdr_verify(struct rdr_source *s);

static void rdr_source_pause(struct rdr_source *s)
{
	if (s->reading) {
		event_del(s->ev_read);
		s->reading = false;
	}
}

static void rdr_source_resume(struct rdr_source *s)
{
	if (!s->reading && s->state == RS_STREAMING && !s->eof && !s->held) {
		event_add(s->ev_read, NULL);
		s->reading = true;
		/* Time the reader did not read is not the source's silence. */
		s->idle_since_ns = clk_monotonic_ns();
	}
}

static void rdr_source_close(struct rdr_source *s, enum rdr_source_state state)
{
	rdr_source_pause(s);
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
	s->state = state;
}

static void rdr_source_fail(struct rdr_source *s, const char *what, uint64_t *counter)
{
	struct rdr *r = s->reader;
	log_error("Reader %u: source %u (%s): %s; closing its connection after %" PRIu64
		  " verified frames", r->opt.id, s->id, s->peer, what, s->c.frames_verified);
	if (counter != NULL)
		(*counter)++;
	r->status = 1;
	/* Unverified bytes are the bad frame and what followed it: gone. */
	s->end = s->checked;
	rdr_source_close(s, RS_FAILED);
}

static uint64_t *rdr_error_counter(struct rdr_source *s, enum frm_status st)
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

static void rdr_release_held(struct rdr_source *s)
{
	s->c.held_ns += clk_monotonic_ns() - s->held_since_ns;
	s->checked += s->held_bytes;
	s->held = false;
	s->held_bytes = 0;
}

/* Verifies the frames received so far, up to a held one. */
static void rdr_verify(struct rdr_source *s)
{
	struct rdr *r = s->reader;
	if (s->held) {
		if (s->held_event >= r->credit_limit)
			return;
		rdr_release_held(s);
	}
	while (s->checked < s->end && s->state == RS_STREAMING) {
		struct frm_header h;
		size_t frame_bytes, need;
		enum frm_status st = frm_decoder_next(&s->decoder, s->buf + s->checked,
						      s->end - s->checked, &h, &frame_bytes, &need);
		if (st == FRM_NEED_MORE)
			break;
		if (st != FRM_OK) {
			s->c.frames_received++;
			s->c.frames_rejected++;
			/* Header errors are found with the 42 header bytes present. */
			frm_parse_header(s->buf + s->checked, &h);
			char what[160];
			if (st == FRM_ERR_RUN)
				snprintf(what, sizeof what, "frame of run %u, expected run %u",
					 h.run_id, r->opt.run_id);
			else if (st == FRM_ERR_LENGTH)
				snprintf(what, sizeof what,
					 "%s: payload_len %u exceeds the limit of %u bytes",
					 frm_status_name(st), h.payload_len, r->opt.max_fragment_bytes);
			else
				snprintf(what, sizeof what, "%s", frm_status_name(st));
			rdr_source_fail(s, what, rdr_error_counter(s, st));
			return;
		}
		if (h.source_id != s->id) {
			s->c.frames_received++;
			s->c.frames_rejected++;
			char what[96];
			snprintf(what, sizeof what, "frame claims source %u", h.source_id);
			rdr_source_fail(s, what, NULL);
			return;
		}
		if (h.flags & FRM_FLAG_END) {
			s->c.end_frames++;
			s->checked += frame_bytes;
			s->state = RS_ENDED;
			if (s->checked < s->end) {
				s->c.err_after_end++;
				log_error("Reader %u: source %u (%s) sent %zu bytes after its END frame",
					  r->opt.id, s->id, s->peer, s->end - s->checked);
				r->status = 1;
				s->end = s->checked;
			}
			break;
		}
		s->c.frames_received++;
		s->c.frames_verified++;
		if (h.event_id >= r->credit_limit) {
			s->held = true;
			s->held_bytes = frame_bytes;
			s->held_event = h.event_id;
			s->held_since_ns = clk_monotonic_ns();
			s->c.held_count++;
			rdr_source_pause(s);
			break;
		}
		s->checked += frame_bytes;
	}
}

/* Verifies what arrived and settles a connection that has closed. */
static void rdr_source_progress(struct rdr_source *s)
{
	rdr_verify(s);
	if (s->eof && s->state == RS_STREAMING && !s->held) {
		if (s->checked < s->end) {
			char what[128];
			snprintf(what, sizeof what, "connection closed inside a frame (%zu bytes of it)",
				 s->end - s->checked);
			s->c.frames_received++;
			s->c.frames_rejected++;
			rdr_source_fail(s, what, &s->c.err_truncated);
		} else {
			rdr_source_fail(s, "connection closed without an END frame", &s->c.err_no_end);
		}
	} else if (s->state == RS_ENDED && s->fd >= 0) {
		rdr_source_close(s, RS_ENDED);
	}
}

/* Makes room at the end of a source's buffer, and keeps the data near its
 * start: once past the first batch, what is not yet forwarded moves back
 * whenever it is no more than what was forwarded before it (so a byte is
 * moved at most about once), and the pages further on are touched only
 * when fragments are held or very large. */
static void rdr_source_compact(struct rdr_source *s)
{
	if (s->start == s->end) {
		s->start = s->checked = s->end = 0;
		return;
	}
	size_t room = s->cap - s->end;
	size_t unsent = s->end - s->start;
	if (s->start > 0 && (room < s->reader->opt.batch_bytes ||
			     (s->end > s->reader->opt.batch_bytes && unsent <= s->start))) {
		/* Only what is not yet forwarded moves: usually part of one frame. */
		memmove(s->buf, s->buf + s->start, s->end - s->start);
		s->checked -= s->start;
		s->end -= s->start;
		s->start = 0;
	}
}

static void rdr_on_source_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct rdr_source *s = arg;
	struct rdr *r = s->reader;
	rdr_source_compact(s);
	size_t room = s->cap - s->end;
	if (room > r->opt.batch_bytes)
		room = r->opt.batch_bytes;
	if (room == 0) {
		/* Full of frames the builder has not taken yet: TCP pushes back. */
		rdr_source_pause(s);
		return;
	}
	ssize_t n = read(fd, s->buf + s->end, room);
	s->c.read_calls++;
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		char what[128];
		snprintf(what, sizeof what, "read failed: %s", strerror(errno));
		rdr_source_fail(s, what, NULL);
		rdr_flush(r);
		rdr_maybe_finish(r);
		return;
	}
	if (n == 0 && s->c.bytes_received == 0) {
		/* Not a byte came: a peer that took the source's slot and left
		 * took nothing from the run, and the source may still come. */
		log_warn("Reader %u: source %u's connection from %s closed; it carried nothing, so the slot is free for source %u again",
			 r->opt.id, s->id, s->peer, s->id);
		rdr_source_close(s, RS_WAITING);
		event_free(s->ev_read);
		s->ev_read = NULL;
		s->peer[0] = '\0';
		return;
	}
	if (n == 0) {
		s->eof = true;
		rdr_source_pause(s);
	} else {
		s->end += (size_t)n;
		s->c.bytes_received += (uint64_t)n;
	}
	rdr_source_progress(s);
	rdr_flush(r);
	rdr_maybe_finish(r);
}

/* After frames left the buffers: reclaims their room and reads again from
 * the sources that were paused on a full buffer. */
static void rdr_resume_sources(struct rdr *r)
{
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		rdr_source_compact(s);
		if (s->state == RS_STREAMING && !s->held && !s->eof)
			rdr_source_resume(s);
	}
}

/* Nothing more can reach the builder through the ring: rather than let the
 * sources fill our buffers and wait for a watchdog, stop them now and
 * report, so the run ends at once and by name. */
static void rdr_ring_lost(struct rdr *r)
{
	r->status = 1;
	r->builder_closed = true;
	r->builder_blocked = false;
	if (r->ev_space != NULL)
		event_del(r->ev_space);
	rdr_stop(r);
}

static void rdr_ring_failed(struct rdr *r, const char *what, int rc)
{
	log_error("Reader %u: shared-memory ring %s to the builder: %s (%s); forwarding stops",
		  r->opt.id, r->segment, what, shr_strerror(rc));
	rdr_ring_lost(r);
}

bool rdr_parse_shm_inject(const char *arg, enum rdr_shm_inject *kind, uint64_t *after)
{
	static const char *const names[] = { "record", "crc", "length", "head" };
	static const enum rdr_shm_inject kinds[] = { RDR_SHM_INJECT_RECORD, RDR_SHM_INJECT_CRC,
						     RDR_SHM_INJECT_LENGTH, RDR_SHM_INJECT_HEAD };
	size_t k;
	if (!opt_kind_at(arg, names, sizeof names / sizeof names[0], &k, after))
		return false;
	*kind = kinds[k];
	return true;
}

/* Test hook (--shm-inject): puts one damaged record where the next frame
 * would go, then forwards nothing more, so that the builder's checks of a
 * ring meet real damage. The frame itself stays in its buffer (held at
 * end), so the books do not count it as forwarded. */
static void rdr_ring_inject(struct rdr *r, const uint8_t *frame)
{
	struct shr_ring *ring = &r->ring;
	uint32_t len = (uint32_t)frm_frame_bytes(frame);
	void *dst;
	int rc = shr_reserve(ring, r->opt.shm_inject == RDR_SHM_INJECT_LENGTH ? 0 : len, &dst);
	if (rc < 0) {
		/* Full: try again once the builder made room. */
		if (rc == -EAGAIN && shr_wait_space(ring, len)) {
			r->builder_blocked = true;
			event_add(r->ev_space, NULL);
		}
		return;
	}
	const char *what = "record";
	switch (r->opt.shm_inject) {
	case RDR_SHM_INJECT_RECORD:
		memcpy(dst, frame, len);
		shr_commit(ring, len - 1);
		what = "record one byte shorter than its frame";
		break;
	case RDR_SHM_INJECT_CRC:
		memcpy(dst, frame, len);
		((uint8_t *)dst)[len - 1] ^= 0x5a;
		shr_commit(ring, len);
		what = "frame with a flipped byte";
		break;
	case RDR_SHM_INJECT_LENGTH: {
		/* The reservation proved the 8 bytes free; the word carries the
		 * right tag, so only the length can be blamed. */
		uint64_t pos = ring->pos;
		*(volatile uint64_t *)(ring->data + (pos & ring->mask)) =
			0x7ffffff0u | (uint64_t)(uint32_t)(pos >> 3) << 32;
		atomic_store_explicit(&ring->hdr->head, pos + SHR_RECORD_PREFIX_BYTES,
				      memory_order_release);
		what = "record length of 2147483632 bytes";
		break;
	}
	case RDR_SHM_INJECT_HEAD:
		atomic_store_explicit(&ring->hdr->head, ring->pos + 3 * ring->capacity_bytes + 4,
				      memory_order_release);
		what = "head counter three laps ahead and misaligned";
		break;
	case RDR_SHM_INJECT_NONE:
		return;
	}
	r->ring_injected = true;
	log_info("Reader %u injected a %s into ring %s after %" PRIu64 " records", r->opt.id, what,
		 r->segment, r->ring_records);
	shr_notify_consumer(ring, r->data_efd);
}

/* Copies every source's verified frames into the ring, one record each,
 * and wakes the builder once per flush, not per frame. A full ring stops
 * the flush until the builder makes room (the space eventfd): the sources'
 * buffers then fill, their reads pause and TCP pushes back on them. */
static void rdr_flush_ring(struct rdr *r)
{
	if (!r->ring_attached || r->builder_blocked || r->builder_closed || r->ring_injected)
		return;
	size_t nsrc = r->opt.source_count;
	bool moved = false;
	for (;;) {
		int rc = 0;
		uint32_t len = 0;
		for (size_t k = 0; k < nsrc && rc == 0; k++) {
			struct rdr_source *s = &r->sources[(r->next_source + k) % nsrc];
			while (s->start < s->checked) {
				void *dst;
				if (r->opt.shm_inject != RDR_SHM_INJECT_NONE &&
				    r->ring_records >= r->opt.shm_inject_after) {
					rdr_ring_inject(r, s->buf + s->start);
					rc = -ECANCELED;
					break;
				}
				len = (uint32_t)frm_frame_bytes(s->buf + s->start);
				rc = shr_reserve(&r->ring, len, &dst);
				if (rc < 0)
					break;
				memcpy(dst, s->buf + s->start, len);
				shr_commit(&r->ring, len);
				s->start += len;
				r->ring_records++;
				r->bytes_forwarded += len;
				moved = true;
			}
		}
		/* Before sleeping too: a builder asleep must see what we put. */
		if (moved) {
			int nrc = shr_notify_consumer(&r->ring, r->data_efd);
			if (nrc < 0) {
				rdr_ring_failed(r, "cannot wake the builder", nrc);
				return;
			}
		}
		if (rc == -EAGAIN) {
			if (!shr_wait_space(&r->ring, len))
				continue;   /* room appeared meanwhile */
			r->ring_full_waits++;
			r->builder_blocked = true;
			event_add(r->ev_space, NULL);
		} else if (rc == -EPIPE) {
			rdr_ring_failed(r, "the builder closed it", rc);
		} else if (rc == -ECANCELED) {
			/* The injection settled the ring's fate (or waits for room). */
		} else if (rc < 0) {
			rdr_ring_failed(r, "cannot write to it", rc);
		}
		break;
	}
	r->next_source = (r->next_source + 1) % nsrc;
	if (moved)
		rdr_resume_sources(r);
}

static void rdr_flush_socket(struct rdr *r);

/* Forwards every source's verified frames to the builder. */
static void rdr_flush(struct rdr *r)
{
	if (r->opt.forward_stall_bytes > 0 && r->bytes_forwarded >= r->opt.forward_stall_bytes) {
		/* Test hook: a data path to the builder that stops delivering
		 * while the control link goes on. */
		if (!r->forward_stalled)
			log_warn("Reader %u: forwarding stalls after %" PRIu64 " bytes (--forward-stall); the control link goes on",
				 r->opt.id, r->bytes_forwarded);
		r->forward_stalled = true;
		return;
	}
	if (r->shm)
		rdr_flush_ring(r);
	else
		rdr_flush_socket(r);
}

/* Writes every source's verified frames to the builder in one writev. */
static void rdr_flush_socket(struct rdr *r)
{
	if (r->builder_fd < 0 || r->builder_blocked || r->builder_closed)
		return;
	size_t nsrc = r->opt.source_count;
	for (;;) {
		int niov = 0;
		int order[RDR_MAX_SOURCES];
		/* A half-written frame must be finished before anything else. */
		if (r->partial_source >= 0) {
			order[niov] = r->partial_source;
			struct rdr_source *s = &r->sources[r->partial_source];
			r->iov[niov].iov_base = s->buf + s->start;
			r->iov[niov].iov_len = s->checked - s->start;
			niov++;
		}
		for (size_t i = 0; i < nsrc && niov < IOV_MAX; i++) {
			struct rdr_source *s = &r->sources[i];
			if ((int)i == r->partial_source || s->checked == s->start)
				continue;
			order[niov] = (int)i;
			r->iov[niov].iov_base = s->buf + s->start;
			r->iov[niov].iov_len = s->checked - s->start;
			niov++;
		}
		if (niov == 0)
			return;
		ssize_t n = writev(r->builder_fd, r->iov, niov);
		r->writev_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				r->builder_blocked = true;
				event_add(r->ev_builder_write, NULL);
				return;
			}
			log_error("Reader %u: data connection to the builder %s failed: %s",
				  r->opt.id, r->builder_peer, strerror(errno));
			r->status = 1;
			r->builder_closed = true;
			return;
		}
		r->bytes_forwarded += (uint64_t)n;
		size_t left = (size_t)n;
		r->partial_source = -1;
		for (int k = 0; k < niov; k++) {
			struct rdr_source *s = &r->sources[order[k]];
			size_t len = r->iov[k].iov_len;
			size_t take = left < len ? left : len;
			s->start += take;
			left -= take;
			if (take < len && take > 0)
				r->partial_source = order[k];
		}
		rdr_resume_sources(r);
		/* After a short write the loop tries once more; EAGAIN then arms
		 * the write event. */
	}
}

static void rdr_on_builder_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct rdr *r = arg;
	r->builder_blocked = false;
	rdr_flush(r);
	rdr_maybe_finish(r);
}

/* Counts the verified frames still in a buffer: they were never forwarded. */
static uint64_t rdr_count_unsent(const struct rdr_source *s)
{
	uint64_t frames = 0;
	size_t pos = s->start;
	while (pos + FRM_HEADER_BYTES <= s->checked) {
		struct frm_header h;
		frm_parse_header(s->buf + pos, &h);
		if (!(h.flags & FRM_FLAG_END))
			frames++;
		pos += FRM_HEADER_BYTES + h.payload_len;
	}
	return frames + (s->held ? 1 : 0);
}

static void rdr_send_report(struct rdr *r)
{
	struct ctl_msg *m = &r->report;
	memset(m, 0, sizeof *m);
	m->type = CTL_END;
	m->u.report.status = r->status;
	struct rdr_counters total = { 0 };
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		if (s->held)
			s->c.held_ns += clk_monotonic_ns() - s->held_since_ns;
		s->c.frames_held_at_end = rdr_count_unsent(s);
		s->c.frames_forwarded = s->c.frames_verified - s->c.frames_held_at_end;
		char name[CTL_MAX_NAME];
		snprintf(name, sizeof name, "source.%u", s->id);
		struct ctl_group *g = ctl_report_group(&m->u.report, name);
#define RDR_SET(f) ctl_group_set(g, #f, s->c.f); total.f += s->c.f;
		RDR_SOURCE_COUNTERS(RDR_SET)
#undef RDR_SET
	}
	struct ctl_group *g = ctl_report_group(&m->u.report, "");
#define RDR_SET_TOTAL(f) ctl_group_set(g, #f, total.f);
	RDR_SOURCE_COUNTERS(RDR_SET_TOTAL)
#undef RDR_SET_TOTAL
	ctl_group_set(g, "writev_calls", r->writev_calls);
	ctl_group_set(g, "bytes_forwarded", r->bytes_forwarded);
	ctl_group_set(g, "transport_shm", r->shm ? 1 : 0);
	if (r->shm) {
		ctl_group_set(g, "ring_records", r->ring_records);
		ctl_group_set(g, "ring_full_waits", r->ring_full_waits);
		ctl_group_set(g, "ring_capacity_bytes", r->ring.capacity_bytes);
	}
	ctl_group_set(g, "credits_received", r->credits_received);
	ctl_group_set(g, "refused_connections", r->refused_connections);
	ctl_group_set(g, "greetings_busy", r->door.busy);
	ctl_group_set(g, "greetings_timed_out", r->door.timed_out);
	ctl_group_set(g, "buffer_bytes", rdr_buffer_bytes(&r->opt));
	procstat_report(&m->u.report);
	if (ctllink_send(r->ctl, m) < 0) {
		log_error("Reader %u could not send its final counters", r->opt.id);
		r->status = 1;
		event_base_loopexit(r->base, NULL);
		return;
	}
	r->reported = true;
	if (!r->opt.quiet && r->shm)
		log_info("Reader %u forwarded %" PRIu64 " frames (%" PRIu64 " rejected, %" PRIu64
			 " held at end) through ring %s, waiting %" PRIu64 " times on a full ring",
			 r->opt.id, total.frames_forwarded, total.frames_rejected,
			 total.frames_held_at_end, r->segment, r->ring_full_waits);
	else if (!r->opt.quiet)
		log_info("Reader %u forwarded %" PRIu64 " frames (%" PRIu64 " rejected, %" PRIu64
			 " held at end) in %" PRIu64 " writes", r->opt.id, total.frames_forwarded,
			 total.frames_rejected, total.frames_held_at_end, r->writev_calls);
}

/* When every source is over and everything verified is forwarded, closes
 * the data stream to the builder and reports. */
static void rdr_maybe_finish(struct rdr *r)
{
	if (r->reported || !r->ctl_ready)
		return;
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		if (s->state == RS_WAITING || s->state == RS_STREAMING)
			return;
		if (s->start < s->checked && !r->builder_closed)
			return;
	}
	if (r->builder_fd >= 0) {
		shutdown(r->builder_fd, SHUT_WR);
		close(r->builder_fd);
		r->builder_fd = -1;
	}
	if (r->ring_attached) {
		/* The builder drains what is left, then sees the end of the
		 * stream; the Unix socket stays open until we exit. */
		shr_close(&r->ring, r->data_efd);
		r->ring_attached = false;
	}
	if (r->listen_fd >= 0) {
		event_del(r->ev_accept);
		close(r->listen_fd);
		r->listen_fd = -1;
	}
	rdr_send_report(r);
}

static struct rdr_source *rdr_find_source(struct rdr *r, uint32_t id)
{
	for (size_t i = 0; i < r->opt.source_count; i++)
		if (r->sources[i].id == id)
			return &r->sources[i];
	return NULL;
}

/* The inactivity limit, checked a few times per limit: a source the reader
 * is reading (not held, not paused on a full buffer) that delivers no
 * complete frame for the limit while the run is live (a frame has come
 * from one of this reader's sources) is given up as lost: stuck inside a
 * frame, or its data path blackholed while its control link lives on. The
 * builder is told at once, so the books close with it named as lost. */
static void rdr_on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct rdr *r = arg;
	if (r->reported)
		return;
	uint64_t now = clk_monotonic_ns();
	uint64_t limit_ns = r->opt.source_idle_timeout_ms * 1000000u;
	bool live = false;
	for (size_t i = 0; i < r->opt.source_count; i++)
		live = live || r->sources[i].c.frames_received > 0;
	bool gave_up = false;
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		uint64_t seen = s->c.frames_received + s->c.end_frames;
		if (s->state != RS_STREAMING || !s->reading || !live || seen != s->idle_frames_seen) {
			s->idle_frames_seen = seen;
			s->idle_since_ns = now;
			continue;
		}
		if (now - s->idle_since_ns < limit_ns)
			continue;
		char what[160];
		snprintf(what, sizeof what,
			 "no complete frame for %" PRIu64 " ms (%zu bytes of a frame pending); given up as lost",
			 (now - s->idle_since_ns) / 1000000u, s->end - s->checked);
		rdr_source_fail(s, what, &s->c.err_idle);
		if (r->ctl_ready) {
			struct ctl_msg m = { .type = CTL_STOP };
			m.u.stop.source = s->id;
			snprintf(m.u.stop.reason, sizeof m.u.stop.reason,
				 "reader %u: source %u sent no complete frame for %" PRIu64 " ms", r->opt.id,
				 s->id, (now - s->idle_since_ns) / 1000000u);
			ctllink_send(r->ctl, &m);
		}
		gave_up = true;
	}
	if (gave_up) {
		rdr_flush(r);
		rdr_maybe_finish(r);
	}
}

static void rdr_on_source_greeted(int fd, const struct ctl_hello *hello, const char *peer,
				  void *arg)
{
	struct rdr *r = arg;
	if (fd < 0) {
		r->refused_connections++;
		return;
	}
	struct rdr_source *s = NULL;
	if (hello->role != CTL_ROLE_SOURCE || hello->channel != CTL_CHANNEL_DATA) {
		greet_reply_error(fd, peer, "wrong_role",
				  "reader %u takes data connections from sources, got a %s on its %s channel",
				  r->opt.id, ctl_role_name(hello->role),
				  hello->channel == CTL_CHANNEL_DATA ? "data" : "control");
	} else if (hello->run_id != r->opt.run_id) {
		greet_reply_error(fd, peer, "wrong_run",
				  "source %u is in run %u but reader %u is in run %u", hello->id,
				  hello->run_id, r->opt.id, r->opt.run_id);
	} else if ((s = rdr_find_source(r, hello->id)) == NULL) {
		greet_reply_error(fd, peer, "unknown_source",
				  "reader %u does not serve source %u; check the topology",
				  r->opt.id, hello->id);
	} else if (s->state == RS_STREAMING) {
		greet_reply_error(fd, peer, "duplicate_id",
				  "source %u is already connected to reader %u from %s", hello->id,
				  r->opt.id, s->peer);
		s = NULL;
	} else if (s->state != RS_WAITING) {
		/* What it sent is in the books: a second stream would be
		 * counted twice. */
		greet_reply_error(fd, peer, "stream_over",
				  "source %u's connection to reader %u from %s has %s after %" PRIu64
				  " verified frames; a source streams once per run",
				  hello->id, r->opt.id, s->peer, s->state == RS_ENDED ? "ended" : "failed",
				  s->c.frames_verified);
		s = NULL;
	} else if (greet_reply_welcome(fd, r->opt.run_id, CTL_ROLE_READER, r->opt.id) < 0) {
		log_warn("Reader %u: source %u (%s) left during the greeting", r->opt.id, hello->id,
			 peer);
		close(fd);
		s = NULL;
	} else {
		s->fd = fd;
		s->state = RS_STREAMING;
		snprintf(s->peer, sizeof s->peer, "%s", peer);
		net_tune(fd, 0);
		s->ev_read = event_new(r->base, fd, EV_READ | EV_PERSIST, rdr_on_source_readable, s);
		rdr_source_resume(s);
		if (!r->opt.quiet)
			log_info("Reader %u: source %u connected from %s (pid %u on %s)", r->opt.id,
				 s->id, peer, hello->pid, hello->host);
		return;
	}
	r->refused_connections++;
}

static void rdr_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct rdr *r = arg;
	greet_accept_all(&r->door, fd, rdr_on_source_greeted, r);
}

static void rdr_on_credit(uint64_t limit, void *arg)
{
	struct rdr *r = arg;
	r->credits_received++;
	if (limit <= r->credit_limit)
		return;
	r->credit_limit = limit;
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		if (!s->held || s->held_event >= limit)
			continue;
		rdr_source_progress(s);
		rdr_source_resume(s);
	}
	rdr_flush(r);
	rdr_maybe_finish(r);
}

static void rdr_on_builder_greeted(int fd, const struct ctl_msg *reply, void *arg)
{
	struct rdr *r = arg;
	r->dial = NULL;
	if (fd < 0) {
		log_error("Reader %u: the builder did not accept our data connection: %s (%s)",
			  r->opt.id, reply->u.error.reason, reply->u.error.code);
		r->status = 1;
		event_base_loopexit(r->base, NULL);
		return;
	}
	r->builder_fd = fd;
	r->ev_builder_write = event_new(r->base, fd, EV_WRITE, rdr_on_builder_writable, r);
	rdr_flush(r);
}

/* The HELLO of the data path, the same over TCP and shared memory. */
static void rdr_data_hello(const struct rdr *r, struct ctl_hello *hello)
{
	greet_hello_init(hello, CTL_ROLE_READER, r->opt.id, CTL_CHANNEL_DATA, r->opt.run_id,
			 r->opt.sources, r->opt.source_count);
}

/* ---- shared-memory path ------------------------------------------------ */

/* A shared-memory path that cannot be set up: like a refused TCP greeting,
 * the reader cannot forward anything and stops. */
static void rdr_shm_abort(struct rdr *r)
{
	r->status = 1;
	event_base_loopexit(r->base, NULL);
}

static void rdr_on_space(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct rdr *r = arg;
	shr_clear_wakeup(fd);
	r->builder_blocked = false;
	rdr_flush(r);
	rdr_maybe_finish(r);
}

/* The Unix socket carries nothing after the handshake: readable means the
 * builder closed it or died. */
static void rdr_on_shm_sock(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct rdr *r = arg;
	uint8_t byte;
	ssize_t n = read(fd, &byte, 1);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	event_del(r->ev_shm_sock);
	if (!r->ring_attached)
		return;     /* our stream is over: the builder may leave */
	if (n > 0)
		log_error("Reader %u: the builder sent an unexpected byte 0x%02x on the shared-memory socket %s",
			  r->opt.id, byte, r->builder_peer);
	else
		log_error("Reader %u: the builder (%s) closed the shared-memory link of ring %s before our data ended",
			  r->opt.id, r->builder_peer, r->segment);
	int32_t pid;
	/* A builder killed before it read our "attached" never removed the
	 * name; we are the last to know of it. */
	if (n == 0 && shr_remove_orphan(r->segment, &pid) > 0)
		log_warn("Reader %u removed segment %s: the builder that created it (pid %d) is gone",
			 r->opt.id, r->segment, (int)pid);
	rdr_ring_lost(r);
}

static void rdr_shm_attach(struct rdr *r)
{
	int rc = shr_attach(&r->ring, r->segment, r->opt.run_id);
	if (rc < 0) {
		log_error("Reader %u cannot attach to the builder's ring %s: %s", r->opt.id,
			  r->segment, shr_strerror(rc));
		int32_t pid;
		/* Nobody else knows of it: left here, it would stay in /dev/shm
		 * until the next builder of this name. */
		if (rc == -EOWNERDEAD && shr_remove_orphan(r->segment, &pid) > 0)
			log_warn("Reader %u removed segment %s: the builder that created it (pid %d) is gone",
				 r->opt.id, r->segment, (int)pid);
		rdr_shm_abort(r);
		return;
	}
	uint64_t max_frame = (uint64_t)r->opt.max_fragment_bytes + FRM_HEADER_BYTES;
	if (max_frame > shr_max_payload(&r->ring)) {
		log_error("Reader %u: the builder's ring %s of %" PRIu64 " bytes holds frames of up to %u bytes, fewer than a fragment of --max-fragment %u needs; raise the builder's --shm-capacity or lower --max-fragment",
			  r->opt.id, r->segment, r->ring.capacity_bytes, shr_max_payload(&r->ring),
			  r->opt.max_fragment_bytes);
		shr_close(&r->ring, r->data_efd);
		rdr_shm_abort(r);
		return;
	}
	uint8_t ack = SHL_ATTACHED_BYTE;
	if (write(r->shm_sock, &ack, 1) != 1) {
		log_error("Reader %u: the builder left during the shared-memory handshake (%s)",
			  r->opt.id, strerror(errno));
		shr_close(&r->ring, r->data_efd);
		rdr_shm_abort(r);
		return;
	}
	r->ring_attached = true;
	r->ev_space = event_new(r->base, r->space_efd, EV_READ, rdr_on_space, r);
	r->ev_shm_sock = event_new(r->base, r->shm_sock, EV_READ | EV_PERSIST, rdr_on_shm_sock, r);
	event_add(r->ev_shm_sock, NULL);
	if (!r->opt.quiet)
		log_info("Reader %u forwards through shared-memory ring %s (%" PRIu64 " bytes)",
			 r->opt.id, r->segment, r->ring.capacity_bytes);
	rdr_flush(r);
	rdr_maybe_finish(r);
}

/* The eventfds follow the WELCOME on the socket, possibly a moment later. */
static void rdr_on_shm_fds(evutil_socket_t fd, short what, void *arg)
{
	struct rdr *r = arg;
	if (what & EV_TIMEOUT) {
		log_error("Reader %u: the builder sent no eventfds for ring %s within the handshake timeout",
			  r->opt.id, r->segment);
		rdr_shm_abort(r);
		return;
	}
	int rc = shr_recv_fds(fd, &r->data_efd, &r->space_efd);
	if (rc == -EAGAIN || rc == -EINTR)
		return;
	event_free(r->ev_shm_sock);
	r->ev_shm_sock = NULL;
	if (rc < 0) {
		log_error("Reader %u: the builder's eventfds for ring %s did not arrive: %s",
			  r->opt.id, r->segment, shr_strerror(rc));
		rdr_shm_abort(r);
		return;
	}
	rdr_shm_attach(r);
}

static void rdr_on_shm_greeted(int fd, const struct ctl_msg *reply, void *arg)
{
	struct rdr *r = arg;
	r->dial = NULL;
	if (fd < 0) {
		log_error("Reader %u: the builder did not accept our shared-memory data path: %s (%s)",
			  r->opt.id, reply->u.error.reason, reply->u.error.code);
		rdr_shm_abort(r);
		return;
	}
	r->shm_sock = fd;
	r->ev_shm_sock = event_new(r->base, fd, EV_READ | EV_PERSIST, rdr_on_shm_fds, r);
	struct timeval tv = { .tv_sec = (time_t)(r->opt.handshake_timeout_ms / 1000),
			      .tv_usec = (suseconds_t)(r->opt.handshake_timeout_ms % 1000) * 1000 };
	event_add(r->ev_shm_sock, &tv);
	/* Usually there already: no need to wait for the loop. */
	event_active(r->ev_shm_sock, EV_READ, 0);
}

/* Once a second the builder hears how much this reader holds back, for its
 * progress line and /metrics. */
static void rdr_on_stats_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct rdr *r = arg;
	if (!r->ctl_ready || r->reported)
		return;
	uint64_t now = clk_monotonic_ns(), held_ns = 0, held_count = 0, forwarded = 0;
	for (size_t i = 0; i < r->opt.source_count; i++) {
		const struct rdr_source *s = &r->sources[i];
		held_ns += s->c.held_ns + (s->held ? now - s->held_since_ns : 0);
		held_count += s->c.held_count;
		forwarded += s->c.frames_verified;
	}
	/* The report is large: reset only what is filled in again. */
	r->stats.type = CTL_STATS;
	r->stats.u.report.group_count = 0;
	r->stats.u.report.status = 0;
	struct ctl_group *g = ctl_report_group(&r->stats.u.report, "");
	ctl_group_set(g, "held_ns", held_ns);
	ctl_group_set(g, "held_count", held_count);
	ctl_group_set(g, "frames_verified", forwarded);
	ctllink_send(r->ctl, &r->stats);
}

static void rdr_on_ctl_ready(void *arg)
{
	struct rdr *r = arg;
	r->ctl_ready = true;
	struct timeval second = { 1, 0 };
	r->ev_stats = event_new(r->base, -1, EV_PERSIST, rdr_on_stats_timer, r);
	event_add(r->ev_stats, &second);
	rdr_maybe_finish(r);
}

static void rdr_on_bye(int32_t status, void *arg)
{
	struct rdr *r = arg;
	if (!r->reported) {
		log_warn("Reader %u: the builder ended the run (status %d) before our sources ended",
			 r->opt.id, status);
		r->status = r->status ? r->status : 1;
	}
	r->done = true;
	event_base_loopexit(r->base, NULL);
}

static void rdr_on_ctl_lost(const char *reason, void *arg)
{
	struct rdr *r = arg;
	if (r->done)
		return;
	log_error("Reader %u lost the builder's control connection: %s; stopping", r->opt.id,
		  reason);
	r->status = 1;
	r->done = true;
	event_base_loopexit(r->base, NULL);
}

/* The builder gave up on a source (dead or stalled): its connection is
 * closed here so the reader can end the run with the others. */
static void rdr_on_stop(uint32_t source, const char *reason, void *arg)
{
	struct rdr *r = arg;
	if (r->reported)
		return;   /* our final counters are on their way */
	if (source == CTL_STOP_ALL) {
		log_warn("Reader %u stopping at the builder's request: %s", r->opt.id, reason);
		rdr_stop(r);
		return;
	}
	struct rdr_source *s = rdr_find_source(r, source);
	if (s == NULL || (s->state != RS_WAITING && s->state != RS_STREAMING))
		return;
	char what[CTL_MAX_TEXT + 32];
	snprintf(what, sizeof what, "dropped at the builder's request: %s", reason);
	rdr_source_fail(s, what, &s->c.err_dropped);
	rdr_flush(r);
	rdr_maybe_finish(r);
}

static const struct ctllink_ops rdr_ctl_ops = {
	.on_ready = rdr_on_ctl_ready,
	.on_credit = rdr_on_credit,
	.on_bye = rdr_on_bye,
	.on_stop = rdr_on_stop,
	.on_lost = rdr_on_ctl_lost,
};

/* One per-source counter family of /metrics. Prometheus names a counter
 * *_total and a duration in seconds, and reads _count as a histogram's: so
 * held_ns is es_reader_held_seconds_total (with the hold in progress, as the
 * END report counts it), held_count es_reader_holds_total, and every other
 * counter es_reader_<its metrics.json name>_total. */
static void rdr_prom_counter(struct evbuffer *out, const struct rdr *r, const char *field,
			     size_t offset)
{
	bool seconds = strcmp(field, "held_ns") == 0;
	char name[96], help[128];
	if (seconds)
		snprintf(name, sizeof name, "es_reader_held_seconds_total");
	else if (strcmp(field, "held_count") == 0)
		snprintf(name, sizeof name, "es_reader_holds_total");
	else
		snprintf(name, sizeof name, "es_reader_%s_total", field);
	snprintf(help, sizeof help, "per source: %s of metrics.json reader.N.source.M%s", field,
		 seconds ? ", in seconds" : "");
	prom_family(out, name, "counter", help);
	uint64_t now = seconds ? clk_monotonic_ns() : 0;
	for (size_t i = 0; i < r->opt.source_count; i++) {
		const struct rdr_source *s = &r->sources[i];
		uint64_t v;
		memcpy(&v, (const char *)&s->c + offset, sizeof v);
		if (seconds)
			prom_sample_f64_id(out, name, "source", s->id,
					   (double)(v + (s->held ? now - s->held_since_ns : 0)) / 1e9);
		else
			prom_sample_u64_id(out, name, "source", s->id, v);
	}
}

/* /metrics and /status: every per-source counter, the admission limit and
 * what is held. */
static void rdr_fill_metrics(struct evbuffer *out, bool json, void *arg)
{
	const struct rdr *r = arg;
	if (json) {
		evbuffer_add_printf(out, "{\"reader\": %u, \"run\": %u, \"admission_limit\": %" PRIu64
				    ", \"sources\": [", r->opt.id, r->opt.run_id, r->credit_limit);
		for (size_t i = 0; i < r->opt.source_count; i++) {
			const struct rdr_source *s = &r->sources[i];
			evbuffer_add_printf(out, "%s{\"source\": %u, \"state\": %d, \"frames_verified\": %" PRIu64
					    ", \"frames_rejected\": %" PRIu64 ", \"held\": %s}", i ? ", " : "",
					    s->id, (int)s->state, s->c.frames_verified, s->c.frames_rejected,
					    s->held ? "true" : "false");
		}
		evbuffer_add_printf(out, "]}\n");
		return;
	}
	prom_family(out, "es_reader_admission_limit", "gauge", "event IDs at or beyond this are held");
	prom_sample_u64(out, "es_reader_admission_limit", NULL, r->credit_limit);
	prom_family(out, "es_reader_writev_calls_total", "counter", "system calls forwarding to the builder");
	prom_sample_u64(out, "es_reader_writev_calls_total", NULL, r->writev_calls);
	prom_family(out, "es_reader_bytes_forwarded_total", "counter", "bytes forwarded to the builder");
	prom_sample_u64(out, "es_reader_bytes_forwarded_total", NULL, r->bytes_forwarded);
	prom_family(out, "es_reader_buffered_bytes", "gauge", "bytes in a source's receive buffer");
	for (size_t i = 0; i < r->opt.source_count; i++)
		prom_sample_u64_id(out, "es_reader_buffered_bytes", "source", r->sources[i].id,
				   r->sources[i].end - r->sources[i].start);
	if (r->ring.hdr != NULL) {
		/* The producer's view: what it wrote that the builder has not yet
		 * released. */
		uint64_t tail = atomic_load_explicit(&r->ring.hdr->tail, memory_order_relaxed);
		prom_family(out, "es_reader_ring_fill_bytes", "gauge", "bytes in the shared-memory ring");
		prom_sample_u64(out, "es_reader_ring_fill_bytes", NULL, r->ring.pos - tail);
		prom_family(out, "es_reader_ring_capacity_bytes", "gauge", "size of the shared-memory ring");
		prom_sample_u64(out, "es_reader_ring_capacity_bytes", NULL, r->ring.capacity_bytes);
		prom_family(out, "es_reader_ring_records_total", "counter", "frames put in the ring");
		prom_sample_u64(out, "es_reader_ring_records_total", NULL, r->ring_records);
	}
	prom_family(out, "es_reader_held", "gauge", "1 while a source is held by the admission limit");
	for (size_t i = 0; i < r->opt.source_count; i++)
		prom_sample_u64_id(out, "es_reader_held", "source", r->sources[i].id, r->sources[i].held);
#define RDR_PROM(f) rdr_prom_counter(out, r, #f, offsetof(struct rdr_counters, f));
	RDR_SOURCE_COUNTERS(RDR_PROM)
#undef RDR_PROM
}

struct rdr *rdr_create(struct event_base *base, const struct rdr_options *opt)
{
	struct rdr *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	r->base = base;
	r->opt = *opt;
	r->listen_fd = -1;
	r->builder_fd = -1;
	char name[64], self[32];
	snprintf(name, sizeof name, "reader %u's data port", opt->id);
	snprintf(self, sizeof self, "reader %u", opt->id);
	greet_door_init(&r->door, base, name, self, opt->handshake_timeout_ms,
			&r->refused_connections);
	r->shm_sock = r->data_efd = r->space_efd = -1;
	r->partial_source = -1;
	/* Hold everything until the builder's first CREDIT says how far to go. */
	r->credit_limit = 0;
	r->shm = opt->builder_shm[0] != '\0';
	char sock_name[96];
	if (r->shm) {
		shl_socket_name(sock_name, sizeof sock_name, opt->builder_shm);
		shl_segment_name(r->segment, sizeof r->segment, opt->builder_shm, opt->id);
		snprintf(r->builder_peer, sizeof r->builder_peer, "@%s", sock_name);
	} else {
		snprintf(r->builder_peer, sizeof r->builder_peer, "%s:%u", opt->builder_host,
			 (unsigned)opt->builder_port);
	}
	r->sources = calloc(opt->source_count, sizeof *r->sources);
	r->iov = calloc(opt->source_count + 1, sizeof *r->iov);
	if (r->sources == NULL || r->iov == NULL)
		goto fail;
	/* After compaction a cut frame (at most one whole frame) sits at the
	 * start and a full batch still fits behind it. */
	size_t cap = (size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES;
	for (size_t i = 0; i < opt->source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		s->reader = r;
		s->id = opt->sources[i];
		s->fd = -1;
		s->cap = cap;
		s->buf = malloc(cap);
		if (s->buf == NULL)
			goto fail;
		frm_decoder_init(&s->decoder, opt->run_id, opt->max_fragment_bytes);
	}
	uint16_t port;
	r->listen_fd = net_listen(opt->listen_host, opt->listen_port, &port);
	if (r->listen_fd < 0)
		goto fail;
	r->ev_accept = event_new(base, r->listen_fd, EV_READ | EV_PERSIST, rdr_on_accept, r);
	event_add(r->ev_accept, NULL);
	if (opt->source_idle_timeout_ms > 0) {
		/* Checked four times per limit, at most every 250 ms. */
		uint64_t every_us = opt->source_idle_timeout_ms * 250u;
		if (every_us > 250000u)
			every_us = 250000u;
		struct timeval tv = { (time_t)(every_us / 1000000u), (suseconds_t)(every_us % 1000000u) };
		r->ev_idle = event_new(base, -1, EV_PERSIST, rdr_on_idle_timer, r);
		if (r->ev_idle == NULL)
			goto fail;
		event_add(r->ev_idle, &tv);
	}
	printf("listening data %s:%u\n", opt->listen_host, (unsigned)port);
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		r->prom = prom_server_start(base, opt->metrics_host, opt->metrics_port, rdr_fill_metrics,
					    r, &metrics_port);
		if (r->prom == NULL)
			goto fail;
		printf("listening metrics %s:%u\n", opt->metrics_host, (unsigned)metrics_port);
	}
	fflush(stdout);
	if (opt->port_file[0] != '\0') {
		const struct net_port ports[] = { { "data", port }, { "metrics", metrics_port } };
		if (net_write_ports(opt->port_file, ports, 2) < 0)
			goto fail;
	}
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_READER, opt->id, CTL_CHANNEL_CONTROL, opt->run_id,
			 opt->sources, opt->source_count);
	r->ctl = ctllink_start(base, opt->control_host, opt->control_port, &hello,
			       opt->connect_timeout_ms, &rdr_ctl_ops, r);
	struct ctl_hello data_hello;
	rdr_data_hello(r, &data_hello);
	if (r->shm)
		r->dial = greet_dial_start(base, "the builder's shared-memory socket", sock_name, 0,
					   true, &data_hello, opt->connect_timeout_ms, -1,
					   rdr_on_shm_greeted, r);
	else
		r->dial = greet_dial_start(base, "the builder's data port", opt->builder_host,
					   opt->builder_port, false, &data_hello,
					   opt->connect_timeout_ms, (int)opt->socket_buffer_bytes,
					   rdr_on_builder_greeted, r);
	if (r->ctl == NULL || r->dial == NULL)
		goto fail;
	return r;
fail:
	rdr_destroy(r);
	return NULL;
}

void rdr_stop(struct rdr *r)
{
	log_info("Reader %u stopping: sources still streaming are closed", r->opt.id);
	for (size_t i = 0; i < r->opt.source_count; i++) {
		struct rdr_source *s = &r->sources[i];
		if (s->state == RS_WAITING || s->state == RS_STREAMING)
			rdr_source_close(s, RS_FAILED);
	}
	r->status = 1;
	rdr_flush(r);
	if (!r->ctl_ready) {
		event_base_loopexit(r->base, NULL);
		return;
	}
	rdr_maybe_finish(r);
}

int rdr_exit_status(const struct rdr *r)
{
	return r->status;
}

void rdr_destroy(struct rdr *r)
{
	if (r == NULL)
		return;
	prom_server_stop(r->prom);
	if (r->ev_stats)
		event_free(r->ev_stats);
	if (r->ev_idle)
		event_free(r->ev_idle);
	ctllink_free(r->ctl);
	greet_dial_cancel(r->dial);
	if (r->ev_accept)
		event_free(r->ev_accept);
	if (r->listen_fd >= 0)
		close(r->listen_fd);
	greet_door_close(&r->door);
	if (r->ev_builder_write)
		event_free(r->ev_builder_write);
	if (r->builder_fd >= 0)
		close(r->builder_fd);
	/* A ring still attached here was cut short (a stop before the end):
	 * detaching tells the builder no more records will come. */
	if (r->ring_attached)
		shr_close(&r->ring, r->data_efd);
	if (r->ev_space)
		event_free(r->ev_space);
	if (r->ev_shm_sock)
		event_free(r->ev_shm_sock);
	if (r->data_efd >= 0)
		close(r->data_efd);
	if (r->space_efd >= 0)
		close(r->space_efd);
	if (r->shm_sock >= 0)
		close(r->shm_sock);
	if (r->sources != NULL) {
		for (size_t i = 0; i < r->opt.source_count; i++) {
			struct rdr_source *s = &r->sources[i];
			if (s->ev_read)
				event_free(s->ev_read);
			if (s->fd >= 0)
				close(s->fd);
			free(s->buf);
		}
	}
	free(r->sources);
	free(r->iov);
	free(r);
}
