/* The serving hub on the operator's HTTP endpoint (io/ctlhttp,
 * docs/RUNCONTROL.md "HTTP"): each request's JSON to a transition of
 * serve_session.h and its answer, /state from what the hub session shows,
 * and GET /runs/N/NAME, a finished run's metrics.json or report.html from
 * the directory its summary names. */
#ifndef ES_BD_SERVE_HTTP_H
#define ES_BD_SERVE_HTTP_H

#include <stdint.h>

struct event_base;
struct serve_session;
struct serve_http;

/* NULL, with the reason logged, when it cannot listen there. console_dir:
 * the console's files ("" the one make built, ES_CONSOLE_DIR). */
struct serve_http *serve_http_new(struct event_base *base, const char *host, uint16_t port,
			    const char *console_dir, struct serve_session *hs,
			    uint16_t *bound_port);
void serve_http_free(struct serve_http *h);

#endif
