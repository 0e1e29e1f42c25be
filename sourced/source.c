#include "source.h"

#include "faults.h"
#include "pace.h"
#include "replay.h"
#include "report.h"
#include "stream.h"

#include "core/gen.h"
#include "io/ctlclient.h"
#include "io/daemon.h"
#include "io/handshake.h"
#include "io/prom.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/control.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	char peer[272];
	struct src_stream *stream;
	struct event *ev_pace;
	struct event *ev_stats;        /* a STATS to the hub at every second of the run */
	struct fault_stall *stall;       /* --stall dribble's timer */
	bool data_stalled;             /* --stall: the stream delivers no more */

	struct pace pace;
	uint64_t next_index;   /* position in the send order */
	uint64_t stamp_ns;     /* last clock read for timestamps */
	uint32_t stamp_uses;
	uint64_t end_ns;

	struct src_delayed *delayed;   /* FIFO: the delay is the same for all */
	uint32_t delayed_head;
	uint32_t delayed_count;

	struct src_replay *replay;     /* --replay, or NULL */
	bool stop_requested;
	bool drain_hold;               /* a drained stop's proposal: wait for the final STOP */
	struct src_counters c;
	struct prom_server *prom;      /* --metrics-listen */
	struct ctl_msg report;         /* the STATS while sending, then the END */
};

static void src_pump(struct src *s);
static void src_begin(struct src *s);
static void src_finish_data(struct src *s);

static void src_timer_in(struct event *ev, uint64_t wait_ns)
{
	struct timeval tv = { .tv_sec = (time_t)(wait_ns / 1000000000u),
			      .tv_usec = (suseconds_t)(wait_ns % 1000000000u) / 1000 };
	evtimer_add(ev, &tv);
}

static void src_fail_data(struct src *s, int err)
{
	log_error("Source %u: data connection to reader %s failed: %s", s->opt.id, s->peer,
		  strerror(-err));
	s->status = 1;
	stream_count_unsent(s->stream);
	src_finish_data(s);
}

/* --stall: from now on the data stream delivers no complete frame, while
 * the event loop, and so the control link, goes on; the builder or the
 * reader has to give this source up. */
static void src_begin_stall(struct src *s)
{
	s->data_stalled = true;
	bool has_next = s->opt.stall == SRC_STALL_DRIBBLE && s->next_index < s->opt.events;
	uint64_t event_id = 0;
	if (has_next)
		event_id = gen_event_at(s->opt.first_event, s->opt.events, s->next_index++,
					s->opt.faults.reorder);
	s->stall = fault_stall_start(s->base, &s->opt, s->stream, &s->c, has_next, event_id);
}

/* The next position of the send order: omitted, held back by the delay
 * fault, or appended to the stream, as the seed says. */
static void src_generate(struct src *s, uint64_t now)
{
	const struct src_options *o = &s->opt;
	uint64_t event_id = gen_event_at(o->first_event, o->events, s->next_index, o->faults.reorder);
	s->next_index++;
	uint16_t sid = (uint16_t)o->id;
	if (gen_is_omitted(&o->faults, o->seed, o->run_id, event_id, sid)) {
		s->c.frags_omitted++;
		return;
	}
	/* The clock is read before the payloads it stamps are made, once per
	 * 16 fragments: a read costs as much as making a 64 B payload and
	 * moves by under a microsecond meanwhile. */
	if ((s->stamp_uses++ & 15u) == 0)
		s->stamp_ns = clk_realtime_ns();
	uint64_t ts = s->stamp_ns;
	if (s->replay != NULL) {
		const uint8_t *payload;
		uint32_t len;
		if (replay_fragment(s->replay, event_id, &payload, &len))
			stream_append_payload(s->stream, event_id, ts, payload, len);
		else
			s->c.frags_omitted++;
		return;
	}
	if (gen_is_delayed(&o->faults, o->seed, o->run_id, event_id, sid)) {
		uint32_t tail = (s->delayed_head + s->delayed_count) % o->max_delayed;
		s->delayed[tail] = (struct src_delayed){
			.event_id = event_id,
			.timestamp_ns = ts,
			.due_ns = now + (uint64_t)o->faults.delay_ms * 1000000u,
		};
		s->delayed_count++;
		s->c.frags_delayed++;
		return;
	}
	stream_append_fragment(s->stream, event_id, ts);
}

