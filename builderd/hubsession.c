/* The hub serving many runs (hubsession.h, docs/RUNCONTROL.md): the session
 * port and its links, the run slot holding the hub's run object, and the
 * operator's transitions over them. */
#include "hubsession.h"

#include "options.h"
#include "run.h"

#include "io/handshake.h"
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
#include <unistd.h>

/* Time for the last messages to be written before the process exits. */
#define HUB_LINGER_US 200000
#define HUB_TICK_US 1000

struct hub_peer {
	enum ctl_role role;
	uint32_t id;
	struct msgconn *link;
	struct hub_session *hs;
	char host[CTL_MAX_TEXT];
	uint32_t pid;
	struct ctl_state last;          /* its last STATE */
	bool configured;                /* answered this run's configure */
	bool has_args;
	char args[CTL_MAX_ARGS_TEXT];
};

struct hub_session {
	struct event_base *base;
	const struct bd_options *opt;   /* the base's */
	struct run_slot *slot;
	struct hub_peer *peers;
	size_t n_peers;
	int session_fd;
	struct event *ev_accept;
	struct event *ev_tick;
	struct greet_door door;
	uint64_t refused;
	uint64_t session_lost;
	enum hub_state state;
	enum hub_state after_stop;      /* IDLE, or ERROR after a failed configure */
	uint32_t run;
	bool run_ready;                 /* the run object has every peer in */
	bool run_started;
	char error[512];
	char ended_by[512];
	char hub_args[CTL_MAX_ARGS_TEXT];
	bool has_hub_args;
	uint64_t start_ns, first_event_ns, stop_ns;
	struct hub_run_summary summaries[HUB_SUMMARIES_KEPT];
	size_t n_summaries;
	bool quit;
};

const char *hub_state_name(enum hub_state s)
{
	static const char *const names[] = { "idle", "configuring", "configured", "running",
					     "stopping", "error" };
	return s <= HUB_ERROR ? names[s] : "?";
}

static void peer_name(const struct hub_peer *p, char *out, size_t len)
{
	snprintf(out, len, "%s %u", ctl_role_name(p->role), p->id);
}

static struct hub_peer *hub_find(struct hub_session *hs, enum ctl_role role, uint32_t id)
{
	for (size_t i = 0; i < hs->n_peers; i++)
		if (hs->peers[i].role == role && hs->peers[i].id == id)
			return &hs->peers[i];
	return NULL;
}

static void hub_send(struct hub_peer *p, const struct ctl_msg *m)
{
	if (p->link != NULL && msgconn_send(p->link, m) < 0) {
		char name[48];
		peer_name(p, name, sizeof name);
		log_warn("Cannot send %s to %s's session link", ctl_type_name(m->type), name);
	}
}

static void hub_order_all(struct hub_session *hs, enum ctl_type type, const char *reason)
{
	struct ctl_msg m = { .type = type };
	snprintf(m.u.order.reason, sizeof m.u.order.reason, "%s", reason);
	for (size_t i = 0; i < hs->n_peers; i++)
		hub_send(&hs->peers[i], &m);
}

/* Every linked peer has no run object: the next configure may go. */
static bool hub_peers_idle(const struct hub_session *hs)
{
	for (size_t i = 0; i < hs->n_peers; i++)
		if (hs->peers[i].link != NULL && hs->peers[i].last.run != 0)
			return false;
	return true;
}

static void hub_settle(struct hub_session *hs)
{
	if (hs->state == HUB_STOPPING && run_slot_object(hs->slot) == NULL && hub_peers_idle(hs)) {
		hs->state = hs->after_stop;
		if (hs->state == HUB_IDLE) {
			log_info("Idle: ready for the next configure");
			notify_status("idle");
		} else {
			notify_status("error: %s", hs->error);
		}
	}
}

/* Ends what is configured or running: the hub's run object stops (BYE to
 * the peers' run objects), every peer is told to reset. */
static void hub_abort(struct hub_session *hs, enum hub_state after, const char *why)
{
	hs->after_stop = after;
	hs->state = HUB_STOPPING;
	snprintf(hs->ended_by, sizeof hs->ended_by, "%s", why);
	hub_order_all(hs, CTL_RESET, why);
	run_slot_stop(hs->slot, why);
	hub_settle(hs);
}

