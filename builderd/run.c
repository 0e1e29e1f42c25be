#include "run.h"

#include "books.h"
#include "clocks.h"
#include "credits.h"
#include "ingest.h"
#include "metrics.h"
#include "peers.h"
#include "shm.h"
#include "snapshot.h"
#include "tcp.h"
#include "watchdog.h"

#include "core/acct.h"
#include "io/handshake.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "io/prom.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/procstat.h"
#include "wire/control.h"
#include "wire/counters.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BD_TICK_US 2000u
#define BD_MAX_ERRORS 64u

enum bd_phase { BD_RUNNING, BD_FINISHED };

/* The run's hub: the peers on the control channel and what the run owes
 * them (START, credits, STOP, BYE), the watchdog and the end of the run.
 * The data side is behind ingest.h. */
struct bd {
	struct event_base *base;
	struct bd_options opt;
	enum bd_phase phase;
	int status;
	int control_fd;
	struct event *ev_control_accept, *ev_tick;
	struct greet_door door;           /* the control port's */
	struct ing *ing;                  /* ingest.c: readers' data, core, records */
	struct bdc *clocks;               /* clocks.c: offsets and bounds */
	struct wd wd;                     /* watchdog.c: stalled and stuck peers */
	int64_t *source_offsets_ns;
	struct peer_table peers;          /* every source and reader */
	uint64_t refused_connections;     /* at the control port */
	uint64_t start_ns;
	uint64_t last_progress_ns;
	uint64_t wind_up_ns;              /* the watchdog fired: gathering final counters */
	uint64_t last_progress_log_ns;
	uint64_t progress_complete_at_log;
	uint64_t credits_sent;
	uint32_t open_conns;              /* after the run: peers still flushing BYE */
	char *errors[BD_MAX_ERRORS];
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t end_ns;
	bool started;                     /* START sent to the sources */
	double recent_events_per_s;       /* completions over the last second */
	uint64_t rate_sample_ns;
	uint64_t rate_sample_complete;
	struct prom_server *prom;         /* --metrics-listen */
	bool progress_on_terminal;        /* stderr is a terminal: one live line */
	bool progress_line_shown;
	struct bd_snapshot_link *snap_links;   /* [readers], for reports */
	char host[256];                   /* the builder's host name */
};

/* Margin for START to reach every source before their common start. */
#define BD_START_DELAY_NS 2000000u

static void bd_finish(struct bd *b, const char *why);
static void bd_maybe_start(struct bd *b);
static bool bd_all_connected(const struct bd *b);
static void bd_peer_gone(struct bd *b, struct bd_peer *p, const char *why);

static void bd_maybe_finish(struct bd *b);
static void bd_snapshot_fill(struct bd *b, struct bd_snapshot *s, struct ctl_report *self);
static void bd_on_source_given_up(struct bd *b, struct bd_peer *reader, uint32_t source);

/* Records an error of the run: logged, listed in metrics.json, and the run
 * ends non-zero. */
