#include "builder/brun.h"

#include "builder/breport.h"
#include "builder/fence.h"
#include "builder/hublink.h"
#include "data/ingest.h"
#include "data/output.h"
#include "data/ownroute.h"
#include "data/record.h"
#include "report/rundir.h"
#include "data/link_shm.h"
#include "data/link_tcp.h"

#include "io/daemon.h"
#include "io/prom.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/counters.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BRUN_TICK_US 2000u
/* After our END, how long to wait for the hub's BYE before leaving. */
#define BRUN_BYE_WAIT_S 10
/* The wait for the hub's kernel to acknowledge a STATS after a loop gap. */
#define BRUN_HUB_ANSWER_NS (1000ull * 1000 * 1000)

struct brun {
	struct event_base *base;
	struct options opt;
	int status;
	struct ingest *ing;
	struct hublink *hub;
	struct event *ev_tick;
	struct event *ev_leave;         /* the loop's end, after a wait */
	struct prom_server *prom;       /* --metrics-listen */
	struct ctl_msg *end;            /* the END report, kept for /metrics */
	struct breport_role role;
	bool hub_ready;
	bool joined;                    /* first TOKEN sent */
	bool reported;                  /* END sent (or the run ended without a hub) */
	bool done;                      /* BYE heard, or the hub lost: leaving */
	bool fenced;                    /* given up by the hub: writes nothing more */
	bool warned_full;
	uint64_t token_decided;         /* decided of the last TOKEN */
	uint64_t token_decided_below;   /* and its decided_below: the fence */
	uint64_t last_take_ns;          /* when frames were last taken (monotonic) */
	uint64_t last_tick_ns;          /* when the tick last ran */
	struct event *ev_stats;         /* a STATS to the hub every second */
	struct ctl_msg stats;
	double events_per_s;            /* completed over the last second */
	uint64_t rate_complete;         /* events_complete at rate_ns */
	uint64_t rate_ns;
};

__attribute__((format(printf, 2, 3))) static void brun_error(struct brun *b, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	log_error("%s", text);
	b->status = 1;
}

static void brun_on_leave(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	struct brun *b = arg;
	event_base_loopexit(b->base, NULL);
}

/* Ends the loop after_s from now: a timer of the run's own, not a timed
 * loopexit, which would outlive the run and end the next one of a builder
 * serving runs. */
static void brun_exit_after(struct brun *b, int after_s)
{
	struct timeval tv = { after_s, 0 };
	if (after_s > 0 && b->ev_leave == NULL)
		b->ev_leave = evtimer_new(b->base, brun_on_leave, b);
	if (after_s == 0 || b->ev_leave == NULL || evtimer_add(b->ev_leave, &tv) < 0)
		event_base_loopexit(b->base, NULL);
}

static void brun_leave(struct brun *b, int after_s)
{
	b->done = true;
	brun_exit_after(b, after_s);
}

/* ---- the fence ------------------------------------------------------------- */

/* Given up by the hub (docs/BUILDERS.md, "A given-up builder is fenced"):
 * the hub's books count this builder's events below its last TOKEN's
 * decided_below as decided and the rest as lost, so nothing more is built,
 * written or sent, and the record files are cut back to exactly those. */
static void brun_fence(struct brun *b, const char *what, const char *why)
{
	if (b->fenced)
		return;
	b->fenced = true;
	b->reported = true;   /* no TOKEN, no records, no END from here on */
	event_del(b->ev_tick);
	struct fence_at at = { .dir = b->opt.out_dir, .builder = b->opt.builder_id,
			       .run = b->opt.run_id, .below = b->joined ? b->token_decided_below : 0,
			       .decided = b->token_decided, .unwritten = ingest_fence(b->ing) };
	fence_apply(&at, what, why);
	b->status = 1;
	brun_leave(b, 0);
}

/* b->stats for the hub; false without a plan and a link, or after END. */
static bool brun_fill_stats(struct brun *b)
{
	struct ownroute *plan = ingest_plan(b->ing);
	if (!b->hub_ready || b->reported || plan == NULL)
		return false;
	uint64_t assigned = ownroute_assigned(plan), decided = ingest_decided(b->ing);
	b->stats.type = CTL_STATS;
	breport_stats(&b->stats.u.report, b->ing, hublink_tokens_sent(b->hub),
		      assigned > decided ? assigned - decided : 0, b->events_per_s);
	return true;
}

/* Whether the hub still holds this builder's link, after a loop gap (a
 * stopped process): the FIN of a hub that gave it up may be stuck behind a
 * full receive window, so a STATS must be acknowledged (a closed socket resets). */
