/* The hub serving many runs (builderd --session-listen, docs/RUNCONTROL.md):
 * the session port every serving peer joins, the hub's own run object made
 * at each configure with START held, the operator's transitions and the
 * summary of every run. serve_http.c puts it on the operator's HTTP endpoint.
 * Its states and transitions are serve_fsm's; configuring, stopping and
 * resetting each wait on the peers under one deadline
 * (--transition-timeout-ms), after which the hub goes to error naming
 * each peer that did not answer (role, id, pid, host). A run object the
 * hub abandoned (a failure, a deadline, a reset) is only summarised when
 * it ends: its end never drives the state. */
#ifndef ES_BD_SERVE_SESSION_H
#define ES_BD_SERVE_SESSION_H

#include "serve/serve_fsm.h"

#include "io/daemon.h"
#include "wire/control.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct serve_session;

/* A serving peer the hub's base options expect, as /state shows it. */
struct serve_peer_view {
	enum ctl_role role;
	uint32_t id;
	bool linked;                 /* its session link is up */
	char host[CTL_MAX_TEXT];
	uint32_t pid;
	uint32_t run;                /* its run object's, 0 with none, as it last said */
	enum ctl_session_state state;
};

/* A run the hub served. */
struct serve_run_summary {
	uint32_t run;
	int status;                  /* the hub's run object's exit status */
	bool started;                /* START went out */
	bool balanced;               /* its books closed and balanced */
	uint64_t events_decided;
	double start_to_first_event_ms;   /* < 0: none built */
	double stop_to_books_ms;          /* < 0: no operator stop */
	char out[1024];
	char ended_by[512];               /* "its end", "operator stop", "reset: ..." */
};

#define SERVE_SUMMARIES_KEPT 64u

/* The session port bound (before the run listeners are kept, so that no
 * run object is ever handed it: the caller then calls net_keep_listeners
 * and hub_prepare_listeners) and the run slot made from the base command
 * line. NULL, logged, on failure. */
struct serve_session *serve_session_new(const struct daemon_def *def, struct event_base *base,
				    int argc, char **argv, uint16_t *session_port);
void serve_session_free(struct serve_session *hs);

/* Serves runs until shutdown or a signal; the process's exit status. */
int serve_session_run(struct serve_session *hs);

/* ---- what the operator's endpoint asks (serve_http.c) ----------------------- */
enum serve_state serve_session_state(const struct serve_session *hs);
uint32_t serve_session_run_now(const struct serve_session *hs);
const char *serve_session_error(const struct serve_session *hs);     /* why ERROR, "" otherwise */
size_t serve_session_peer_count(const struct serve_session *hs);
struct serve_peer_view serve_session_peer_at(const struct serve_session *hs, size_t i);
size_t serve_session_summary_count(const struct serve_session *hs);
/* The current run object's live view (hub_live_json), NULL with none. */
json_t *serve_session_live(const struct serve_session *hs);
const struct serve_run_summary *serve_session_summary_at(const struct serve_session *hs, size_t i);

/* A configure's arguments, one daemon at a time ("hub", "source.0",
 * "reader.1", "builder.2"; args with '\n' between them), then the
 * configure itself. false with the reason. */
void serve_session_configure_begin(struct serve_session *hs);
bool serve_session_configure_arg(struct serve_session *hs, const char *key, const char *args, char *reason,
		       size_t len);
bool serve_session_configure(struct serve_session *hs, uint32_t run, char *reason, size_t len);
bool serve_session_start(struct serve_session *hs, uint32_t run, char *reason, size_t len);
bool serve_session_stop(struct serve_session *hs, uint32_t run, char *reason, size_t len);
bool serve_session_reset(struct serve_session *hs, char *reason, size_t len);
void serve_session_shutdown(struct serve_session *hs, const char *why);

#endif
