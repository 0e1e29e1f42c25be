/* The one JSON writer of builderd's documents (metrics.json, the clocks part
 * of it, builder.json, running.json): jansson values made from C values. Private to builderd. */
#ifndef ES_METRICS_JSON_H
#define ES_METRICS_JSON_H

#include <jansson.h>
#include <stdint.h>

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

/* Writes root to path, with a final newline, through the one atomic writer
 * (sys/afile): a reader never sees it empty or cut. flags: jansson's dump
 * flags. 0 or -errno, the failure logged with the path. */
int metrics_json_write(const char *path, const json_t *root, size_t flags);

#endif
