/* The live view of a run from builderd's --metrics-listen: /metrics
 * (Prometheus text, docs/METRICS.md) and /status (one JSON object), made
 * from a snapshot while the run goes on. Private to builderd. */
#ifndef ES_BD_LIVE_H
#define ES_BD_LIVE_H

#include <jansson.h>
#include <stdbool.h>

struct snapshot;
struct evbuffer;

/* Appends /status (json true) or /metrics to out. */
void live_fill(struct evbuffer *out, bool json, const struct snapshot *s);

/* The serving hub's /state "live" (docs/RUNCONTROL.md, the console): the
 * run's /status object as "status", its p50 latency, and a row per peer
 * (its control link's state, clock offset and bound, when last heard, a
 * reader's frames received and time held). */
json_t *live_json(const struct snapshot *s);

#endif
