/* One run of the builder: the control hub every daemon reports to, the
 * data connections from the readers, the builder core, the record files and
 * the end-of-run accounting. */
#ifndef ES_RUN_H
#define ES_RUN_H

#include "options.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct event_base;

struct hub;

struct hub *hub_create(struct event_base *base, const struct options *opt);
void hub_destroy(struct hub *b);

/* Ends the run now, as if every peer had finished: accounts for what
 * arrived and tells every peer. */
void hub_stop(struct hub *b, const char *why);

/* A hub serving many runs (serve_session.h) holds START: once every peer has
 * joined and its clock is measured, on_ready(arg) is called once instead,
 * and START goes when hub_release_start() is called (at once if it is
 * already due). Call hub_hold_start before the loop runs. */
void hub_hold_start(struct hub *b, void (*on_ready)(void *arg), void *arg);
void hub_release_start(struct hub *b);

/* A serving hub's listeners, opened once at its start in the order
 * hub_create() asks for them (io/net keeps them for every run), and the port
 * file written with them and the session and HTTP ports. */
bool hub_prepare_listeners(const struct options *opt, uint16_t session_port,
			  uint16_t http_port);

/* The same for a --role builder serving runs (daemon_def.prepare): its
 * data and metrics listeners and its port file. */
bool hub_prepare_builder(void *opts);

/* The run's books closed and every equation balanced (false before). */
bool hub_books_balanced(const struct hub *b);

/* Events decided so far (built, or in role hub decided by the builders). */
uint64_t hub_events_decided(const struct hub *b);
/* The operator's drained stop (docs/RUNCONTROL.md, "stop"): a STOP with
 * last_event to every source, each generating up to that event and then
 * ending as at the run's natural end; the run then ends the normal way,
 * its books balanced with the cut-off as its own bucket. A second call, or
 * one once the run has ended, does nothing. */
void hub_stop_drained(struct hub *b, const char *why);

/* 0 when every equation balanced and nothing went wrong; 1 otherwise. */
int hub_exit_status(const struct hub *b);

/* The run as the console sees it live (report/live.h's live_json). */
json_t *hub_live_json(struct hub *b);

#endif
