/* The hub serving many runs (serve_session.h, docs/RUNCONTROL.md): the run
 * slot holding the hub's run object, the operator's transitions and the
 * events of the run and the peers, each through serve_fsm's rules, and the
 * deadline of every state that waits on its peers. The session port and
 * the peers' links are serve_session_peers.c's. */
#include "serve/serve_session_internal.h"

#include "options.h"
#include "hub/hub.h"

#include "io/msgstream.h"
#include "io/net.h"
#include "io/session.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/notify.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Time for the last messages to be written before the process exits. */
#define SERVE_LINGER_US 200000
#define SERVE_TICK_US 1000
/* An abandoned run object ends within this, or the hub ends it: as long
 * as a run object's own wait for its peers' close after BYE. */
#define SERVE_ABANDONED_END_S 2

static void serve_notify(const struct serve_session *hs)
{
	switch (hs->state) {
	case SERVE_IDLE:
		log_info("Idle: ready for the next configure");
		notify_status("idle");
		break;
	case SERVE_CONFIGURED:
		log_info("Run %u configured: every peer in, START held for the operator", hs->run);
		notify_status("configured for run %u", hs->run);
		break;
	case SERVE_RUNNING:
		notify_status("running run %u", hs->run);
		break;
	case SERVE_ERROR:
		log_error("Error: %s", hs->error);
		notify_status("error: %s", hs->error);
		break;
	default:
		notify_status("%s run %u", serve_fsm_state_name(hs->state), hs->run);
		break;
	}
}

/* The one place the state changes: event's rule from the current state,
 * the deadline (re)armed when the new state waits on its peers. false
 * when no rule applies (nothing changes). */
static bool serve_enter(struct serve_session *hs, enum serve_event event)
{
	enum serve_state to;
	if (!serve_fsm_next(hs->state, event, &to))
		return false;
	bool changed = to != hs->state;
	hs->state = to;
	event_del(hs->ev_deadline);
	if (serve_fsm_has_deadline(to)) {
		uint64_t ms = hs->opt->transition_timeout_ms;
		const struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
		event_add(hs->ev_deadline, &tv);
	}
	if (changed)
		serve_notify(hs);
	return true;
}

/* A linked peer still holding a run object (as it last said), or one that
 * has not answered the reset it was sent. */
static bool serve_peer_busy(const struct serve_peer *p)
{
	return p->link != NULL && (p->last.run != 0 || !p->answered);
}

/* Stopping or resetting is over once the run object is gone and every
 * linked peer is idle. */
static void serve_settle(struct serve_session *hs)
{
	if (hs->state != SERVE_STOPPING && hs->state != SERVE_RESETTING)
		return;
	if (run_slot_object(hs->slot) != NULL)
		return;
	for (size_t i = 0; i < hs->n_peers; i++)
		if (serve_peer_busy(&hs->peers[i]))
			return;
	serve_enter(hs, SERVE_EV_SETTLED);
}

/* The current run object is given up: its end will only be summarised.
 * The hub's run object stops (BYE to the peers' run objects) and every
 * peer is told to reset, its answer awaited. */
static void serve_abandon(struct serve_session *hs, const char *why)
{
	hs->live_epoch = 0;
	if (hs->ended_by[0] == '\0')
		snprintf(hs->ended_by, sizeof hs->ended_by, "%s", why);
	for (size_t i = 0; i < hs->n_peers; i++)
		hs->peers[i].answered = hs->peers[i].link == NULL;
	serve_session_order_all(hs, CTL_RESET, why);
	run_slot_stop(hs->slot, why);
	if (run_slot_object(hs->slot) != NULL) {
		const struct timeval tv = { SERVE_ABANDONED_END_S, 0 };
		event_add(hs->ev_abandoned, &tv);
	}
}

/* An abandoned run object that has not ended SERVE_ABANDONED_END_S after
 * the hub gave it up (its peers reset, its books of no interest) is ended
 * here: its loop is left, and the run is summarised and destroyed as at
 * any end. Its end once went missing in a reset that came in the same
 * turn of the loop as the run object's own end. */
