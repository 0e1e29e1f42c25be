/* The in-band clock-offset estimator, and how it meets chrony's bounds; see
 * clockoffset.h for the contracts and docs/CLOCKS.md for the reasoning. */
#include "core/clockoffset.h"

#include "core/saturate.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- in-band estimator ---- */

void cks_reset(struct cks_estimator *est)
{
	memset(est, 0, sizeof(*est));
	est->drift_ppm = CKS_DEFAULT_DRIFT_PPM;
}

int cks_set_drift_ppm(struct cks_estimator *est, double drift_ppm)
{
	/* Written so that NaN fails the test too. */
	if (!(drift_ppm >= 0.0 && drift_ppm <= CKS_MAX_DRIFT_PPM))
		return -EINVAL;
	est->drift_ppm = drift_ppm;
	return 0;
}

/* (a + b) / 2 without forming a + b, which may overflow; within 0.5 of the
 * exact half-sum, which keeps the ceil(delay/2) bound valid (CLOCKS.md). */
static int64_t half_sum(int64_t a, int64_t b)
{
	return a / 2 + b / 2 + (a % 2 + b % 2) / 2;
}

int cks_add_sample(struct cks_estimator *est, int64_t t1_ns, int64_t t2_ns, int64_t t3_ns,
		   int64_t t4_ns)
{
	int64_t rtt, hold, out, back;
	struct cks_sample *s;
	int ret;

	if (t4_ns < t1_ns || t3_ns < t2_ns) {
		ret = -EINVAL;
		goto reject;
	}
	if (__builtin_sub_overflow(t4_ns, t1_ns, &rtt) ||
	    __builtin_sub_overflow(t3_ns, t2_ns, &hold) ||
	    __builtin_sub_overflow(t2_ns, t1_ns, &out) ||
	    __builtin_sub_overflow(t3_ns, t4_ns, &back)) {
		ret = -ERANGE;
		goto reject;
	}
	/* A peer that held the PING longer than the whole round trip has a
	 * clock that jumped, or is lying; the sample would carry a bound
	 * smaller than its error. */
	if (rtt < hold) {
		ret = -EINVAL;
		goto reject;
	}

	if (est->count == CKS_WINDOW)
		est->evicted++;
	else
		est->count++;
	s = &est->samples[est->next];
	est->next = (est->next + 1) % CKS_WINDOW;
	s->offset_ns = half_sum(out, back);
	s->delay_ns = rtt - hold;
	/* Age counts from t1, not t4: the peer read its clock somewhere
	 * between the two, so drift during the exchange is covered too. */
	s->taken_ns = t1_ns;
	est->accepted++;
	return 0;

reject:
	est->rejected++;
	return ret;
}

int64_t cks_sample_bound_ns(const struct cks_sample *s, double drift_ppm, int64_t now_ns)
{
	/* A negative age means the builder clock stepped back; the distance
	 * still measures how far the offset may have wandered. */
	uint64_t age = abs_diff_i64(now_ns, s->taken_ns);
	double widen = ceil(drift_ppm * (double)age / 1e6);
	int64_t half = s->delay_ns / 2 + (s->delay_ns & 1);

	if (!(widen < 9.2e18))
		return INT64_MAX;
	return sat_add_i64(half, (int64_t)widen);
}

int cks_estimate(const struct cks_estimator *est, int64_t now_ns, int64_t *offset_ns,
		 int64_t *bound_ns)
{
	const struct cks_sample *best = NULL;
	int64_t best_bound = INT64_MAX;
	unsigned i, slot;

	if (est->count == 0)
		return -ENODATA;

	/* Oldest to newest, so "<=" lets a newer sample win a tie. */
	slot = (est->next + CKS_WINDOW - est->count) % CKS_WINDOW;
	for (i = 0; i < est->count; i++, slot = (slot + 1) % CKS_WINDOW) {
		const struct cks_sample *s = &est->samples[slot];
		int64_t b = cks_sample_bound_ns(s, est->drift_ppm, now_ns);

		if (!best || b <= best_bound) {
			best = s;
			best_bound = b;
		}
	}
	*offset_ns = best->offset_ns;
	*bound_ns = best_bound;
	return 0;
}

int cks_estimate_range(const struct cks_estimator *est, int64_t now_ns, int64_t *lo_ns,
		       int64_t *hi_ns)
{
	int64_t lo = INT64_MIN, hi = INT64_MAX, off, bound;
	unsigned i;

	if (cks_estimate(est, now_ns, &off, &bound) < 0)
		return -ENODATA;
	for (i = 0; i < est->count; i++) {
		const struct cks_sample *s = &est->samples[i];
		int64_t b = cks_sample_bound_ns(s, est->drift_ppm, now_ns);
		int64_t slo = sat_sub_i64(s->offset_ns, b), shi = sat_add_i64(s->offset_ns, b);

		if (slo > lo)
			lo = slo;
		if (shi < hi)
			hi = shi;
	}
	if (lo > hi) {
		*lo_ns = sat_sub_i64(off, bound);
		*hi_ns = sat_add_i64(off, bound);
		return -ERANGE;
	}
	*lo_ns = lo;
	*hi_ns = hi;
	return 0;
}

int64_t cks_correct(int64_t peer_ts_ns, int64_t offset_ns)
{
	return sat_sub_i64(peer_ts_ns, offset_ns);
}

/* ---- in-band against chrony ---- */

/* One host's frequency error bound in ppm, NaN when it cannot be told. */
static double host_drift_ppm(const struct cks_chrony *c)
{
	double slew = 0.0;

	if (cks_chrony_bound_ns(c) < 0)
		return NAN;
	/* chronyd removes its pending correction by slewing; it aims to be
	 * done within a few update intervals (correction_time_ratio in
	 * reference.c), so |offset| / interval is the rate it adds. */
	if (c->offset_s != 0.0) {
		if (!(c->update_interval_s > 0.0))
			return NAN;
		slew = fabs(c->offset_s) / c->update_interval_s * 1e6;
	}
	return c->skew_ppm + fabs(c->residual_freq_ppm) + slew;
}

double cks_drift_ppm_from_chrony(const struct cks_chrony *peer, const struct cks_chrony *builder)
{
	double d;

	if (!peer || !builder)
		return CKS_DEFAULT_DRIFT_PPM;
	d = host_drift_ppm(peer) + host_drift_ppm(builder);
	if (isnan(d))
		return CKS_DEFAULT_DRIFT_PPM;
	/* chrony claiming more than any clock could drift: trust the claim
	 * as far as the estimator accepts, never shrink it to the default. */
	if (!(d <= CKS_MAX_DRIFT_PPM))
		return CKS_MAX_DRIFT_PPM;
	return d;
}

enum cks_verdict cks_check_consistent(int64_t offset_ns, int64_t bound_inband_ns,
				      int64_t chrony_bound_a_ns, int64_t chrony_bound_b_ns)
{
	uint64_t limit;

	if (bound_inband_ns < 0 || chrony_bound_a_ns < 0 || chrony_bound_b_ns < 0)
		return CKS_UNKNOWN;
	limit = sat_add_u64(sat_add_u64((uint64_t)bound_inband_ns, (uint64_t)chrony_bound_a_ns),
			 (uint64_t)chrony_bound_b_ns);
	return abs_diff_i64(offset_ns, 0) <= limit ? CKS_CONSISTENT : CKS_INCONSISTENT;
}