/* Fills the send buffer with what is due at now: the bad frame of
 * --inject, delayed fragments whose time has come, then the due positions.
 * Returns true when it stopped because the delay fault holds as many
 * fragments as it may (the oldest has to go out first). */
static bool src_fill(struct src *s, uint64_t now, uint64_t due_positions)
{
	while (stream_has_room(s->stream)) {
		if (fault_stall_due(&s->opt, &s->c))
			break;
		if (fault_inject_due(&s->opt, &s->c)) {
			if (s->opt.inject != SRC_INJECT_NOEND)
				fault_inject(s->stream, &s->opt, &s->c);
			s->stop_requested = true;
			break;
		}
		if (s->delayed_count > 0 && s->delayed[s->delayed_head].due_ns <= now) {
			struct src_delayed *d = &s->delayed[s->delayed_head];
			stream_append_fragment(s->stream, d->event_id, d->timestamp_ns);
			s->delayed_head = (s->delayed_head + 1) % s->opt.max_delayed;
			s->delayed_count--;
			continue;
		}
		if (s->stop_requested || s->next_index >= due_positions)
			break;
		if (s->delayed_count == s->opt.max_delayed)
			return true;
		src_generate(s, now);
	}
	return false;
}

/* Nothing more is due now: sleep until the next position or delayed
 * fragment is, on the run's pacing grid. */
static void src_sleep(struct src *s, uint64_t now)
{
	uint64_t delayed_due = s->delayed_count > 0 ? s->delayed[s->delayed_head].due_ns : UINT64_MAX;
	src_timer_in(s->ev_pace, pace_wait(&s->pace, now, s->next_index, delayed_due));
}

/* Fills the send buffer with what is due now and writes it; returns when
 * the socket is full, nothing more is due, or the run's fragments are out. */
