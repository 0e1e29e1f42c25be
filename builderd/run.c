#include "run.h"
#include "run_state.h"

#include "core/acct.h"
#include "core/builder.h"
#include "sys/clock.h"
#include "clocks.h"
#include "wire/control.h"
#include "wire/frame.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "metrics.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "output.h"
#include "sys/procstat.h"
#include "io/prom.h"
#include "shm.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Margin for START to reach every source before their common start. */
#define BD_START_DELAY_NS 2000000u

static void bd_finish(struct bd *b, const char *why);
static bool bd_all_connected(const struct bd *b);
static void bd_maybe_start(struct bd *b);
static void bd_peer_gone(struct bd *b, struct bd_peer *p, const char *why);
static void bd_check_stalls(struct bd *b, uint64_t now);

static void bd_maybe_finish(struct bd *b);
static void bd_on_source_given_up(struct bd *b, struct bd_peer *reader, uint32_t source);

void bd_error(struct bd *b, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	log_error("%s", text);
	b->status = 1;
	if (b->error_count < BD_MAX_ERRORS)
		b->errors[b->error_count++] = strdup(text);
	else
		b->errors_dropped++;
}

static void bd_on_complete(void *ctx, const struct bld_event *e)
{
	struct bd *b = ctx;
	b->last_complete_ns = clk_monotonic_ns();
	if (b->opt.filter_cost_us)
		clk_burn_us(b->opt.filter_cost_us);
	if (e->accepted)
		out_add_event(b->out, e);
}

static void bd_on_expired(void *ctx, const struct bld_expired *x)
{
	struct bd *b = ctx;
	out_add_expired(b->out, x);
}

/* ---- credits ---------------------------------------------------------- */

static void bd_send_credit(struct bd_peer *p, uint64_t limit, uint64_t now)
{
	struct ctl_msg m = { .type = CTL_CREDIT };
	m.u.credit.limit = limit;
	m.u.credit.sequence = ++p->credits;
	if (msgconn_send(p->conn, &m) == 0) {
		p->credit_sent = limit;
		p->credit_sent_ns = now;
		p->run->credits_sent++;
	}
}

/* Publishes the admission limit. Updates are coalesced to at most one per
 * reader per millisecond and, between ticks, to advances of window/8; the
 * tick sends any advance at all, so no reader waits on a stale limit for
 * more than a tick. */
static void bd_publish_credits(struct bd *b, bool tick)
{
	if (b->phase != BD_RUNNING)
		return;
	uint64_t limit = b->opt.no_admission ? UINT64_MAX : bld_admission_limit(b->core);
	uint64_t step = b->opt.max_inflight / 8 ? b->opt.max_inflight / 8 : 1;
	uint64_t now = clk_monotonic_ns();
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		struct bd_peer *p = &b->reader_peers[r];
		if (p->conn == NULL || limit <= p->credit_sent)
			continue;
		if (now - p->credit_sent_ns < BD_CREDIT_MIN_INTERVAL_NS)
			continue;
		if (tick || limit - p->credit_sent >= step)
			bd_send_credit(p, limit, now);
	}
}

/* ---- data from readers -------------------------------------------------- */

void bd_reader_close(struct bd_reader *rd, enum bd_data_state state)
{
	bshm_reader_close(rd);
	if (rd->ev_read != NULL) {
		event_free(rd->ev_read);
		rd->ev_read = NULL;
	}
	if (rd->fd >= 0) {
		close(rd->fd);
		rd->fd = -1;
	}
	rd->state = state;
}

enum frm_status bd_reader_take(struct bd_reader *rd, const uint8_t *buf, size_t avail,
			       bool exact, size_t *frame_bytes, uint64_t now)
{
	struct bd *b = rd->run;
	struct frm_header h;
	size_t need;
	enum frm_status st = frm_decoder_next(&rd->decoder, buf, avail, &h, frame_bytes, &need);
	if (exact && (st == FRM_NEED_MORE || (st == FRM_OK && *frame_bytes != avail))) {
		/* The reader verified this frame; a record that disagrees with
		 * its own frame's length was damaged in the ring. */
		bd_error(b, "Reader %u (%s) put a record of %zu bytes in its ring that does not hold exactly one frame (%zu bytes); closing its data path",
			 rd->id, rd->address, avail, st == FRM_OK ? *frame_bytes : need);
		return FRM_ERR_LENGTH;
	}
	if (st == FRM_NEED_MORE)
		return st;
	if (st != FRM_OK) {
		bd_error(b, "Reader %u (%s) sent a bad frame: %s; closing its data %s", rd->id,
			 rd->address, frm_status_name(st), exact ? "ring" : "connection");
		return st;
	}
	if (h.source_id < b->opt.sources && b->reader_of_source[h.source_id] != (int32_t)rd->id)
		bd_error(b, "Reader %u forwarded a frame of source %u, which it does not serve",
			 rd->id, h.source_id);
	if (h.flags & FRM_FLAG_END) {
		rd->end_frames++;
		if (h.source_id < b->opt.sources) {
			b->end_frame_seen[h.source_id] = true;
			b->end_frame_events[h.source_id] = h.event_id;
		}
		return FRM_OK;
	}
	rd->frames_received++;
	b->frames_received++;
	if (b->first_fragment_ns == 0)
		b->first_fragment_ns = now;
	struct bld_fragment f = {
		.run_id = h.run_id,
		.source_id = h.source_id,
		.event_id = h.event_id,
		.timestamp_ns = h.timestamp_ns,
		.payload_len = h.payload_len,
		.payload_crc = h.payload_crc,   /* the decoder summed it apart */
	};
	bld_add(b->core, &f, now);
	return FRM_OK;
}

void bd_after_frames(struct bd *b)
{
	out_flush(b->out);
	bd_publish_credits(b, false);
	bd_maybe_finish(b);
}

