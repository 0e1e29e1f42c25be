/* The hub's HTTP control endpoint (docs/RUNCONTROL.md, "The operator's
 * interface"): GET /state and POST /configure, /start, /stop, /reset,
 * /shutdown, served with libevent's evhttp from the daemon's event loop;
 * POST /control and /release, who is in control (io/ctlowner), answered
 * here; GET / and /console/NAME, the operator's console (io/ctlstatic).
 *
 * Every request is checked here before the handler sees it: the path and
 * the method (404, 405), the body's size (at most CTLHTTP_MAX_BODY bytes,
 * 413), the authorization (401) and the body's JSON (an object, 400).
 * Authorization is `Authorization: es-hmac <unix-ms> <nonce> <hex>`, nonce
 * 32 lowercase hex digits the client draws for this request alone and hex
 * HMAC-SHA256 under the run key (sys/auth) of
 * "METHOD\nPATH\nUNIX-MS\nNONCE\nBODY", the time at most CTLHTTP_MAX_SKEW_MS
 * from this host's CLOCK_REALTIME. A signed request is taken once: its
 * nonce is remembered while its time is within the skew (sys/replay, at
 * most REPLAY_MAX_NONCES at once) and a second request with it is refused
 * 401 "replayed request" and counted; when all of them are still needed a
 * new one is refused 503 rather than an old one forgotten. Without a run
 * key the endpoint listens on loopback only and takes requests without the
 * header. Connections go through io/httplisten's door (caps per listener
 * and per address, a deadline, accept backoff, a log rate). Every answer, refusals included, is one
 * line of JSON (Content-Type: application/json); a refusal's is
 * {"error": "reason"}. Every answer closes its connection (Connection:
 * close), so that no client sends a request twice over a kept connection
 * the door closed under it.
 *
 * A signed GET /runs/N/NAME is a file the owner keeps (a finished run's
 * metrics.json): ctlhttp_set_files's resolver names it, or refuses, and it
 * is read as the console's files are (io/ctlstatic) and sent as it is.
 *
 * A POST's body may name its "operator"; while one operator holds control
 * every other POST but /control is refused 409 naming the holder, before
 * the handler sees it; GET /state's answer gets "control" (who holds it,
 * since when, takes, take-overs). */
#ifndef ES_IO_CTLHTTP_H
#define ES_IO_CTLHTTP_H

#include "io/httplisten.h"

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

/* What the endpoint counted: requests read whole, refused (any status
 * but the handler's), of them replayed and refused for a full nonce
 * table; the listener's door. */
struct ctlhttp_stats {
	uint64_t requests;
	uint64_t refused;
	uint64_t replayed;
	uint64_t nonces_full;
	struct httplisten_stats listener;
};

void ctlhttp_stats(const struct ctlhttp *h, struct ctlhttp_stats *out);

#define CTLHTTP_FILES_PREFIX "/runs/"

/* A signed GET under CTLHTTP_FILES_PREFIX: writes the path on this host of
 * the file uri names (as the request line has it, "/runs/7/metrics.json")
 * into file and returns 200, or returns the refusal's status (404) with
 * the reason. */
typedef int (*ctlhttp_file_resolver)(void *arg, const char *uri, char *file, size_t len,
				     char *reason, size_t reason_len);

/* Serves the files resolve names under CTLHTTP_FILES_PREFIX; without it
 * every such path is a 404. */
void ctlhttp_set_files(struct ctlhttp *h, ctlhttp_file_resolver resolve, void *arg);

/* Serves the operator's console from dir (io/ctlstatic: GET / and
 * /console/NAME, unsigned); NULL or "" serves none. */
void ctlhttp_set_console(struct ctlhttp *h, const char *dir);

/* The bound port. */
uint16_t ctlhttp_port(const struct ctlhttp *h);

/* Stops serving and closes every connection; NULL is allowed. */
void ctlhttp_free(struct ctlhttp *h);

#endif
