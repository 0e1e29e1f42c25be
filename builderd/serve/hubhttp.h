/* The serving hub on the operator's HTTP endpoint (io/ctlhttp,
 * docs/RUNCONTROL.md "HTTP"): each request's JSON to a transition of
 * hubsession.h and its answer, /state from what the hub session shows. */
#ifndef ES_BD_HUBHTTP_H
#define ES_BD_HUBHTTP_H

#include <stdint.h>

struct event_base;
struct hub_session;
struct hubhttp;

/* NULL, with the reason logged, when it cannot listen there. */
struct hubhttp *hubhttp_new(struct event_base *base, const char *host, uint16_t port,
			    struct hub_session *hs, uint16_t *bound_port);
void hubhttp_free(struct hubhttp *h);

#endif