static void serve_on_abandoned(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct serve_session *hs = arg;
	if (run_slot_object(hs->slot) == NULL || hs->live_epoch != 0)
		return;
	log_warn("Run %u's object did not end within %d s of being abandoned; ending it", hs->run,
		 SERVE_ABANDONED_END_S);
	event_base_loopexit(hs->base, NULL);
}

/* A transition failed (event FAILED or DEADLINE): the run abandoned, the
 * hub in error with the reason until the operator's reset. */
static void serve_fail(struct serve_session *hs, enum serve_event event, const char *reason)
{
	snprintf(hs->error, sizeof hs->error, "%s", reason);
	serve_abandon(hs, reason);
	serve_enter(hs, event);
}

static void serve_check_configured(struct serve_session *hs)
{
	if (hs->state != SERVE_CONFIGURING || !hs->run_ready)
		return;
	for (size_t i = 0; i < hs->n_peers; i++)
		if (!hs->peers[i].configured)
			return;
	serve_enter(hs, SERVE_EV_CONFIGURED);
}

static void serve_on_peer_state(struct serve_session *hs, struct serve_peer *p, const struct ctl_state *st)
{
	p->last = *st;
	p->answered = true;
	if (hs->state == SERVE_CONFIGURING && !p->configured) {
		char name[48], reason[512];
		serve_session_peer_name(p, name, sizeof name);
		if (!st->accepted) {
			snprintf(reason, sizeof reason, "%s refused run %u: %s", name, hs->run, st->reason);
			log_error("Configure of run %u failed: %s", hs->run, reason);
			serve_fail(hs, SERVE_EV_FAILED, reason);
			return;
		}
		if (st->state == CTL_SESSION_CONFIGURED && st->run == hs->run) {
			p->configured = true;
			serve_check_configured(hs);
		}
		return;
	}
	serve_settle(hs);
}

static void serve_on_peer_left(struct serve_session *hs, struct serve_peer *p)
{
	if (hs->state == SERVE_CONFIGURING) {
		char name[48], reason[512];
		serve_session_peer_name(p, name, sizeof name);
		snprintf(reason, sizeof reason, "%s left during the configure of run %u", name, hs->run);
		serve_fail(hs, SERVE_EV_FAILED, reason);
	}
	serve_settle(hs);
}

/* ---- the deadline --------------------------------------------------------- */

/* Whether peer p is one the current state still waits for. */
static bool serve_peer_silent(const struct serve_session *hs, const struct serve_peer *p)
{
	if (hs->state == SERVE_CONFIGURING)
		return p->link != NULL && !p->configured;
	return serve_peer_busy(p);
}

static void serve_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct serve_session *hs = arg;
	if (hs->quit)
		return;         /* shutting down: the process exits once its run object is over */
	char reason[512], what_of[64];
	double s = (double)hs->opt->transition_timeout_ms / 1000.0;
	if (hs->state == SERVE_CONFIGURING)
		snprintf(what_of, sizeof what_of, "configure of run %u", hs->run);
	else if (hs->state == SERVE_STOPPING)
		snprintf(what_of, sizeof what_of, "stop of run %u", hs->run);
	else
		snprintf(what_of, sizeof what_of, "reset");
	int used = snprintf(reason, sizeof reason, "%s: no answer within %g s from", what_of, s);
	size_t named = 0;
	for (size_t i = 0; i < hs->n_peers && used > 0 && (size_t)used < sizeof reason; i++) {
		const struct serve_peer *p = &hs->peers[i];
		if (!serve_peer_silent(hs, p))
			continue;
		used += snprintf(reason + used, sizeof reason - (size_t)used, "%s %s %u (pid %u on %s)",
				 named++ ? "," : "", ctl_role_name(p->role), p->id, p->pid, p->host);
	}
	if (named == 0 && used > 0 && (size_t)used < sizeof reason)
		snprintf(reason + used, sizeof reason - (size_t)used, " the hub's run %u: %s", hs->run,
			 hs->state == SERVE_CONFIGURING ? "not every peer greeted or clocks not measured"
						      : "its run object has not ended");
	log_error("Deadline passed: %s", reason);
	serve_fail(hs, SERVE_EV_DEADLINE, reason);
}

