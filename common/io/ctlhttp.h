/* The hub's HTTP control endpoint (docs/RUNCONTROL.md, "The operator's
 * interface"): GET /state and POST /configure, /start, /stop, /reset,
 * /shutdown, served with libevent's evhttp from the daemon's event loop.
 *
 * Every request is checked here before the handler sees it: the path and
 * the method (404, 405), the body's size (at most CTLHTTP_MAX_BODY bytes,
 * 413), the authorization (401) and the body's JSON (an object, 400).
 * Authorization is `Authorization: es-hmac <unix-ms> <hex>`, hex being
 * HMAC-SHA256 under the run key (sys/auth) of "METHOD\nPATH\nUNIX-MS\nBODY",
 * the time at most CTLHTTP_MAX_SKEW_MS from this host's CLOCK_REALTIME.
 * Without a run key the endpoint listens on loopback only and takes
 * requests without the header. Every answer, refusals included, is one
 * line of JSON (Content-Type: application/json); a refusal's is
 * {"error": "reason"}. */
#ifndef ES_IO_CTLHTTP_H
#define ES_IO_CTLHTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct ctlhttp;

#define CTLHTTP_MAX_BODY (64u * 1024u)
#define CTLHTTP_MAX_SKEW_MS 30000u

/* One authenticated request: method "GET"/"POST", path ("/state"), body
 * the parsed JSON object (NULL for a GET or an empty body). Sets *answer (a
 * new reference, ctlhttp sends and releases it; NULL sends {}) and returns
 * the HTTP status (200, 409 ...). */
typedef int (*ctlhttp_handler)(void *arg, const char *method, const char *path,
			       const json_t *body, json_t **answer);

/* Serves the endpoint on host:port (port 0 asks for any; a kept listener
 * in a serving process, io/net). NULL with the reason in err: the
 * listener failed, or host is not loopback and no run key is loaded. */
struct ctlhttp *ctlhttp_new(struct event_base *base, const char *host, uint16_t port,
			    ctlhttp_handler handler, void *arg, char *err, size_t errlen);

/* The bound port. */
uint16_t ctlhttp_port(const struct ctlhttp *h);

/* Stops serving and closes every connection; NULL is allowed. */
void ctlhttp_free(struct ctlhttp *h);

#endif