static void hub_check_configured(struct hub_session *hs)
{
	if (hs->state != HUB_CONFIGURING || !hs->run_ready)
		return;
	for (size_t i = 0; i < hs->n_peers; i++)
		if (!hs->peers[i].configured)
			return;
	hs->state = HUB_CONFIGURED;
	log_info("Run %u configured: every peer in, START held for the operator", hs->run);
	notify_status("configured for run %u", hs->run);
}

/* ---- the session links -------------------------------------------------- */

static void hub_on_state(struct hub_session *hs, struct hub_peer *p, const struct ctl_state *st)
{
	p->last = *st;
	if (hs->state == HUB_CONFIGURING && !p->configured) {
		char name[48];
		peer_name(p, name, sizeof name);
		if (!st->accepted) {
			snprintf(hs->error, sizeof hs->error, "%s refused run %u: %s", name, hs->run,
				 st->reason);
			log_error("Configure of run %u failed: %s", hs->run, hs->error);
			hub_abort(hs, HUB_ERROR, hs->error);
			return;
		}
		if (st->state == CTL_SESSION_CONFIGURED && st->run == hs->run) {
			p->configured = true;
			hub_check_configured(hs);
		}
		return;
	}
	hub_settle(hs);
}

static void hub_on_link_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
				void *arg)
{
	(void)c;
	(void)rx_ns;
	struct hub_peer *p = arg;
	if (msg->type == CTL_STATE)
		hub_on_state(p->hs, p, &msg->u.state);
	else
		log_warn("Unexpected %s on a session link; ignored", ctl_type_name(msg->type));
}

static void hub_on_link_close(struct msgconn *c, const char *reason, void *arg)
{
	struct hub_peer *p = arg;
	struct hub_session *hs = p->hs;
	char name[48];
	peer_name(p, name, sizeof name);
	if (hs->quit)
		log_info("%s's session link closed: %s", name, reason);
	else
		log_warn("Lost %s's session link: %s", name, reason);
	msgconn_free(c);
	p->link = NULL;
	p->last = (struct ctl_state){ 0 };
	hs->session_lost++;
	if (hs->state == HUB_CONFIGURING) {
		snprintf(hs->error, sizeof hs->error, "%s left during the configure of run %u",
			 name, hs->run);
		hub_abort(hs, HUB_ERROR, hs->error);
	}
	hub_settle(hs);
}

static const struct msgconn_ops hub_link_ops = {
	.on_message = hub_on_link_message,
	.on_close = hub_on_link_close,
};

static void hub_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
			   const char *peer, void *arg)
{
	struct hub_session *hs = arg;
	if (fd < 0) {
		hs->refused++;
		return;
	}
	struct hub_peer *p = hub_find(hs, h->role, h->id);
	if (h->channel != CTL_CHANNEL_SESSION) {
		greet_reply_error(fd, peer, "wrong_channel", "%s %u greeted the hub's session port as a %s connection",
				  ctl_role_name(h->role), h->id, ctl_channel_name(h->channel));
	} else if (p == NULL) {
		greet_reply_error(fd, peer, "unknown_peer",
				  "%s %u is not a peer of this hub (%u sources, %u readers, %u builders)",
				  ctl_role_name(h->role), h->id, hs->opt->sources, hs->opt->readers,
				  hs->opt->role == BD_ROLE_HUB ? hs->opt->builders : 0);
	} else if (p->link != NULL) {
		greet_reply_error(fd, peer, "duplicate_id", "%s %u has a session link already (pid %u on %s)",
				  ctl_role_name(h->role), h->id, p->pid, p->host);
	} else if (greet_reply_welcome(fd, 0, CTL_ROLE_BUILDER, 0) < 0) {
		close(fd);
		return;
	} else {
		p->link = msgconn_new(hs->base, fd, seal, peer, &hub_link_ops, p);
		if (p->link == NULL) {
			close(fd);
			return;
		}
		p->pid = h->pid;
		snprintf(p->host, sizeof p->host, "%s", h->host);
		p->last = (struct ctl_state){ 0 };
		log_info("%s %u joined the session from %s (pid %u on %s)", ctl_role_title(h->role),
			 h->id, peer, h->pid, h->host);
		return;
	}
	hs->refused++;
}

static void hub_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct hub_session *hs = arg;
	greet_accept_all(&hs->door, fd, hub_on_greeted, hs);
}

/* ---- the operator's transitions ----------------------------------------- */

