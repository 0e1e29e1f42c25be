#include "hub/hub.h"
#include "hub/hub_internal.h"
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
#include "peer.h"
#include "hub/progress.h"
#include "data/link_shm.h"
#include "snapshot.h"
#include "data/link_tcp.h"
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
#define HUB_START_DELAY_NS 2000000u

static void hub_finish(struct hub *b, const char *why);
static void hub_maybe_start(struct hub *b);
static bool hub_all_connected(const struct hub *b);

static void hub_maybe_finish(struct hub *b);

/* Records an error of the run: logged, listed in metrics.json, and the run
 * ends non-zero. */
static void hub_error(struct hub *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void hub_error(struct hub *b, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	log_error("%s", text);
	b->status = 1;
	if (b->error_count < HUB_MAX_ERRORS)
		b->errors[b->error_count++] = strdup(text);
	else
		b->errors_dropped++;
}

static void hub_hook_error(void *ctx, const char *text)
{
	hub_error(ctx, "%s", text);
}

/* ---- credits ---------------------------------------------------------- */

static void hub_send_credit(struct hub *b, struct peer *p, uint64_t limit, uint64_t now)
{
	b->credits_sent += credits_send(p, limit, now) ? 1 : 0;
}

static void hub_publish_credits(struct hub *b, bool tick)
{
	if (b->phase == HUB_RUNNING && !b->role_hub)
		b->credits_sent += credits_publish(&b->peers, ingest_admission_limit(b->ing),
						   b->opt.max_inflight, tick, clk_monotonic_ns());
}

/* ---- joining and START ------------------------------------------------- */

/* Once every peer is up, tells the sources to start together, so that the
 * fragments of one event leave every source at about the same moment. */
/* The clock module measured the last source: START may go. */
static void hub_on_clocks_ready(void *arg)
{
	hub_maybe_start(arg);
}

static void hub_maybe_start(struct hub *b)
{
	if (b->started || b->phase != HUB_RUNNING || !hub_all_connected(b) || !clocks_ready(b->clocks))
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
	m.u.start.delay_ns = HUB_START_DELAY_NS;
	m.u.start.at_realtime_ns = clk_realtime_true_ns() + HUB_START_DELAY_NS;
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (peer_source(&b->peers, s)->conn != NULL)
			msgconn_send(peer_source(&b->peers, s)->conn, &m);
	if (!b->opt.quiet && b->role_hub)
		log_info("Run %u: all %u sources, %u readers and %u builders connected; starting",
			 b->opt.run_id, b->opt.sources, b->opt.readers, b->opt.builders);
	else if (!b->opt.quiet)
		log_info("Run %u: all %u sources and %u readers connected; starting", b->opt.run_id,
			 b->opt.sources, b->opt.readers);
	if (b->mgr != NULL)
		manager_start(b->mgr, clk_monotonic_ns());
}

/* The control port welcomed p: its control connection, its first clock
 * burst, and for a reader its first admission limit. */
static void hub_on_joined(void *ctx, struct peer *p, int fd, const struct ctl_hello *h,
			 const struct msgseal *seal, const char *peer)
{
	struct hub *b = ctx;
	if (p->role == CTL_ROLE_READER && b->role_hub)
		fleet_claim(b->fleet, h);
	else if (p->role == CTL_ROLE_READER)
		ingest_claim(b->ing, h);
	peerlink_attach(b->plink, p, fd, seal, peer);
	p->last_heard_ns = clk_monotonic_ns();
	clocks_peer_joined(b->clocks, p);
	b->last_progress_ns = clk_monotonic_ns();
	if (!b->opt.quiet)
		log_info("%s %u joined run %u from %s (pid %u on %s)", ctl_role_title(h->role), h->id,
			 b->opt.run_id, peer, h->pid, h->host);
	if (b->mgr != NULL)
		manager_welcomed(b->mgr, p);
	hub_fault_tell(b, p);
	if (p->role == CTL_ROLE_READER && p->conn != NULL && !b->role_hub) {
		/* The reader holds everything until it hears a limit. */
		hub_send_credit(b, p, ingest_admission_limit(b->ing),
			       clk_monotonic_ns());
	}
	hub_maybe_start(b);
}

/* ---- the tick and the end of the run ----------------------------------- */

static void hub_on_linger_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct hub *b = arg;
	event_base_loopexit(b->base, NULL);
}