static void bd_on_reader_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct bd_reader *rd = arg;
	struct bd *b = rd->run;
	if (rd->start > 0) {
		/* Only the tail of a frame cut by the last read moves. */
		memmove(rd->buf, rd->buf + rd->start, rd->end - rd->start);
		rd->end -= rd->start;
		rd->start = 0;
	}
	/* At most a batch per read: the buffer's pages beyond a batch and the
	 * frame in progress are only touched by a fragment that large. */
	size_t room = rd->cap - rd->end;
	if (room > b->opt.batch_bytes)
		room = b->opt.batch_bytes;
	ssize_t n = read(fd, rd->buf + rd->end, room);
	rd->read_calls++;
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		if (bd_reader_release(rd, strerror(errno)))
			return;
		bd_error(b, "Data connection of reader %u (%s) failed: %s", rd->id, rd->address,
			 strerror(errno));
		bd_reader_close(rd, BD_DATA_FAILED);
		bd_maybe_finish(b);
		return;
	}
	uint64_t now = clk_monotonic_ns();
	b->last_progress_ns = now;
	rd->end += (size_t)n;
	rd->bytes_received += (uint64_t)n;
	while (rd->start < rd->end) {
		size_t frame_bytes;
		enum frm_status st = bd_reader_take(rd, rd->buf + rd->start, rd->end - rd->start,
						    false, &frame_bytes, now);
		if (st == FRM_NEED_MORE)
			break;
		if (st != FRM_OK) {
			bd_reader_close(rd, BD_DATA_FAILED);
			out_flush(b->out);
			bd_maybe_finish(b);
			return;
		}
		rd->start += frame_bytes;
	}
	if (n == 0 && bd_reader_release(rd, "closed"))
		return;
	if (n == 0) {
		if (rd->start < rd->end)
			bd_error(b, "Reader %u (%s) closed its data connection inside a frame (%zu bytes)",
				 rd->id, rd->address, rd->end - rd->start);
		bd_reader_close(rd, rd->start < rd->end ? BD_DATA_FAILED : BD_DATA_CLOSED);
	}
	out_flush(b->out);
	bd_publish_credits(b, false);
	if (n == 0)
		bd_maybe_finish(b);
}

/* ---- greetings ---------------------------------------------------------- */

static struct bd_peer *bd_peer_of(struct bd *b, const struct ctl_hello *h)
{
	if (h->role == CTL_ROLE_SOURCE && h->id < b->opt.sources)
		return &b->source_peers[h->id];
	if (h->role == CTL_ROLE_READER && h->id < b->opt.readers)
		return &b->reader_peers[h->id];
	return NULL;
}

/* Common checks of every HELLO; false after refusing it. */
static bool bd_check_hello(struct bd *b, int fd, const struct ctl_hello *h, const char *peer,
			   enum ctl_channel channel)
{
	/* The protocol version is checked with the greeting (common/io/handshake.c),
	 * by every listener alike. */
	if (h->run_id != b->opt.run_id) {
		greet_reply_error(fd, peer, "wrong_run", "%s %u is in run %u but the builder is in run %u",
				  ctl_role_name(h->role), h->id, h->run_id, b->opt.run_id);
	} else if (h->channel != channel) {
		greet_reply_error(fd, peer, "wrong_channel", "%s %u greeted the %s port as a %s connection",
				  ctl_role_name(h->role), h->id,
				  channel == CTL_CHANNEL_DATA ? "data" : "control",
				  h->channel == CTL_CHANNEL_DATA ? "data" : "control");
	} else if (b->phase != BD_RUNNING) {
		greet_reply_error(fd, peer, "run_over", "run %u is over", b->opt.run_id);
	} else if (bd_peer_of(b, h) == NULL) {
		greet_reply_error(fd, peer, "unknown_peer",
				  "%s %u is not part of run %u (%u sources, %u readers)",
				  ctl_role_name(h->role), h->id, b->opt.run_id, b->opt.sources,
				  b->opt.readers);
	} else {
		return true;
	}
	b->refused_connections++;
	return false;
}

struct bd_reader *bd_reader_admit(struct bd *b, int fd, const struct ctl_hello *h,
				  const char *peer)
{
	if (!bd_check_hello(b, fd, h, peer, CTL_CHANNEL_DATA))
		return NULL;
	if (h->role != CTL_ROLE_READER) {
		greet_reply_error(fd, peer, "wrong_role",
				  "the builder's data port takes readers, not a %s", ctl_role_name(h->role));
		b->refused_connections++;
		return NULL;
	}
	struct bd_reader *rd = &b->readers[h->id];
	if (rd->state == BD_DATA_STREAMING) {
		greet_reply_error(fd, peer, "duplicate_id", "reader %u already has a data connection from %s",
				  h->id, rd->address);
		b->refused_connections++;
		return NULL;
	}
	if (rd->state != BD_DATA_WAITING) {
		/* What it carried is in the books: a second stream would be
		 * counted twice. */
		greet_reply_error(fd, peer, "stream_over",
				  "reader %u's data connection from %s has %s after %" PRIu64
				  " frames; a reader streams once per run",
				  h->id, rd->address, rd->state == BD_DATA_CLOSED ? "ended" : "failed",
				  rd->frames_received);
		b->refused_connections++;
		return NULL;
	}
	for (uint32_t i = 0; i < h->source_count; i++) {
		uint16_t s = h->sources[i];
		if (s >= b->opt.sources || (b->reader_of_source[s] >= 0 &&
					    b->reader_of_source[s] != (int32_t)h->id)) {
			greet_reply_error(fd, peer, "bad_sources",
					  "reader %u claims source %u, which %s", h->id, s,
					  s >= b->opt.sources ? "is not in this run"
							      : "another reader serves");
			b->refused_connections++;
			return NULL;
		}
	}
	return rd;
}

bool bd_reader_release(struct bd_reader *rd, const char *why)
{
	struct bd *b = rd->run;
	const struct bd_peer *p = &b->reader_peers[rd->id];
	if (rd->state != BD_DATA_STREAMING || rd->bytes_received != 0 || rd->frames_received != 0 ||
	    p->lost || p->reported || b->phase != BD_RUNNING ||
	    (p->conn != NULL && p->pid == rd->pid))
		return false;
	log_warn("Reader %u's data connection from %s %s; it carried nothing, so the slot is free for reader %u again",
		 rd->id, rd->address, why, rd->id);
	bd_reader_close(rd, BD_DATA_WAITING);
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (b->reader_of_source[s] == (int32_t)rd->id)
			b->reader_of_source[s] = -1;
	rd->source_count = 0;
	rd->address[0] = '\0';
	return true;
}

