/* The end-of-run report: metrics.json (docs/METRICS.md lists every field)
 * and the short summary builderd prints. */
#ifndef ES_METRICS_H
#define ES_METRICS_H

#include "core/acct.h"

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>
#include <stdint.h>

struct bd;

/* metrics.json is built as one jansson tree and written once; every value
 * enters through these. A string (or an object key) of any bytes becomes
 * valid UTF-8 first (text_to_utf8), so the file stays strict JSON whatever a
 * peer sent; jansson escapes quotes, backslashes and control bytes. NULL
 * values become null; metrics_json_set() takes ownership of value. */
json_t *metrics_json_text(const char *s);
void metrics_json_set(json_t *obj, const char *key, json_t *value);
/* Integers above INT64_MAX (only an absurd peer counter) are written as the
 * nearest real: jansson's integers are signed 64-bit. */
json_t *metrics_json_u64(uint64_t v);
/* A real rounded to decimals places, as the fixed-point text it replaces. */
json_t *metrics_json_real(double v, int decimals);

/* Writes OUT_DIR/metrics.json; 0 or -errno. */
int metrics_write(const struct bd *b, const struct acct *a);

/* A few lines a person reads at the end of a run. */
void metrics_print_summary(FILE *f, const struct bd *b, const struct acct *a);

struct evbuffer;

/* The live view of the run for /metrics (Prometheus text) and /status
 * (JSON), from builderd's --metrics-listen. */
void metrics_fill_live(struct evbuffer *out, bool json, void *arg);

#endif
