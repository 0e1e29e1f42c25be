#include "hub/run.h"
#include "hub/run_internal.h"
#include "report/rundir.h"

#include "hub/books.h"
#include "clock/clocks.h"
#include "hub/credits.h"
#include "hub/ctlport.h"
#include "hub/dataview.h"
#include "hub/fleet.h"
#include "data/ingest.h"
#include "report/metrics.h"
#include "report/live.h"
#include "hub/manager.h"
#include "hub/peerlink.h"
#include "peers.h"
#include "hub/progress.h"
#include "data/shm.h"
#include "snapshot.h"
#include "data/tcp.h"
#include "hub/watchdog.h"

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

/* Margin for START to reach every source before their common start. */
#define BD_START_DELAY_NS 2000000u

static void bd_finish(struct bd *b, const char *why);
static void bd_maybe_start(struct bd *b);
static bool bd_all_connected(const struct bd *b);

static void bd_maybe_finish(struct bd *b);

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
	if (b->phase == BD_RUNNING && !b->hub)
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
	if (b->on_ready != NULL && !b->start_released) {
		if (!b->ready_told) {
			b->ready_told = true;
			b->on_ready(b->on_ready_arg);
		}
		return;
	}
	b->started = true;
	b->started_ns = clk_monotonic_ns();
	struct ctl_msg m = { .type = CTL_START };
	m.u.start.delay_ns = BD_START_DELAY_NS;
	m.u.start.at_realtime_ns = clk_realtime_true_ns() + BD_START_DELAY_NS;
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (peer_source(&b->peers, s)->conn != NULL)
			msgconn_send(peer_source(&b->peers, s)->conn, &m);
	if (!b->opt.quiet && b->hub)
		log_info("Run %u: all %u sources, %u readers and %u builders connected; starting",
			 b->opt.run_id, b->opt.sources, b->opt.readers, b->opt.builders);
	else if (!b->opt.quiet)
		log_info("Run %u: all %u sources and %u readers connected; starting", b->opt.run_id,
			 b->opt.sources, b->opt.readers);
	if (b->mgr != NULL)
		mgr_start(b->mgr, clk_monotonic_ns());
}

/* The control port welcomed p: its control connection, its first clock
 * burst, and for a reader its first admission limit. */
static void bd_on_joined(void *ctx, struct bd_peer *p, int fd, const struct ctl_hello *h,
			 const struct msgseal *seal, const char *peer)
{
	struct bd *b = ctx;
	if (p->role == CTL_ROLE_READER && b->hub)
		fleet_claim(b->fleet, h);
	else if (p->role == CTL_ROLE_READER)
		ing_claim(b->ing, h);
	plink_attach(b->plink, p, fd, seal, peer);
	p->last_heard_ns = clk_monotonic_ns();
	bdc_peer_joined(b->clocks, p);
	b->last_progress_ns = clk_monotonic_ns();
	if (!b->opt.quiet)
		log_info("%s %u joined run %u from %s (pid %u on %s)", ctl_role_title(h->role), h->id,
			 b->opt.run_id, peer, h->pid, h->host);
	if (b->mgr != NULL)
		mgr_welcomed(b->mgr, p);
	bd_fault_tell(b, p);
	if (p->role == CTL_ROLE_READER && p->conn != NULL && !b->hub) {
		/* The reader holds everything until it hears a limit. */
		bd_send_credit(b, p, ing_admission_limit(b->ing),
			       clk_monotonic_ns());
	}
	bd_maybe_start(b);
}

/* ---- the tick and the end of the run ----------------------------------- */

static void bd_on_linger_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct bd *b = arg;
	event_base_loopexit(b->base, NULL);
}

/* Every source, reader and (role hub) builder has reported or is lost. */
static bool bd_reports_done(const struct bd *b)
{
	for (uint32_t i = 0; i < peer_count(&b->peers); i++)
		if (!peer_at(&b->peers, i)->reported && !peer_at(&b->peers, i)->lost)
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
	if (b->phase == BD_RUNNING && (b->hub || ing_done(b->ing)) && bd_reports_done(b) &&
	    !bdc_close(b->clocks, bd_on_clocks_closed, b))
		bd_finish(b, NULL);
}

static bool bd_all_connected(const struct bd *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!peer_source(&b->peers, s)->connected)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!peer_reader(&b->peers, r)->connected ||
		    bdd_reader_state(&b->data, r) == BD_DATA_WAITING)
			return false;
	/* A builder joins with its first token, once every reader's data path
	 * to it is up. */
	for (uint32_t k = 0; k < b->peers.builders; k++)
		if (!peer_builder(&b->peers, k)->connected)
			return false;
	return b->mgr == NULL || mgr_all_joined(b->mgr);
}

/* Role hub, from the tick: assignments that tokens alone did not make,
 * and a builder that holds events but sent no token for the stall timeout
 * past its event timeout (a healthy one may wait that long for an event). */
