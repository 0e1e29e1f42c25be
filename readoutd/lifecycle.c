/* The reader's lifecycle: wires the data port, the intake and a forwarder, keeps the
 * control link to the builder (CREDIT, STOP, BYE, the STATS every second),
 * and ends the run: once every source is over and everything verified is
 * forwarded, it closes the data stream and sends the END report. */
#include "reader.h"

#include "door.h"
#include "forward.h"
#include "intake.h"
#include "metrics.h"

#include "sys/log.h"
#include "wire/control.h"
#include "io/handshake.h"
#include "wire/frame.h"
#include "io/ctlclient.h"
#include "io/net.h"
#include "io/prom.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rdr {
	struct event_base *base;
	struct rdr_options opt;
	int status;
	struct intake *intake;
	struct door *door;
	struct fwd *fwd;
	struct ctllink *ctl;
	bool ctl_ready;
	struct prom_server *prom;    /* --metrics-listen */
	struct event *ev_stats;      /* a STATS to the builder every second */
	struct ctl_msg stats;
	uint64_t credits_received;
	bool reported;
	bool done;
	struct ctl_msg report;
};

size_t rdr_buffer_bytes(const struct rdr_options *opt)
{
	return opt->source_count *
	       ((size_t)opt->batch_bytes + (size_t)opt->max_fragment_bytes + FRM_HEADER_BYTES);
}

static int rdr_status(const struct rdr *r)
{
	return r->status ? r->status : intake_failed(r->intake) ? 1 : 0;
}

static struct rmet_reader rdr_books(const struct rdr *r)
{
	struct rmet_reader b = { .id = r->opt.id, .run_id = r->opt.run_id,
				 .status = rdr_status(r),
				 .credits_received = r->credits_received,
				 .buffer_bytes = rdr_buffer_bytes(&r->opt) };
	door_counts(r->door, &b.refused_connections, &b.greetings_busy, &b.greetings_evicted,
		    &b.greetings_timed_out);
	return b;
}

static void rdr_send_report(struct rdr *r)
{
	struct rdr_counters total;
	struct rmet_reader books = rdr_books(r);
	intake_close_books(r->intake);
	rmet_end_report(&r->report, &books, r->intake, r->fwd, &total);
	if (ctllink_send(r->ctl, &r->report) < 0) {
		log_error("Reader %u could not send its final counters", r->opt.id);
		r->status = 1;
		event_base_loopexit(r->base, NULL);
		return;
	}
	r->reported = true;
	if (r->opt.quiet)
		return;
	struct fwd_stats st;
	fwd_stats(r->fwd, &st);
	if (st.shm)
		log_info("Reader %u forwarded %" PRIu64 " frames (%" PRIu64 " rejected, %" PRIu64
			 " held at end) through ring %s, waiting %" PRIu64 " times on a full ring",
			 r->opt.id, total.frames_forwarded, total.frames_rejected,
			 total.frames_held_at_end, st.ring_name, st.ring_full_waits);
	else
		log_info("Reader %u forwarded %" PRIu64 " frames (%" PRIu64 " rejected, %" PRIu64
			 " held at end) in %" PRIu64 " writes", r->opt.id, total.frames_forwarded,
			 total.frames_rejected, total.frames_held_at_end, st.writev_calls);
}

/* When every source is over and everything verified is forwarded, closes
 * the data stream to the builder and reports. */
static void rdr_maybe_finish(struct rdr *r)
{
	if (r->reported || !r->ctl_ready || !intake_over(r->intake))
		return;
	if (intake_unsent(r->intake) && !fwd_closed(r->fwd))
		return;
	fwd_finish(r->fwd);
	door_close(r->door);
	intake_finish(r->intake);
	rdr_send_report(r);
}

/* Frames were verified or room appeared: forward, and see whether the run
 * is over. */
static void rdr_on_progress(void *arg)
{
	struct rdr *r = arg;
	fwd_flush(r->fwd);
	rdr_maybe_finish(r);
}

static void rdr_on_given_up(void *arg, uint16_t source, uint64_t idle_ms)
{
	struct rdr *r = arg;
	if (!r->ctl_ready)
		return;
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = source;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason,
		 "reader %u: source %u sent no complete frame for %" PRIu64 " ms", r->opt.id,
		 source, idle_ms);
	ctllink_send(r->ctl, &m);
}

