/* One peer's clock as builderd knows it (docs/CLOCKS.md): the in-band
 * estimator its exchanges feed, the chrony states of its host at the start
 * and end of the run, their intervals combined into the estimate applied,
 * each estimate kept (the first PEERCLOCK_HISTORY) and checked against the
 * injected offsets, and whether in band and chrony agree. The builder
 * host's side of every pair is a peerclock_host the caller owns. Pure: no clock
 * reads, no I/O; every function that needs the time takes now (builder
 * realtime, ns), so tests/unit/test_peerclock.c drives it with its own
 * times. Private to builderd. */
#ifndef ES_BD_PEERCLOCK_H
#define ES_BD_PEERCLOCK_H

#include "core/clockoffset.h"
#include "core/interval.h"
#include "io/probe.h"

#include <stdbool.h>
#include <stdint.h>

struct ctl_report;

/* The two moments of a run whose chrony states and estimates are kept. */
enum peerclock_phase { PEERCLOCK_START, PEERCLOCK_END, PEERCLOCK_PHASES };

/* "start", "end". */
const char *peerclock_phase_name(int phase);

/* The builder host's side of every pair: its --clock-offset-ns and its own
 * chrony reads, each with the builder realtime from which its bound holds. */
struct peerclock_host {
	int64_t injected_ns;
	struct cks_chrony chrony[PEERCLOCK_PHASES];
	int64_t chrony_at_ns[PEERCLOCK_PHASES];
};

/* The in-band estimate at one moment, and what was made of it with
 * chrony's interval. */
struct peerclock_snapshot {
	bool valid;
	int64_t offset_ns;
	int64_t bound_ns;
	int64_t at_ns;             /* builder clock */
	struct ivl inband;         /* every in-band sample's interval intersected */
	bool chrony_valid;
	struct ivl chrony;         /* chrony's interval for the offset then */
	struct ivl_estimate applied;
};

/* Estimates kept per peer for metrics.json: one per exchange and report,
 * so at one exchange per 10 ms and a few early ones, 16-20 s of a run;
 * later ones are only counted (and still checked against the injected
 * offsets). */
#define PEERCLOCK_HISTORY 2048u

struct peerclock_record {
	int64_t at_ns;             /* builder clock */
	int64_t offset_ns;
	int64_t bound_ns;
	uint8_t basis;             /* enum ivl_basis */
};

struct peerclock;

/* |v|, exact for INT64_MIN. */
uint64_t peerclock_abs(int64_t v);

/* a + b, saturating at INT64_MAX. */
int64_t peerclock_sat_add(uint64_t a, uint64_t b);

/* A peer with no exchange and no chrony state yet, the default drift
 * bound; NULL when out of memory. */
struct peerclock *peerclock_create(void);

void peerclock_destroy(struct peerclock *p);

/* One answered exchange (t1, t4 builder clock; t2, t3 the peer's): 0 or
 * cks_add_sample()'s -errno; an accepted one counts its stamps' origins. */
int peerclock_add_exchange(struct peerclock *p, const struct prb_exchange *x);

/* Smallest delay among the samples still in the window; -1 when empty. */
int64_t peerclock_best_delay(const struct peerclock *p);

/* Delay of the sample added last; -1 when empty. */
int64_t peerclock_latest_delay(const struct peerclock *p);

/* A report's "clock" group: the peer's injected offset (--clock-offset-ns). */
void peerclock_take_clock(struct peerclock *p, const struct ctl_report *r);

/* A report's chrony group, the first one of its phase; the peer read it
 * read_age_ns before now. */
void peerclock_take_chrony(struct peerclock *p, const struct ctl_report *r, int phase, int64_t now);

/* chrony's drift bound for the pair where both hosts are synchronised, at
 * start or end; the larger when both; the default otherwise. */
void peerclock_update_drift(struct peerclock *p, const struct peerclock_host *h);

/* The drift bound in ppm the estimates use now. */
double peerclock_drift_ppm(const struct peerclock *p);

/* The estimate at now, in band and chrony combined (interval.h), recorded
 * for the report and checked against the injected offsets; basis NONE
 * (and nothing recorded) when neither is known. */
struct ivl_estimate peerclock_estimate(struct peerclock *p, const struct peerclock_host *h, int64_t now);

/* The same, kept as the estimate of phase (not recorded). */
void peerclock_snapshot(struct peerclock *p, const struct peerclock_host *h, int phase, int64_t now);

/* The estimate kept for phase; valid false before peerclock_snapshot() made one
 * from at least one exchange. */
struct peerclock_snapshot peerclock_snapshot_at(const struct peerclock *p, int phase);

/* The in-band estimate alone at now: offset (peer minus builder) and bound
 * in ns; false before the first exchange. */
bool peerclock_inband(const struct peerclock *p, int64_t now, int64_t *offset_ns, int64_t *bound_ns);

/* The peer's injected offset; false until its "clock" group arrived. */
bool peerclock_injected(const struct peerclock *p, int64_t *injected_ns);

/* Whether the in-band estimate of one phase agrees with chrony: the two
 * hosts are within the sum of their chrony bounds of each other. */
enum cks_verdict peerclock_verdict(const struct peerclock *p, const struct peerclock_host *h, int phase);

/* Inconsistent when any estimate combined disjoint intervals or either
 * phase is; consistent when one phase is and none is inconsistent;
 * unknown otherwise. */
enum cks_verdict peerclock_overall(const struct peerclock *p, const struct peerclock_host *h);

/* Everything the report shows of one peer's clock, a plain copy. */
struct peerclock_view {
	bool clock_seen;             /* its "clock" group arrived */
	int64_t injected_ns;
	struct peerclock_snapshot snap[PEERCLOCK_PHASES];
	struct cks_chrony chrony[PEERCLOCK_PHASES];
	double drift_ppm;
	bool drift_from_chrony;
	int64_t best_delay_ns;       /* -1: no sample */
	uint64_t accepted, rejected, evicted;
	uint64_t stamps[4][3];       /* accepted exchanges by stamp origin, t1..t4 */
	const char *stamps_summary;  /* "kernel", "user space", "mixed", "none" */
	uint64_t estimates;          /* made, recorded or not */
	uint64_t by_basis[IVL_BASIS_UNION + 1];
	uint64_t window_disjoint;    /* estimates whose samples did not all overlap */
	uint64_t inside_injected;    /* estimates holding the injected truth */
	int64_t worst_margin_ns;     /* min of bound - |offset - injected| */
	bool last_valid;
	struct ivl_estimate last;    /* the latest estimate */
	const struct peerclock_record *history;  /* [recorded], valid while p lives */
	uint32_t recorded;
};

void peerclock_view(const struct peerclock *p, struct peerclock_view *v);

/* The in-band estimate that describes the run: the final one, else the
 * one after the first burst; NULL when neither was made. */
const struct peerclock_snapshot *peerclock_view_best(const struct peerclock_view *v);

#endif
