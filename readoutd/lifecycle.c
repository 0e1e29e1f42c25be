/* The reader's lifecycle: wires the data port, the intake and one forwarder
 * per data connection (each rail of each builder link), keeps the control link to the builder or the hub
 * (CREDIT, or ROUTING, ASSIGN and LOST of several builders; STOP, BYE, the
 * STATS every second), and ends the run: once every source is over and
 * everything verified is forwarded, it closes the data streams and sends
 * the END report. */
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
#include "io/daemon.h"
#include "io/net.h"
#include "io/prom.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
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
	uint32_t nlinks;
	bool *link_broken;           /* [nlinks]: a connection of the link failed */
	uint32_t nconns;
	struct rdr_connctx *conns;   /* [nconns], each link's rails in turn */
	const struct fwd *fwd_list[RDR_MAX_LINKS * RDR_MAX_RAILS];
	struct ctllink *ctl;
	bool ctl_ready;
	struct prom_server *prom;    /* --metrics-listen */
	struct event *ev_stats;      /* a STATS to the builder every second */
	struct ctl_msg stats;
	uint64_t credits_received;
	uint64_t assigns_received;   /* for --skip-assign */
	bool warned_credit;          /* routing: a CREDIT is ignored, said once */
	bool reported;
	bool done;
	struct ctl_msg report;
	/* A fault of the run this reader found (the hub's plan refused, a
	 * builder link answered by another builder): told the hub at once
	 * (STOP for every source, the sentence as reason), or as soon as the
	 * control link is up. */
	struct ctl_msg fault;
	bool fault_pending;
	bool fault_told;
};

/* One data connection (a rail of a builder link): its forwarder, and who
 * it is for the callbacks. */
struct rdr_connctx {
	struct rdr *r;
	struct fwd_conn c;
	struct fwd *fwd;             /* finished once its link broke or its builder is lost */
};

static void rdr_tell_fault(struct rdr *r);

static int rdr_status(const struct rdr *r)
{
	return r->status ? r->status : intake_failed(r->intake) ? 1 : 0;
}

/* The forwarders in connection order, as metrics reads them. */
static const struct fwd *const *rdr_fwds(struct rdr *r)
{
	for (uint32_t d = 0; d < r->nconns; d++)
		r->fwd_list[d] = r->conns[d].fwd;
	return r->fwd_list;
}

static struct rmet_reader rdr_books(const struct rdr *r)
{
	struct rmet_reader b = { .id = r->opt.id, .run_id = r->opt.run_id,
				 .status = rdr_status(r),
				 .routing = r->opt.routing,
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
	rmet_end_report(&r->report, &books, r->intake, rdr_fwds(r), &total);
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
	rmet_fwd_total(rdr_fwds(r), r->nconns, &st);
	if (r->opt.routing)
		log_info("Reader %u forwarded %" PRIu64 " frames (%" PRIu64 " rejected, %" PRIu64
			 " held at end, %" PRIu64 " late, %" PRIu64 " lost with a builder) to %u builders in %" PRIu64
			 " writes and %" PRIu64 " ring records", r->opt.id, total.frames_forwarded,
			 total.frames_rejected, total.frames_held_at_end, total.frames_late,
			 total.frames_lost_builder, r->nlinks, st.writev_calls, st.ring_records);
	else if (st.shm)
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
	for (uint32_t d = 0; d < r->nconns; d++) {
		struct fwd *f = r->conns[d].fwd;
		if (f != NULL && !r->link_broken[r->conns[d].c.link] &&
		    intake_connection_unsent(r->intake, d) && !fwd_closed(f))
			return;
	}
	for (uint32_t d = 0; d < r->nconns; d++)
		if (r->conns[d].fwd != NULL)
			fwd_finish(r->conns[d].fwd);
	door_close(r->door);
	intake_finish(r->intake);
	rdr_send_report(r);
}

/* Every connection forwards what it can now. */
static void rdr_flush(struct rdr *r)
{
	for (uint32_t d = 0; d < r->nconns; d++)
		if (r->conns[d].fwd != NULL && !r->link_broken[r->conns[d].c.link])
			fwd_flush(r->conns[d].fwd);
}

/* Frames were verified or room appeared: forward, and see whether the run
 * is over. */
static void rdr_on_progress(void *arg)
{
	struct rdr *r = arg;
	rdr_flush(r);
	rdr_maybe_finish(r);
}

static void rdr_on_link_progress(void *arg)
{
	rdr_on_progress(((struct rdr_connctx *)arg)->r);
}

static void rdr_on_given_up(void *arg, uint16_t source, uint64_t idle_ms)
{
	struct rdr *r = arg;
	if (!r->ctl_ready)
		return;
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = source;
	m.u.stop.last_event = CTL_STOP_NOW;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason,
		 "reader %u: source %u sent no complete frame for %" PRIu64 " ms", r->opt.id,
		 source, idle_ms);
	ctllink_send(r->ctl, &m);
}

