/* The operator's requests to the serving hub (serve_http.h). */
#include "serve/serve_http.h"

#include "serve/serve_fsm.h"
#include "serve/serve_session.h"

#include "io/ctlhttp.h"
#include "sys/log.h"
#include "wire/counters.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct serve_http {
	struct ctlhttp *http;
	struct serve_session *hs;
};

static json_t *ms_or_null(double ms)
{
	return ms < 0 ? json_null() : json_real(ms);
}

/* The operator's requests and the events of the state machine they are:
 * what /state offers as the actions that apply now, with their arguments. */
static const struct {
	enum serve_event event;
	const char *path;
	const char *run;        /* what its "run" must be; NULL: it takes none */
	bool args;              /* it takes "args", every daemon's arguments */
} actions[] = {
	{ SERVE_EV_CONFIGURE, "/configure", "the new run's number, 1 .. 4294967295", true },
	{ SERVE_EV_START, "/start", "the configured run's number", false },
	{ SERVE_EV_STOP, "/stop", "the running run's number", false },
	{ SERVE_EV_RESET, "/reset", NULL, false },
	{ SERVE_EV_SHUTDOWN, "/shutdown", NULL, false },
};

static json_t *hubhttp_action_args(size_t a)
{
	json_t *args = json_object();
	if (actions[a].run != NULL)
		json_object_set_new(args, "run", json_string(actions[a].run));
	if (actions[a].args)
		json_object_set_new(args, "args", json_string(
			"an object of every daemon's arguments: {\"hub\": [...], \"reader.0\": "
			"[...], \"source.0\": [...], ...}"));
	return args;
}

/* "machine": every state and rule; "actions": the operator's requests that
 * apply in the state now, each with its arguments, as the rules say. */
static void hubhttp_machine(json_t *state, enum serve_state now)
{
	json_t *states = json_array(), *rules = json_array(), *offered = json_array();
	for (int st = 0; st < SERVE_STATE_COUNT; st++)
		json_array_append_new(states, json_pack("{s:s, s:b}", "name", serve_fsm_state_name(st),
							"deadline", serve_fsm_has_deadline(st)));
	for (size_t i = 0; i < serve_fsm_rule_count(); i++) {
		const struct serve_fsm_rule *r = serve_fsm_rule_at(i);
		json_t *from = json_array();
		for (int st = 0; st < SERVE_STATE_COUNT; st++)
			if (r->from & (1u << st))
				json_array_append_new(from, json_string(serve_fsm_state_name(st)));
		json_array_append_new(rules, json_pack("{s:s, s:o, s:s, s:s}", "event",
			serve_fsm_event_name(r->event), "from", from, "to", serve_fsm_state_name(r->to),
			"meaning", r->meaning));
	}
	for (size_t a = 0; a < sizeof actions / sizeof actions[0]; a++) {
		for (size_t i = 0; i < serve_fsm_rule_count(); i++) {
			const struct serve_fsm_rule *r = serve_fsm_rule_at(i);
			if (r->event != actions[a].event || !serve_fsm_rule_applies(r, now))
				continue;
			json_array_append_new(offered, json_pack("{s:s, s:s, s:o, s:s, s:s}",
				"action", serve_fsm_event_name(r->event), "path", actions[a].path,
				"args", hubhttp_action_args(a), "to", serve_fsm_state_name(r->to),
				"meaning", r->meaning));
			break;
		}
	}
	json_object_set_new(state, "machine", json_pack("{s:o, s:o}", "states", states,
							"rules", rules));
	json_object_set_new(state, "actions", offered);
}

/* The endpoint's counters (CNT_LIST_CONTROL_HTTP), so that an operator
 * sees replays and what the door turned away. */
static json_t *hubhttp_counters(const struct ctlhttp *http)
{
	struct ctlhttp_stats st;
	ctlhttp_stats(http, &st);
	const uint64_t values[CNT_CONTROL_HTTP_COUNT] = {
		[CNT_CONTROL_HTTP_http_requests] = st.requests,
		[CNT_CONTROL_HTTP_http_refused] = st.refused,
		[CNT_CONTROL_HTTP_http_replayed] = st.replayed,
		[CNT_CONTROL_HTTP_http_nonces_full] = st.nonces_full,
		[CNT_CONTROL_HTTP_http_connections] = st.listener.accepted,
		[CNT_CONTROL_HTTP_http_evicted] = st.listener.evicted,
		[CNT_CONTROL_HTTP_http_timed_out] = st.listener.timed_out,
		[CNT_CONTROL_HTTP_http_accept_backoffs] = st.listener.accept_backoffs,
		[CNT_CONTROL_HTTP_http_log_suppressed] = st.listener.log_suppressed,
	};
	json_t *o = json_object();
	for (size_t i = 0; i < CNT_CONTROL_HTTP_COUNT; i++)
		json_object_set_new(o, cnt_control_http_names[i], json_integer((json_int_t)values[i]));
	return o;
}