void bd_reader_started(struct bd_reader *rd, const struct ctl_hello *h, const char *peer)
{
	struct bd *b = rd->run;
	for (uint32_t i = 0; i < h->source_count; i++)
		b->reader_of_source[h->sources[i]] = (int32_t)h->id;
	rd->source_count = h->source_count;
	memcpy(rd->sources, h->sources, h->source_count * sizeof h->sources[0]);
	rd->state = BD_DATA_STREAMING;
	rd->pid = h->pid;
	snprintf(rd->address, sizeof rd->address, "%s", peer);
	bd_maybe_start(b);
}

static void bd_on_reader_greeted(int fd, const struct ctl_hello *h, const char *peer, void *arg)
{
	struct bd *b = arg;
	if (fd < 0) {
		b->refused_connections++;
		return;
	}
	struct bd_reader *rd = bd_reader_admit(b, fd, h, peer);
	if (rd == NULL)
		return;
	if (greet_reply_welcome(fd, b->opt.run_id, CTL_ROLE_BUILDER, 0) < 0) {
		close(fd);
		return;
	}
	rd->fd = fd;
	net_tune(fd, (int)b->opt.socket_buffer_bytes);
	rd->ev_read = event_new(b->base, fd, EV_READ | EV_PERSIST, bd_on_reader_readable, rd);
	event_add(rd->ev_read, NULL);
	if (!b->opt.quiet)
		log_info("Reader %u data connected from %s (pid %u on %s)", h->id, peer, h->pid, h->host);
	bd_reader_started(rd, h, peer);
}

static void bd_on_peer_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
			       void *arg)
{
	(void)c;
	struct bd_peer *p = arg;
	struct bd *b = p->run;
	p->last_heard_ns = clk_monotonic_ns();
	switch (msg->type) {
	case CTL_END:
		/* Only data and final reports are progress: clock answers keep
		 * coming from a peer that is stuck. */
		b->last_progress_ns = clk_monotonic_ns();
		bdc_on_report(b->clocks, p, &msg->u.report, true);
		if (p->report == NULL)
			p->report = malloc(sizeof *p->report);
		if (p->report != NULL)
			*p->report = msg->u.report;
		p->reported = true;
		if (msg->u.report.status != 0)
			b->status = 1;
		bd_maybe_finish(b);
		break;
	case CTL_STATS:
		bdc_on_report(b->clocks, p, &msg->u.report, false);
		p->held_ns = acct_value(&msg->u.report, "", "held_ns", NULL);
		p->verified = acct_value(&msg->u.report, "", "frames_verified", NULL);
		break;
	case CTL_PONG:
		bdc_on_pong(b->clocks, p, &msg->u.pong, rx_ns);
		break;
	case CTL_STOP:
		if (p->role == CTL_ROLE_READER) {
			bd_on_source_given_up(b, p, msg->u.stop.source);
			break;
		}
		log_warn("Ignoring a stop message from %s %u", ctl_role_name(p->role), p->id);
		break;
	default:
		log_warn("Ignoring a %s message from %s %u", ctl_type_name(msg->type),
			 ctl_role_name(p->role), p->id);
		break;
	}
}

static void bd_on_peer_close(struct msgconn *c, const char *reason, void *arg)
{
	struct bd_peer *p = arg;
	struct bd *b = p->run;
	msgconn_free(c);
	p->conn = NULL;
	if (b->phase == BD_FINISHED) {
		if (b->open_conns > 0 && --b->open_conns == 0)
			event_base_loopexit(b->base, NULL);
		return;
	}
	if (!p->reported) {
		char why[CTL_MAX_TEXT + 64];
		snprintf(why, sizeof why, "lost its control connection before reporting (%s)", reason);
		bd_peer_gone(b, p, why);
	}
}

/* A peer died or stalled before its final report. What it held is counted
 * as lost with it (metrics.json, equations), the peers that depend on it are
 * told to stop or to drop it so the run can still end, and nothing waits for
 * it any more. */
static void bd_peer_gone(struct bd *b, struct bd_peer *p, const char *why)
{
	if (p->lost || p->reported)
		return;
	p->lost = true;
	bd_error(b, "%s %u (%s, pid %u on %s) %s; what it held is counted as lost with it",
		 ctl_role_title(p->role), p->id, p->address, p->pid, p->host, why);
	if (p->conn != NULL) {
		msgconn_free(p->conn);
		p->conn = NULL;
	}
	struct ctl_msg stop = { .type = CTL_STOP };
	snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason, "%s %u %s", ctl_role_name(p->role),
		 p->id, p->stalled ? "stalled" : p->stuck ? "is stuck" : "is gone");
	if (p->role == CTL_ROLE_READER) {
		struct bd_reader *rd = &b->readers[p->id];
		/* A dead reader's data connection ends by itself, and its
		 * transport says how; a stalled one's must be cut here. */
		if (rd->state == BD_DATA_WAITING ||
		    ((p->stalled || p->stuck) && rd->state == BD_DATA_STREAMING))
			bd_reader_close(rd, BD_DATA_FAILED);
		stop.u.stop.source = CTL_STOP_ALL;
		for (uint16_t s = 0; s < b->opt.sources; s++)
			if (b->reader_of_source[s] == (int32_t)p->id && b->source_peers[s].conn != NULL)
				msgconn_send(b->source_peers[s].conn, &stop);
	} else if (p->role == CTL_ROLE_SOURCE) {
		int32_t r = b->reader_of_source[p->id];
		stop.u.stop.source = p->id;
		if (r >= 0 && b->reader_peers[r].conn != NULL)
			msgconn_send(b->reader_peers[r].conn, &stop);
	}
	/* Lost before the start (its greeting was kept waiting at a busy
	 * door, say): the others start without it rather than wait for ever. */
	bd_maybe_start(b);
	bd_maybe_finish(b);
}