/* Every source, reader and (role hub) builder has reported or is lost. */
static bool hub_reports_done(const struct hub *b)
{
	for (uint32_t i = 0; i < peer_count(&b->peers); i++)
		if (!peer_at(&b->peers, i)->reported && !peer_at(&b->peers, i)->lost)
			return false;
	return true;
}

static void hub_on_clocks_closed(void *arg)
{
	hub_finish(arg, NULL);
}

/* Everything is in: a last round of clock exchanges (bounded in time),
 * then the end of the run. */
static void hub_maybe_finish(struct hub *b)
{
	if (b->phase == HUB_RUNNING && (b->role_hub || ingest_done(b->ing)) && hub_reports_done(b) &&
	    !clocks_close(b->clocks, hub_on_clocks_closed, b))
		hub_finish(b, NULL);
}

static bool hub_all_connected(const struct hub *b)
{
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (!peer_source(&b->peers, s)->connected)
			return false;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (!peer_reader(&b->peers, r)->connected ||
		    dataview_reader_state(&b->data, r) == INGEST_DATA_WAITING)
			return false;
	/* A builder joins with its first token, once every reader's data path
	 * to it is up. */
	for (uint32_t k = 0; k < b->peers.builders; k++)
		if (!peer_builder(&b->peers, k)->connected)
			return false;
	return b->mgr == NULL || manager_all_joined(b->mgr);
}

/* Role hub, from the tick: assignments that tokens alone did not make,
 * and a builder that holds events but sent no token for the stall timeout
 * past its event timeout (a healthy one may wait that long for an event). */
static void hub_manage(struct hub *b, uint64_t now)
{
	uint64_t limit_ms = options_builder_stall_ms(&b->opt);
	int32_t k = manager_stalled_builder(b->mgr, now, limit_ms * 1000000u);
	if (k >= 0) {
		struct peer *p = peer_builder(&b->peers, (uint32_t)k);
		p->stalled = true;
		char why[160];
		snprintf(why, sizeof why, "stalled: it holds events but sent no token for %" PRIu64 " ms (--stall-timeout-ms %" PRIu64 " past --timeout-ms %" PRIu64 ")",
			 limit_ms, b->opt.stall_timeout_ms, b->opt.timeout_ms);
		peerlink_gone(b->plink, p, why);
	}
	manager_pump(b->mgr);
}

static void hub_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct hub *b = arg;
	if (b->phase != HUB_RUNNING)
		return;
	uint64_t now = clk_monotonic_ns();
	if (b->ready_told && !b->started)
		b->last_progress_ns = now;      /* an operator's wait for start is not a stall */
	if (b->role_hub)
		hub_manage(b, now);
	else
		ingest_tick(b->ing, now);
	hub_publish_credits(b, true);
	hub_drain_settle(b, now);
	watchdog_check_stalls(&b->wd, now);
	uint64_t done = hub_events_done(b);
	progress_sample(b->prog, now, done);
	if (b->first_built_ns == 0 && b->started && done > 0)
		b->first_built_ns = now;
	if (b->phase != HUB_RUNNING)
		return;
	uint64_t limit_ns = b->opt.peer_timeout_ms * 1000000u;
	if (!hub_all_connected(b) && now - b->start_ns > limit_ns) {
		watchdog_report_missing(&b->wd, true);
		hub_finish(b, "a peer never connected");
		return;
	}
	if (b->wind_up_ns != 0 && now - b->wind_up_ns > b->opt.stall_timeout_ms * 1000000u) {
		watchdog_wind_up_over(&b->wd);
		if (b->phase != HUB_RUNNING)
			return;
		watchdog_report_missing(&b->wd, false);
		hub_finish(b, "no progress");
		return;
	}
	if (b->wind_up_ns == 0 && now - b->last_progress_ns > limit_ns) {
		b->wind_up_ns = now;
		watchdog_wind_up(&b->wd, now, b->last_progress_ns);
		hub_maybe_finish(b);
		return;
	}
	if (!b->opt.quiet && progress_due(b->prog, now)) {
		struct snapshot snap;
		hub_snapshot_fill(b, &snap, NULL);
		progress_show(b->prog, now, &snap);
	}
}

