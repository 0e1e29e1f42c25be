/* A test program, not a daemon: io/ctlhttp serving a tiny in-memory run
 * state (idle -> configured -> running -> idle) so that tests/e2e's
 * test_daqctl.py can drive deploy/daqctl against the real endpoint.
 *
 *     ctlhttp_serve [--run-key-file FILE] [--host HOST]
 *
 * Prints "port N" on stdout once listening (port 0 asked for), serves until
 * POST /shutdown or SIGTERM, exits 0. Refusals are 409 {"accepted": false,
 * "reason": ...} as the hub's are (docs/RUNCONTROL.md). */
#include <event2/event.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ctlhttp.h"
#include "sys/auth.h"
#include "sys/log.h"

struct state {
	struct event_base *base;
	const char *name;	/* "idle", "configured", "running" */
	json_int_t run;
	json_t *runs;		/* the runs that ended, as /state's "runs" */
};

static int accepted(json_t **answer, const char *state)
{
	*answer = json_pack("{s:b,s:s}", "accepted", 1, "state", state);
	return 200;
}

static int refused(json_t **answer, const char *reason)
{
	*answer = json_pack("{s:b,s:s}", "accepted", 0, "reason", reason);
	return 409;
}

/* The body's "run", 1 .. 2^32-1, or 0. */
static json_int_t body_run(const json_t *body)
{
	json_t *run = body != NULL ? json_object_get(body, "run") : NULL;
	json_int_t n = json_is_integer(run) ? json_integer_value(run) : 0;
	return n >= 1 && n <= 4294967295 ? n : 0;
}

static void end_loop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static int transition(struct state *s, const char *path, const json_t *body, json_t **answer)
{
	char reason[160];
	json_int_t run = body_run(body);
	if (strcmp(path, "/reset") == 0) {
		s->name = "idle";
		s->run = 0;
		return accepted(answer, s->name);
	}
	if (strcmp(path, "/shutdown") == 0) {
		/* After the answer has gone out. */
		struct timeval soon = { 0, 50000 };
		event_base_once(s->base, -1, EV_TIMEOUT, end_loop, s->base, &soon);
		return accepted(answer, "shutdown");
	}
	if (run == 0)
		return refused(answer, "the body's \"run\" is missing or not 1 .. 2^32-1");
	if (strcmp(path, "/configure") == 0) {
		if (strcmp(s->name, "idle") != 0) {
			snprintf(reason, sizeof reason, "the hub is %s for run %lld; reset it first",
				 s->name, (long long)s->run);
			return refused(answer, reason);
		}
		if (!json_is_object(json_object_get(body, "args")))
			return refused(answer, "the body's \"args\" is missing or not an object");
		s->name = "configured";
		s->run = run;
		return accepted(answer, s->name);
	}
	const char *want = strcmp(path, "/start") == 0 ? "configured" : "running";
	if (strcmp(s->name, want) != 0 || s->run != run) {
		snprintf(reason, sizeof reason, "%s run %lld: the hub is %s (run %lld)", path + 1,
			 (long long)run, s->name, (long long)s->run);
		return refused(answer, reason);
	}
	if (strcmp(path, "/stop") == 0) {
		json_array_append_new(s->runs, json_pack("{s:I,s:i,s:b}", "run", run, "status", 0,
							 "balanced", 1));
		s->name = "idle";
		s->run = 0;
		return accepted(answer, "stopping");
	}
	s->name = "running";
	return accepted(answer, s->name);
}

static int handle(void *arg, const char *method, const char *path, const json_t *body,
		  json_t **answer)
{
	struct state *s = arg;
	if (strcmp(method, "GET") == 0) {
		*answer = json_pack("{s:s,s:I,s:[],s:[],s:O}", "state", s->name, "run", s->run,
				    "peers", "missing", "runs", s->runs);
		return 200;
	}
	return transition(s, path, body, answer);
}

int main(int argc, char **argv)
{
	const char *key = NULL, *host = "127.0.0.1";
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--run-key-file") == 0 && i + 1 < argc)
			key = argv[++i];
		else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
			host = argv[++i];
		else {
			fprintf(stderr, "usage: ctlhttp_serve [--run-key-file FILE] [--host HOST]\n");
			return 2;
		}
	}
	log_init("ctlhttp_serve", -1, LOG_LEVEL_INFO);
	if (key != NULL && auth_load_key_file(key) != 0)
		return 1;
	struct state s = { .base = event_base_new(), .name = "idle", .runs = json_array() };
	char err[256];
	struct ctlhttp *h = ctlhttp_new(s.base, host, 0, handle, &s, err, sizeof err);
	if (h == NULL) {
		fprintf(stderr, "ctlhttp_serve: %s\n", err);
		return 1;
	}
	struct event *term = evsignal_new(s.base, SIGTERM, end_loop, s.base);
	event_add(term, NULL);
	printf("port %u\n", (unsigned)ctlhttp_port(h));
	fflush(stdout);
	event_base_dispatch(s.base);
	event_free(term);
	ctlhttp_free(h);
	json_decref(s.runs);
	event_base_free(s.base);
	auth_forget_key();
	return 0;
}