static void bd_manage(struct bd *b, uint64_t now)
{
	uint64_t limit_ms = bd_builder_stall_ms(&b->opt);
	int32_t k = mgr_stalled_builder(b->mgr, now, limit_ms * 1000000u);
	if (k >= 0) {
		struct bd_peer *p = peer_builder(&b->peers, (uint32_t)k);
		p->stalled = true;
		char why[160];
		snprintf(why, sizeof why, "stalled: it holds events but sent no token for %" PRIu64 " ms (--stall-timeout-ms %" PRIu64 " past --timeout-ms %" PRIu64 ")",
			 limit_ms, b->opt.stall_timeout_ms, b->opt.timeout_ms);
		plink_gone(b->plink, p, why);
	}
	mgr_pump(b->mgr);
}

static void bd_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct bd *b = arg;
	if (b->phase != BD_RUNNING)
		return;
	uint64_t now = clk_monotonic_ns();
	if (b->ready_told && !b->started)
		b->last_progress_ns = now;      /* an operator's wait for start is not a stall */
	if (b->hub)
		bd_manage(b, now);
	else
		ing_tick(b->ing, now);
	bd_publish_credits(b, true);
	wd_check_stalls(&b->wd, now);
	uint64_t done = bd_events_done(b);
	prog_sample(b->prog, now, done);
	if (b->first_built_ns == 0 && b->started && done > 0)
		b->first_built_ns = now;
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
		.opt = &b->opt, .peers = &b->peers, .data = &b->data, .manager = b->mgr,
		.stopped_at_fault = b->fault_ns != 0, .error = bd_hook_error, .ctx = b,
	};
	int written = b->hub ? 0 : ing_finish(b->ing, books_events_generated(&bk));
	books_check(&bk);
	if (written < 0)
		bd_error(b, "Writing the record files in %s failed", b->opt.out_dir);
	bdc_finish(b->clocks);
	struct acct a = { 0 };
	books_account(&bk, &a);
	b->books_balanced = acct_balanced(&a);
	if (!b->books_balanced)
		b->status = 1;
	b->books_ns = clk_monotonic_ns();
	bd_report(b, &a);
	acct_free(&a);
	if (!b->hub && !ing_close_output(b->ing))
		b->status = 1;
	bd_say_bye(b);
	if (b->open_conns == 0) {
		event_base_loopexit(b->base, NULL);
	} else {
		/* Peers close after BYE; do not wait forever for one that won't.
		 * A timer of the run's own, not a timed loopexit, which would
		 * outlive the run and end the next one of a serving hub. */
		struct timeval tv = { 2, 0 };
		b->ev_linger = evtimer_new(b->base, bd_on_linger_over, b);
		if (b->ev_linger == NULL || evtimer_add(b->ev_linger, &tv) < 0)
			event_base_loopexit(b->base, NULL);
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
	struct bd *b = ctx;
	if (status != 0)
		b->status = 1;
	if (p->role == CTL_ROLE_BUILDER && b->fleet != NULL)
		fleet_update(b->fleet);
	bd_fault_tell_builders(b);
	bd_maybe_finish(b);
}

static void bd_hook_fault(void *ctx, struct bd_peer *p)
{
	struct bd *b = ctx;
	bd_stop_at_fault(b, p);
	bd_maybe_finish(b);
}

static void bd_hook_lost(void *ctx, struct bd_peer *p)
{
	struct bd *b = ctx;
	if (p->role == CTL_ROLE_BUILDER && b->mgr != NULL)
		mgr_builder_gone(b->mgr, p->id, peer_how_gone(p));
	/* Lost before the start (its greeting was kept waiting at a busy
	 * door, say): the others start without it rather than wait for ever. */
	bd_fault_tell_builders(b);
	bd_maybe_start(b);
	bd_maybe_finish(b);
}

/* Role hub: a builder's TOKEN goes to the manager. */
static bool bd_hook_message(void *ctx, struct bd_peer *p, const struct ctl_msg *m)
{
	struct bd *b = ctx;
	if (m->type != CTL_TOKEN || p->role != CTL_ROLE_BUILDER || b->mgr == NULL)
		return false;
	if (b->phase == BD_RUNNING) {
		mgr_token(b->mgr, p, &m->u.token, clk_monotonic_ns());
		bd_maybe_start(b);
	}
	return true;
}

static void bd_mgr_send(void *ctx, struct bd_peer *p, const struct ctl_msg *m)
{
	(void)ctx;
	if (p->conn != NULL)
		msgconn_send(p->conn, m);
}

/* A peer closed after BYE: the loop ends once the last one has. */
static void bd_hook_closed(void *ctx)
{
	struct bd *b = ctx;
	if (b->open_conns > 0 && --b->open_conns == 0)
		event_base_loopexit(b->base, NULL);
}

/* ---- life --------------------------------------------------------------- */

/* The data side: in role both this process's ingest and its links (TCP
 * always, shared memory on request); in role hub the builders' reports
 * and the event manager. */