/* ---- the operator's transitions ----------------------------------------- */

enum serve_state serve_session_state(const struct serve_session *hs) { return hs->state; }
uint32_t serve_session_run_now(const struct serve_session *hs) { return hs->run; }
const char *serve_session_error(const struct serve_session *hs) { return hs->state == SERVE_ERROR ? hs->error : ""; }
size_t serve_session_summary_count(const struct serve_session *hs) { return hs->n_summaries; }

const struct serve_run_summary *serve_session_summary_at(const struct serve_session *hs, size_t i)
{
	size_t first = hs->n_summaries > SERVE_SUMMARIES_KEPT ? hs->n_summaries - SERVE_SUMMARIES_KEPT : 0;
	return &hs->summaries[(first + i) % SERVE_SUMMARIES_KEPT];
}

static void serve_on_run_ready(void *arg)
{
	struct serve_session *hs = arg;
	hs->run_ready = true;
	serve_check_configured(hs);
}

/* The configure's preconditions besides the state; false with the reason. */
static bool serve_configure_ready(const struct serve_session *hs, uint32_t run, char *reason,
				size_t len)
{
	char names[CTL_MAX_TEXT];
	if (run == 0) {
		snprintf(reason, len, "run: 1 .. 4294967295");
		return false;
	}
	if (serve_session_missing(hs, false, names, sizeof names)) {
		snprintf(reason, len, "no session link from %s: not started, dead or unreachable", names);
		return false;
	}
	if (!hs->has_hub_args || serve_session_missing(hs, true, names, sizeof names)) {
		snprintf(reason, len, "args: none for %s", hs->has_hub_args ? names : "hub");
		return false;
	}
	return true;
}

bool serve_session_configure(struct serve_session *hs, uint32_t run, char *reason, size_t len)
{
	enum serve_state to;
	if (!serve_fsm_next(hs->state, SERVE_EV_CONFIGURE, &to)) {
		snprintf(reason, len, "the hub is %s (run %u); %s first", serve_fsm_state_name(hs->state),
			 hs->run, hs->state == SERVE_ERROR ? "reset" : "stop or reset it");
		return false;
	}
	if (!serve_configure_ready(hs, run, reason, len))
		return false;
	char *argv[256], text[CTL_MAX_ARGS_TEXT], err[CTL_MAX_TEXT];
	snprintf(text, sizeof text, "%s", hs->hub_args);
	int argc = session_split_args(text, argv, 256);
	if (argc < 0) {
		snprintf(reason, len, "args: the hub's are more than 256");
		return false;
	}
	net_kept_rewind();
	if (!run_slot_configure(hs->slot, run, argc, argv, err, sizeof err)) {
		snprintf(reason, len, "hub: %s", err);
		return false;
	}
	hub_hold_start(run_slot_object(hs->slot), serve_on_run_ready, hs);
	hs->run = run;
	hs->live_epoch = ++hs->epoch;
	hs->run_ready = hs->run_started = false;
	hs->start_ns = hs->first_event_ns = hs->stop_ns = 0;
	hs->error[0] = hs->ended_by[0] = '\0';
	serve_enter(hs, SERVE_EV_CONFIGURE);
	for (size_t i = 0; i < hs->n_peers; i++) {
		struct serve_peer *p = &hs->peers[i];
		struct ctl_msg m = { .type = CTL_CONFIGURE };
		m.u.configure.run = run;
		snprintf(m.u.configure.args, sizeof m.u.configure.args, "%s", p->args);
		p->configured = false;
		serve_session_send(p, &m);
	}
	log_info("Configuring run %u", run);
	return true;
}

