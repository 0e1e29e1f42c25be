/* An HTTP endpoint's listener and its door: the one place a socket from
 * net_listen is handed to evhttp, for every HTTP endpoint a daemon serves
 * (io/prom's /metrics and /status, io/ctlhttp's control endpoint), and the
 * limits every connection to it lives under, as the greeting's doors set
 * them for the data and control ports (io/handshake.h):
 *
 * - a cap of HTTPLISTEN_MAX_CONNECTIONS per listener and a share of
 *   HTTPLISTEN_MAX_PER_ADDRESS per peer address; when either is full a
 *   newcomer is still let in and the oldest connection (of that address,
 *   or of the listener) is closed, so that slow or idle connections cannot
 *   keep an operator out however many they are;
 * - a deadline for the whole connection, HTTPLISTEN_DEADLINE_MS from its
 *   accept, however its bytes trickle in (evhttp's own timeout restarts
 *   with every byte): a request is sent and answered well within it, and
 *   a client that keeps a connection open reconnects;
 * - when accept fails other than for a reason libevent retries itself
 *   (EMFILE, ENFILE, ENOBUFS, ENOMEM: for want of descriptors or memory)
 *   the listener stops accepting for a while
 *   (HTTPLISTEN_BACKOFF_MIN_MS doubling to HTTPLISTEN_BACKOFF_MAX_MS, back
 *   to the minimum at the next accept) instead of retrying at once on a
 *   socket that stays readable;
 * - every eviction, deadline and failed accept is counted
 *   (struct httplisten_stats) and logged within a rate (io/ratelog).
 *
 * evhttp 2.1 has no hook at a connection's accept: the listener makes each
 * connection's bufferevent itself (evhttp_set_bevcb) and finds its
 * connection at the next turn of the loop, from the bufferevent's callback
 * argument, checked against evhttp_connection_get_bufferevent(). */
#ifndef ES_IO_HTTPLISTEN_H
#define ES_IO_HTTPLISTEN_H

#include <stdint.h>

struct event_base;
struct evhttp;
struct httplisten;

#define HTTPLISTEN_MAX_CONNECTIONS 64u
#define HTTPLISTEN_MAX_PER_ADDRESS (HTTPLISTEN_MAX_CONNECTIONS / 4u)
#define HTTPLISTEN_DEADLINE_MS 5000u
#define HTTPLISTEN_BACKOFF_MIN_MS 10u
#define HTTPLISTEN_BACKOFF_MAX_MS 1000u

struct httplisten_stats {
	uint64_t accepted;             /* connections accepted */
	uint64_t evicted;              /* closed to make room for a newcomer */
	uint64_t timed_out;            /* closed at the deadline */
	uint64_t accept_backoffs;      /* accepts failed (out of descriptors, say), each a pause */
	uint64_t log_suppressed;       /* lines held back by the rate (still counted above) */
	unsigned open;                 /* connections open now */
};

/* A new evhttp in base accepting on host:port (port 0: any, the port got in
 * *bound_port), its door named name in log lines ("the hub's control
 * endpoint"). The socket comes from net_listen, so that a daemon serving
 * many runs keeps the port across them; from here on the listener owns it.
 * Returns 0 with *out set, or -errno with nothing left open: net_listen's
 * error (logged there with the address), -ENOMEM. The caller sets the
 * server's limits and callbacks on httplisten_http(). */
int httplisten_open(struct event_base *base, const char *host, uint16_t port, const char *name,
		    struct httplisten **out, uint16_t *bound_port);

/* The evhttp served. */
struct evhttp *httplisten_http(struct httplisten *l);

/* What the door counted. */
void httplisten_stats(const struct httplisten *l, struct httplisten_stats *out);

/* A refusal line of the endpoint's own (a request refused), within the
 * door's log rate. */
void httplisten_warn(struct httplisten *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Closes every connection and the socket; NULL is allowed. */
void httplisten_close(struct httplisten *l);

#endif