static void bd_error(struct bd *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bd_error(struct bd *b, const char *fmt, ...)
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

static void bd_hook_error(void *ctx, const char *text)
{
	bd_error(ctx, "%s", text);
}

/* ---- credits ---------------------------------------------------------- */

static void bd_send_credit(struct bd *b, struct bd_peer *p, uint64_t limit, uint64_t now)
{
	b->credits_sent += credits_send(p, limit, now) ? 1 : 0;
}

static void bd_publish_credits(struct bd *b, bool tick)
{
	if (b->phase == BD_RUNNING)
		b->credits_sent += credits_publish(&b->peers, ing_admission_limit(b->ing),
						   b->opt.max_inflight, tick, clk_monotonic_ns());
}

/* ---- greetings ---------------------------------------------------------- */

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
	} else if (peer_find(&b->peers, h->role, h->id) == NULL) {
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
		p->held_ns = acct_value(&msg->u.report, CNT_GROUP_TOTALS, CNT_READER_SOURCE(held_ns), NULL);
		p->verified = acct_value(&msg->u.report, CNT_GROUP_TOTALS,
					 CNT_READER_SOURCE(frames_verified), NULL);
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
		enum bd_data_state st = ing_reader_state(b->ing, p->id);
		/* A dead reader's data connection ends by itself, and its
		 * transport says how; a stalled one's must be cut here. */
		if (st == BD_DATA_WAITING || ((p->stalled || p->stuck) && st == BD_DATA_STREAMING))
			ing_cut(b->ing, p->id);
		stop.u.stop.source = CTL_STOP_ALL;
		for (uint16_t s = 0; s < b->opt.sources; s++)
			if (ing_reader_of_source(b->ing, s) == (int32_t)p->id && peer_source(&b->peers, s)->conn != NULL)
				msgconn_send(peer_source(&b->peers, s)->conn, &stop);
	} else if (p->role == CTL_ROLE_SOURCE) {
		int32_t r = ing_reader_of_source(b->ing, (uint16_t)p->id);
		stop.u.stop.source = p->id;
		if (r >= 0 && peer_reader(&b->peers, r)->conn != NULL)
			msgconn_send(peer_reader(&b->peers, r)->conn, &stop);
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
	if (source >= b->opt.sources ||
	    ing_reader_of_source(b->ing, (uint16_t)source) != (int32_t)reader->id) {
		log_warn("Reader %u gave up source %" PRIu32 ", which it does not serve; ignored",
			 reader->id, source);
		return;
	}
	struct bd_peer *p = peer_source(&b->peers, source);
	if (p->reported || p->lost)
		return;
	p->stuck = true;
	char why[200];
	snprintf(why, sizeof why,
		 "was given up by reader %u: its data connection delivered no complete frame within the reader's inactivity limit%s",
		 reader->id, p->conn != NULL ? " while its control link was alive" : "");
	bd_peer_gone(b, p, why);
}

static const struct msgconn_ops bd_peer_ops = {
	.on_message = bd_on_peer_message,
	.on_close = bd_on_peer_close,
};

/* Once every peer is up, tells the sources to start together, so that the
 * fragments of one event leave every source at about the same moment. */
/* The clock module measured the last source: START may go. */
static void bd_on_clocks_ready(void *arg)
{
	bd_maybe_start(arg);
}

static void bd_maybe_start(struct bd *b)
{
	if (b->started || b->phase != BD_RUNNING || !bd_all_connected(b) || !bdc_ready(b->clocks))
		return;
	b->started = true;
	struct ctl_msg m = { .type = CTL_START };
	m.u.start.delay_ns = BD_START_DELAY_NS;
	m.u.start.at_realtime_ns = clk_realtime_true_ns() + BD_START_DELAY_NS;
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (peer_source(&b->peers, s)->conn != NULL)
			msgconn_send(peer_source(&b->peers, s)->conn, &m);
	if (!b->opt.quiet)
		log_info("Run %u: all %u sources and %u readers connected; starting", b->opt.run_id,
			 b->opt.sources, b->opt.readers);
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
	struct bd_peer *p = peer_find(&b->peers, h->role, h->id);
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
		ing_claim(b->ing, h);
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
		bd_send_credit(b, p, ing_admission_limit(b->ing),
			       clk_monotonic_ns());
	}
	bd_maybe_start(b);
}

static void bd_on_control_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct bd *b = arg;
	greet_accept_all(&b->door, fd, bd_on_control_greeted, b);
}

/* ---- progress, watchdog, end of run ------------------------------------ */


static bool bd_reports_done(const struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!peer_source(&b->peers, s)->reported && !peer_source(&b->peers, s)->lost)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!peer_reader(&b->peers, r)->reported && !peer_reader(&b->peers, r)->lost)
			return false;
	return true;
}

static void bd_on_clocks_closed(void *arg)
{
	bd_finish(arg, NULL);
}

/* Everything is in: a last round of clock exchanges (bounded in time),
 * then the end of the run. */
