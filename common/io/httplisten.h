/* An evhttp server's listener: the one place a socket from net_listen is
 * handed to evhttp, for every HTTP endpoint a daemon serves (io/prom's
 * /metrics and /status, io/ctlhttp's control endpoint). */
#ifndef ES_IO_HTTPLISTEN_H
#define ES_IO_HTTPLISTEN_H

#include <stdint.h>

struct event_base;
struct evhttp;

/* A new evhttp in base accepting on host:port (port 0: any, the port got in
 * *bound_port). The socket comes from net_listen, so that a daemon serving
 * many runs keeps the port across them; from here on the evhttp owns it and
 * evhttp_free closes it. Returns 0 with *http set, or -errno with nothing
 * left open: net_listen's error (logged there with the address), -ENOMEM
 * when evhttp cannot take the socket. The caller sets the server's limits
 * and callbacks. */
int httplisten_open(struct event_base *base, const char *host, uint16_t port,
		    struct evhttp **http, uint16_t *bound_port);

#endif