/* A reader gave up one of its sources: no complete frame on its data
 * connection for the reader's inactivity limit (stuck inside a frame, or a
 * data path that stopped delivering), though the source may still answer on
 * its control link. It is lost like a dead one: named, its reader's books
 * close without it, and what it generated beyond what the builder got is
 * counted as lost with it. */
static void bd_on_source_given_up(struct bd *b, struct bd_peer *reader, uint32_t source)
{
	if (source >= b->opt.sources || b->reader_of_source[source] != (int32_t)reader->id) {
		log_warn("Reader %u gave up source %" PRIu32 ", which it does not serve; ignored",
			 reader->id, source);
		return;
	}
	struct bd_peer *p = &b->source_peers[source];
	if (p->reported || p->lost)
		return;
	p->stuck = true;
	char why[200];
	snprintf(why, sizeof why,
		 "was given up by reader %u: its data connection delivered no complete frame within the reader's inactivity limit%s",
		 reader->id, p->conn != NULL ? " while its control link was alive" : "");
	bd_peer_gone(b, p, why);
}

/* The no-progress watchdog fired. Ending at once would leave the healthy
 * peers' final counters out and fail their books, so: every source that has
 * not ended is named stuck and given up (its reader is told to drop it and
 * can then report), every reader still to report is asked to stop and
 * report, and the run ends once they have, or after --stall-timeout-ms,
 * when whoever still has not is given up by name too. */
static void bd_wind_up(struct bd *b, uint64_t now)
{
	b->wind_up_ns = now;
	log_warn("Run %u: no progress for %" PRIu64 " ms; giving up the sources that have not ended and asking the readers for their final counters",
		 b->opt.run_id, (now - b->last_progress_ns) / 1000000u);
	uint64_t stall_ns = b->opt.stall_timeout_ms * 1000000u;
	/* A reader that verified frames the builder never received has a data
	 * path to the builder that stopped delivering: it is the stuck one,
	 * and its sources, held up behind it, are told to stop and report. */
	for (uint32_t r = 0; r < b->opt.readers && b->phase == BD_RUNNING; r++) {
		struct bd_peer *p = &b->reader_peers[r];
		const struct bd_reader *rd = &b->readers[r];
		if (!p->connected || p->reported || p->lost || rd->state != BD_DATA_STREAMING ||
		    p->verified <= rd->frames_received)
			continue;
		p->stuck = true;
		char why[200];
		snprintf(why, sizeof why,
			 "is stuck: its data path to the builder stopped delivering (it verified %" PRIu64 " frames, the builder received %" PRIu64 ")",
			 p->verified, rd->frames_received);
		bd_peer_gone(b, p, why);
	}
	for (uint16_t s = 0; s < b->opt.sources && b->phase == BD_RUNNING; s++) {
		struct bd_peer *p = &b->source_peers[s];
		int32_t r = b->reader_of_source[s];
		if (!p->connected || p->reported || p->lost)
			continue;
		if (r >= 0 && b->reader_peers[r].stuck)
			continue;   /* told to stop by bd_peer_gone(); waited for below */
		p->stuck = true;
		char why[200];
		snprintf(why, sizeof why,
			 "is stuck: no final counters after %" PRIu64 " ms without progress, though its control link %s",
			 b->opt.peer_timeout_ms,
			 p->conn != NULL && now - p->last_heard_ns <= stall_ns ? "still answers" : "is silent");
		bd_peer_gone(b, p, why);
	}
	struct ctl_msg stop = { .type = CTL_STOP };
	stop.u.stop.source = CTL_STOP_ALL;
	snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason,
		 "the run made no progress for %" PRIu64 " ms; send your final counters",
		 b->opt.peer_timeout_ms);
	for (uint32_t r = 0; r < b->opt.readers && b->phase == BD_RUNNING; r++) {
		struct bd_peer *p = &b->reader_peers[r];
		if (p->conn != NULL && !p->reported && !p->lost)
			msgconn_send(p->conn, &stop);
	}
	bd_maybe_finish(b);
}

/* The watchdog's wait is over: whoever has still not reported is stuck. */
static void bd_wind_up_over(struct bd *b)
{
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers && b->phase == BD_RUNNING;
	     i++) {
		struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
						       : &b->reader_peers[i - b->opt.sources];
		if (!p->connected || p->reported || p->lost)
			continue;
		p->stuck = true;
		char why[160];
		snprintf(why, sizeof why,
			 "is stuck: no final counters within %" PRIu64 " ms of the builder asking for them",
			 b->opt.stall_timeout_ms);
		bd_peer_gone(b, p, why);
	}
}

/* From the tick: a peer that has not said anything (clock answers come
 * every 200 ms) for the stall timeout is stopped, SIGSTOP-style, or hung. */
static void bd_check_stalls(struct bd *b, uint64_t now)
{
	uint64_t limit = b->opt.stall_timeout_ms * 1000000u;
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
						       : &b->reader_peers[i - b->opt.sources];
		if (p->conn == NULL || p->reported || p->lost || now - p->last_heard_ns <= limit)
			continue;
		p->stalled = true;
		char why[96];
		snprintf(why, sizeof why, "stalled: no answer for %" PRIu64 " ms",
			 (now - p->last_heard_ns) / 1000000u);
		bd_peer_gone(b, p, why);
	}
}

static const struct msgconn_ops bd_peer_ops = {
	.on_message = bd_on_peer_message,
	.on_close = bd_on_peer_close,
};

/* Once every peer is up, tells the sources to start together, so that the
 * fragments of one event leave every source at about the same moment. */
static void bd_maybe_start(struct bd *b)
{
	if (b->started || b->phase != BD_RUNNING || !bd_all_connected(b))
		return;
	b->started = true;
	struct ctl_msg m = { .type = CTL_START };
	m.u.start.delay_ns = BD_START_DELAY_NS;
	m.u.start.at_realtime_ns = clk_realtime_true_ns() + BD_START_DELAY_NS;
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (b->source_peers[s].conn != NULL)
			msgconn_send(b->source_peers[s].conn, &m);
	if (!b->opt.quiet)
		log_info("Run %u: all %u sources and %u readers connected; starting", b->opt.run_id,
			 b->opt.sources, b->opt.readers);
}

