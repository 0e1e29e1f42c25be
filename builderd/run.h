/* One run of the builder: the control hub every daemon reports to, the
 * data connections from the readers, the builder core, the record files and
 * the end-of-run accounting. */
#ifndef ES_RUN_H
#define ES_RUN_H

#include "options.h"

#include <stdbool.h>
#include <stdint.h>

struct event_base;

struct bd;

struct bd *bd_create(struct event_base *base, const struct bd_options *opt);
void bd_destroy(struct bd *b);

/* Ends the run now, as if every peer had finished: accounts for what
 * arrived and tells every peer. */
void bd_stop(struct bd *b, const char *why);

/* The operator's drained stop (docs/RUNCONTROL.md, "stop"): a STOP with
 * last_event to every source, each generating up to that event and then
 * ending as at the run's natural end; the run then ends the normal way,
 * its books balanced with the cut-off as its own bucket. A second call, or
 * one once the run has ended, does nothing. */
void bd_stop_drained(struct bd *b, const char *why);

/* 0 when every equation balanced and nothing went wrong; 1 otherwise. */
int bd_exit_status(const struct bd *b);

#endif
