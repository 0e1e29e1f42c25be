/* The hub's watchdog over its peers: who stalled (silent on the control
 * channel), who is stuck when the run makes no progress (alive but with no
 * data and no final counters), and who never did its part. It decides and
 * names; the hub acts (hooks.gone counts the peer as lost, tells the peers
 * that depend on it). Driven by the hub's tick with the time passed in, so
 * it runs without sockets (tests/unit/test_watchdog.c). Private to
 * builderd. */
#ifndef ES_BD_WATCHDOG_H
#define ES_BD_WATCHDOG_H

#include "options.h"
#include "peer.h"

#include <stdbool.h>
#include <stdint.h>

struct dataview;
struct ctl_msg;

struct watchdog_hooks {
	void *ctx;
	/* p is given up: why follows "Source N (...)". */
	void (*gone)(void *ctx, struct peer *p, const char *why);
	/* Sends a reader the STOP asking for its final counters. */
	void (*send)(void *ctx, struct peer *p, const struct ctl_msg *m);
	/* Records an error of the run. */
	void (*error)(void *ctx, const char *text);
	/* false once the run has ended (a gone peer can end it). */
	bool (*running)(void *ctx);
};

struct watchdog {
	const struct options *opt;   /* the stall and peer timeouts */
	struct peer_table *peers;
	const struct dataview *data;     /* each reader's data path */
	struct watchdog_hooks hooks;
};

/* A peer silent for --stall-timeout-ms (clock answers come every 200 ms)
 * is stalled: SIGSTOP-style, or hung. */
void watchdog_check_stalls(const struct watchdog *w, uint64_t now);

/* The no-progress watchdog fired (nothing since last_progress_ns). Ending
 * at once would leave the healthy peers' final counters out and fail their
 * books, so: a reader that verified frames the builder never received is
 * stuck; every source that has not ended is named stuck and given up
 * (unless its reader is the stuck one); every reader still to report is
 * asked to stop and report. The hub ends the run once they have, or after
 * --stall-timeout-ms (watchdog_wind_up_over). */
void watchdog_wind_up(const struct watchdog *w, uint64_t now, uint64_t last_progress_ns);

/* The wind-up's wait is over: whoever has still not reported is stuck. */
void watchdog_wind_up_over(const struct watchdog *w);

/* Names, as errors of the run, every peer that has not done its part;
 * never_connected_only: only those that never connected. */
void watchdog_report_missing(const struct watchdog *w, bool never_connected_only);

#endif