/* A reader's control HELLO names its sources as its data HELLO will: known
 * from the first, a reader lost before its data path opened (kept waiting
 * at a busy door, say) still has its sources stopped and its share of the
 * books closed. The data HELLO is checked against it (bad_sources). */
static void bd_reader_claims(struct bd *b, const struct ctl_hello *h)
{
	struct bd_reader *rd = &b->readers[h->id];
	if (rd->state != BD_DATA_WAITING || rd->source_count != 0)
		return;
	for (uint32_t i = 0; i < h->source_count; i++) {
		uint16_t s = h->sources[i];
		if (s >= b->opt.sources || (b->reader_of_source[s] >= 0 &&
					    b->reader_of_source[s] != (int32_t)h->id))
			return;
	}
	for (uint32_t i = 0; i < h->source_count; i++)
		b->reader_of_source[h->sources[i]] = (int32_t)h->id;
	rd->source_count = h->source_count;
	memcpy(rd->sources, h->sources, h->source_count * sizeof h->sources[0]);
}

static void bd_on_control_greeted(int fd, const struct ctl_hello *h, const char *peer, void *arg)
{
	struct bd *b = arg;
	if (fd < 0) {
		b->refused_connections++;
		return;
	}
	if (!bd_check_hello(b, fd, h, peer, CTL_CHANNEL_CONTROL))
		return;
	struct bd_peer *p = bd_peer_of(b, h);
	if (p->connected && p->conn != NULL) {
		greet_reply_error(fd, peer, "duplicate_id", "%s %u is already connected from %s (pid %u)",
				  ctl_role_name(h->role), h->id, p->address, p->pid);
		b->refused_connections++;
		return;
	}
	if (p->connected) {
		/* Its share of the run is booked (reported, or counted lost):
		 * a second one would be counted twice. */
		greet_reply_error(fd, peer, "peer_left",
				  "%s %u was connected from %s (pid %u) and left run %u %s; it cannot rejoin",
				  ctl_role_name(h->role), h->id, p->address, p->pid, b->opt.run_id,
				  p->reported ? "after its final report" : "before it, counted as lost");
		b->refused_connections++;
		return;
	}
	if (greet_reply_welcome(fd, b->opt.run_id, CTL_ROLE_BUILDER, 0) < 0) {
		close(fd);
		return;
	}
	p->connected = true;
	p->pid = h->pid;
	snprintf(p->host, sizeof p->host, "%s", h->host);
	snprintf(p->address, sizeof p->address, "%s", peer);
	if (p->role == CTL_ROLE_READER)
		bd_reader_claims(b, h);
	net_tune(fd, 0);
	p->conn = msgconn_new(b->base, fd, peer, &bd_peer_ops, p);
	p->last_heard_ns = clk_monotonic_ns();
	bdc_peer_joined(b->clocks, p);
	b->last_progress_ns = clk_monotonic_ns();
	if (!b->opt.quiet)
		log_info("%s %u joined run %u from %s (pid %u on %s)", ctl_role_title(h->role), h->id,
			 b->opt.run_id, peer, h->pid, h->host);
	if (p->role == CTL_ROLE_READER && p->conn != NULL) {
		/* The reader holds everything until it hears a limit. */
		bd_send_credit(p, b->opt.no_admission ? UINT64_MAX : bld_admission_limit(b->core),
			       clk_monotonic_ns());
	}
	bd_maybe_start(b);
}

static void bd_on_data_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct bd *b = arg;
	greet_accept_all(&b->doors[BD_DOOR_DATA], fd, bd_on_reader_greeted, b);
}

static void bd_on_control_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct bd *b = arg;
	greet_accept_all(&b->doors[BD_DOOR_CONTROL], fd, bd_on_control_greeted, b);
}

/* ---- progress, watchdog, end of run ------------------------------------ */

static bool bd_data_done(const struct bd *b)
{
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (b->readers[r].state == BD_DATA_WAITING || b->readers[r].state == BD_DATA_STREAMING)
			return false;
	return true;
}

static bool bd_reports_done(const struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!b->source_peers[s].reported && !b->source_peers[s].lost)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!b->reader_peers[r].reported && !b->reader_peers[r].lost)
			return false;
	return true;
}

static void bd_on_clocks_closed(struct bd *b)
{
	bd_finish(b, NULL);
}

/* Everything is in: a last round of clock exchanges (bounded in time),
 * then the end of the run. */
static void bd_maybe_finish(struct bd *b)
{
	if (b->phase == BD_RUNNING && bd_data_done(b) && bd_reports_done(b) &&
	    !bdc_close(b->clocks, bd_on_clocks_closed))
		bd_finish(b, NULL);
}

/* Names every peer that has not done its part. */
static void bd_report_missing(struct bd *b, bool never_connected_only)
{
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		struct bd_peer *p = &b->source_peers[s];
		if (!p->connected)
			bd_error(b, "Source %u never connected to the builder's control port", s);
		else if (!never_connected_only && !p->reported && !p->lost)
			bd_error(b, "Source %u (pid %u on %s) never ended: no final counters after %" PRIu64 " ms without progress",
				 s, p->pid, p->host, b->opt.peer_timeout_ms);
	}
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		struct bd_peer *p = &b->reader_peers[r];
		struct bd_reader *rd = &b->readers[r];
		if (!p->connected)
			bd_error(b, "Reader %u never connected to the builder's control port", r);
		else if (!never_connected_only && !p->reported && !p->lost)
			bd_error(b, "Reader %u (pid %u on %s) never ended: no final counters after %" PRIu64 " ms without progress",
				 r, p->pid, p->host, b->opt.peer_timeout_ms);
		if (rd->state == BD_DATA_WAITING)
			bd_error(b, "Reader %u never opened its data connection", r);
		else if (!never_connected_only && rd->state == BD_DATA_STREAMING)
			bd_error(b, "Reader %u never closed its data stream", r);
	}
}

