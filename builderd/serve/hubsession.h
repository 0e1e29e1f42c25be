/* The hub serving many runs (builderd --session-listen, docs/RUNCONTROL.md):
 * the session port every serving peer joins, the hub's own run object made
 * at each configure with START held, the operator's transitions and the
 * summary of every run. hubhttp.c puts it on the operator's HTTP endpoint.
 * Its states and transitions are hubfsm's; configuring, stopping and
 * resetting each wait on the peers under one deadline
 * (--transition-timeout-ms), after which the hub goes to error naming
 * each peer that did not answer (role, id, pid, host). A run object the
 * hub abandoned (a failure, a deadline, a reset) is only summarised when
 * it ends: its end never drives the state. */
#ifndef ES_BD_HUBSESSION_H
#define ES_BD_HUBSESSION_H

#include "serve/hubfsm.h"

#include "io/daemon.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct hub_session;

/* A serving peer the hub's base options expect, as /state shows it. */
struct hub_peer_view {
	enum ctl_role role;
	uint32_t id;
	bool linked;                 /* its session link is up */
	char host[CTL_MAX_TEXT];
	uint32_t pid;
	uint32_t run;                /* its run object's, 0 with none, as it last said */
	enum ctl_session_state state;
};

/* A run the hub served. */
struct hub_run_summary {
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

#define HUB_SUMMARIES_KEPT 64u

/* The session port bound (before the run listeners are kept, so that no
 * run object is ever handed it: the caller then calls net_keep_listeners
 * and bd_prepare_listeners) and the run slot made from the base command
 * line. NULL, logged, on failure. */
struct hub_session *hub_session_new(const struct daemon_def *def, struct event_base *base,
				    int argc, char **argv, uint16_t *session_port);
void hub_session_free(struct hub_session *hs);

/* Serves runs until shutdown or a signal; the process's exit status. */
int hub_session_run(struct hub_session *hs);

/* ---- what the operator's endpoint asks (hubhttp.c) ----------------------- */
enum hub_state hub_state_now(const struct hub_session *hs);
uint32_t hub_run_now(const struct hub_session *hs);
const char *hub_error(const struct hub_session *hs);     /* why ERROR, "" otherwise */
size_t hub_peer_count(const struct hub_session *hs);
struct hub_peer_view hub_peer_at(const struct hub_session *hs, size_t i);
size_t hub_summary_count(const struct hub_session *hs);
const struct hub_run_summary *hub_summary_at(const struct hub_session *hs, size_t i);

/* A configure's arguments, one daemon at a time ("hub", "source.0",
 * "reader.1", "builder.2"; args with '\n' between them), then the
 * configure itself. false with the reason. */
void hub_configure_begin(struct hub_session *hs);
bool hub_configure_arg(struct hub_session *hs, const char *key, const char *args, char *reason,
		       size_t len);
bool hub_configure(struct hub_session *hs, uint32_t run, char *reason, size_t len);
bool hub_start(struct hub_session *hs, uint32_t run, char *reason, size_t len);
bool hub_stop(struct hub_session *hs, uint32_t run, char *reason, size_t len);
bool hub_reset(struct hub_session *hs, char *reason, size_t len);
void hub_shutdown(struct hub_session *hs, const char *why);

#endif