static json_t *hubhttp_state(const struct serve_http *h)
{
	const struct serve_session *hs = h->hs;
	json_t *peers = json_array(), *missing = json_array(), *runs = json_array();
	for (size_t i = 0; i < serve_session_peer_count(hs); i++) {
		struct serve_peer_view v = serve_session_peer_at(hs, i);
		char name[48];
		snprintf(name, sizeof name, "%s %u", ctl_role_name(v.role), v.id);
		if (!v.linked) {
			json_array_append_new(missing, json_string(name));
			continue;
		}
		json_array_append_new(peers, json_pack("{s:s, s:I, s:s, s:I, s:s, s:I}",
			"role", ctl_role_name(v.role), "id", (json_int_t)v.id, "host", v.host,
			"pid", (json_int_t)v.pid, "state", ctl_session_state_name(v.state),
			"run", (json_int_t)v.run));
	}
	for (size_t i = 0; i < serve_session_summary_count(hs) && i < SERVE_SUMMARIES_KEPT; i++) {
		const struct serve_run_summary *s = serve_session_summary_at(hs, i);
		json_array_append_new(runs, json_pack("{s:I, s:i, s:b, s:b, s:I, s:o, s:o, s:s, s:s}",
			"run", (json_int_t)s->run, "status", s->status, "balanced", s->balanced,
			"started", s->started, "events_decided", (json_int_t)s->events_decided,
			"start_to_first_event_ms", ms_or_null(s->start_to_first_event_ms),
			"stop_to_books_ms", ms_or_null(s->stop_to_books_ms), "out", s->out,
			"ended_by", s->ended_by));
	}
	json_t *state = json_pack("{s:s, s:I, s:s, s:o, s:o, s:o, s:o}", "state",
				  serve_fsm_state_name(serve_session_state(hs)), "run", (json_int_t)serve_session_run_now(hs),
				  "error", serve_session_error(hs), "peers", peers, "missing", missing, "runs", runs,
				  CNT_GROUP_CONTROL_HTTP, hubhttp_counters(h->http));
	if (state != NULL) {
		hubhttp_machine(state, serve_session_state(hs));
		json_t *live = serve_session_live(hs);
		json_object_set_new(state, "live", live != NULL ? live : json_null());
	}
	return state;
}

/* body's "run": 1 .. 2^32-1; 0 when absent or out of range. */
static uint32_t body_run(const json_t *body)
{
	json_t *run = body ? json_object_get(body, "run") : NULL;
	json_int_t n = json_is_integer(run) ? json_integer_value(run) : 0;
	return n >= 1 && n <= (json_int_t)UINT32_MAX ? (uint32_t)n : 0;
}

/* "args": {"hub": ["--x", ...], "source.0": [...]} into the hub session. */
static bool hubhttp_args(struct serve_session *hs, const json_t *body, char *reason, size_t len)
{
	json_t *args = json_object_get(body, "args");
	if (!json_is_object(args)) {
		snprintf(reason, len, "args: an object of every daemon's arguments is needed");
		return false;
	}
	serve_session_configure_begin(hs);
	const char *key;
	json_t *list;
	json_object_foreach(args, key, list) {
		char text[CTL_MAX_ARGS_TEXT];
		size_t used = 0, i;
		json_t *a;
		if (!json_is_array(list)) {
			snprintf(reason, len, "args: %s: a list of strings is needed", key);
			return false;
		}
		text[0] = '\0';
		json_array_foreach(list, i, a) {
			const char *s = json_string_value(a);
			if (s == NULL || strchr(s, '\n') != NULL) {
				snprintf(reason, len, "args: %s[%zu]: a string without a newline is needed",
					 key, i);
				return false;
			}
			int n = snprintf(text + used, sizeof text - used, "%s%s", i ? "\n" : "", s);
			if (n < 0 || (size_t)n >= sizeof text - used) {
				snprintf(reason, len, "args: %s's arguments are more than %u bytes", key,
					 CTL_MAX_ARGS_TEXT - 1);
				return false;
			}
			used += (size_t)n;
		}
		if (!serve_session_configure_arg(hs, key, text, reason, len))
			return false;
	}
	return true;
}