enum hub_state hub_state_now(const struct hub_session *hs) { return hs->state; }
uint32_t hub_run_now(const struct hub_session *hs) { return hs->run; }
const char *hub_error(const struct hub_session *hs) { return hs->state == HUB_ERROR ? hs->error : ""; }
size_t hub_peer_count(const struct hub_session *hs) { return hs->n_peers; }
size_t hub_summary_count(const struct hub_session *hs) { return hs->n_summaries; }

struct hub_peer_view hub_peer_at(const struct hub_session *hs, size_t i)
{
	const struct hub_peer *p = &hs->peers[i];
	struct hub_peer_view v = { .role = p->role, .id = p->id, .linked = p->link != NULL,
				   .pid = p->pid, .run = p->last.run, .state = p->last.state };
	snprintf(v.host, sizeof v.host, "%s", p->host);
	return v;
}

const struct hub_run_summary *hub_summary_at(const struct hub_session *hs, size_t i)
{
	size_t first = hs->n_summaries > HUB_SUMMARIES_KEPT ? hs->n_summaries - HUB_SUMMARIES_KEPT : 0;
	return &hs->summaries[(first + i) % HUB_SUMMARIES_KEPT];
}

void hub_configure_begin(struct hub_session *hs)
{
	hs->has_hub_args = false;
	for (size_t i = 0; i < hs->n_peers; i++)
		hs->peers[i].has_args = false;
}

bool hub_configure_arg(struct hub_session *hs, const char *key, const char *args, char *reason,
		       size_t len)
{
	char *text = NULL;
	bool *has = NULL;
	if (strcmp(key, "hub") == 0) {
		text = hs->hub_args;
		has = &hs->has_hub_args;
	} else {
		char role[16];
		unsigned id;
		char tail;
		if (sscanf(key, "%15[a-z].%u%c", role, &id, &tail) == 2) {
			for (size_t i = 0; i < hs->n_peers; i++) {
				struct hub_peer *p = &hs->peers[i];
				if (p->id == id && strcmp(ctl_role_name(p->role), role) == 0) {
					text = p->args;
					has = &p->has_args;
				}
			}
		}
	}
	if (text == NULL) {
		snprintf(reason, len, "args: \"%s\" is neither \"hub\" nor a peer of this hub", key);
		return false;
	}
	if (strlen(args) >= CTL_MAX_ARGS_TEXT) {
		snprintf(reason, len, "args: %s's arguments are %zu bytes, more than %u", key,
			 strlen(args), CTL_MAX_ARGS_TEXT - 1);
		return false;
	}
	snprintf(text, CTL_MAX_ARGS_TEXT, "%s", args);
	*has = true;
	return true;
}

/* The peers missing a session link or arguments, named; false with none. */
static bool hub_missing(const struct hub_session *hs, bool args, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < hs->n_peers && used + 1 < len; i++) {
		const struct hub_peer *p = &hs->peers[i];
		if (args ? p->has_args : p->link != NULL)
			continue;
		int n = snprintf(out + used, len - used, "%s%s %u", used ? ", " : "",
				 ctl_role_name(p->role), p->id);
		used += n > 0 ? (size_t)n : 0;
	}
	return out[0] != '\0';
}

static void hub_on_run_ready(void *arg)
{
	struct hub_session *hs = arg;
	hs->run_ready = true;
	hub_check_configured(hs);
}

bool hub_configure(struct hub_session *hs, uint32_t run, char *reason, size_t len)
{
	char names[CTL_MAX_TEXT];
	if (hs->state != HUB_IDLE) {
		snprintf(reason, len, "the hub is %s (run %u); %s first", hub_state_name(hs->state),
			 hs->run, hs->state == HUB_ERROR ? "reset" : "stop or reset it");
		return false;
	}
	if (run == 0) {
		snprintf(reason, len, "run: 1 .. 4294967295");
		return false;
	}
	if (hub_missing(hs, false, names, sizeof names)) {
		snprintf(reason, len, "no session link from %s: not started, dead or unreachable", names);
		return false;
	}
	if (!hs->has_hub_args || hub_missing(hs, true, names, sizeof names)) {
		snprintf(reason, len, "args: none for %s", hs->has_hub_args ? names : "hub");
		return false;
	}
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
	bd_hold_start(run_slot_object(hs->slot), hub_on_run_ready, hs);
	hs->run = run;
	hs->run_ready = hs->run_started = false;
	hs->start_ns = hs->first_event_ns = hs->stop_ns = 0;
	hs->error[0] = hs->ended_by[0] = '\0';
	hs->state = HUB_CONFIGURING;
	for (size_t i = 0; i < hs->n_peers; i++) {
		struct hub_peer *p = &hs->peers[i];
		struct ctl_msg m = { .type = CTL_CONFIGURE };
		m.u.configure.run = run;
		snprintf(m.u.configure.args, sizeof m.u.configure.args, "%s", p->args);
		p->configured = false;
		hub_send(p, &m);
	}
	log_info("Configuring run %u", run);
	return true;
}