static bool bd_all_connected(const struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!b->source_peers[s].connected)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!b->reader_peers[r].connected || b->readers[r].state == BD_DATA_WAITING)
			return false;
	return true;
}

/* One line on how the run goes: on a terminal it is rewritten in place
 * every second, elsewhere (a log file, CI) logged every five seconds. */
static void bd_log_progress(struct bd *b, uint64_t now, bool terminal)
{
	const struct bld_counters *c = bld_counters(b->core);
	double secs = (double)(now - b->last_progress_log_ns) / 1e9;
	double rate = secs > 0 ? (double)(c->events_complete - b->progress_complete_at_log) / secs : 0;
	uint64_t expected = b->opt.events;
	char complete[48] = "", eta[32] = "", p99[32] = "n/a";
	if (expected > 0) {
		snprintf(complete, sizeof complete, ", %.1f%% complete",
			 100.0 * (double)c->events_complete / (double)expected);
		uint64_t done = c->events_complete + c->events_expired + c->events_unobserved;
		if (rate > 0 && done < expected)
			snprintf(eta, sizeof eta, ", ETA %.0f s", (double)(expected - done) / rate);
	}
	const struct hist *lat = out_latency(b->out);
	if (lat->samples > 0)
		snprintf(p99, sizeof p99, "%.3f ms", (double)hist_quantile(lat, 0.99) / 1e6);
	uint64_t oldest = bld_oldest_pending(b->core);
	char pending[64] = "";
	if (oldest != UINT64_MAX)
		snprintf(pending, sizeof pending, " (oldest %" PRIu64 ")", oldest);
	char limit[40] = "off";
	if (!b->opt.no_admission)
		snprintf(limit, sizeof limit, "%" PRIu64, bld_admission_limit(b->core));
	/* Summed as doubles: peers' counters must not wrap the line's figure. */
	double held_ns = 0;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		held_ns += (double)b->reader_peers[r].held_ns;
	char line[360];
	snprintf(line, sizeof line,
		 "Run %u: %" PRIu64 " built (%.0f/s), %" PRIu64 " accepted, %" PRIu64 " expired%s, "
		 "%u pending%s, limit %s, readers held %.1f ms, p99 %s%s",
		 b->opt.run_id, c->events_complete, rate, c->events_accepted, c->events_expired,
		 complete, bld_pending(b->core), pending, limit, held_ns / 1e6, p99, eta);
	if (terminal) {
		fprintf(stderr, "\r%s\033[K", line);
		fflush(stderr);
		b->progress_line_shown = true;
	} else {
		log_info("%s", line);
	}
	b->last_progress_log_ns = now;
	b->progress_complete_at_log = c->events_complete;
}

static void bd_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct bd *b = arg;
	if (b->phase != BD_RUNNING)
		return;
	uint64_t now = clk_monotonic_ns();
	bld_expire(b->core, now);
	out_flush(b->out);
	bd_publish_credits(b, true);
	bshm_tick(b, now);
	bd_check_stalls(b, now);
	if (now - b->rate_sample_ns >= 1000000000u) {
		uint64_t complete = bld_counters(b->core)->events_complete;
		b->recent_events_per_s = (double)(complete - b->rate_sample_complete) * 1e9 /
					 (double)(now - b->rate_sample_ns);
		b->rate_sample_ns = now;
		b->rate_sample_complete = complete;
	}
	if (b->phase != BD_RUNNING)
		return;
	uint64_t limit_ns = b->opt.peer_timeout_ms * 1000000u;
	if (!bd_all_connected(b) && now - b->start_ns > limit_ns) {
		bd_report_missing(b, true);
		bd_finish(b, "a peer never connected");
		return;
	}
	if (b->wind_up_ns != 0 && now - b->wind_up_ns > b->opt.stall_timeout_ms * 1000000u) {
		bd_wind_up_over(b);
		if (b->phase != BD_RUNNING)
			return;
		bd_report_missing(b, false);
		bd_finish(b, "no progress");
		return;
	}
	if (b->wind_up_ns == 0 && now - b->last_progress_ns > limit_ns) {
		bd_wind_up(b, now);
		return;
	}
	if (!b->opt.quiet) {
		bool terminal = b->progress_on_terminal;
		if (now - b->last_progress_log_ns >= (terminal ? 1000000000u : 5000000000u))
			bd_log_progress(b, now, terminal);
	}
}

static uint64_t bd_events_generated(struct bd *b)
{
	if (b->opt.events != 0)
		return b->opt.events;
	uint64_t n = 0;
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		bool found;
		uint64_t v = acct_value(b->source_peers[s].report, "", "events", &found);
		if (found && v > n)
			n = v;
		if (b->end_frame_seen[s] && b->end_frame_events[s] > n)
			n = b->end_frame_events[s];
	}
	return n;
}

static void bd_check_end_frames(struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		bool found;
		uint64_t v = acct_value(b->source_peers[s].report, "", "events", &found);
		if (b->end_frame_seen[s] && found && b->end_frame_events[s] != v)
			bd_error(b, "Source %u's END frame announced %" PRIu64 " events but it reported %" PRIu64,
				 s, b->end_frame_events[s], v);
	}
}

/* Turns the error counters and statuses in the peers' reports into named
 * errors of the run. */
static void bd_collect_peer_errors(struct bd *b)
{
	static const struct {
		const char *counter;
		const char *what;
	} kinds[] = {
		{ "err_magic", "frames with a bad magic" },
		{ "err_version", "frames with a bad version" },
		{ "err_flags", "frames with bad flags" },
		{ "err_length", "frames with an oversized length" },
		{ "err_crc", "frames with a checksum mismatch" },
		{ "err_run", "frames of another run" },
		{ "err_truncated", "connections closed inside a frame" },
		{ "err_no_end", "connections closed without an END frame" },
		{ "err_after_end", "connections with data after END" },
		{ "err_dropped", "connections dropped because the source was gone" },
		{ "err_idle", "connections given up with no complete frame within the inactivity limit" },
	};
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		const struct bd_peer *p = &b->reader_peers[r];
		for (uint32_t i = 0; i < b->readers[r].source_count; i++) {
			char group[CTL_MAX_NAME];
			uint16_t sid = b->readers[r].sources[i];
			snprintf(group, sizeof group, "source.%u", sid);
			for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
				uint64_t v = acct_value(p->report, group, kinds[k].counter, NULL);
				if (v > 0)
					bd_error(b, "Reader %u rejected source %u: %" PRIu64 " %s (%s)", r, sid,
						 v, kinds[k].what, kinds[k].counter);
			}
		}
	}
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		const struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
							     : &b->reader_peers[i - b->opt.sources];
		if (p->report != NULL && p->report->status != 0)
			bd_error(b, "%s %u (pid %u on %s) ended with errors (status %d); see its log",
				 ctl_role_title(p->role), p->id, p->pid, p->host, p->report->status);
	}
}