static void src_pump(struct src *s)
{
	if (s->state != SRC_SENDING || s->data_stalled)
		return;
	for (uint64_t rounds = 1;; rounds++) {
		uint64_t now = clk_monotonic_ns();
		s->stamp_uses = 0;   /* a fresh read for the first fragment of a pass */
		uint64_t due_positions = pace_due(&s->pace, now);
		bool blocked = src_fill(s, now, due_positions);
		bool all_out = s->stop_requested ||
			       (s->next_index >= s->pace.events && s->delayed_count == 0 &&
				!s->drain_hold);
		if (all_out && !stream_end_queued(s->stream) && s->opt.inject != SRC_INJECT_NOEND &&
		    s->c.frames_bad_injected == 0)
			stream_append_end(s->stream);
		int rc = stream_flush(s->stream);
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
		if (fault_stall_due(&s->opt, &s->c)) {
			src_begin_stall(s);
			return;
		}
		if (s->next_index >= due_positions || blocked) {
			src_sleep(s, now);
			return;
		}
		/* Unpaced: give the loop a turn now and then for control traffic. */
		if (rounds == 64) {
			src_timer_in(s->ev_pace, 0);
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

/* The next whole second of the run after now: every source's STATS are
 * taken at the same instants (START is one instant for all of them), so
 * the hub compares like with like. */
static void src_arm_stats(struct src *s, uint64_t now)
{
	uint64_t start = s->pace.start_ns, second = 1000000000u;
	uint64_t next = now < start ? start + second : start + ((now - start) / second + 1) * second;
	src_timer_in(s->ev_stats, next - now);
}

/* Where the source is, for the operator's live view: no STATS once the
 * END report is made, so the two share one message. */
static void src_on_stats(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	struct src *s = arg;
	if (s->state != SRC_SENDING)
		return;
	const struct src_options *o = &s->opt;
	uint64_t now = clk_monotonic_ns(), n = s->next_index;
	report_stats(&s->report, now > s->pace.start_ns ? (now - s->pace.start_ns) / 1000000000u : 0,
		     n, n ? gen_event_at(o->first_event, o->events, n - 1, o->faults.reorder) : 0);
	ctllink_send(s->ctl, &s->report);
	src_arm_stats(s, now);
}

static void src_send_report(struct src *s)
{
	report_end(&s->report, &s->c, s->status);
	if (ctllink_send(s->ctl, &s->report) < 0) {
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
	stream_close(s->stream);
	uint64_t start_ns = s->pace.start_ns;
	/* Positions at or past the drained stop's limit were never generated:
	 * cut by the stop, not abandoned. */
	s->c.frags_cut_by_stop = s->opt.events - s->pace.events;
	s->c.frags_abandoned = s->c.events - s->c.frags_omitted - s->c.frags_sent -
			       s->c.frags_cut_by_stop;
	s->c.sending_ns = start_ns ? s->end_ns - start_ns : 0;
	double secs = (double)(s->end_ns - start_ns) / 1e9;
	if (!s->opt.quiet)
		log_info("Source %u sent %" PRIu64 " fragments (%" PRIu64 " omitted, %" PRIu64
			 " duplicated, %" PRIu64 " abandoned, %" PRIu64 " cut by the stop) in %.3f s, %"
			 PRIu64 " writes", s->opt.id, s->c.frags_sent, s->c.frags_omitted,
			 s->c.frags_duplicated, s->c.frags_abandoned, s->c.frags_cut_by_stop, secs,
			 s->c.write_calls);
	s->state = SRC_REPORTING;
	if (s->ctl_ready)
		src_send_report(s);
}

static void src_maybe_start(struct src *s)
{
	if (s->state != SRC_CONNECTING || !s->ctl_ready || !stream_open(s->stream))
		return;
	s->state = SRC_WAITING_START;
	if (s->pace.start_ns != 0)
		src_begin(s);
}

/* The builder's START: every peer is up. */
static void src_on_start(uint64_t start_mono_ns, void *arg)
{
	struct src *s = arg;
	s->pace.start_ns = start_mono_ns;
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
	src_timer_in(s->ev_pace, s->pace.start_ns > now ? s->pace.start_ns - now : 0);
	src_arm_stats(s, now);
}

/* No data connection: nothing was sent, the report says so. */
static void src_no_data(struct src *s)
{
	s->status = 1;
	s->state = SRC_REPORTING;
	if (s->ctl_ready)
		src_send_report(s);
	else
		event_base_loopexit(s->base, NULL);
}

static void src_on_data_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
				void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct src *s = arg;
	s->dial = NULL;
	if (fd < 0) {
		log_error("Source %u: the reader at %s did not accept us: %s (%s)", s->opt.id, s->peer,
			  reply->u.error.reason, reply->u.error.code);
		src_no_data(s);
		return;
	}
	if (stream_attach(s->stream, s->base, fd, src_on_writable, s) < 0) {
		log_error("Source %u: out of memory for the data connection to %s", s->opt.id, s->peer);
		src_no_data(s);
		return;
	}
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
		stream_count_unsent(s->stream);
		stream_pause(s->stream);
	}
	src_finish_data(s);
}

/* The operator's drained stop: the positions to generate end after the
 * event last_event (or where we are, if past it), then END goes as at the
 * run's natural end; the rest is cut by the stop. With the reorder fault a
 * pair of positions swaps its two IDs, so the limit is rounded up to a
 * whole pair: the partner past last_event is sent too rather than the one
 * before it left out. A proposal (confirm) is answered with the last event
 * this source will have generated, and the source holds there: the hub
 * makes the highest answer the final stop, which only raises the limit. */
static void src_on_drain(uint64_t last_event, bool confirm, const char *reason, void *arg)
{
	struct src *s = arg;
	const struct src_options *o = &s->opt;
	uint64_t limit = 0;
	if (last_event >= o->first_event)
		limit = last_event - o->first_event >= o->events ? o->events
			: last_event - o->first_event + 1;
	if (o->faults.reorder && (limit & 1u) && limit < o->events)
		limit++;
	if (limit < s->next_index)
		limit = s->next_index;
	bool ended = s->state >= SRC_REPORTING || s->stop_requested;
	if (confirm) {
		/* Generated so far when ended, else where the limit puts us. */
		uint64_t count = ended ? s->next_index : limit < s->pace.events ? limit
			: s->pace.events;
		struct ctl_msg answer = { .type = CTL_STOP };
		answer.u.stop.source = o->id;
		answer.u.stop.last_event = count > 0 ? o->first_event + count - 1 : CTL_STOP_NOW;
		snprintf(answer.u.stop.reason, sizeof answer.u.stop.reason,
			 "%" PRIu64 " of %" PRIu64 " events generated at the end", count, o->events);
		if (ctllink_send(s->ctl, &answer) < 0)
			log_warn("Source %u could not answer the drained stop", o->id);
	}
	if (ended)
		return;
	/* Held at a proposal, the final stop may raise the limit (another
	 * source was past the proposal); otherwise a stop only lowers it. */
	if (limit < s->pace.events || s->drain_hold)
		s->pace.events = limit;
	s->drain_hold = confirm;
	log_info("Source %u: drained stop after event %" PRIu64 " (%s)%s: %" PRIu64
		 " of %" PRIu64 " events to generate", o->id, last_event, reason,
		 confirm ? ", proposed" : "", s->pace.events, o->events);
	if (s->state == SRC_SENDING)
		src_pump(s);
}

static const struct ctllink_ops src_ctl_ops = {
	.on_ready = src_on_ctl_ready,
	.on_start = src_on_start,
	.on_bye = src_on_bye,
	.on_stop = src_on_stop,
	.on_drain = src_on_drain,
	.on_lost = src_on_ctl_lost,
};

/* /metrics and /status: the source's counters and where it is in its run. */
static void src_fill_metrics(struct evbuffer *out, bool json, void *arg)
{
	const struct src *s = arg;
	const struct report_live live = {
		.id = s->opt.id,
		.run_id = s->opt.run_id,
		.state = (int)s->state,
		.position = s->next_index,
		.events = s->opt.events,
		.delayed_held = s->delayed_count,
	};
	report_live(out, json, &s->c, &live);
}

/* The control link to the builder and the greeting at the reader's data
 * port, both with our HELLO. */
static int src_connect(struct src *s)
{
	const struct src_options *opt = &s->opt;
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_SOURCE, opt->id, CTL_CHANNEL_CONTROL, opt->run_id, NULL, 0);
	s->ctl = ctllink_start(s->base, opt->control_host, opt->control_port, &hello,
			       opt->connect_timeout_ms, &src_ctl_ops, s);
	hello.channel = CTL_CHANNEL_DATA;
	s->dial = greet_dial_start(s->base, "the reader's data port", opt->data_host, opt->data_port,
				   false, &hello, opt->connect_timeout_ms, 0, src_on_data_greeted, s);
	return s->ctl != NULL && s->dial != NULL ? 0 : -EIO;
}

/* --replay: the recording mapped and verified before anything is sent. */
static int src_open_replay(struct src *s)
{
	struct replay_summary sum;
	char error[4400];
	int rc = replay_open(&s->replay, s->opt.replay_dir, (uint16_t)s->opt.id,
			     s->opt.payload_bytes, error, sizeof error);

	if (rc < 0) {
		log_error("Source %u: %s", s->opt.id, error);
		return rc;
	}
	replay_summary(s->replay, &sum);
	log_info("Source %u replays %s: %" PRIu64 " of its fragments (events %" PRIu64 " .. %" PRIu64
		 ") in %" PRIu64 " records of %u files", s->opt.id, s->opt.replay_dir, sum.fragments,
		 sum.first_event, sum.last_event, sum.records, sum.files);
	return 0;
}

struct src *src_create(struct event_base *base, const struct src_options *opt)
{
	struct src *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->base = base;
	s->opt = *opt;
	s->c.events = opt->events;
	s->pace = (struct pace){ .rate = opt->rate, .events = opt->events,
				 .tick_ns = (uint64_t)opt->pace_tick_us * 1000u };
	s->stream = stream_create(&s->opt, &s->c);
	s->delayed = calloc(opt->max_delayed ? opt->max_delayed : 1, sizeof *s->delayed);
	s->ev_pace = evtimer_new(base, src_on_pace, s);
	s->ev_stats = evtimer_new(base, src_on_stats, s);
	if (s->stream == NULL || s->delayed == NULL || s->ev_pace == NULL || s->ev_stats == NULL)
		goto fail;
	snprintf(s->peer, sizeof s->peer, "%s:%u", opt->data_host, (unsigned)opt->data_port);
	if (opt->replay_dir[0] != '\0' && src_open_replay(s) < 0)
		goto fail;
	if (opt->metrics_host[0] != '\0') {
		uint16_t port;
		s->prom = prom_server_start(base, opt->metrics_host, opt->metrics_port, src_fill_metrics,
					    s, &port);
		if (s->prom == NULL)
			goto fail;
		const struct daemon_port announced = { "metrics", opt->metrics_host, port, true };
		daemon_announce(&announced, 1, NULL);
	}
	if (src_connect(s) < 0)
		goto fail;
	return s;
fail:
	src_destroy(s);
	return NULL;
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
	if (s->ev_pace)
		event_free(s->ev_pace);
	if (s->ev_stats)
		event_free(s->ev_stats);
	fault_stall_free(s->stall);
	stream_destroy(s->stream);
	replay_close(s->replay);
	free(s->delayed);
	free(s);
}