static bool hub_check_run(const struct hub_session *hs, enum hub_state want, uint32_t run,
			  const char *what, char *reason, size_t len)
{
	if (hs->state != want) {
		snprintf(reason, len, "cannot %s: the hub is %s (run %u), not %s", what,
			 hub_state_name(hs->state), hs->run, hub_state_name(want));
		return false;
	}
	if (run != hs->run) {
		snprintf(reason, len, "cannot %s run %u: the hub is %s run %u", what, run,
			 hub_state_name(hs->state), hs->run);
		return false;
	}
	return true;
}

bool hub_start(struct hub_session *hs, uint32_t run, char *reason, size_t len)
{
	if (!hub_check_run(hs, HUB_CONFIGURED, run, "start", reason, len))
		return false;
	hs->state = HUB_RUNNING;
	hs->run_started = true;
	hs->start_ns = clk_monotonic_ns();
	log_info("Starting run %u", run);
	notify_status("running run %u", run);
	bd_release_start(run_slot_object(hs->slot));
	return true;
}

bool hub_stop(struct hub_session *hs, uint32_t run, char *reason, size_t len)
{
	if (!hub_check_run(hs, HUB_RUNNING, run, "stop", reason, len))
		return false;
	hs->state = HUB_STOPPING;
	hs->after_stop = HUB_IDLE;
	hs->stop_ns = clk_monotonic_ns();
	snprintf(hs->ended_by, sizeof hs->ended_by, "operator stop");
	log_info("Stopping run %u: a drained stop", run);
	bd_stop_drained(run_slot_object(hs->slot), "operator stop");
	return true;
}

bool hub_reset(struct hub_session *hs, char *reason, size_t len)
{
	if (hs->state == HUB_IDLE) {
		snprintf(reason, len, "nothing to reset: the hub is idle");
		return false;
	}
	hs->error[0] = '\0';
	if (hs->state == HUB_ERROR) {
		hs->state = HUB_IDLE;
		return true;
	}
	hub_abort(hs, HUB_IDLE, "reset by the operator");
	return true;
}

void hub_shutdown(struct hub_session *hs, const char *why)
{
	log_info("Shutting down: %s", why);
	notify_stopping();
	hub_order_all(hs, CTL_SHUTDOWN, why);
	hs->quit = true;
	if (run_slot_object(hs->slot) != NULL) {
		hs->state = HUB_STOPPING;
		run_slot_stop(hs->slot, why);
		return;
	}
	const struct timeval linger = { 0, HUB_LINGER_US };
	event_base_loopexit(hs->base, &linger);
}

/* ---- the run's end, the tick, the main loop ----------------------------- */

static double ms_between(uint64_t from, uint64_t to)
{ return from != 0 && to >= from ? (double)(to - from) / 1e6 : -1.0; }

static void hub_run_over(struct hub_session *hs)
{
	uint64_t now = clk_monotonic_ns();
	struct hub_run_summary *s = &hs->summaries[hs->n_summaries % HUB_SUMMARIES_KEPT];
	*s = (struct hub_run_summary){ .run = hs->run, .started = hs->run_started };
	s->events_decided = bd_events_decided(run_slot_object(hs->slot));
	s->balanced = bd_books_balanced(run_slot_object(hs->slot));
	s->status = run_slot_finish(hs->slot);
	/* A second loopexit the run asked for would end the next run at once:
	 * let it fire now, with nothing to end. */
	event_base_loop(hs->base, EVLOOP_NONBLOCK);
	s->start_to_first_event_ms = ms_between(hs->start_ns, hs->first_event_ns);
	s->stop_to_books_ms = ms_between(hs->stop_ns, now);
	snprintf(s->ended_by, sizeof s->ended_by, "%s", hs->ended_by[0] ? hs->ended_by : "its end");
	session_find_arg(hs->hub_args, "--out", s->out, sizeof s->out);
	hs->n_summaries++;
	log_info("Run %u over (status %d, %llu events decided, ended by %s)", s->run, s->status,
		 (unsigned long long)s->events_decided, s->ended_by);
	notify_status("run %u over (status %d)", s->run, s->status);
	if (hs->state != HUB_STOPPING) {
		/* It ended by itself: before START only when something failed. */
		hs->after_stop = hs->run_started ? HUB_IDLE : HUB_ERROR;
		hs->state = HUB_STOPPING;
	}
	if (hs->after_stop == HUB_ERROR && hs->error[0] == '\0')
		snprintf(hs->error, sizeof hs->error, "run %u ended before it was configured", s->run);
	hub_settle(hs);
}