static void bd_say_bye(struct bd *b)
{
	struct ctl_msg m = { .type = CTL_BYE };
	m.u.bye.status = b->status;
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
						       : &b->reader_peers[i - b->opt.sources];
		if (p->conn == NULL)
			continue;
		msgconn_send(p->conn, &m);
		b->open_conns++;
	}
}

static void bd_finish(struct bd *b, const char *why)
{
	if (b->phase != BD_RUNNING)
		return;
	b->phase = BD_FINISHED;
	b->end_ns = clk_monotonic_ns();
	if (b->progress_line_shown)
		fputc('\n', stderr);
	if (why != NULL)
		log_warn("Ending run %u early: %s", b->opt.run_id, why);
	event_del(b->ev_tick);
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (b->readers[r].state == BD_DATA_STREAMING)
			bd_reader_close(&b->readers[r], BD_DATA_FAILED);
	bld_finish(b->core, bd_events_generated(b));
	bd_check_end_frames(b);
	bd_collect_peer_errors(b);
	if (out_flush(b->out) < 0)
		bd_error(b, "Writing the record files in %s failed", b->opt.out_dir);
	bdc_finish(b->clocks);

	const struct ctl_report **source_reports = calloc(b->opt.sources, sizeof *source_reports);
	struct acct_reader *readers = calloc(b->opt.readers, sizeof *readers);
	bool *source_gone = calloc(b->opt.sources, sizeof *source_gone);
	uint64_t *unique_from = calloc(b->opt.sources, sizeof *unique_from);
	struct acct a = { 0 };
	if (source_reports == NULL || readers == NULL || source_gone == NULL || unique_from == NULL) {
		bd_error(b, "Out of memory for the end-of-run accounting");
	} else {
		for (uint16_t s = 0; s < b->opt.sources; s++) {
			source_reports[s] = b->source_peers[s].report;
			source_gone[s] = b->source_peers[s].lost && !b->source_peers[s].reported;
			unique_from[s] = bld_unique_from(b->core, s);
		}
		for (uint32_t r = 0; r < b->opt.readers; r++) {
			readers[r].id = r;
			readers[r].report = b->reader_peers[r].report;
			readers[r].gone = b->reader_peers[r].lost && !b->reader_peers[r].reported;
			readers[r].frames_received_by_builder = b->readers[r].frames_received;
			readers[r].source_count = b->readers[r].source_count;
			readers[r].sources = b->readers[r].sources;
		}
		struct acct_run run = {
			.sources = b->opt.sources,
			.source_reports = source_reports,
			.source_gone = source_gone,
			.unique_from = unique_from,
			.reader_count = b->opt.readers,
			.readers = readers,
			.builder = bld_counters(b->core),
			.builder_frames_received = b->frames_received,
		};
		if (acct_compute(&run, &a) < 0)
			bd_error(b, "Out of memory for the end-of-run accounting");
		/* A peer's counters that cannot be true fail the run by name. */
		for (size_t i = 0; i < a.violation_count; i++)
			bd_error(b, "%s", a.violations[i].text);
	}
	if (!acct_balanced(&a))
		b->status = 1;
	if (metrics_write(b, &a) < 0)
		b->status = 1;
	metrics_print_summary(stdout, b, &a);
	fflush(stdout);
	acct_free(&a);
	free(source_reports);
	free(source_gone);
	free(unique_from);
	free(readers);
	if (!out_close(b->out))
		b->status = 1;
	b->out = NULL;
	bd_say_bye(b);
	if (b->open_conns == 0) {
		event_base_loopexit(b->base, NULL);
	} else {
		/* Peers close after BYE; do not wait forever for one that won't. */
		struct timeval tv = { 2, 0 };
		event_base_loopexit(b->base, &tv);
	}
}