static bool brun_hub_answers(struct brun *b)
{
	if (hublink_hub_closed(b->hub))
		return false;
	return !b->joined || !brun_fill_stats(b) ||
	       hublink_hub_answers(b->hub, &b->stats, BRUN_HUB_ANSWER_NS);
}

/* ---- tokens --------------------------------------------------------------- */

/* false when the hub has closed the link: it gave this builder up, and a
 * TOKEN now would count events its books already call lost. */
static bool brun_send_token(struct brun *b, uint64_t decided, uint64_t decided_below)
{
	if (hublink_hub_closed(b->hub)) {
		brun_fence(b, "lost its hub's control connection", "closed before its next token");
		return false;
	}
	if (hublink_send_token(b->hub, b->opt.max_inflight, decided, decided_below) == 0) {
		b->token_decided = decided;
		b->token_decided_below = decided_below;
		b->role.ids_decided = decided;
	}
	return true;
}

/* The first TOKEN joins the builder, once the hub's plan is here and every
 * reader's data path to it is up: from then on the hub may assign it
 * events, and every reader can forward them. */
static void brun_maybe_join(struct brun *b)
{
	struct ownroute *plan = ingest_plan(b->ing);
	if (b->joined || b->reported || !b->hub_ready || plan == NULL)
		return;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		if (ingest_reader_state(b->ing, r) == INGEST_DATA_WAITING)
			return;
	b->joined = true;
	b->last_take_ns = clk_monotonic_ns();   /* a stop before the first frame is a gap too */
	brun_send_token(b, 0, ownroute_first_event(plan));
	if (!b->opt.quiet)
		log_info("Builder %u joined run %u with %u slots: every reader's data path is up",
			 b->opt.builder_id, b->opt.run_id, b->opt.max_inflight);
}

/* A TOKEN when decided grew by half a batch, or on the tick by anything.
 * decided counts only the local IDs below the lowest undecided one, so the
 * hub never assigns past the core's window. */
static void brun_tokens(struct brun *b, bool tick)
{
	struct ownroute *plan = ingest_plan(b->ing);
	if (!b->joined || b->reported || plan == NULL)
		return;
	uint64_t decided = ingest_decided(b->ing);
	uint64_t half = ownroute_batch(plan) / 2 ? ownroute_batch(plan) / 2 : 1;   /* the hub's batch */
	if (decided <= b->token_decided || (!tick && decided - b->token_decided < half))
		return;
	brun_send_token(b, decided, ownroute_decided_below(plan, decided));
}

/* ---- the end --------------------------------------------------------------- */

static void brun_refresh_report(struct brun *b)
{
	b->role.tokens_sent = hublink_tokens_sent(b->hub);
	b->role.frags_misrouted = ingest_misrouted(b->ing);
	b->role.frames_held_unassigned = ingest_held_unassigned(b->ing);
	struct ownroute *plan = ingest_plan(b->ing);
	b->role.events_assigned = plan != NULL ? ownroute_assigned(plan) : 0;
	if (!breport_fill(&b->end->u.report, b->ing, &b->role, b->status) && !b->warned_full) {
		b->warned_full = true;
		log_warn("Builder %u: its report has more groups or counters than a message holds; the hub gets only those that fit",
			 b->opt.builder_id);
	}
}

/* Every reader's data path has ended (or the run is stopped): the core
 * closes over the IDs assigned to this builder, the records are written,
 * a last TOKEN says every one is decided, then the END. */