static void hub_on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct hub_session *hs = arg;
	void *bd = run_slot_object(hs->slot);
	if (bd != NULL && hs->run_started && hs->first_event_ns == 0 && bd_events_decided(bd) > 0)
		hs->first_event_ns = clk_monotonic_ns();
}

static void hub_on_signal(void *arg, const char *why) { hub_shutdown(arg, why); }

struct hub_session *hub_session_new(const struct daemon_def *def, struct event_base *base,
				    int argc, char **argv, uint16_t *session_port)
{
	const struct bd_options *o = def->opts;
	struct hub_session *hs = calloc(1, sizeof *hs);
	size_t n = (size_t)o->sources + o->readers + (o->role == BD_ROLE_HUB ? o->builders : 0);
	if (hs == NULL || (hs->peers = calloc(n, sizeof *hs->peers)) == NULL) {
		free(hs);
		return NULL;
	}
	hs->base = base;
	hs->opt = o;
	hs->session_fd = -1;
	for (uint32_t i = 0; i < o->sources; i++)
		hs->peers[hs->n_peers++] = (struct hub_peer){ .role = CTL_ROLE_SOURCE, .id = i, .hs = hs };
	for (uint32_t i = 0; i < o->readers; i++)
		hs->peers[hs->n_peers++] = (struct hub_peer){ .role = CTL_ROLE_READER, .id = i, .hs = hs };
	for (uint32_t i = 0; o->role == BD_ROLE_HUB && i < o->builders; i++)
		hs->peers[hs->n_peers++] = (struct hub_peer){ .role = CTL_ROLE_BUILDER, .id = i, .hs = hs };
	greet_door_init(&hs->door, base, "the hub's session port", "the hub",
			o->handshake_timeout_ms, &hs->refused);
	hs->slot = run_slot_new(def, base, argc, argv);
	hs->session_fd = hs->slot != NULL ? net_listen(o->session_listen_host,
						       o->session_listen_port, session_port) : -1;
	if (hs->session_fd < 0)
		goto fail;
	hs->ev_accept = event_new(base, hs->session_fd, EV_READ | EV_PERSIST, hub_on_accept, hs);
	hs->ev_tick = event_new(base, -1, EV_PERSIST, hub_on_tick, hs);
	const struct timeval tick = { 0, HUB_TICK_US };
	if (hs->ev_accept == NULL || hs->ev_tick == NULL || event_add(hs->ev_accept, NULL) < 0 ||
	    event_add(hs->ev_tick, &tick) < 0)
		goto fail;
	return hs;
fail:
	hub_session_free(hs);
	return NULL;
}

void hub_session_free(struct hub_session *hs)
{
	if (hs == NULL)
		return;
	if (hs->ev_accept != NULL)
		event_free(hs->ev_accept);
	if (hs->ev_tick != NULL)
		event_free(hs->ev_tick);
	if (hs->session_fd >= 0)
		close(hs->session_fd);
	greet_door_close(&hs->door);
	for (size_t i = 0; i < hs->n_peers; i++)
		msgconn_free(hs->peers[i].link);
	run_slot_free(hs->slot);
	free(hs->peers);
	free(hs);
}

int hub_session_run(struct hub_session *hs)
{
	log_info("Serving runs: %zu peers expected on the session port", hs->n_peers);
	for (;;) {
		daemon_run(hs->base, hub_on_signal, hs);
		if (run_slot_object(hs->slot) != NULL) {
			hub_run_over(hs);
			if (hs->quit) {
				const struct timeval linger = { 0, HUB_LINGER_US };
				event_base_loopexit(hs->base, &linger);
				daemon_run(hs->base, hub_on_signal, hs);
			}
		}
		if (hs->quit)
			break;
	}
	return 0;          /* a shutdown or a signal: the hub's own failures end before */
}
