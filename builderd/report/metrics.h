/* The end-of-run report: metrics.json (docs/METRICS.md lists every field)
 * and the short summary builderd prints. The live view is live.h, the
 * progress line progress.h. */
#ifndef ES_METRICS_H
#define ES_METRICS_H

#include "core/acct.h"
#include "metrics_json.h"

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>
#include <stdint.h>

struct snapshot;

/* metrics.json's tree (a new reference), fields in the order
 * docs/METRICS.md lists them. */
json_t *metrics_json(const struct snapshot *s, const struct acct *a);

/* Writes OUT_DIR/metrics.json; 0 or -errno. */
int metrics_write(const struct snapshot *s, const struct acct *a);

/* A few lines a person reads at the end of a run. */
void metrics_print_summary(FILE *f, const struct snapshot *s, const struct acct *a);

#endif