static void bd_maybe_finish(struct bd *b)
{
	if (b->phase == BD_RUNNING && ing_done(b->ing) && bd_reports_done(b) &&
	    !bdc_close(b->clocks, bd_on_clocks_closed, b))
		bd_finish(b, NULL);
}

static bool bd_all_connected(const struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!peer_source(&b->peers, s)->connected)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!peer_reader(&b->peers, r)->connected || ing_reader_state(b->ing, r) == BD_DATA_WAITING)
			return false;
	return true;
}

/* One line on how the run goes: on a terminal it is rewritten in place
 * every second, elsewhere (a log file, CI) logged every five seconds. */
static void bd_log_progress(struct bd *b, uint64_t now, bool terminal)
{
	const struct bld_counters *c = ing_counters(b->ing);
	double secs = (double)(now - b->last_progress_log_ns) / 1e9;
	double rate = secs > 0 ? (double)(c->events_complete - b->progress_complete_at_log) / secs : 0;
	struct bd_snapshot snap;
	bd_snapshot_fill(b, &snap, NULL);
	char line[360];
	metrics_progress_line(line, sizeof line, &snap, rate);
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
	ing_tick(b->ing, now);
	bd_publish_credits(b, true);
	wd_check_stalls(&b->wd, now);
	if (now - b->rate_sample_ns >= 1000000000u) {
		uint64_t complete = ing_counters(b->ing)->events_complete;
		b->recent_events_per_s = (double)(complete - b->rate_sample_complete) * 1e9 /
					 (double)(now - b->rate_sample_ns);
		b->rate_sample_ns = now;
		b->rate_sample_complete = complete;
	}
	if (b->phase != BD_RUNNING)
		return;
	uint64_t limit_ns = b->opt.peer_timeout_ms * 1000000u;
	if (!bd_all_connected(b) && now - b->start_ns > limit_ns) {
		wd_report_missing(&b->wd, true);
		bd_finish(b, "a peer never connected");
		return;
	}
	if (b->wind_up_ns != 0 && now - b->wind_up_ns > b->opt.stall_timeout_ms * 1000000u) {
		wd_wind_up_over(&b->wd);
		if (b->phase != BD_RUNNING)
			return;
		wd_report_missing(&b->wd, false);
		bd_finish(b, "no progress");
		return;
	}
	if (b->wind_up_ns == 0 && now - b->last_progress_ns > limit_ns) {
		b->wind_up_ns = now;
		wd_wind_up(&b->wd, now, b->last_progress_ns);
		bd_maybe_finish(b);
		return;
	}
	if (!b->opt.quiet) {
		bool terminal = b->progress_on_terminal;
		if (now - b->last_progress_log_ns >= (terminal ? 1000000000u : 5000000000u))
			bd_log_progress(b, now, terminal);
	}
}

static void bd_say_bye(struct bd *b)
{
	struct ctl_msg m = { .type = CTL_BYE };
	m.u.bye.status = b->status;
	for (uint32_t i = 0; i < peer_count(&b->peers); i++) {
		struct bd_peer *p = peer_at(&b->peers, i);
		if (p->conn == NULL)
			continue;
		msgconn_send(p->conn, &m);
		b->open_conns++;
	}
}

/* The run's figures for a report: the hub's own, then the data side's.
 * self (may be NULL) gets the builder process's own counters. */
static void bd_snapshot_fill(struct bd *b, struct bd_snapshot *s, struct ctl_report *self)
{
	*s = (struct bd_snapshot){
		.opt = &b->opt,
		.running = b->phase == BD_RUNNING,
		.status = b->status,
		.peers = &b->peers,
		.errors = (const char *const *)b->errors,
		.error_count = b->error_count,
		.errors_dropped = b->errors_dropped,
		.refused_connections = b->refused_connections,
		.greetings_busy = b->door.busy,
		.greetings_evicted = b->door.evicted,
		.greetings_timed_out = b->door.timed_out,
		.credits_sent = b->credits_sent,
		.recent_events_per_s = b->recent_events_per_s,
		.links = b->snap_links,
		.clocks = b->clocks,
		.self = self,
		.self_pid = (uint32_t)getpid(),
		.self_host = b->host,
		.self_peak_rss_kib = procstat_peak_rss_kib(),
	};
	ing_snapshot(b->ing, s);
}

