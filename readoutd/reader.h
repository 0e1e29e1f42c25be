/* A reader: accepts its sources' data connections, verifies every frame as
 * it arrives, holds fragments at or beyond the builder's admission limit
 * (TCP then pushes back on that source alone) and forwards verified frames
 * to the builder: over TCP many per system call, straight from each
 * source's receive buffer, or, on the builder's host, copied once each into
 * a shared-memory ring (no system call while both sides are busy). */
#ifndef ES_READER_H
#define ES_READER_H

#include "config.h"

#include <stdbool.h>

struct event_base;

struct rdr;

struct rdr *rdr_create(struct event_base *base, const struct rdr_options *opt);

/* A reader serving many runs opens its listeners once, at start, in the
 * order rdr_create() asks for them (io/net keeps them for every run), and
 * writes its port file (daemon_def.prepare). false, logged, on failure. */
bool rdr_prepare(void *opts);
void rdr_destroy(struct rdr *r);

/* Stops accepting and ends the run as if every source had ended. */
void rdr_stop(struct rdr *r);

int rdr_exit_status(const struct rdr *r);

#endif
