/* Prometheus text exposition (format 0.0.4) and the small HTTP server that
 * serves it from a daemon's event loop with libevent's evhttp: /metrics in
 * that format, /status as JSON. Names are es_<daemon>_<what>, with units in
 * the name (_seconds, _bytes) and _total on counters. */
#ifndef ES_IO_PROM_H
#define ES_IO_PROM_H

#include "core/hist.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct event_base;

/* A family's # HELP and # TYPE lines; type is "counter", "gauge" or
 * "histogram". Write it once, then its samples. */
void prom_family(struct evbuffer *out, const char *name, const char *type, const char *help);

/* One sample; labels is NULL or a label list without braces, such as
 * source="3". */
void prom_sample_u64(struct evbuffer *out, const char *name, const char *labels, uint64_t value);
void prom_sample_f64(struct evbuffer *out, const char *name, const char *labels, double value);

/* Appends key="value" to the label list dst (capacity cap, always
 * terminated; a comma first when dst is not empty), the value escaped as
 * the exposition format wants ('\\', '"' and newline; text.h), so a peer's
 * string cannot break the scrape. */
void prom_label_add(char *dst, size_t cap, const char *key, const char *value);

/* The same with the one label key="id", such as source="3". */
void prom_sample_u64_id(struct evbuffer *out, const char *name, const char *key, unsigned id,
			uint64_t value);
void prom_sample_f64_id(struct evbuffer *out, const char *name, const char *key, unsigned id,
			double value);

/* A whole histogram family from a latency histogram in nanoseconds,
 * exposed in seconds: cumulative _bucket{le=...} at each power-of-two
 * boundary, +Inf, _sum and _count. */
void prom_histogram_ns(struct evbuffer *out, const char *name, const char *help,
		       const struct hist *h);

/* Fills out with /metrics (json false) or /status (json true). */
typedef void (*prom_fill_fn)(struct evbuffer *out, bool json, void *arg);

struct prom_server;

/* Serves /metrics and /status on host:port (port 0: any; *bound_port set).
 * NULL with the reason logged when it cannot listen. */
struct prom_server *prom_server_start(struct event_base *base, const char *host, uint16_t port,
				      prom_fill_fn fill, void *arg, uint16_t *bound_port);

void prom_server_stop(struct prom_server *s);

#endif