static void hub_say_bye(struct hub *b)
{
	struct ctl_msg m = { .type = CTL_BYE };
	m.u.bye.status = b->status;
	for (uint32_t i = 0; i < peer_count(&b->peers); i++) {
		struct peer *p = peer_at(&b->peers, i);
		if (p->conn == NULL)
			continue;
		msgconn_send(p->conn, &m);
		b->open_conns++;
	}
}

static void hub_finish(struct hub *b, const char *why)
{
	if (b->phase != HUB_RUNNING)
		return;
	b->phase = HUB_FINISHED;
	b->end_ns = clk_monotonic_ns();
	progress_end(b->prog);
	if (why != NULL)
		log_warn("Ending run %u early: %s", b->opt.run_id, why);
	event_del(b->ev_tick);
	struct books bk = {
		.opt = &b->opt, .peers = &b->peers, .data = &b->data, .manager = b->mgr,
		.stopped_at_fault = b->fault_ns != 0, .error = hub_hook_error, .ctx = b,
	};
	int written = b->role_hub ? 0 : ingest_finish(b->ing, books_events_generated(&bk));
	books_check(&bk);
	if (written < 0)
		hub_error(b, "Writing the record files in %s failed", b->opt.out_dir);
	clocks_finish(b->clocks);
	struct acct a = { 0 };
	books_account(&bk, &a);
	b->books_balanced = acct_balanced(&a);
	if (!b->books_balanced)
		b->status = 1;
	b->books_ns = clk_monotonic_ns();
	hub_report(b, &a);
	acct_free(&a);
	if (!b->role_hub && !ingest_close_output(b->ing))
		b->status = 1;
	hub_say_bye(b);
	if (b->open_conns == 0) {
		event_base_loopexit(b->base, NULL);
	} else {
		/* Peers close after BYE; do not wait forever for one that won't.
		 * A timer of the run's own, not a timed loopexit, which would
		 * outlive the run and end the next one of a serving hub. */
		struct timeval tv = { 2, 0 };
		b->ev_linger = evtimer_new(b->base, hub_on_linger_over, b);
		if (b->ev_linger == NULL || evtimer_add(b->ev_linger, &tv) < 0)
			event_base_loopexit(b->base, NULL);
	}
}

/* ---- what ingest asks of the hub ---------------------------------------- */

static void hub_hook_started(void *ctx)
{
	hub_maybe_start(ctx);
}

static void hub_hook_progress(void *ctx, uint64_t now)
{
	struct hub *b = ctx;
	b->last_progress_ns = now;
}

static void hub_hook_after_frames(void *ctx)
{
	struct hub *b = ctx;
	hub_publish_credits(b, false);
	hub_maybe_finish(b);
}

static bool hub_hook_holds_slot(void *ctx, uint32_t reader, uint32_t pid)
{
	struct hub *b = ctx;
	const struct peer *p = peer_reader(&b->peers, reader);
	return p->lost || p->reported || b->phase != HUB_RUNNING || (p->conn != NULL && p->pid == pid);
}

static void hub_wd_gone(void *ctx, struct peer *p, const char *why)
{
	const struct hub *b = ctx;
	peerlink_gone(b->plink, p, why);
}

static void hub_wd_send(void *ctx, struct peer *p, const struct ctl_msg *m)
{
	(void)ctx;
	msgconn_send(p->conn, m);
}

static bool hub_hook_running(void *ctx)
{
	const struct hub *b = ctx;
	return b->phase == HUB_RUNNING;
}

/* ---- what the peers' links ask of the hub ------------------------------ */

static void hub_hook_reported(void *ctx, struct peer *p, int32_t status)
{
	struct hub *b = ctx;
	if (status != 0)
		b->status = 1;
	if (p->role == CTL_ROLE_BUILDER && b->fleet != NULL)
		fleet_update(b->fleet);
	hub_fault_tell_builders(b);
	hub_maybe_finish(b);
}