struct bd *bd_create(struct event_base *base, const struct bd_options *opt)
{
	struct bd *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->base = base;
	b->opt = *opt;
	b->data_fd = b->control_fd = -1;
	static const char *const door_names[BD_DOORS] = {
		[BD_DOOR_DATA] = "the builder's data port",
		[BD_DOOR_CONTROL] = "the builder's control port",
		[BD_DOOR_SHM] = "the builder's shared-memory socket",
	};
	for (int d = 0; d < BD_DOORS; d++)
		greet_door_init(&b->doors[d], base, door_names[d], "the builder",
				opt->handshake_timeout_ms, &b->refused_connections);
	b->start_ns = b->last_progress_ns = b->last_progress_log_ns = clk_monotonic_ns();
	b->progress_on_terminal = isatty(STDERR_FILENO);
	uint16_t S = opt->sources;
	uint32_t N = opt->readers;
	b->source_offsets_ns = calloc(S, sizeof *b->source_offsets_ns);
	b->source_peers = calloc(S, sizeof *b->source_peers);
	b->reader_peers = calloc(N, sizeof *b->reader_peers);
	b->readers = calloc(N, sizeof *b->readers);
	b->reader_of_source = malloc(S * sizeof *b->reader_of_source);
	b->end_frame_events = calloc(S, sizeof *b->end_frame_events);
	b->end_frame_seen = calloc(S, sizeof *b->end_frame_seen);
	if (!b->source_offsets_ns || !b->source_peers || !b->reader_peers || !b->readers ||
	    !b->reader_of_source || !b->end_frame_events || !b->end_frame_seen)
		goto fail;
	for (uint16_t s = 0; s < S; s++) {
		b->reader_of_source[s] = -1;
		b->source_peers[s] = (struct bd_peer){ .run = b, .role = CTL_ROLE_SOURCE, .id = s };
	}
	size_t cap = (size_t)opt->batch_bytes + opt->max_fragment_bytes + FRM_HEADER_BYTES;
	for (uint32_t r = 0; r < N; r++) {
		b->reader_peers[r] = (struct bd_peer){ .run = b, .role = CTL_ROLE_READER, .id = r };
		struct bd_reader *rd = &b->readers[r];
		rd->run = b;
		rd->id = r;
		rd->fd = -1;
		rd->cap = cap;
		rd->buf = malloc(cap);
		if (rd->buf == NULL)
			goto fail;
		frm_decoder_init(&rd->decoder, opt->run_id, opt->max_fragment_bytes);
	}
	if (mkdir(opt->out_dir, 0755) < 0 && errno != EEXIST) {
		log_error("Cannot create the output folder %s: %s", opt->out_dir, strerror(errno));
		goto fail;
	}
	struct bld_config bc = {
		.run_id = opt->run_id,
		.sources = S,
		.window = opt->max_inflight,
		.timeout_ns = opt->timeout_ms * 1000000u,
		.skip_timeout_ns = opt->skip_timeout_ms * 1000000u,
		.filter_modulo = opt->filter_modulo,
		.first_event = opt->first_event,
		.events = opt->events,
	};
	struct bld_sink sink = { .on_complete = bd_on_complete, .on_expired = bd_on_expired, .ctx = b };
	b->core = bld_create(&bc, &sink);
	if (b->core == NULL) {
		log_error("Cannot create the builder core (window %u, %u sources): %s",
			  opt->max_inflight, S, strerror(errno));
		goto fail;
	}
	b->out = out_open(opt->out_dir, opt->flush_every, S, b->source_offsets_ns);
	if (b->out == NULL)
		goto fail;
	b->clocks = bdc_create(b);
	if (b->clocks == NULL)
		goto fail;
	uint16_t data_port, control_port;
	b->data_fd = net_listen(opt->listen_host, opt->listen_port, &data_port);
	if (b->data_fd < 0)
		goto fail;
	b->control_fd = net_listen(opt->control_host, opt->control_port, &control_port);
	if (b->control_fd < 0)
		goto fail;
	if (bshm_start(b) < 0)
		goto fail;
	b->ev_data_accept = event_new(base, b->data_fd, EV_READ | EV_PERSIST, bd_on_data_accept, b);
	b->ev_control_accept = event_new(base, b->control_fd, EV_READ | EV_PERSIST,
					 bd_on_control_accept, b);
	b->ev_tick = event_new(base, -1, EV_PERSIST, bd_on_tick, b);
	event_add(b->ev_data_accept, NULL);
	event_add(b->ev_control_accept, NULL);
	struct timeval tick = { 0, BD_TICK_US };
	event_add(b->ev_tick, &tick);
	printf("listening data %s:%u control %s:%u\n", opt->listen_host, (unsigned)data_port,
	       opt->control_host, (unsigned)control_port);
	fflush(stdout);
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		b->prom = prom_server_start(base, opt->metrics_host, opt->metrics_port,
					    metrics_fill_live, b, &metrics_port);
		if (b->prom == NULL)
			goto fail;
		printf("listening metrics %s:%u\n", opt->metrics_host, (unsigned)metrics_port);
	}
	if (opt->port_file[0] != '\0') {
		const struct net_port ports[] = { { "data", data_port }, { "control", control_port },
						  { "metrics", metrics_port } };
		if (net_write_ports(opt->port_file, ports, 3) < 0)
			goto fail;
	}
	if (!opt->quiet)
		log_info("Run %u: waiting for %u sources and %u readers; window %u events, timeout %" PRIu64
			 " ms, admission %s", opt->run_id, S, N, opt->max_inflight, opt->timeout_ms,
			 opt->no_admission ? "off" : "on");
	return b;
fail:
	bd_destroy(b);
	return NULL;
}

void bd_stop(struct bd *b, const char *why)
{
	if (b->phase == BD_RUNNING) {
		bd_error(b, "Run %u stopped: %s", b->opt.run_id, why);
		bd_finish(b, why);
	}
}

int bd_exit_status(const struct bd *b)
{
	return b->status;
}

void bd_destroy(struct bd *b)
{
	if (b == NULL)
		return;
	for (uint32_t i = 0; b->source_peers && i < b->opt.sources; i++) {
		msgconn_free(b->source_peers[i].conn);
		free(b->source_peers[i].report);
	}
	for (uint32_t i = 0; b->reader_peers && i < b->opt.readers; i++) {
		msgconn_free(b->reader_peers[i].conn);
		free(b->reader_peers[i].report);
	}
	for (uint32_t i = 0; b->readers && i < b->opt.readers; i++) {
		bd_reader_close(&b->readers[i], BD_DATA_CLOSED);
		bshm_reader_free(&b->readers[i]);
		free(b->readers[i].buf);
	}
	bshm_stop(b);
	if (b->ev_data_accept)
		event_free(b->ev_data_accept);
	if (b->ev_control_accept)
		event_free(b->ev_control_accept);
	if (b->ev_tick)
		event_free(b->ev_tick);
	prom_server_stop(b->prom);
	if (b->data_fd >= 0)
		close(b->data_fd);
	if (b->control_fd >= 0)
		close(b->control_fd);
	for (int d = 0; d < BD_DOORS; d++)
		greet_door_close(&b->doors[d]);
	bdc_destroy(b->clocks);
	out_close(b->out);
	bld_destroy(b->core);
	for (uint32_t i = 0; i < b->error_count; i++)
		free(b->errors[i]);
	free(b->source_offsets_ns);
	free(b->source_peers);
	free(b->reader_peers);
	free(b->readers);
	free(b->reader_of_source);
	free(b->end_frame_events);
	free(b->end_frame_seen);
	free(b);
}