static int hubhttp_handle(void *arg, const char *method, const char *path, const json_t *body,
			  json_t **answer)
{
	struct serve_http *h = arg;
	struct serve_session *hs = h->hs;
	char reason[512] = "";
	bool ok;
	(void)method;     /* ctlhttp answers a wrong method itself */
	if (strcmp(path, "/state") == 0) {
		*answer = hubhttp_state(h);
		return 200;
	}
	if (strcmp(path, "/configure") == 0)
		ok = body_run(body) != 0 ? hubhttp_args(hs, body, reason, sizeof reason) &&
					   serve_session_configure(hs, body_run(body), reason, sizeof reason)
					 : (snprintf(reason, sizeof reason, "run: 1 .. 4294967295 is needed"), false);
	else if (strcmp(path, "/start") == 0)
		ok = serve_session_start(hs, body_run(body), reason, sizeof reason);
	else if (strcmp(path, "/stop") == 0)
		ok = serve_session_stop(hs, body_run(body), reason, sizeof reason);
	else if (strcmp(path, "/reset") == 0)
		ok = serve_session_reset(hs, reason, sizeof reason);
	else if (strcmp(path, "/shutdown") == 0) {
		serve_session_shutdown(hs, "the operator's shutdown");
		ok = true;
	} else {
		*answer = json_pack("{s:s}", "error", "no such request");
		return 404;
	}
	if (!ok) {
		log_warn("%s refused: %s", path + 1, reason);
		*answer = json_pack("{s:b, s:s, s:s}", "accepted", 0, "reason", reason, "state",
				    serve_fsm_state_name(serve_session_state(hs)));
		return 409;
	}
	*answer = json_pack("{s:b, s:s, s:I}", "accepted", 1, "state",
			    serve_fsm_state_name(serve_session_state(hs)), "run", (json_int_t)serve_session_run_now(hs));
	return 200;
}

/* The files of a finished run the endpoint serves (GET /runs/N/NAME): its
 * books and, when someone made one, its report; nothing else can be named. */
static const char *const hubhttp_run_files[] = { "metrics.json", "report.html" };

/* "/runs/N/NAME": the run number (1 .. 2^32-1, decimal, no leading zero)
 * and the name, or false. */
static bool hubhttp_run_path(const char *uri, uint32_t *run, const char **name)
{
	const char *p = uri + strlen(CTLHTTP_FILES_PREFIX);
	uint64_t n = 0;
	size_t digits = 0;
	while (p[digits] >= '0' && p[digits] <= '9' && digits < 11)
		n = n * 10 + (uint64_t)(p[digits++] - '0');
	if (digits == 0 || p[0] == '0' || p[digits] != '/' || n > UINT32_MAX)
		return false;
	*run = (uint32_t)n;
	*name = p + digits + 1;
	return true;
}

/* The resolver of io/ctlhttp's files: the latest summary of run N names its
 * directory; the name must be one of hubhttp_run_files. */
static int hubhttp_run_file(void *arg, const char *uri, char *file, size_t len, char *reason,
			    size_t reason_len)
{
	const struct serve_http *h = arg;
	uint32_t run = 0;
	const char *name = "";
	size_t f = 0, nf = sizeof hubhttp_run_files / sizeof hubhttp_run_files[0];
	bool named = hubhttp_run_path(uri, &run, &name);
	while (named && f < nf && strcmp(name, hubhttp_run_files[f]) != 0)
		f++;
	if (!named || f == nf) {
		snprintf(reason, reason_len, "no such run file; a finished run's are GET "
					     "%sN/metrics.json and %sN/report.html",
			 CTLHTTP_FILES_PREFIX, CTLHTTP_FILES_PREFIX);
		return 404;
	}
	const struct serve_run_summary *s = NULL;
	for (size_t i = 0; i < serve_session_summary_count(h->hs) && i < SERVE_SUMMARIES_KEPT; i++)
		if (serve_session_summary_at(h->hs, i)->run == run)
			s = serve_session_summary_at(h->hs, i);
	if (s == NULL || s->out[0] == '\0') {
		snprintf(reason, reason_len, "no finished run %u%s; the hub serves the files of the "
					     "runs GET /state lists", run, s == NULL ? "" : " with an output directory");
		return 404;
	}
	snprintf(file, len, "%s/%s", s->out, hubhttp_run_files[f]);
	return 200;
}

#ifndef ES_CONSOLE_DIR
#define ES_CONSOLE_DIR "build/console"
#endif

struct serve_http *serve_http_new(struct event_base *base, const char *host, uint16_t port,
			    const char *console_dir, struct serve_session *hs,
			    uint16_t *bound_port)
{
	struct serve_http *h = calloc(1, sizeof *h);
	char err[256];
	if (h == NULL)
		return NULL;
	h->hs = hs;
	h->http = ctlhttp_new(base, host, port, hubhttp_handle, h, err, sizeof err);
	if (h->http == NULL) {
		log_error("%s", err);
		free(h);
		return NULL;
	}
	ctlhttp_set_console(h->http, console_dir[0] != '\0' ? console_dir : ES_CONSOLE_DIR);
	ctlhttp_set_files(h->http, hubhttp_run_file, h);
	*bound_port = ctlhttp_port(h->http);
	return h;
}

void serve_http_free(struct serve_http *h)
{
	if (h == NULL)
		return;
	ctlhttp_free(h->http);
	free(h);
}
