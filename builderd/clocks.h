/* builderd's view of every peer's clock (docs/CLOCKS.md): four-timestamp
 * PING/PONG exchanges on each control connection feeding one cks_estimator
 * per peer, the chrony state of every host (the builder's own read, the
 * peers' sent in their first STATS and their END), the offsets and bounds
 * the output module applies to each source's timestamps, and the "clocks"
 * part of metrics.json. run.c calls the hooks below; everything else about
 * clocks stays here. */
#ifndef ES_CLOCKS_H
#define ES_CLOCKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct event_base;
struct out;
struct peer_table;
struct bd_peer;
struct bdc;
struct ctl_pong;
struct ctl_report;

/* Exchanges right after a peer joins and again at the end of the run: a
 * burst finds a quiet moment whatever the load (the estimator keeps the
 * exchange with the smallest delay). */
#define BDC_BURST 8u
#define BDC_BURST_GAP_NS 1000000u
/* Between bursts, one exchange per peer this often: with the default drift
 * bound of 100 ppm the newest sample has aged by at most 20 us. */
#define BDC_PERIOD_NS 200000000u
/* The same over a peer's UDP probe socket, whose exchanges cost the peer a
 * datagram in and two out: at 100 ppm the newest sample has aged by at most
 * 1 us, which keeps drift from outgrowing a kernel-stamped bound of a few
 * microseconds, and the window of 32 holds 320 ms. */
#define BDC_PROBE_PERIOD_NS 10000000u
/* After an exchange whose delay is more than twice the best in the window
 * (a busy moment on the path), up to this many more follow BDC_BURST_GAP_NS
 * apart instead of a period later. */
#define BDC_RETRIES 3u
/* The final burst is abandoned after this long: a peer that does not answer
 * keeps the estimate it has. */
#define BDC_CLOSE_TIMEOUT_NS 300000000u

struct bdc_config {
	struct event_base *base;
	struct peer_table *peers;   /* the run's peers; outlives the bdc */
	struct out *out;            /* gets each source's offset; outlives bdc_finish() */
	uint32_t run_id;
	bool correction;            /* false: measure offsets but apply none */
	bool quiet;
	void (*ready)(void *arg);   /* called when bdc_ready() becomes true last */
	void *ready_arg;
};

/* Reads the builder host's chrony state (runs chronyc: milliseconds, at
 * most CKS_CHRONYC_TIMEOUT_MS) and allocates the per-peer state. NULL with a
 * logged reason on failure. */
struct bdc *bdc_create(const struct bdc_config *cfg);

void bdc_destroy(struct bdc *c);

/* START waits this long at most for a source's first burst to be
 * answered: a peer that does not answer cannot hold the run. */
#define BDC_READY_TIMEOUT_NS 200000000u

/* True when every connected source has answered its first burst over its
 * probe socket (over the control connection when it has none) or joined
 * BDC_READY_TIMEOUT_NS ago: its first fragment then finds a measured
 * offset. bd_maybe_start() is called when the last becomes ready. */
bool bdc_ready(const struct bdc *c);

/* A peer's control connection is up: starts its first burst. */
void bdc_peer_joined(struct bdc *c, struct bd_peer *p);

/* A PONG from p received at rx_ns (builder clock): one exchange. */
void bdc_on_pong(struct bdc *c, struct bd_peer *p, const struct ctl_pong *pong, uint64_t rx_ns);

/* A STATS (final false) or END (final true) from p: takes its "clock" and
 * "chrony" groups. */
void bdc_on_report(struct bdc *c, struct bd_peer *p, const struct ctl_report *r, bool final);

/* The run is over but every connection is still up: sends each connected
 * peer a final burst. Returns true when done(arg) will be called, once every
 * peer answered, lost its connection, or after BDC_CLOSE_TIMEOUT_NS; false
 * when there is nothing to wait for (no peer connected, or already
 * finished). Calling it again while waiting returns true and changes
 * nothing. */
bool bdc_close(struct bdc *c, void (*done)(void *arg), void *arg);

/* The current in-band estimate of p's clock: offset (peer minus builder)
 * and bound in ns; false before the first exchange. */
bool bdc_peer_estimate(const struct bdc *c, const struct bd_peer *p, int64_t *offset_ns,
		       int64_t *bound_ns);

/* Stops all exchanges, reads the builder host's chrony state again and
 * fixes each peer's final estimate and verdict. Call once, before the
 * metrics are written; later calls do nothing. */
void bdc_finish(struct bdc *c);

/* Adds the latency fields that depend on clocks to metrics.json's
 * "latency" object. */
void bdc_latency_json(const struct bdc *c, json_t *latency);

/* The "clocks" member of metrics.json (a new reference). */
json_t *bdc_json(const struct bdc *c);

/* " (+/- U, how)" after the latency percentiles of the summary. */
void bdc_print_latency_uncertainty(const struct bdc *c, FILE *f);

/* Summary lines: peers not on the builder's clock, and any whose in-band
 * and chrony estimates disagree. */
void bdc_print_summary(const struct bdc *c, FILE *f);

#endif
