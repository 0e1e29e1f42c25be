#include "run.h"

#include "books.h"
#include "clocks.h"
#include "credits.h"
#include "ctlport.h"
#include "ingest.h"
#include "metrics.h"
#include "live.h"
#include "peerlink.h"
#include "peers.h"
#include "progress.h"
#include "shm.h"
#include "snapshot.h"
#include "tcp.h"
#include "watchdog.h"

#include "core/acct.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "io/prom.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/procstat.h"
#include "wire/control.h"

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

/* The run's hub: what the run owes its peers (START, credits, BYE), the
 * tick that drives the watchdog and the progress line, and the end of the
 * run. The control port's greetings are ctlport.c's, each peer's control
 * link and its loss peerlink.c's; the data side is behind ingest.h. */
struct bd {
	struct event_base *base;
	struct bd_options opt;
	enum bd_phase phase;
	int status;
	struct event *ev_tick;
	struct ctlport *ctlport;          /* ctlport.c: the control port and its greetings */
	struct ing *ing;                  /* ingest.c: readers' data, core, records */
	struct bdc *clocks;               /* clocks.c: the exchanges, offsets and bounds */
	struct wd wd;                     /* watchdog.c: stalled and stuck peers */
	struct plink *plink;              /* peerlink.c: each peer's control link, its loss */
	int64_t *source_offsets_ns;
	struct peer_table peers;          /* every source and reader */
	uint64_t start_ns;
	uint64_t last_progress_ns;
	uint64_t wind_up_ns;              /* the watchdog fired: gathering final counters */
	struct prog *prog;                /* progress.c: the rate, the progress line */
	uint64_t credits_sent;
	uint32_t open_conns;              /* after the run: peers still flushing BYE */
	char *errors[BD_MAX_ERRORS];
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t end_ns;
	bool started;                     /* START sent to the sources */
	struct prom_server *prom;         /* --metrics-listen */
	struct bd_snapshot_link *snap_links;   /* [readers], for reports */
	char host[256];                   /* the builder's host name */
};

/* Margin for START to reach every source before their common start. */
#define BD_START_DELAY_NS 2000000u

static void bd_finish(struct bd *b, const char *why);
static void bd_maybe_start(struct bd *b);
static bool bd_all_connected(const struct bd *b);

static void bd_maybe_finish(struct bd *b);
static void bd_snapshot_fill(struct bd *b, struct bd_snapshot *s, struct ctl_report *self);

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

/* ---- joining and START ------------------------------------------------- */

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

/* The control port welcomed p: its control connection, its first clock
 * burst, and for a reader its first admission limit. */
static void bd_on_joined(void *ctx, struct bd_peer *p, int fd, const struct ctl_hello *h,
			 const char *peer)
{
	struct bd *b = ctx;
	if (p->role == CTL_ROLE_READER)
		ing_claim(b->ing, h);
	plink_attach(b->plink, p, fd, peer);
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

/* ---- the tick and the end of the run ----------------------------------- */

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
	prog_sample(b->prog, now, ing_counters(b->ing)->events_complete);
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
	if (!b->opt.quiet && prog_due(b->prog, now)) {
		struct bd_snapshot snap;
		bd_snapshot_fill(b, &snap, NULL);
		prog_show(b->prog, now, &snap);
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
		.credits_sent = b->credits_sent,
		.recent_events_per_s = prog_rate(b->prog),
		.links = b->snap_links,
		.clocks = b->clocks,
		.self = self,
		.self_pid = (uint32_t)getpid(),
		.self_host = b->host,
		.self_peak_rss_kib = procstat_peak_rss_kib(),
	};
	ctlport_snapshot(b->ctlport, s);
	ing_snapshot(b->ing, s);
}

static void bd_fill_live(struct evbuffer *out, bool json, void *arg)
{
	struct bd_snapshot s;
	bd_snapshot_fill(arg, &s, NULL);
	live_fill(out, json, &s);
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
	prog_end(b->prog);
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
	const struct bd *b = ctx;
	plink_gone(b->plink, p, why);
}

static void bd_wd_send(void *ctx, struct bd_peer *p, const struct ctl_msg *m)
{
	(void)ctx;
	msgconn_send(p->conn, m);
}

static bool bd_hook_running(void *ctx)
{
	const struct bd *b = ctx;
	return b->phase == BD_RUNNING;
}

/* ---- what the peers' links ask of the hub ------------------------------ */

static void bd_hook_reported(void *ctx, struct bd_peer *p, int32_t status)
{
	(void)p;
	struct bd *b = ctx;
	if (status != 0)
		b->status = 1;
	bd_maybe_finish(b);
}

static void bd_hook_lost(void *ctx, struct bd_peer *p)
{
	(void)p;
	struct bd *b = ctx;
	/* Lost before the start (its greeting was kept waiting at a busy
	 * door, say): the others start without it rather than wait for ever. */
	bd_maybe_start(b);
	bd_maybe_finish(b);
}

/* A peer closed after BYE: the loop ends once the last one has. */
static void bd_hook_closed(void *ctx)
{
	struct bd *b = ctx;
	if (b->open_conns > 0 && --b->open_conns == 0)
		event_base_loopexit(b->base, NULL);
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
	b->start_ns = b->last_progress_ns = clk_monotonic_ns();
	b->prog = prog_create(b->start_ns, isatty(STDERR_FILENO) ? stderr : NULL);
	net_host_name(b->host, sizeof b->host);
	b->source_offsets_ns = calloc(opt->sources + 1, sizeof *b->source_offsets_ns);
	b->snap_links = calloc(opt->readers + 1, sizeof *b->snap_links);
	if (peer_table_init(&b->peers, opt->sources, opt->readers) < 0 || !b->source_offsets_ns ||
	    !b->snap_links || b->prog == NULL)
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
	struct plink_config lc = {
		.base = base,
		.peers = &b->peers,
		.ing = b->ing,
		.clocks = b->clocks,
		.hooks = { .ctx = b, .error = bd_hook_error, .progress = bd_hook_progress,
			   .reported = bd_hook_reported, .lost = bd_hook_lost,
			   .closed = bd_hook_closed, .running = bd_hook_running },
	};
	b->plink = plink_create(&lc);
	if (b->plink == NULL)
		goto fail;
	b->wd = (struct wd){
		.opt = &b->opt,
		.peers = &b->peers,
		.ing = b->ing,
		.hooks = { .ctx = b, .gone = bd_wd_gone, .send = bd_wd_send, .error = bd_hook_error,
			   .running = bd_hook_running },
	};
	struct ctlport_hooks ch = { .ctx = b, .running = bd_hook_running, .joined = bd_on_joined };
	b->ctlport = ctlport_open(base, &b->opt, &b->peers, &ch, &control_port);
	if (b->ctlport == NULL)
		goto fail;
	b->ev_tick = event_new(base, -1, EV_PERSIST, bd_on_tick, b);
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
	plink_destroy(b->plink);
	ing_destroy(b->ing);
	ctlport_close(b->ctlport);
	if (b->ev_tick)
		event_free(b->ev_tick);
	prom_server_stop(b->prom);
	bdc_destroy(b->clocks);
	for (uint32_t i = 0; i < b->error_count; i++)
		free(b->errors[i]);
	free(b->source_offsets_ns);
	free(b->snap_links);
	prog_destroy(b->prog);
	peer_table_free(&b->peers);
	free(b);
}