static void bd_fill_live(struct evbuffer *out, bool json, void *arg)
{
	struct bd_snapshot s;
	bd_snapshot_fill(arg, &s, NULL);
	metrics_fill_live(out, json, &s);
}

/* metrics.json and the summary. */
static void bd_report(struct bd *b, const struct acct *a)
{
	struct ctl_report *self = calloc(1, sizeof *self);
	if (self != NULL)
		procstat_report(self);
	struct bd_snapshot snap;
	bd_snapshot_fill(b, &snap, self);
	if (metrics_write(&snap, a) < 0)
		b->status = 1;
	snap.status = b->status;
	metrics_print_summary(stdout, &snap, a);
	fflush(stdout);
	free(self);
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
	struct books bk = {
		.opt = &b->opt, .peers = &b->peers, .ing = b->ing, .error = bd_hook_error, .ctx = b,
	};
	int written = ing_finish(b->ing, books_events_generated(&bk));
	books_check(&bk);
	if (written < 0)
		bd_error(b, "Writing the record files in %s failed", b->opt.out_dir);
	bdc_finish(b->clocks);
	struct acct a = { 0 };
	books_account(&bk, &a);
	if (!acct_balanced(&a))
		b->status = 1;
	bd_report(b, &a);
	acct_free(&a);
	if (!ing_close_output(b->ing))
		b->status = 1;
	bd_say_bye(b);
	if (b->open_conns == 0) {
		event_base_loopexit(b->base, NULL);
	} else {
		/* Peers close after BYE; do not wait forever for one that won't. */
		struct timeval tv = { 2, 0 };
		event_base_loopexit(b->base, &tv);
	}
}

/* ---- what ingest asks of the hub ---------------------------------------- */

static void bd_hook_started(void *ctx)
{
	bd_maybe_start(ctx);
}

static void bd_hook_progress(void *ctx, uint64_t now)
{
	struct bd *b = ctx;
	b->last_progress_ns = now;
}

static void bd_hook_after_frames(void *ctx)
{
	struct bd *b = ctx;
	bd_publish_credits(b, false);
	bd_maybe_finish(b);
}

static bool bd_hook_holds_slot(void *ctx, uint32_t reader, uint32_t pid)
{
	struct bd *b = ctx;
	const struct bd_peer *p = peer_reader(&b->peers, reader);
	return p->lost || p->reported || b->phase != BD_RUNNING || (p->conn != NULL && p->pid == pid);
}

static void bd_wd_gone(void *ctx, struct bd_peer *p, const char *why)
{
	bd_peer_gone(ctx, p, why);
}

static void bd_wd_send(void *ctx, struct bd_peer *p, const struct ctl_msg *m)
{
	(void)ctx;
	msgconn_send(p->conn, m);
}

static bool bd_wd_running(void *ctx)
{
	const struct bd *b = ctx;
	return b->phase == BD_RUNNING;
}

/* ---- life --------------------------------------------------------------- */

/* The port file and the "listening" lines the launcher reads back. */
static int bd_announce(struct bd *b, uint16_t data_port, uint16_t control_port)
{
	const struct bd_options *opt = &b->opt;
	printf("listening data %s:%u control %s:%u\n", opt->listen_host, (unsigned)data_port,
	       opt->control_host, (unsigned)control_port);
	fflush(stdout);
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		b->prom = prom_server_start(b->base, opt->metrics_host, opt->metrics_port,
					    bd_fill_live, b, &metrics_port);
		if (b->prom == NULL)
			return -EADDRNOTAVAIL;
		printf("listening metrics %s:%u\n", opt->metrics_host, (unsigned)metrics_port);
	}
	if (opt->port_file[0] != '\0') {
		const struct net_port ports[] = { { "data", data_port },
						  { "control", control_port },
						  { "metrics", metrics_port } };
		int rc = net_write_ports(opt->port_file, ports, 3);
		if (rc < 0)
			return rc;
	}
	return 0;
}