static void hub_hook_fault(void *ctx, struct peer *p)
{
	struct hub *b = ctx;
	hub_stop_at_fault(b, p);
	hub_maybe_finish(b);
}

static void hub_hook_lost(void *ctx, struct peer *p)
{
	struct hub *b = ctx;
	if (p->role == CTL_ROLE_BUILDER && b->mgr != NULL)
		manager_builder_gone(b->mgr, p->id, peer_how_gone(p));
	/* Lost before the start (its greeting was kept waiting at a busy
	 * door, say): the others start without it rather than wait for ever. */
	hub_fault_tell_builders(b);
	hub_drain_settle(b, clk_monotonic_ns());
	hub_maybe_start(b);
	hub_maybe_finish(b);
}

/* Role hub: a builder's TOKEN goes to the manager. */
static bool hub_hook_message(void *ctx, struct peer *p, const struct ctl_msg *m)
{
	struct hub *b = ctx;
	if (m->type == CTL_STOP && p->role == CTL_ROLE_SOURCE) {
		hub_drain_answer(b, p, m->u.stop.last_event);
		return true;
	}
	if (m->type != CTL_TOKEN || p->role != CTL_ROLE_BUILDER || b->mgr == NULL)
		return false;
	if (b->phase == HUB_RUNNING) {
		manager_token(b->mgr, p, &m->u.token, clk_monotonic_ns());
		hub_maybe_start(b);
	}
	return true;
}

static void hub_mgr_send(void *ctx, struct peer *p, const struct ctl_msg *m)
{
	(void)ctx;
	if (p->conn != NULL)
		msgconn_send(p->conn, m);
}

/* A peer closed after BYE: the loop ends once the last one has. */
static void hub_hook_closed(void *ctx)
{
	struct hub *b = ctx;
	if (b->open_conns > 0 && --b->open_conns == 0)
		event_base_loopexit(b->base, NULL);
}

/* ---- life --------------------------------------------------------------- */

/* The data side: in role both this process's ingest and its links (TCP
 * always, shared memory on request); in role hub the builders' reports
 * and the event manager. */
static int hub_create_data(struct hub *b, uint16_t *data_port)
{
	*data_port = 0;
	if (b->role_hub) {
		struct manager_hooks mh = { .ctx = b, .error = hub_hook_error, .send = hub_mgr_send,
					.progress = hub_hook_progress };
		b->fleet = fleet_create(&b->opt, &b->peers);
		b->mgr = b->fleet != NULL ? manager_create(&b->opt, &b->peers, &mh) : NULL;
		if (b->mgr == NULL)
			return -ENOMEM;
		fleet_view(b->fleet, &b->data);
		return 0;
	}
	struct ingest_hooks hooks = {
		.ctx = b,
		.error = hub_hook_error,
		.data_started = hub_hook_started,
		.progress = hub_hook_progress,
		.after_frames = hub_hook_after_frames,
		.reader_holds_slot = hub_hook_holds_slot,
	};
	b->ing = ingest_create(b->base, &b->opt, b->source_offsets_ns, &hooks);
	if (b->ing == NULL || link_tcp_start(b->ing, data_port) < 0 || link_shm_start(b->ing) < 0)
		return -EIO;
	dataview_from_ingest(&b->data, b->ing);
	return 0;
}

/* The hub's modules: clocks, the peers' links, the watchdog, the control
 * port. */
