/* The control port: listen, the greeting, each HELLO checked against the
 * run (its id, the channel, the run not over) and the peer table (a peer of
 * the run, not already connected, never left), refusals answered with
 * their reason and counted; a welcomed peer's slot filled in (pid, host,
 * address) and handed to the hub with its connection. Private to
 * builderd. */
#ifndef ES_BD_CTLPORT_H
#define ES_BD_CTLPORT_H

#include "options.h"
#include "peer.h"

#include "io/msgseal.h"

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct snapshot;
struct ctl_hello;

struct ctlport_hooks {
	void *ctx;
	/* false once the run is over: greetings are refused as run_over. */
	bool (*running)(void *ctx);
	/* p was welcomed: fd (tuned, greeted, the hook's to own) is its
	 * control connection from address peer, sealed with seal (valid
	 * during the call). */
	void (*joined)(void *ctx, struct peer *p, int fd, const struct ctl_hello *h,
		       const struct msgseal *seal, const char *peer);
};

struct ctlport;

/* Listens on opt's control host and port (the port bound in *port) and
 * greets every connection; NULL with the reason logged on failure. */
struct ctlport *ctlport_open(struct event_base *base, const struct options *opt,
			     struct peer_table *peers, const struct ctlport_hooks *hooks,
			     uint16_t *port);

/* Stops listening and abandons the greetings in progress. NULL is fine. */
void ctlport_close(struct ctlport *c);

/* Its counters into a report: refused connections, greetings told busy,
 * evicted and timed out. */
void ctlport_snapshot(const struct ctlport *c, struct snapshot *s);

#endif