static bool serve_check_run(const struct serve_session *hs, enum serve_event event, uint32_t run,
			  char *reason, size_t len)
{
	enum serve_state to;
	if (!serve_fsm_next(hs->state, event, &to)) {
		enum serve_state want = event == SERVE_EV_START ? SERVE_CONFIGURED : SERVE_RUNNING;
		snprintf(reason, len, "cannot %s: the hub is %s (run %u), not %s",
			 serve_fsm_event_name(event), serve_fsm_state_name(hs->state), hs->run,
			 serve_fsm_state_name(want));
		return false;
	}
	if (run != hs->run) {
		snprintf(reason, len, "cannot %s run %u: the hub is %s run %u", serve_fsm_event_name(event),
			 run, serve_fsm_state_name(hs->state), hs->run);
		return false;
	}
	return true;
}

bool serve_session_start(struct serve_session *hs, uint32_t run, char *reason, size_t len)
{
	if (!serve_check_run(hs, SERVE_EV_START, run, reason, len))
		return false;
	hs->run_started = true;
	hs->start_ns = clk_monotonic_ns();
	log_info("Starting run %u", run);
	serve_enter(hs, SERVE_EV_START);
	hub_release_start(run_slot_object(hs->slot));
	return true;
}

bool serve_session_stop(struct serve_session *hs, uint32_t run, char *reason, size_t len)
{
	if (!serve_check_run(hs, SERVE_EV_STOP, run, reason, len))
		return false;
	hs->stop_ns = clk_monotonic_ns();
	snprintf(hs->ended_by, sizeof hs->ended_by, "operator stop");
	log_info("Stopping run %u: a drained stop", run);
	serve_enter(hs, SERVE_EV_STOP);
	hub_stop_drained(run_slot_object(hs->slot), "operator stop");
	return true;
}

bool serve_session_reset(struct serve_session *hs, char *reason, size_t len)
{
	enum serve_state to;
	if (!serve_fsm_next(hs->state, SERVE_EV_RESET, &to)) {
		snprintf(reason, len, "nothing to reset: the hub is %s", serve_fsm_state_name(hs->state));
		return false;
	}
	log_info("Reset by the operator (the hub was %s, run %u)", serve_fsm_state_name(hs->state),
		 hs->run);
	hs->error[0] = '\0';
	serve_abandon(hs, "reset by the operator");
	serve_enter(hs, SERVE_EV_RESET);
	serve_settle(hs);
	return true;
}

void serve_session_shutdown(struct serve_session *hs, const char *why)
{
	log_info("Shutting down: %s", why);
	notify_stopping();
	serve_session_order_all(hs, CTL_SHUTDOWN, why);
	hs->quit = true;
	hs->live_epoch = 0;
	if (run_slot_object(hs->slot) != NULL) {
		serve_enter(hs, SERVE_EV_SHUTDOWN);
		run_slot_stop(hs->slot, why);
		return;
	}
	const struct timeval linger = { 0, SERVE_LINGER_US };
	event_base_loopexit(hs->base, &linger);
}

/* ---- the run's end, the tick, the main loop ----------------------------- */

static double ms_between(uint64_t from, uint64_t to)
{ return from != 0 && to >= from ? (double)(to - from) / 1e6 : -1.0; }

/* The run object's loop is over: it is summarised and destroyed; its end
 * drives the state only when it is the live run (not one the hub abandoned
 * at a failure, a deadline or a reset, whose end may come after the hub
 * has moved on). Everything is decided before the loop runs again. */