static int hub_create_hub(struct hub *b, uint16_t *control_port)
{
	struct clocks_config cc = {
		.base = b->base,
		.peers = &b->peers,
		.out = b->ing != NULL ? ingest_output(b->ing) : NULL,
		.run_id = b->opt.run_id,
		.correction = !b->opt.no_clock_correction,
		.probe_period_ns = b->opt.probe_period_ms * 1000000u,
		.quiet = b->opt.quiet,
		.ready = hub_on_clocks_ready,
		.ready_arg = b,
	};
	b->clocks = clocks_create(&cc);
	if (b->clocks == NULL)
		return -ENOMEM;
	struct peerlink_config lc = {
		.base = b->base,
		.peers = &b->peers,
		.data = &b->data,
		.clocks = b->clocks,
		.hooks = { .ctx = b, .error = hub_hook_error, .progress = hub_hook_progress,
			   .reported = hub_hook_reported, .lost = hub_hook_lost,
			   .closed = hub_hook_closed, .running = hub_hook_running,
			   .fault = hub_hook_fault, .message = hub_hook_message },
	};
	b->plink = peerlink_create(&lc);
	if (b->plink == NULL)
		return -ENOMEM;
	b->wd = (struct watchdog){
		.opt = &b->opt,
		.peers = &b->peers,
		.data = &b->data,
		.hooks = { .ctx = b, .gone = hub_wd_gone, .send = hub_wd_send, .error = hub_hook_error,
			   .running = hub_hook_running },
	};
	struct ctlport_hooks ch = { .ctx = b, .running = hub_hook_running, .joined = hub_on_joined };
	b->ctlport = ctlport_open(b->base, &b->opt, &b->peers, &ch, control_port);
	return b->ctlport == NULL ? -EADDRNOTAVAIL : 0;
}

struct hub *hub_create(struct event_base *base, const struct options *opt)
{
	struct hub *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->base = base;
	b->opt = *opt;
	b->role_hub = opt->role == ROLE_HUB;
	b->start_ns = b->last_progress_ns = clk_monotonic_ns();
	b->prog = progress_create(b->start_ns, isatty(STDERR_FILENO) ? stderr : NULL);
	net_host_name(b->host, sizeof b->host);
	b->source_offsets_ns = calloc(opt->sources + 1, sizeof *b->source_offsets_ns);
	b->snap_links = calloc(opt->readers + 1, sizeof *b->snap_links);
	if (peer_table_init_builders(&b->peers, opt->sources, opt->readers,
				     b->role_hub ? opt->builders : 0) < 0 ||
	    !b->source_offsets_ns || !b->snap_links || b->prog == NULL)
		goto fail;
	/* An earlier run's metrics.json must not sit beside this one's records. */
	if (rundir_begin(opt->out_dir, "metrics.json", opt->run_id, b->role_hub ? "hub" : "builder", 0))
		goto fail;
	uint16_t data_port, control_port;
	if (hub_create_data(b, &data_port) < 0 || hub_create_hub(b, &control_port) < 0)
		goto fail;
	b->ev_tick = event_new(base, -1, EV_PERSIST, hub_on_tick, b);
	struct timeval tick = { 0, HUB_TICK_US };
	event_add(b->ev_tick, &tick);
	if (hub_announce(b, data_port, control_port) < 0)
		goto fail;
	hub_log_waiting(b);
	return b;
fail:
	hub_destroy(b);
	return NULL;
}

void hub_stop(struct hub *b, const char *why)
{
	if (b->phase == HUB_RUNNING) {
		hub_error(b, "Run %u stopped: %s", b->opt.run_id, why);
		hub_finish(b, why);
	}
}

void hub_hold_start(struct hub *b, void (*on_ready)(void *arg), void *arg)
{
	b->on_ready = on_ready;
	b->on_ready_arg = arg;
}

void hub_release_start(struct hub *b)
{
	b->start_released = true;
	hub_maybe_start(b);
}

void hub_destroy(struct hub *b)
{
	if (b == NULL)
		return;
	if (b->ev_linger != NULL)
		event_free(b->ev_linger);
	peerlink_destroy(b->plink);
	ingest_destroy(b->ing);
	manager_destroy(b->mgr);
	fleet_destroy(b->fleet);
	ctlport_close(b->ctlport);
	if (b->ev_tick)
		event_free(b->ev_tick);
	prom_server_stop(b->prom);
	clocks_destroy(b->clocks);
	for (uint32_t i = 0; i < b->error_count; i++)
		free(b->errors[i]);
	free(b->source_offsets_ns);
	free(b->snap_links);
	progress_destroy(b->prog);
	peer_table_free(&b->peers);
	free(b);
}