/* A connection that fails fails its link, as the one connection of a
 * link of one rail does: the link's other rails forward nothing more. */
static void rdr_break_link(struct rdr *r, const struct rdr_connctx *failed)
{
	r->link_broken[failed->c.link] = true;
	for (uint32_t d = 0; d < r->nconns; d++)
		if (r->conns[d].c.link == failed->c.link && d != failed->c.dest &&
		    r->conns[d].fwd != NULL)
			fwd_finish(r->conns[d].fwd);
}

static void rdr_on_fwd_failed(void *arg, enum fwd_failure why)
{
	const struct rdr_connctx *l = arg;
	struct rdr *r = l->r;
	uint32_t rails = rdr_link_rails(&r->opt, l->c.link);
	char rail[80] = "";
	if (rails > 1)
		snprintf(rail, sizeof rail, " (its rail %u of %u, so the link's every rail)",
			 l->c.rail, rails);
	if (!r->link_broken[l->c.link])
		rdr_break_link(r, l);
	if (r->opt.routing && why != FWD_REFUSED) {
		/* One builder of several went away: the hub names it and says
		 * `lost`, and what waits for it is counted then. Until that word
		 * its frames stay queued, and the other builders go on. */
		log_warn("Reader %u: the link to builder %u broke%s; its frames wait for the hub to give it up while the other builders go on",
			 r->opt.id, l->c.link, rail);
		return;
	}
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
	if (r->fault_pending)
		rdr_tell_fault(r);
	rdr_maybe_finish(r);
}