static void serve_run_over(struct serve_session *hs)
{
	uint64_t now = clk_monotonic_ns();
	bool live = hs->live_epoch != 0 && hs->live_epoch == hs->epoch;
	struct serve_run_summary *s = &hs->summaries[hs->n_summaries % SERVE_SUMMARIES_KEPT];
	*s = (struct serve_run_summary){ .run = hs->run, .started = hs->run_started };
	s->events_decided = hub_events_decided(run_slot_object(hs->slot));
	s->balanced = hub_books_balanced(run_slot_object(hs->slot));
	s->status = run_slot_finish(hs->slot);
	s->start_to_first_event_ms = ms_between(hs->start_ns, hs->first_event_ns);
	s->stop_to_books_ms = ms_between(hs->stop_ns, now);
	snprintf(s->ended_by, sizeof s->ended_by, "%s", hs->ended_by[0] ? hs->ended_by : "its end");
	session_find_arg(hs->hub_args, "--out", s->out, sizeof s->out);
	hs->n_summaries++;
	hs->live_epoch = 0;
	event_del(hs->ev_abandoned);
	log_info("Run %u over (status %d, %llu events decided, ended by %s%s)", s->run, s->status,
		 (unsigned long long)s->events_decided, s->ended_by, live ? "" : "; abandoned");
	notify_status("run %u over (status %d)", s->run, s->status);
	if (live && hs->state != SERVE_RUNNING && hs->state != SERVE_STOPPING) {
		char reason[128];
		snprintf(reason, sizeof reason, "run %u ended before it was configured (status %d)",
			 s->run, s->status);
		serve_fail(hs, SERVE_EV_RUN_OVER, reason);
	} else if (live) {
		serve_enter(hs, SERVE_EV_RUN_OVER);
	}
	serve_settle(hs);
	/* A second loopexit the run asked for would end the next run at once:
	 * let it fire now, with nothing to end. */
	event_base_loop(hs->base, EVLOOP_NONBLOCK);
}

static void serve_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct serve_session *hs = arg;
	void *hub = run_slot_object(hs->slot);
	if (hub != NULL && hs->run_started && hs->first_event_ns == 0 && hub_events_decided(hub) > 0)
		hs->first_event_ns = clk_monotonic_ns();
}

static void serve_on_signal(void *arg, const char *why) { serve_session_shutdown(arg, why); }

struct serve_session *serve_session_new(const struct daemon_def *def, struct event_base *base,
				    int argc, char **argv, uint16_t *session_port)
{
	struct serve_session *hs = calloc(1, sizeof *hs);
	if (hs == NULL)
		return NULL;
	hs->base = base;
	hs->opt = def->opts;
	hs->session_fd = -1;
	hs->on_peer_state = serve_on_peer_state;
	hs->on_peer_left = serve_on_peer_left;
	hs->slot = run_slot_new(def, base, argc, argv);
	if (hs->slot == NULL || !serve_session_peers_open(hs, session_port))
		goto fail;
	hs->ev_tick = event_new(base, -1, EV_PERSIST, serve_on_tick, hs);
	hs->ev_deadline = evtimer_new(base, serve_on_deadline, hs);
	hs->ev_abandoned = evtimer_new(base, serve_on_abandoned, hs);
	const struct timeval tick = { 0, SERVE_TICK_US };
	if (hs->ev_tick == NULL || hs->ev_deadline == NULL || hs->ev_abandoned == NULL ||
	    event_add(hs->ev_tick, &tick) < 0)
		goto fail;
	return hs;
fail:
	serve_session_free(hs);
	return NULL;
}

void serve_session_free(struct serve_session *hs)
{
	if (hs == NULL)
		return;
	if (hs->ev_tick != NULL)
		event_free(hs->ev_tick);
	if (hs->ev_deadline != NULL)
		event_free(hs->ev_deadline);
	if (hs->ev_abandoned != NULL)
		event_free(hs->ev_abandoned);
	serve_session_peers_close(hs);
	run_slot_free(hs->slot);
	free(hs);
}

int serve_session_run(struct serve_session *hs)
{
	log_info("Serving runs: %zu peers expected on the session port", hs->n_peers);
	for (;;) {
		daemon_run(hs->base, serve_on_signal, hs);
		if (run_slot_object(hs->slot) != NULL) {
			serve_run_over(hs);
			if (hs->quit) {
				const struct timeval linger = { 0, SERVE_LINGER_US };
				event_base_loopexit(hs->base, &linger);
				daemon_run(hs->base, serve_on_signal, hs);
			}
		}
		if (hs->quit)
			break;
	}
	return 0;          /* a shutdown or a signal: the hub's own failures end before */
}