static int bd_create_data(struct bd *b, uint16_t *data_port)
{
	*data_port = 0;
	if (b->hub) {
		struct mgr_hooks mh = { .ctx = b, .error = bd_hook_error, .send = bd_mgr_send,
					.progress = bd_hook_progress };
		b->fleet = fleet_create(&b->opt, &b->peers);
		b->mgr = b->fleet != NULL ? mgr_create(&b->opt, &b->peers, &mh) : NULL;
		if (b->mgr == NULL)
			return -ENOMEM;
		fleet_view(b->fleet, &b->data);
		return 0;
	}
	struct ing_hooks hooks = {
		.ctx = b,
		.error = bd_hook_error,
		.data_started = bd_hook_started,
		.progress = bd_hook_progress,
		.after_frames = bd_hook_after_frames,
		.reader_holds_slot = bd_hook_holds_slot,
	};
	b->ing = ing_create(b->base, &b->opt, b->source_offsets_ns, &hooks);
	if (b->ing == NULL || btcp_start(b->ing, data_port) < 0 || bshm_start(b->ing) < 0)
		return -EIO;
	bdd_from_ing(&b->data, b->ing);
	return 0;
}

/* The hub's modules: clocks, the peers' links, the watchdog, the control
 * port. */
static int bd_create_hub(struct bd *b, uint16_t *control_port)
{
	struct bdc_config cc = {
		.base = b->base,
		.peers = &b->peers,
		.out = b->ing != NULL ? ing_output(b->ing) : NULL,
		.run_id = b->opt.run_id,
		.correction = !b->opt.no_clock_correction,
		.probe_period_ns = b->opt.probe_period_ms * 1000000u,
		.quiet = b->opt.quiet,
		.ready = bd_on_clocks_ready,
		.ready_arg = b,
	};
	b->clocks = bdc_create(&cc);
	if (b->clocks == NULL)
		return -ENOMEM;
	struct plink_config lc = {
		.base = b->base,
		.peers = &b->peers,
		.data = &b->data,
		.clocks = b->clocks,
		.hooks = { .ctx = b, .error = bd_hook_error, .progress = bd_hook_progress,
			   .reported = bd_hook_reported, .lost = bd_hook_lost,
			   .closed = bd_hook_closed, .running = bd_hook_running,
			   .fault = bd_hook_fault, .message = bd_hook_message },
	};
	b->plink = plink_create(&lc);
	if (b->plink == NULL)
		return -ENOMEM;
	b->wd = (struct wd){
		.opt = &b->opt,
		.peers = &b->peers,
		.data = &b->data,
		.hooks = { .ctx = b, .gone = bd_wd_gone, .send = bd_wd_send, .error = bd_hook_error,
			   .running = bd_hook_running },
	};
	struct ctlport_hooks ch = { .ctx = b, .running = bd_hook_running, .joined = bd_on_joined };
	b->ctlport = ctlport_open(b->base, &b->opt, &b->peers, &ch, control_port);
	return b->ctlport == NULL ? -EADDRNOTAVAIL : 0;
}

struct bd *bd_create(struct event_base *base, const struct bd_options *opt)
{
	struct bd *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->base = base;
	b->opt = *opt;
	b->hub = opt->role == BD_ROLE_HUB;
	b->start_ns = b->last_progress_ns = clk_monotonic_ns();
	b->prog = prog_create(b->start_ns, isatty(STDERR_FILENO) ? stderr : NULL);
	net_host_name(b->host, sizeof b->host);
	b->source_offsets_ns = calloc(opt->sources + 1, sizeof *b->source_offsets_ns);
	b->snap_links = calloc(opt->readers + 1, sizeof *b->snap_links);
	if (peer_table_init_builders(&b->peers, opt->sources, opt->readers,
				     b->hub ? opt->builders : 0) < 0 ||
	    !b->source_offsets_ns || !b->snap_links || b->prog == NULL)
		goto fail;
	/* An earlier run's metrics.json must not sit beside this one's records. */
	if (rundir_begin(opt->out_dir, "metrics.json", opt->run_id, b->hub ? "hub" : "builder", 0))
		goto fail;
	uint16_t data_port, control_port;
	if (bd_create_data(b, &data_port) < 0 || bd_create_hub(b, &control_port) < 0)
		goto fail;
	b->ev_tick = event_new(base, -1, EV_PERSIST, bd_on_tick, b);
	struct timeval tick = { 0, BD_TICK_US };
	event_add(b->ev_tick, &tick);
	if (bd_announce(b, data_port, control_port) < 0)
		goto fail;
	bd_log_waiting(b);
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

void bd_hold_start(struct bd *b, void (*on_ready)(void *arg), void *arg)
{
	b->on_ready = on_ready;
	b->on_ready_arg = arg;
}

void bd_release_start(struct bd *b)
{
	b->start_released = true;
	bd_maybe_start(b);
}

void bd_destroy(struct bd *b)
{
	if (b == NULL)
		return;
	if (b->ev_linger != NULL)
		event_free(b->ev_linger);
	plink_destroy(b->plink);
	ing_destroy(b->ing);
	mgr_destroy(b->mgr);
	fleet_destroy(b->fleet);
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
