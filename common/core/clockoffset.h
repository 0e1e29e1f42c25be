/* Clock offsets between hosts and how far to trust them (docs/CLOCKS.md).
 *
 * Two independent sources:
 *  - the in-band estimator (here): builderd's PING/PONG four-timestamp
 *    exchanges with a peer, best sample of a sliding window, bound =
 *    delay/2 widened by a drift bound as the sample ages. Pure: no clock
 *    reads, no I/O, no allocation; every function takes the builder's "now".
 *  - chrony's tracking state of each host (core/chrony.h), which bounds
 *    that host's clock against its reference; this module takes the drift
 *    bound from it and checks the two sources against each other.
 *
 * Sign convention everywhere: offset = peer clock minus builder clock, so a
 * peer timestamp on the builder's clock is peer_ts - offset. Times are
 * CLOCK_REALTIME nanoseconds since the Unix epoch held in int64_t (good until
 * 2262); arithmetic saturates or rejects rather than wraps. */
#ifndef ES_CORE_CLOCKOFFSET_H
#define ES_CORE_CLOCKOFFSET_H

#include "core/chrony.h"

#include <stdbool.h>
#include <stdint.h>

/* Samples the estimator keeps: at builderd's PING every 200 ms, 3.2 s of
 * history (two bursts of 8 while a run starts), enough to ride out a burst
 * of queueing without letting old samples linger: at 100 ppm a 3 s old
 * sample has widened by 300 us and long lost to any fresh one. */
#define CKS_WINDOW 32

/* Relative drift assumed between two clocks when chrony cannot tell us
 * better, in ppm. Commodity crystals are specified to a few tens of ppm
 * each; two of them off in opposite directions stay within 100 ppm. It is a
 * working assumption, not a hard limit (the kernel accepts +-500 ppm). */
#define CKS_DEFAULT_DRIFT_PPM 100.0

/* Largest drift bound accepted, in ppm; beyond it a clock is broken. */
#define CKS_MAX_DRIFT_PPM 1e6

/* One accepted exchange. */
struct cks_sample {
	int64_t offset_ns;  /* peer - builder, ((t2-t1)+(t3-t4))/2 */
	int64_t delay_ns;   /* (t4-t1)-(t3-t2), >= 0 */
	int64_t taken_ns;   /* t1, builder clock: the sample's age starts here */
};

/* Fixed ring of the last CKS_WINDOW samples of one peer. Embed it (no
 * allocation); fields are read-only outside clockoffset.c except the counters,
 * which the owner may reset. */
struct cks_estimator {
	struct cks_sample samples[CKS_WINDOW];
	unsigned count;      /* valid samples, <= CKS_WINDOW */
	unsigned next;       /* slot the next sample overwrites */
	double drift_ppm;    /* relative frequency bound widening old samples */
	uint64_t accepted;   /* samples stored */
	uint64_t rejected;   /* impossible samples refused by cks_add_sample() */
	uint64_t evicted;    /* samples pushed out of the full window */
};

/* Empties the window, zeroes the counters and sets the drift bound to
 * CKS_DEFAULT_DRIFT_PPM. Call before first use. */
void cks_reset(struct cks_estimator *est);

/* Sets the drift bound in ppm used to widen aged samples. NaN, negative or
 * above CKS_MAX_DRIFT_PPM: -EINVAL and the bound is unchanged. */
int cks_set_drift_ppm(struct cks_estimator *est, double drift_ppm);

/* Adds one exchange: t1 builder send, t2 peer receive, t3 peer send,
 * t4 builder receive. Returns 0, -EINVAL for an impossible exchange
 * (t4 < t1, t3 < t2, or negative delay: the peer claims to have held the
 * PING longer than the round trip) or -ERANGE when the differences overflow
 * int64 (garbage timestamps); refused samples only bump est->rejected.
 * A full window evicts its oldest sample. */
int cks_add_sample(struct cks_estimator *est, int64_t t1_ns, int64_t t2_ns, int64_t t3_ns,
		   int64_t t4_ns);

/* The offset of the sample with the smallest bound at now_ns, where a
 * sample's bound is ceil(delay/2) + drift_ppm * |now_ns - taken_ns|; ties go
 * to the newest sample. The true offset lies within offset +- bound as long
 * as the drift bound holds. Returns 0 or -ENODATA when the window is empty.
 * The bound saturates at INT64_MAX. */
int cks_estimate(const struct cks_estimator *est, int64_t now_ns, int64_t *offset_ns,
		 int64_t *bound_ns);

/* Every sample in the window holds the true offset within its own bound
 * at now_ns, so the offset lies in the intersection of all their intervals,
 * which is never wider than the best one's and narrower wherever samples
 * with delay on different sides cut off different ends. Sets [*lo_ns,
 * *hi_ns] and returns 0; -ENODATA when the window is empty; -ERANGE when
 * the intervals do not all overlap (a drift bound or a sample that cannot
 * be true), and then sets the best sample's interval. */
int cks_estimate_range(const struct cks_estimator *est, int64_t now_ns, int64_t *lo_ns,
		       int64_t *hi_ns);

/* Bound of one sample at now_ns (the quantity cks_estimate() minimises). */
int64_t cks_sample_bound_ns(const struct cks_sample *s, double drift_ppm, int64_t now_ns);

/* A peer timestamp converted to the builder's clock: peer_ts - offset,
 * saturating at the int64 limits instead of wrapping. */
int64_t cks_correct(int64_t peer_ts_ns, int64_t offset_ns);

/* Drift bound in ppm between the clocks of two chrony-disciplined hosts:
 * each host's skew + |residual frequency| + the rate at which chronyd is
 * slewing away its pending correction (|offset| / update interval). Falls
 * back to CKS_DEFAULT_DRIFT_PPM unless both hosts are synchronised and the
 * result is finite and at most CKS_MAX_DRIFT_PPM. */
double cks_drift_ppm_from_chrony(const struct cks_chrony *peer, const struct cks_chrony *builder);

enum cks_verdict {
	CKS_UNKNOWN,      /* a bound is missing (negative) */
	CKS_CONSISTENT,   /* the in-band and chrony intervals overlap */
	CKS_INCONSISTENT, /* at least one of the bounds is wrong */
};

/* Whether an in-band offset +- bound agrees with chrony: both hosts are
 * within their chrony bounds of a common reference, so the true offset is
 * within bound_a + bound_b of zero; consistent when
 * |offset| <= bound_inband + chrony_bound_a + chrony_bound_b. */
enum cks_verdict cks_check_consistent(int64_t offset_ns, int64_t bound_inband_ns,
				      int64_t chrony_bound_a_ns, int64_t chrony_bound_b_ns);

#endif