static void rdr_on_credit(uint64_t limit, void *arg)
{
	struct rdr *r = arg;
	r->credits_received++;
	if (r->opt.routing) {
		if (!r->warned_credit)
			log_warn("Reader %u: ignoring CREDIT (limit %" PRIu64 ") from the hub: with --builder B=URL links the hub's assignments admit events",
				 r->opt.id, limit);
		r->warned_credit = true;
		return;
	}
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
	if (r->fault_told)
		log_info("Reader %u: the hub closed our control connection after our fault report (%s)",
			 r->opt.id, reason);
	else
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

/* Tells the hub the fault at once, so that it ends the run now rather
 * than wait for what this reader will never forward; then stops. */
static void rdr_tell_fault(struct rdr *r)
{
	r->fault_pending = false;
	if (ctllink_send(r->ctl, &r->fault) == 0)
		r->fault_told = true;
	rdr_stop(r);
}

/* A fault that fails the run: the hub hears of it (now, or once the
 * control link is up) and the reader stops. */
static void rdr_fault(struct rdr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void rdr_fault(struct rdr *r, const char *fmt, ...)
{
	if (r->fault_pending || r->fault_told)
		return;
	r->status = 1;
	r->fault = (struct ctl_msg){ .type = CTL_STOP };
	r->fault.u.stop.source = CTL_STOP_ALL;
	r->fault.u.stop.last_event = CTL_STOP_NOW;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->fault.u.stop.reason, sizeof r->fault.u.stop.reason, fmt, ap);
	va_end(ap);
	r->fault_pending = true;
	if (r->ctl_ready && !r->reported)
		rdr_tell_fault(r);
}

/* The hub and this reader disagree on the run's plan: the run fails. */
static void rdr_fail(struct rdr *r, const char *what, const char *why)
{
	log_error("Reader %u refuses the hub's %s: %s; the run fails", r->opt.id, what, why);
	rdr_fault(r, "refuses the hub's %s: %s", what, why);
}

/* A builder refused a data connection, or builder link b was answered by
 * another builder (frames would go to the wrong one): none go; the run
 * fails, named. */
static void rdr_on_refused(void *arg, const char *why)
{
	const struct rdr_connctx *l = arg;
	struct rdr *r = l->r;
	if (!r->link_broken[l->c.link])
		rdr_break_link(r, l);
	rdr_fault(r, "finds %s", why);
}

static void rdr_on_routing(struct rdr *r, const struct ctl_routing *m)
{
	char why[CTL_MAX_TEXT + 64];
	if (!r->opt.routing) {
		rdr_fail(r, "routing plan", "this reader has one --builder URL without B=, the one builder of a CREDIT run");
		return;
	}
	struct evm_plan plan = { .builders = m->builders, .first_event = m->first_event,
				 .events = m->events, .batch = m->batch,
				 .window_batches = m->window_batches };
	if (intake_plan(r->intake, &plan, why, sizeof why) < 0) {
		rdr_fail(r, "routing plan", why);
		return;
	}
	if (!r->opt.quiet)
		log_info("Reader %u routes events %" PRIu64 " .. %" PRIu64 " to %u builders (%s, batches of %u)",
			 r->opt.id, m->first_event, m->first_event + m->events - 1, m->builders,
			 ctl_routing_mode_name(m->mode), m->batch);
}

static void rdr_on_assign(struct rdr *r, const struct ctl_assign *m)
{
	char why[CTL_MAX_TEXT + 64];
	if (++r->assigns_received == r->opt.skip_assign) {
		log_warn("Reader %u: --skip-assign: taking the hub's assignment %" PRIu64 " (events %" PRIu64 "..+%u to builder %u) as never received",
			 r->opt.id, r->assigns_received, m->first, m->count, m->builder);
		return;
	}
	struct evm_assignment a = { .first = m->first, .count = m->count, .builder = m->builder };
	if (intake_assign(r->intake, &a, m->retired_below, why, sizeof why) < 0) {
		rdr_fail(r, "assignment", why);
		return;
	}
	rdr_on_progress(r);
}

/* The hub gave builder b up: what is queued for it is lost, its link closes,
 * the others go on. */
static void rdr_on_lost_builder(struct rdr *r, const struct ctl_lost *m)
{
	char why[CTL_MAX_TEXT + 64];
	uint64_t frames;
	int rc = intake_lose(r->intake, m->builder, &frames);
	if (rc < 0) {
		snprintf(why, sizeof why, "builder %u is lost, but %s", m->builder,
			 rc == -EPROTO ? "no routing plan came before" : "the run has no such builder");
		rdr_fail(r, "lost message", why);
		return;
	}
	log_warn("Reader %u: the hub lost builder %u (%s); %" PRIu64 " frames queued for it are counted lost, and its frames from now on; its link closes",
		 r->opt.id, m->builder, m->reason, frames);
	/* Kept for their counters: once finished they forward nothing more. */
	for (uint32_t d = 0; d < r->nconns; d++)
		if (r->conns[d].c.link == m->builder)
			fwd_finish(r->conns[d].fwd);
	rdr_on_progress(r);
}

static void rdr_on_routing_message(const struct ctl_msg *msg, void *arg)
{
	struct rdr *r = arg;
	if (r->reported)
		return;
	switch (msg->type) {
	case CTL_ROUTING: rdr_on_routing(r, &msg->u.routing); break;
	case CTL_ASSIGN: rdr_on_assign(r, &msg->u.assign); break;
	case CTL_LOST: rdr_on_lost_builder(r, &msg->u.lost); break;
	default:
		log_warn("Reader %u: ignoring unexpected %s from the builder", r->opt.id,
			 ctl_type_name(msg->type));
		break;
	}
}

static const struct ctllink_ops rdr_ctl_ops = {
	.on_ready = rdr_on_ctl_ready,
	.on_credit = rdr_on_credit,
	.on_bye = rdr_on_bye,
	.on_stop = rdr_on_stop,
	.on_lost = rdr_on_ctl_lost,
	.on_message = rdr_on_routing_message,
};

static void rdr_fill_metrics(struct evbuffer *out, bool json, void *arg)
{
	const struct rdr *r = arg;
	struct rmet_reader books = rdr_books(r);
	rmet_exposition(out, json, &books, r->intake, rdr_fwds((struct rdr *)r));
}

/* Prints and writes (--port-file) the ports bound, and serves /metrics. */
static int rdr_announce(struct rdr *r, uint16_t data_port)
{
	const struct rdr_options *opt = &r->opt;
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		r->prom = prom_server_start(r->base, opt->metrics_host, opt->metrics_port,
					    rdr_fill_metrics, r, &metrics_port);
		if (r->prom == NULL)
			return -1;
	}
	const struct daemon_port ports[] = { { "data", opt->listen_host, data_port, false },
					     { "metrics", opt->metrics_host, metrics_port, true } };
	return daemon_announce(ports, 2, opt->port_file) < 0 ? -1 : 0;
}

