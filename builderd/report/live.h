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
 * run's /status object as "status", its p50 latency, its last error, the
 * window the sources may be apart in, the event ID below which every one
 * is decided, the event files this process writes (role both; null
 * otherwise), and a row per peer: its control link's state, clock offset
 * and bound, when last heard; a source's send positions and last event
 * sent; a reader's frames received, holds, frames verified and (role
 * both) credits; a builder's rate, tokens sent and held and event files. */
json_t *live_json(const struct snapshot *s);

#endif
