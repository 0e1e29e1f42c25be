/* The end-of-run report: metrics.json (docs/METRICS.md lists every field)
 * and the short summary builderd prints. */
#ifndef ES_METRICS_H
#define ES_METRICS_H

#include "acct.h"

#include <stdio.h>

struct bd;

/* Writes OUT_DIR/metrics.json; 0 or -errno. */
int metrics_write(const struct bd *b, const struct acct *a);

/* A few lines a person reads at the end of a run. */
void metrics_print_summary(FILE *f, const struct bd *b, const struct acct *a);

#endif