bool rdr_prepare(void *opts)
{
	const struct rdr_options *opt = opts;
	uint16_t data_port = 0, metrics_port = 0;
	int fd = net_listen(opt->listen_host, opt->listen_port, &data_port);
	if (fd < 0)
		return false;
	close(fd);
	if (opt->metrics_host[0] != '\0') {
		if ((fd = net_listen(opt->metrics_host, opt->metrics_port, &metrics_port)) < 0)
			return false;
		close(fd);
	}
	const struct daemon_port ports[] = { { "data", opt->listen_host, data_port, false },
					     { "metrics", NULL, metrics_port, false } };
	return daemon_announce(ports, 2, opt->port_file) >= 0;
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

/* One forwarder per data connection: every rail of every link. */
static int rdr_connect(struct rdr *r, const struct fwd_events *fwd_ev)
{
	r->nlinks = intake_link_count(r->intake);
	r->nconns = intake_connection_count(r->intake);
	r->link_broken = calloc(r->nlinks, sizeof *r->link_broken);
	r->conns = calloc(r->nconns, sizeof *r->conns);
	if (r->link_broken == NULL || r->conns == NULL)
		return -ENOMEM;
	struct fwd_feed feed = intake_feed(r->intake);
	for (uint32_t b = 0; b < r->nlinks; b++) {
		for (uint32_t k = 0; k < intake_link_rails(r->intake, b); k++) {
			uint32_t d = intake_connection(r->intake, b, k);
			struct rdr_connctx *cx = &r->conns[d];
			*cx = (struct rdr_connctx){ .r = r, .c = { .link = b, .rail = k, .dest = d } };
			cx->fwd = fwd_create(r->base, &r->opt, cx->c, &feed, fwd_ev, cx);
			if (cx->fwd == NULL)
				return -ENOMEM;
		}
	}
	return 0;
}

struct rdr *rdr_create(struct event_base *base, const struct rdr_options *opt)
{
	static const struct intake_events intake_ev = {
		.on_progress = rdr_on_progress,
		.on_given_up = rdr_on_given_up,
	};
	static const struct fwd_events fwd_ev = {
		.on_progress = rdr_on_link_progress,
		.on_failed = rdr_on_fwd_failed,
		.on_refused = rdr_on_refused,
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
	if (r->ctl == NULL)
		goto fail;
	if (rdr_connect(r, &fwd_ev) < 0)
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
	rdr_flush(r);
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
	for (uint32_t d = 0; r->conns != NULL && d < r->nconns; d++)
		fwd_destroy(r->conns[d].fwd);
	free(r->conns);
	free(r->link_broken);
	door_destroy(r->door);
	intake_destroy(r->intake);
	free(r);
}
