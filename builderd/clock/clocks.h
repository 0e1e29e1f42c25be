/* builderd's clock exchanges with every peer (docs/CLOCKS.md): a burst of
 * four-timestamp exchanges when a peer joins, then one each period, over
 * the peer's UDP probe socket (PING/PONG on its control connection where it
 * has none), a few retries after a busy moment, the final burst at the end
 * of the run; the builder host's chrony state read at start and end, the
 * peers' taken from their first STATS and their END. Each peer's estimate
 * is a peerclock.h; what the output module applies to each source's
 * timestamps is set from it here. run.c calls the hooks below; the report
 * (clockreport.h) reads the plain views at the end. */
#ifndef ES_CLOCKS_H
#define ES_CLOCKS_H

#include "clock/peerclock.h"

#include "io/probe.h"

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct output;
struct peer_table;
struct peer;
struct clocks;
struct ctl_pong;
struct ctl_report;

/* Exchanges right after a peer joins and again at the end of the run: a
 * burst finds a quiet moment whatever the load (the estimator keeps the
 * exchange with the smallest delay). */
#define CLOCKS_BURST 8u
#define CLOCKS_BURST_GAP_NS 1000000u
/* Between bursts, one exchange per peer this often: with the default drift
 * bound of 100 ppm the newest sample has aged by at most 20 us. */
#define CLOCKS_PERIOD_NS 200000000u
/* The same over a peer's UDP probe socket, whose exchanges cost the peer a
 * datagram in and two out: at 100 ppm the newest sample has aged by at most
 * 1 us, which keeps drift from outgrowing a kernel-stamped bound of a few
 * microseconds, and the window of 32 holds 320 ms. The default of
 * --probe-period-ms: with many peers on few cores a longer period trades a
 * few microseconds of bound for CPU. */
#define CLOCKS_PROBE_PERIOD_NS 10000000u
/* After an exchange whose delay is more than twice the best in the window
 * (a busy moment on the path), up to this many more follow CLOCKS_BURST_GAP_NS
 * apart instead of a period later. */
#define CLOCKS_RETRIES 3u
/* The final burst is abandoned after this long: a peer that does not answer
 * keeps the estimate it has. */
#define CLOCKS_CLOSE_TIMEOUT_NS 300000000u

struct clocks_config {
	struct event_base *base;
	struct peer_table *peers;   /* the run's peers; outlives the bdc */
	struct output *out;            /* gets each source's offset; outlives clocks_finish() */
	uint32_t run_id;
	bool correction;            /* false: measure offsets but apply none */
	uint64_t probe_period_ns;   /* over a UDP probe socket; 0: CLOCKS_PROBE_PERIOD_NS */
	bool quiet;
	void (*ready)(void *arg);   /* called when clocks_ready() becomes true last */
	void *ready_arg;
};

/* Reads the builder host's chrony state (runs chronyc: milliseconds, at
 * most CKS_CHRONYC_TIMEOUT_MS) and allocates the per-peer state. NULL with a
 * logged reason on failure. */
struct clocks *clocks_create(const struct clocks_config *cfg);

void clocks_destroy(struct clocks *c);

/* START waits this long at most for a source's first burst to be
 * answered: a peer that does not answer cannot hold the run. */
#define CLOCKS_READY_TIMEOUT_NS 200000000u

/* True when every connected source has answered its first burst over its
 * probe socket (over the control connection when it has none) or joined
 * CLOCKS_READY_TIMEOUT_NS ago: its first fragment then finds a measured
 * offset. hub_maybe_start() is called when the last becomes ready. */
bool clocks_ready(const struct clocks *c);

/* A peer's control connection is up: starts its first burst. */
void clocks_peer_joined(struct clocks *c, struct peer *p);

/* A PONG from p received at rx_ns (builder clock): one exchange. */
void clocks_on_pong(struct clocks *c, struct peer *p, const struct ctl_pong *pong, uint64_t rx_ns);

/* A STATS (final false) or END (final true) from p: takes its "clock" and
 * "chrony" groups. */
void clocks_on_report(struct clocks *c, struct peer *p, const struct ctl_report *r, bool final);

/* The run is over but every connection is still up: sends each connected
 * peer a final burst. Returns true when done(arg) will be called, once every
 * peer answered, lost its connection, or after CLOCKS_CLOSE_TIMEOUT_NS; false
 * when there is nothing to wait for (no peer connected, or already
 * finished). Calling it again while waiting returns true and changes
 * nothing. */
bool clocks_close(struct clocks *c, void (*done)(void *arg), void *arg);

/* The current in-band estimate of p's clock: offset (peer minus builder)
 * and bound in ns; false before the first exchange. */
bool clocks_peer_estimate(const struct clocks *c, const struct peer *p, int64_t *offset_ns,
		       int64_t *bound_ns);

/* Stops all exchanges, reads the builder host's chrony state again and
 * fixes each peer's final estimate and verdict. Call once, before the
 * metrics are written; later calls do nothing. */
void clocks_finish(struct clocks *c);

/* How a peer is taken to share the builder's clock (metrics.json says it). */
#define CLOCKS_SAME_CLOCK_RULE \
	"a peer shares the builder's clock when its control connection comes from an address of " \
	"the builder's own network stack (loopback or an address of one of its interfaces) and " \
	"neither was started with a non-zero --clock-offset-ns; the host name a peer sends is " \
	"not trusted for this"

/* What the report reads of the clocks as a whole. */
struct clocks_view {
	const char *host;               /* the builder's host name */
	const struct peerclock_host *clock;  /* the builder host's side of every pair */
	const struct output *out;          /* the latencies the offsets corrected; may be NULL */
	bool correction;
	bool all_sources_same_clock;
	uint16_t sources;
	uint32_t count;                 /* peers: sources, then readers */
};

void clocks_view(const struct clocks *c, struct clocks_view *v);

/* What the report reads of one peer's clock: a plain copy. */
struct clocks_peer_view {
	const struct peer *peer;
	bool same_host;                 /* its control connection is from our own addresses */
	bool same_clock;                /* CLOCKS_SAME_CLOCK_RULE */
	bool udp;                       /* exchanges over its probe socket */
	struct prb_prober_stats probe;  /* zero without one */
	uint64_t pings;
	uint64_t pongs;
	uint64_t pongs_unmatched;       /* PONGs answering no PING of ours */
	uint64_t retried;               /* early exchanges after a busy one */
	struct peerclock_view clock;
	enum cks_verdict verdict[PEERCLOCK_PHASES];
	enum cks_verdict overall;
};

/* Peer i of the table (sources, then readers). */
void clocks_peer_view(const struct clocks *c, uint32_t i, struct clocks_peer_view *v);

#endif