static void brun_finish(struct brun *b)
{
	if (b->reported)
		return;
	/* The hub closed the link before this END: it gave this builder up
	 * (it was stopped), or died. Either way its books end at the last
	 * TOKEN it read: fenced, not finished. */
	if (b->joined && !brun_hub_answers(b)) {
		brun_fence(b, "lost its hub's control connection", "closed before the run's end");
		return;
	}
	b->reported = true;
	event_del(b->ev_tick);
	struct ownroute *plan = ingest_plan(b->ing);
	uint64_t assigned = plan != NULL ? ownroute_assigned(plan) : 0;
	if (ingest_finish(b->ing, assigned) < 0)
		brun_error(b, "Writing the record files in %s failed", b->opt.out_dir);
	/* The last TOKEN, whatever the one before said: the hub's books
	 * check it against the END (docs/BUILDERS.md, The books). */
	if (b->joined && !brun_send_token(b, assigned, ownroute_assigned_end(plan)))
		return;
	const struct bld_counters *c = ingest_counters(b->ing);
	brun_refresh_report(b);
	if (!ingest_close_output(b->ing))
		b->status = 1;
	b->end->u.report.status = b->status;
	if (breport_write_json(b->opt.out_dir, b->opt.builder_id, b->opt.run_id, &b->end->u.report) < 0)
		b->status = 1;
	else
		rundir_end(b->opt.out_dir);
	b->end->type = CTL_END;
	b->end->u.report.status = b->status;
	if (!b->opt.quiet)
		log_info("Builder %u: %" PRIu64 " events assigned, %" PRIu64 " complete, %" PRIu64
			 " expired, %" PRIu64 " never observed; %" PRIu64 " misrouted fragments, %" PRIu64
			 " tokens",
			 b->opt.builder_id, assigned, c->events_complete, c->events_expired,
			 c->events_unobserved, ingest_misrouted(b->ing), hublink_tokens_sent(b->hub));
	if (!b->hub_ready || hublink_send_end(b->hub, b->end) < 0) {
		log_error("Builder %u could not send its final counters to the hub", b->opt.builder_id);
		b->status = 1;
		brun_leave(b, 0);
		return;
	}
	/* The hub answers with BYE; do not wait for ever for one that won't. */
	brun_exit_after(b, BRUN_BYE_WAIT_S);
}

/* A gap in the builder's loop longer than this (a stopped or starved
 * process) makes it ask whether its hub gave it up meanwhile before it
 * takes another frame: it never builds, and so never records, events the
 * hub's books already call lost. */
#define BRUN_GAP_CHECK_NS (100ull * 1000 * 1000)

/* Not right after a gap in the loop (a stopped process): the tick does. */
static void brun_maybe_finish(struct brun *b)
{
	if (!b->reported && !b->fenced && ingest_plan(b->ing) != NULL && ingest_done(b->ing) &&
	    clk_monotonic_ns() - b->last_tick_ns <= BRUN_GAP_CHECK_NS)
		brun_finish(b);
}

/* ---- what ingest asks ------------------------------------------------------- */

static void brun_hook_error(void *ctx, const char *text)
{
	brun_error(ctx, "%s", text);
}

static void brun_hook_started(void *ctx)
{
	brun_maybe_join(ctx);
}

static bool brun_hook_may_take(void *ctx, uint64_t now)
{
	struct brun *b = ctx;
	uint64_t last = b->last_take_ns;
	b->last_take_ns = now;
	if (b->fenced)
		return false;
	if (last != 0 && now - last > BRUN_GAP_CHECK_NS && !brun_hub_answers(b)) {
		brun_fence(b, "lost its hub's control connection", "closed while it was stopped");
		return false;
	}
	return true;
}

static void brun_hook_after_frames(void *ctx)
{
	struct brun *b = ctx;
	brun_tokens(b, false);
	brun_maybe_finish(b);
}

/* No reader's control link comes here: the hub knows it. A data path that
 * ends before carrying a byte gave nothing, so its slot is free again for
 * the real reader's (ingest keeps it once the run is over). */
static bool brun_hook_holds_slot(void *ctx, uint32_t reader, uint32_t pid)
{
	(void)ctx;
	(void)reader;
	(void)pid;
	return false;
}

/* ---- what the hub says ------------------------------------------------------- */

static void brun_on_ready(void *arg)
{
	struct brun *b = arg;
	b->hub_ready = true;
	if (!b->opt.quiet)
		log_info("Builder %u joined hub %s:%u for run %u", b->opt.builder_id, b->opt.hub_host,
			 (unsigned)b->opt.hub_port, b->opt.run_id);
}

static void brun_on_routing(const struct ctl_routing *r, void *arg)
{
	struct brun *b = arg;
	char why[512];
	if (ingest_plan(b->ing) != NULL) {
		brun_error(b, "Builder %u: the hub sent its routing twice; refusing the run",
			   b->opt.builder_id);
		brun_leave(b, 0);
		return;
	}
	struct ownroute *plan = ownroute_create(r, b->opt.builders, b->opt.builder_id, b->opt.max_inflight,
				      why, sizeof why);
	if (plan == NULL) {
		brun_error(b, "Builder %u refuses run %u: %s", b->opt.builder_id, b->opt.run_id, why);
		brun_leave(b, 0);
		return;
	}
	ingest_set_plan(b->ing, plan);
	if (!b->opt.quiet)
		log_info("Builder %u: %s routing over %u builders, events %" PRIu64 "..+%" PRIu64
			 ", batches of %u, %u live", b->opt.builder_id, ctl_routing_mode_name(r->mode),
			 r->builders, r->first_event, r->events, r->batch, r->window_batches);
	brun_maybe_join(b);
}