static void rdr_on_fwd_failed(void *arg, enum fwd_failure why)
{
	struct rdr *r = arg;
	r->status = 1;
	if (why == FWD_REFUSED)
		event_base_loopexit(r->base, NULL);
	else if (why == FWD_LOST)
		rdr_stop(r);
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
	rmet_stats(&r->stats, r->intake);
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

static void rdr_on_credit(uint64_t limit, void *arg)
{
	struct rdr *r = arg;
	r->credits_received++;
	intake_admit(r->intake, limit);
	rdr_on_progress(r);
}

static void rdr_on_bye(int32_t status, void *arg)
{
	struct rdr *r = arg;
	if (!r->reported) {
		log_warn("Reader %u: the builder ended the run (status %d) before our sources ended",
			 r->opt.id, status);
		r->status = rdr_status(r) ? rdr_status(r) : 1;
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
	if (source > UINT16_MAX || !intake_drop(r->intake, (uint16_t)source, reason))
		return;
	rdr_on_progress(r);
}

static const struct ctllink_ops rdr_ctl_ops = {
	.on_ready = rdr_on_ctl_ready,
	.on_credit = rdr_on_credit,
	.on_bye = rdr_on_bye,
	.on_stop = rdr_on_stop,
	.on_lost = rdr_on_ctl_lost,
};

static void rdr_fill_metrics(struct evbuffer *out, bool json, void *arg)
{
	const struct rdr *r = arg;
	struct rmet_reader books = rdr_books(r);
	rmet_exposition(out, json, &books, r->intake, r->fwd);
}

/* Prints and writes (--port-file) the ports bound, and serves /metrics. */
static int rdr_announce(struct rdr *r, uint16_t data_port)
{
	const struct rdr_options *opt = &r->opt;
	printf("listening data %s:%u\n", opt->listen_host, (unsigned)data_port);
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		r->prom = prom_server_start(r->base, opt->metrics_host, opt->metrics_port,
					    rdr_fill_metrics, r, &metrics_port);
		if (r->prom == NULL)
			return -1;
		printf("listening metrics %s:%u\n", opt->metrics_host, (unsigned)metrics_port);
	}
	fflush(stdout);
	if (opt->port_file[0] != '\0') {
		const struct net_port ports[] = { { "data", data_port }, { "metrics", metrics_port } };
		if (net_write_ports(opt->port_file, ports, 2) < 0)
			return -1;
	}
	return 0;
}

static struct ctllink *rdr_control_start(struct rdr *r)
{
	const struct rdr_options *opt = &r->opt;
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_READER, opt->id, CTL_CHANNEL_CONTROL, opt->run_id,
			 opt->sources, opt->source_count);
	return ctllink_start(r->base, opt->control_host, opt->control_port, &hello,
			     opt->connect_timeout_ms, &rdr_ctl_ops, r);
}

struct rdr *rdr_create(struct event_base *base, const struct rdr_options *opt)
{
	static const struct intake_events intake_ev = {
		.on_progress = rdr_on_progress,
		.on_given_up = rdr_on_given_up,
	};
	static const struct fwd_events fwd_ev = {
		.on_progress = rdr_on_progress,
		.on_failed = rdr_on_fwd_failed,
	};
	struct rdr *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	r->base = base;
	r->opt = *opt;
	uint16_t port;
	r->intake = intake_create(base, &r->opt, &intake_ev, r);
	if (r->intake == NULL)
		goto fail;
	r->door = door_open(base, &r->opt, r->intake, &port);
	if (r->door == NULL || rdr_announce(r, port) < 0)
		goto fail;
	r->ctl = rdr_control_start(r);
	struct fwd_feed feed = intake_feed(r->intake);
	r->fwd = fwd_create(base, &r->opt, &feed, &fwd_ev, r);
	if (r->ctl == NULL || r->fwd == NULL)
		goto fail;
	return r;
fail:
	rdr_destroy(r);
	return NULL;
}

void rdr_stop(struct rdr *r)
{
	log_info("Reader %u stopping: sources still streaming are closed", r->opt.id);
	intake_close_all(r->intake);
	r->status = 1;
	fwd_flush(r->fwd);
	if (!r->ctl_ready) {
		event_base_loopexit(r->base, NULL);
		return;
	}
	rdr_maybe_finish(r);
}

int rdr_exit_status(const struct rdr *r)
{
	return rdr_status(r);
}

void rdr_destroy(struct rdr *r)
{
	if (r == NULL)
		return;
	prom_server_stop(r->prom);
	if (r->ev_stats)
		event_free(r->ev_stats);
	ctllink_free(r->ctl);
	fwd_destroy(r->fwd);
	door_destroy(r->door);
	intake_destroy(r->intake);
	free(r);
}