struct bd *bd_create(struct event_base *base, const struct bd_options *opt)
{
	struct bd *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->base = base;
	b->opt = *opt;
	b->control_fd = -1;
	greet_door_init(&b->door, base, "the builder's control port", "the builder",
			opt->handshake_timeout_ms, &b->refused_connections);
	b->start_ns = b->last_progress_ns = b->last_progress_log_ns = clk_monotonic_ns();
	b->progress_on_terminal = isatty(STDERR_FILENO);
	net_host_name(b->host, sizeof b->host);
	b->source_offsets_ns = calloc(opt->sources + 1, sizeof *b->source_offsets_ns);
	b->snap_links = calloc(opt->readers + 1, sizeof *b->snap_links);
	if (peer_table_init(&b->peers, opt->sources, opt->readers, b) < 0 || !b->source_offsets_ns ||
	    !b->snap_links)
		goto fail;
	struct ing_hooks hooks = {
		.ctx = b,
		.error = bd_hook_error,
		.data_started = bd_hook_started,
		.progress = bd_hook_progress,
		.after_frames = bd_hook_after_frames,
		.reader_holds_slot = bd_hook_holds_slot,
	};
	uint16_t data_port, control_port;
	/* The data side and its links: TCP always, shared memory on request. */
	b->ing = ing_create(base, opt, b->source_offsets_ns, &hooks);
	if (b->ing == NULL || btcp_start(b->ing, &data_port) < 0 || bshm_start(b->ing) < 0)
		goto fail;
	struct bdc_config cc = {
		.base = base,
		.peers = &b->peers,
		.out = ing_output(b->ing),
		.run_id = opt->run_id,
		.correction = !opt->no_clock_correction,
		.quiet = opt->quiet,
		.ready = bd_on_clocks_ready,
		.ready_arg = b,
	};
	b->clocks = bdc_create(&cc);
	if (b->clocks == NULL)
		goto fail;
	b->wd = (struct wd){
		.opt = &b->opt,
		.peers = &b->peers,
		.ing = b->ing,
		.hooks = { .ctx = b, .gone = bd_wd_gone, .send = bd_wd_send, .error = bd_hook_error,
			   .running = bd_wd_running },
	};
	b->control_fd = net_listen(opt->control_host, opt->control_port, &control_port);
	if (b->control_fd < 0)
		goto fail;
	b->ev_control_accept = event_new(base, b->control_fd, EV_READ | EV_PERSIST,
					 bd_on_control_accept, b);
	b->ev_tick = event_new(base, -1, EV_PERSIST, bd_on_tick, b);
	event_add(b->ev_control_accept, NULL);
	struct timeval tick = { 0, BD_TICK_US };
	event_add(b->ev_tick, &tick);
	if (bd_announce(b, data_port, control_port) < 0)
		goto fail;
	if (!opt->quiet)
		log_info("Run %u: waiting for %u sources and %u readers; window %u events, timeout %" PRIu64
			 " ms, admission %s", opt->run_id, opt->sources, opt->readers, opt->max_inflight,
			 opt->timeout_ms, opt->no_admission ? "off" : "on");
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
	for (uint32_t i = 0; b->peers.peers && i < peer_count(&b->peers); i++)
		msgconn_free(peer_at(&b->peers, i)->conn);
	ing_destroy(b->ing);
	if (b->ev_control_accept)
		event_free(b->ev_control_accept);
	if (b->ev_tick)
		event_free(b->ev_tick);
	prom_server_stop(b->prom);
	if (b->control_fd >= 0)
		close(b->control_fd);
	greet_door_close(&b->door);
	bdc_destroy(b->clocks);
	for (uint32_t i = 0; i < b->error_count; i++)
		free(b->errors[i]);
	free(b->source_offsets_ns);
	free(b->snap_links);
	peer_table_free(&b->peers);
	free(b);
}