static void brun_on_assign(const struct ctl_assign *a, void *arg)
{
	struct brun *b = arg;
	char why[512];
	if (b->reported)
		return;
	b->role.assignments_received++;
	if (ingest_plan(b->ing) == NULL) {
		brun_error(b, "Builder %u: the hub assigned events %" PRIu64 "..+%u before its routing; stopping",
			   b->opt.builder_id, a->first, a->count);
		brun_finish(b);
		return;
	}
	if (ingest_assign(b->ing, a, why, sizeof why) < 0) {
		brun_error(b, "Builder %u refuses the hub's %s; the hub and this builder disagree on the plan, stopping",
			   b->opt.builder_id, why);
		brun_finish(b);
	}
}

static void brun_on_lost(const struct ctl_lost *l, void *arg)
{
	struct brun *b = arg;
	if (l->builder == b->opt.builder_id) {
		brun_fence(b, "was given up by its hub", l->reason);
		return;
	}
	struct ownroute *plan = ingest_plan(b->ing);
	if (plan != NULL && ownroute_lose(plan, l->builder) == 0 && !b->opt.quiet)
		log_info("Builder %u: the hub gave builder %u up (%s)", b->opt.builder_id, l->builder,
			 l->reason);
}

/* The hub's estimate of a source's clock against this builder's: later
 * records of that source are corrected by it and carry its bound. */
static void brun_on_clock(const struct ctl_clock *c, void *arg)
{
	struct brun *b = arg;
	struct output *o = ingest_output(b->ing);
	if (b->reported || o == NULL)
		return;   /* the records are written: the hub's last rounds come too late */
	if (c->source >= b->opt.sources) {
		log_warn("Builder %u: ignoring the hub's clock of source %u, which is not in the run",
			 b->opt.builder_id, c->source);
		return;
	}
	struct output_clock oc = {
		.offset_ns = c->offset_ns,
		.bound_ns = c->bound_ns < 0 ? OUTPUT_UNBOUNDED : c->bound_ns,
		.at_ns = c->at_ns > INT64_MAX ? INT64_MAX : (int64_t)c->at_ns,
		.drift_ppm = (double)c->drift_ppb / 1000.0,
	};
	output_set_clock(o, (uint16_t)c->source, &oc);
	b->role.clocks_received++;
}

static void brun_on_stop(const char *reason, void *arg)
{
	struct brun *b = arg;
	log_warn("Builder %u stopping at the hub's request: %s", b->opt.builder_id, reason);
	for (uint32_t r = 0; r < b->opt.readers; r++)
		ingest_cut(b->ing, r);
	brun_finish(b);
}

static void brun_on_bye(int32_t status, void *arg)
{
	struct brun *b = arg;
	if (!b->reported) {
		log_warn("Builder %u: the hub ended the run (status %d) before every reader's data ended",
			 b->opt.builder_id, status);
		b->status = 1;
	}
	if (status != 0)
		b->status = 1;
	brun_leave(b, 0);
}

static void brun_on_gone(const char *reason, void *arg)
{
	struct brun *b = arg;
	if (b->done)
		return;
	if (b->joined && !b->reported) {
		/* Mid-run: given up (a stall), or the hub died; either way the
		 * hub's books, if any, end at the last TOKEN it read. */
		brun_fence(b, "lost its hub's control connection", reason);
		return;
	}
	if (b->hub_ready)
		brun_error(b, "Builder %u lost its hub's control connection: %s; stopping",
			   b->opt.builder_id, reason);
	else
		brun_error(b, "Builder %u could not join its hub at %s:%u: %s; stopping",
			   b->opt.builder_id, b->opt.hub_host, (unsigned)b->opt.hub_port, reason);
	brun_leave(b, 0);
}

static const struct hublink_ops brun_hub_ops = {
	.ready = brun_on_ready,
	.routing = brun_on_routing,
	.assign = brun_on_assign,
	.lost = brun_on_lost,
	.clock = brun_on_clock,
	.stop = brun_on_stop,
	.bye = brun_on_bye,
	.gone = brun_on_gone,
};

/* ---- life ------------------------------------------------------------------ */

static void brun_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	struct brun *b = arg;
	if (b->reported)
		return;
	b->last_tick_ns = clk_monotonic_ns();
	ingest_tick(b->ing, b->last_tick_ns);
	brun_tokens(b, true);
	brun_maybe_finish(b);
}

