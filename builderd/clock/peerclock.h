/* One peer's clock as builderd knows it (docs/CLOCKS.md): the in-band
 * estimator its exchanges feed, the chrony states of its host at the start
 * and end of the run, their intervals combined into the estimate applied,
 * each estimate kept (the first PCLK_HISTORY) and checked against the
 * injected offsets, and whether in band and chrony agree. The builder
 * host's side of every pair is a pclk_host the caller owns. Pure: no clock
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
enum pclk_phase { PCLK_START, PCLK_END, PCLK_PHASES };

/* "start", "end". */
const char *pclk_phase_name(int phase);

/* The builder host's side of every pair: its --clock-offset-ns and its own
 * chrony reads, each with the builder realtime from which its bound holds. */
struct pclk_host {
	int64_t injected_ns;
	struct cks_chrony chrony[PCLK_PHASES];
	int64_t chrony_at_ns[PCLK_PHASES];
};

/* The in-band estimate at one moment, and what was made of it with
 * chrony's interval. */
struct pclk_snapshot {
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
#define PCLK_HISTORY 2048u

struct pclk_record {
	int64_t at_ns;             /* builder clock */
	int64_t offset_ns;
	int64_t bound_ns;
	uint8_t basis;             /* enum ivl_basis */
};

struct pclk;

/* |v|, exact for INT64_MIN. */
uint64_t pclk_abs(int64_t v);

/* a + b, saturating at INT64_MAX. */
int64_t pclk_sat_add(uint64_t a, uint64_t b);

/* A peer with no exchange and no chrony state yet, the default drift
 * bound; NULL when out of memory. */
struct pclk *pclk_create(void);

void pclk_destroy(struct pclk *p);

/* One answered exchange (t1, t4 builder clock; t2, t3 the peer's): 0 or
 * cks_add_sample()'s -errno; an accepted one counts its stamps' origins. */
int pclk_add_exchange(struct pclk *p, const struct prb_exchange *x);

/* Smallest delay among the samples still in the window; -1 when empty. */
int64_t pclk_best_delay(const struct pclk *p);

/* Delay of the sample added last; -1 when empty. */
int64_t pclk_latest_delay(const struct pclk *p);

/* A report's "clock" group: the peer's injected offset (--clock-offset-ns). */
void pclk_take_clock(struct pclk *p, const struct ctl_report *r);

/* A report's chrony group, the first one of its phase; the peer read it
 * read_age_ns before now. */
void pclk_take_chrony(struct pclk *p, const struct ctl_report *r, int phase, int64_t now);

/* chrony's drift bound for the pair where both hosts are synchronised, at
 * start or end; the larger when both; the default otherwise. */
void pclk_update_drift(struct pclk *p, const struct pclk_host *h);

/* The drift bound in ppm the estimates use now. */
double pclk_drift_ppm(const struct pclk *p);

/* The estimate at now, in band and chrony combined (interval.h), recorded
 * for the report and checked against the injected offsets; basis NONE
 * (and nothing recorded) when neither is known. */
struct ivl_estimate pclk_estimate(struct pclk *p, const struct pclk_host *h, int64_t now);

/* The same, kept as the estimate of phase (not recorded). */
void pclk_snapshot(struct pclk *p, const struct pclk_host *h, int phase, int64_t now);

/* The estimate kept for phase; valid false before pclk_snapshot() made one
 * from at least one exchange. */
struct pclk_snapshot pclk_snapshot_at(const struct pclk *p, int phase);

/* The in-band estimate alone at now: offset (peer minus builder) and bound
 * in ns; false before the first exchange. */
bool pclk_inband(const struct pclk *p, int64_t now, int64_t *offset_ns, int64_t *bound_ns);

/* The peer's injected offset; false until its "clock" group arrived. */
bool pclk_injected(const struct pclk *p, int64_t *injected_ns);

/* Whether the in-band estimate of one phase agrees with chrony: the two
 * hosts are within the sum of their chrony bounds of each other. */
enum cks_verdict pclk_verdict(const struct pclk *p, const struct pclk_host *h, int phase);

/* Inconsistent when any estimate combined disjoint intervals or either
 * phase is; consistent when one phase is and none is inconsistent;
 * unknown otherwise. */
enum cks_verdict pclk_overall(const struct pclk *p, const struct pclk_host *h);

/* Everything the report shows of one peer's clock, a plain copy. */
struct pclk_view {
	bool clock_seen;             /* its "clock" group arrived */
	int64_t injected_ns;
	struct pclk_snapshot snap[PCLK_PHASES];
	struct cks_chrony chrony[PCLK_PHASES];
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
	const struct pclk_record *history;  /* [recorded], valid while p lives */
	uint32_t recorded;
};

void pclk_view(const struct pclk *p, struct pclk_view *v);

/* The in-band estimate that describes the run: the final one, else the
 * one after the first burst; NULL when neither was made. */
const struct pclk_snapshot *pclk_view_best(const struct pclk_view *v);

#endif
