/* The live view of a run from builderd's --metrics-listen: /metrics
 * (Prometheus text, docs/METRICS.md) and /status (one JSON object), made
 * from a snapshot while the run goes on. Private to builderd. */
#ifndef ES_BD_LIVE_H
#define ES_BD_LIVE_H

#include <stdbool.h>

struct snapshot;
struct evbuffer;

/* Appends /status (json true) or /metrics to out. */
void live_fill(struct evbuffer *out, bool json, const struct snapshot *s);

#endif