static void brun_fill_live(struct evbuffer *out, bool json, void *arg)
{
	struct brun *b = arg;
	if (!b->reported)
		brun_refresh_report(b);
	struct record_stats rs;
	const struct output *o = ingest_output(b->ing);
	int64_t free_bytes = o != NULL && output_record_stats(o, &rs) ? (int64_t)rs.free_bytes : -1;
	breport_exposition(out, json, &b->end->u.report, b->events_per_s, free_bytes);
}

/* Once a second: the rate over the last second, and the hub hears how
 * this builder is doing (docs/BUILDERS.md, the live view). */
static void brun_on_stats(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	struct brun *b = arg;
	uint64_t now = clk_monotonic_ns();
	const struct bld_counters *c = ingest_counters(b->ing);
	if (b->rate_ns != 0 && now > b->rate_ns)
		b->events_per_s = (double)(c->events_complete - b->rate_complete) * 1e9 /
				  (double)(now - b->rate_ns);
	b->rate_ns = now;
	b->rate_complete = c->events_complete;
	if (brun_fill_stats(b))
		hublink_send_stats(b->hub, &b->stats);
}

/* The port file and the "listening" lines the launcher reads back. */
static int brun_announce(struct brun *b, uint16_t data_port)
{
	const struct options *opt = &b->opt;
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		b->prom = prom_server_start(b->base, opt->metrics_host, opt->metrics_port,
					    brun_fill_live, b, &metrics_port);
		if (b->prom == NULL)
			return -EADDRNOTAVAIL;
	}
	const struct daemon_port ports[] = { { "data", opt->listen_hosts[0], data_port, false },
					     { "metrics", opt->metrics_host, metrics_port, true } };
	return daemon_announce(ports, 2, opt->port_file);
}

struct brun *brun_create(struct event_base *base, const struct options *opt)
{
	struct brun *b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->base = base;
	b->opt = *opt;
	b->end = calloc(1, sizeof *b->end);
	if (b->end == NULL || rundir_begin(opt->out_dir, "builder.json", opt->run_id, "builder",
					   opt->builder_id) < 0)
		goto fail;
	struct ingest_hooks hooks = {
		.ctx = b,
		.error = brun_hook_error,
		.data_started = brun_hook_started,
		.may_take = brun_hook_may_take,
		.after_frames = brun_hook_after_frames,
		.reader_holds_slot = brun_hook_holds_slot,
	};
	uint16_t data_port;
	b->ing = b->end != NULL ? ingest_create(base, opt, NULL, &hooks) : NULL;
	if (b->ing == NULL || link_tcp_start(b->ing, &data_port) < 0 || link_shm_start(b->ing) < 0)
		goto fail;
	b->ev_tick = event_new(base, -1, EV_PERSIST, brun_on_tick, b);
	b->ev_stats = event_new(base, -1, EV_PERSIST, brun_on_stats, b);
	if (b->ev_tick == NULL || b->ev_stats == NULL)
		goto fail;
	struct timeval tick = { 0, BRUN_TICK_US }, second = { 1, 0 };
	event_add(b->ev_tick, &tick);
	event_add(b->ev_stats, &second);
	if (brun_announce(b, data_port) < 0)
		goto fail;
	b->hub = hublink_start(base, opt, &brun_hub_ops, b);
	if (b->hub == NULL)
		goto fail;
	if (!opt->quiet)
		log_info("Builder %u of %u, run %u: waiting for %u readers and the hub at %s:%u; window %u events",
			 opt->builder_id, opt->builders, opt->run_id, opt->readers, opt->hub_host,
			 (unsigned)opt->hub_port, opt->max_inflight);
	return b;
fail:
	brun_destroy(b);
	return NULL;
}

void brun_stop(struct brun *b, const char *why)
{
	if (b->reported) {
		brun_leave(b, 0);
		return;
	}
	brun_error(b, "Builder %u stopped: %s", b->opt.builder_id, why);
	for (uint32_t r = 0; r < b->opt.readers; r++)
		ingest_cut(b->ing, r);
	brun_finish(b);
}

int brun_exit_status(const struct brun *b)
{
	return b->status ? 1 : 0;
}

void brun_destroy(struct brun *b)
{
	if (b == NULL)
		return;
	hublink_free(b->hub);
	prom_server_stop(b->prom);
	ingest_destroy(b->ing);
	if (b->ev_tick)
		event_free(b->ev_tick);
	if (b->ev_leave != NULL)
		event_free(b->ev_leave);
	if (b->ev_stats)
		event_free(b->ev_stats);
	free(b->end);
	free(b);
}
