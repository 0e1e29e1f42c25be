/* One readout sector: generates its fragments deterministically, applies the
 * seed's faults, paces them and streams them to its reader in batches; then
 * reports its counters to the builder. This is what main.c sees (its options
 * are options.h's); the source itself (source.c: its life from the
 * greetings to BYE, and which fragment goes next) uses pace.h (when),
 * stream.h (the data connection), faults.h (--inject, --stall) and
 * report.h (its counters and what it reports). */
#ifndef ES_SOURCE_H
#define ES_SOURCE_H

#include "options.h"

#include <stdint.h>

struct event_base;

struct src;

struct src *src_create(struct event_base *base, const struct src_options *opt);
void src_destroy(struct src *s);

/* Stops generating: what is not yet sent counts as abandoned. */
void src_stop(struct src *s);

/* The daemon's exit status once the loop has ended. */
int src_exit_status(const struct src *s);

#endif
