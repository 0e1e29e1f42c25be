/* One builder of a run of several (--role builder, docs/BUILDERS.md): the
 * data side (ingest and its links, as in --role both) numbered by the hub's
 * plan, the control link to the hub (hublink), the 2 ms tick that expires
 * events and sends TOKENs, and the end: the core closed over the IDs
 * assigned to it, the records, a last TOKEN, the END report and
 * builder.json. The hub, the books and metrics.json are the hub's. */
#ifndef ES_BD_BRUN_H
#define ES_BD_BRUN_H

#include "options.h"

struct event_base;
struct brun;

struct brun *brun_create(struct event_base *base, const struct options *opt);
void brun_destroy(struct brun *b);

/* Ends the run now (a signal): cuts the data paths, reports what arrived
 * to the hub, exits once the hub says BYE (or soon after). */
void brun_stop(struct brun *b, const char *why);

/* 0 when nothing went wrong and the hub's BYE said 0; 1 otherwise. */
int brun_exit_status(const struct brun *b);

#endif
