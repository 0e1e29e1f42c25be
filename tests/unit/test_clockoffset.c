/* Unit tests of common/core/clockoffset: the in-band offset estimator
 * against a simulated peer clock with a known offset and drift, its drift
 * bound from chrony's states and its verdict against chrony's bounds.
 * Randomised tests draw from one seed, printed at start; ES_TEST_SEED=N
 * repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clockoffset.h"

#include "chrony_lines.h"

#define MS INT64_C(1000000)
#define US INT64_C(1000)
#define SEC INT64_C(1000000000)
/* A plausible CLOCK_REALTIME: late 2026. */
#define BASE_NS INT64_C(1795980992000000000)

static uint64_t seed;
static uint64_t rng_state;

static void reseed(void)
{
	rng_state = seed;
}

/* SplitMix64: tiny, and every run is a pure function of the seed. */
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rnd_range(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

/* The peer's clock as seen from the builder's, which is the reference:
 * theta(t) = theta0 + rate * (t - BASE_NS). */
struct sim {
	int64_t theta0_ns;
	int64_t rate_ppb;
};

static int64_t sim_theta(const struct sim *m, int64_t t)
{
	return m->theta0_ns + (t - BASE_NS) * m->rate_ppb / 1000000000;
}

/* One PING/PONG sent at builder time t1: d1 on the way out, the peer holds
 * it for hold, d2 on the way back. Returns cks_add_sample()'s result; *t4
 * receives the builder's receive time. */
static int exchange(struct cks_estimator *est, const struct sim *m, int64_t t1, int64_t d1,
		    int64_t hold, int64_t d2, int64_t *t4)
{
	int64_t arrive = t1 + d1, leave = arrive + hold;
	int64_t t2 = arrive + sim_theta(m, arrive);
	int64_t t3 = leave + sim_theta(m, leave);

	if (t4)
		*t4 = leave + d2;
	return cks_add_sample(est, t1, t2, t3, leave + d2);
}

static void estimate(const struct cks_estimator *est, int64_t now, int64_t *off, int64_t *bound)
{
	ck_assert_int_eq(cks_estimate(est, now, off, bound), 0);
}

/* ---- estimator ---- */

START_TEST(test_symmetric_recovers_exactly)
{
	static const int64_t offsets[] = { 5 * MS, -5 * MS, 0, 1, -1, 123456789, -3 * SEC };
	struct cks_estimator est;
	int64_t off, bound, t4;

	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		struct sim m = { .theta0_ns = offsets[i] };

		cks_reset(&est);
		ck_assert_int_eq(exchange(&est, &m, BASE_NS, 200 * US, 30 * US, 200 * US, &t4), 0);
		estimate(&est, t4, &off, &bound);
		ck_assert_int_eq(off, offsets[i]);
		/* delay/2, plus 100 ppm of the 430 us since t1. */
		ck_assert_int_eq(bound, 200 * US + 43);
		ck_assert_int_eq(est.samples[0].delay_ns, 400 * US);
	}
}
END_TEST

START_TEST(test_asymmetric_within_half_delay)
{
	struct cks_estimator est;
	int64_t off, bound, t4;
	int i;

	/* All the delay on one side: the error is exactly delay/2, so the
	 * bound is tight, not just safe. */
	{
		struct sim m = { .theta0_ns = 5 * MS };

		cks_reset(&est);
		ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
		ck_assert_int_eq(exchange(&est, &m, BASE_NS, 0, 10 * US, 800 * US, &t4), 0);
		estimate(&est, t4, &off, &bound);
		ck_assert_int_eq(off, 5 * MS - 400 * US);
		ck_assert_int_eq(bound, 400 * US);
		ck_assert_int_eq(abs64(off - 5 * MS), bound);

		cks_reset(&est);
		ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
		ck_assert_int_eq(exchange(&est, &m, BASE_NS, 800 * US, 10 * US, 0, &t4), 0);
		estimate(&est, t4, &off, &bound);
		ck_assert_int_eq(off, 5 * MS + 400 * US);
		ck_assert_int_eq(bound, 400 * US);
	}

	/* Random offsets and delays, odd ones included: never outside. */
	for (i = 0; i < 200000; i++) {
		struct sim m = { .theta0_ns = rnd_range(-2 * SEC, 2 * SEC) };
		int64_t d1 = rnd_range(0, i % 2 ? 1000 : 20 * MS);
		int64_t d2 = rnd_range(0, i % 3 ? 1000 : 20 * MS);

		cks_reset(&est);
		ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
		ck_assert_int_eq(exchange(&est, &m, BASE_NS + rnd_range(-SEC, SEC), d1,
					  rnd_range(0, 100 * US), d2, &t4), 0);
		estimate(&est, t4, &off, &bound);
		ck_assert_int_eq(bound, (d1 + d2 + 1) / 2);
		ck_assert_msg(abs64(off - m.theta0_ns) <= bound,
			      "seed %" PRIu64 " iteration %d: offset %" PRId64 " true %" PRId64
			      " bound %" PRId64, seed, i, off, m.theta0_ns, bound);
	}
}
END_TEST

START_TEST(test_outliers_ignored)
{
	struct sim m = { .theta0_ns = 5 * MS };
	struct cks_estimator est;
	int64_t off, bound, t4 = 0, good = 0;
	int i;

	cks_reset(&est);
	for (i = 0; i < CKS_WINDOW; i++) {
		int64_t t1 = BASE_NS + i * SEC;

		if (i == CKS_WINDOW - 9) {
			/* The one quiet exchange, slightly asymmetric, 8 s
			 * before the last. */
			ck_assert_int_eq(exchange(&est, &m, t1, 40 * US, 5 * US, 60 * US, &t4), 0);
			good = 5 * MS - 10 * US;
		} else {
			/* Queueing behind a burst: tens of ms, all one way. */
			ck_assert_int_eq(exchange(&est, &m, t1, rnd_range(20, 80) * MS, 5 * US,
						  rnd_range(0, 100) * US, &t4), 0);
		}
	}
	estimate(&est, t4, &off, &bound);
	ck_assert_int_eq(off, good);
	ck_assert_int_le(abs64(off - 5 * MS), bound);
	/* 50 us of delay/2 plus 100 ppm of about 8 s. */
	ck_assert_int_lt(bound, 50 * US + 900 * US);
}
END_TEST

/* Property: with the peer drifting slower than the drift bound, the true
 * offset at any later moment is within the estimate's bound. */
static void run_drift(int64_t rate_ppb, double drift_ppm, int64_t *violations, int64_t *checks)
{
	struct sim m = { .theta0_ns = rnd_range(-50 * MS, 50 * MS), .rate_ppb = rate_ppb };
	struct cks_estimator est;
	int64_t t1 = BASE_NS, t4, off, bound, now;
	int i, k;

	cks_reset(&est);
	ck_assert_int_eq(cks_set_drift_ppm(&est, drift_ppm), 0);
	for (i = 0; i < 2000; i++) {
		int64_t d1 = rnd_range(20 * US, 500 * US), d2 = rnd_range(20 * US, 500 * US);

		/* Now and then a burst makes a sample useless. */
		if (rnd() % 10 == 0)
			d1 += rnd_range(10 * MS, 100 * MS);
		ck_assert_int_eq(exchange(&est, &m, t1, d1, rnd_range(1 * US, 50 * US), d2, &t4), 0);
		t1 += rnd_range(100 * MS, 2 * SEC);
		for (k = 0; k < 4; k++) {
			now = k == 0 || t1 <= t4 ? t4 : rnd_range(t4, t1);
			estimate(&est, now, &off, &bound);
			(*checks)++;
			if (abs64(off - sim_theta(&m, now)) > bound)
				(*violations)++;
			/* The intersection of every sample's interval holds the
			 * truth too, and is never wider than the best one. */
			int64_t lo, hi;
			int rc = cks_estimate_range(&est, now, &lo, &hi);
			ck_assert(rc == 0 || rc == -ERANGE);
			ck_assert_int_le(hi - lo, 2 * bound);
			if (rc != 0 || sim_theta(&m, now) < lo || sim_theta(&m, now) > hi)
				(*violations)++;
		}
	}
}

START_TEST(test_drift_within_widened_bound)
{
	int64_t violations = 0, checks = 0;

	/* 50 ppm either way against the default 100 ppm bound. */
	run_drift(50000, CKS_DEFAULT_DRIFT_PPM, &violations, &checks);
	run_drift(-50000, CKS_DEFAULT_DRIFT_PPM, &violations, &checks);
	/* Right at the bound. */
	run_drift(100000, CKS_DEFAULT_DRIFT_PPM, &violations, &checks);
	ck_assert_msg(violations == 0, "seed %" PRIu64 ": %" PRId64 " of %" PRId64
		      " estimates outside their bound", seed, violations, checks);

	/* The same drift without widening must break the bound, or the test
	 * above proves nothing. */
	violations = checks = 0;
	run_drift(50000, 0.0, &violations, &checks);
	ck_assert_msg(violations > 0, "seed %" PRIu64 ": drift never showed", seed);
}
END_TEST

/* Two exchanges delayed on opposite sides cut opposite ends: the
 * intersection is narrower than either, and still holds the truth. */
START_TEST(test_range_intersects_samples)
{
	struct sim m = { .theta0_ns = 5 * MS };
	struct cks_estimator est;
	int64_t lo, hi, off, bound, t4;

	cks_reset(&est);
	ck_assert_int_eq(cks_estimate_range(&est, BASE_NS, &lo, &hi), -ENODATA);
	ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
	/* 30 us out, 10 back: offset +10 us, bound 20 us: [5 ms - 10, 5 ms + 30]. */
	ck_assert_int_eq(exchange(&est, &m, BASE_NS, 30 * US, 0, 10 * US, &t4), 0);
	/* 8 out, 32 back: offset -12 us, bound 20 us: [5 ms - 32, 5 ms + 8]. */
	ck_assert_int_eq(exchange(&est, &m, BASE_NS + MS, 8 * US, 0, 32 * US, &t4), 0);
	estimate(&est, t4, &off, &bound);
	ck_assert_int_eq(bound, 20 * US);
	ck_assert_int_eq(cks_estimate_range(&est, t4, &lo, &hi), 0);
	ck_assert_int_eq(lo, 5 * MS - 10 * US);
	ck_assert_int_eq(hi, 5 * MS + 8 * US);
	/* A sample that cannot be true (its interval misses the others'):
	 * -ERANGE and the best sample's interval. */
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS + 2 * MS, BASE_NS + 2 * MS + 9 * MS,
					BASE_NS + 2 * MS + 9 * MS, BASE_NS + 2 * MS + 2 * US), 0);
	ck_assert_int_eq(cks_estimate_range(&est, t4, &lo, &hi), -ERANGE);
	estimate(&est, t4, &off, &bound);
	ck_assert_int_eq(lo, off - bound);
	ck_assert_int_eq(hi, off + bound);
}
END_TEST

START_TEST(test_ageing)
{
	struct sim m = { .theta0_ns = 5 * MS };
	struct cks_estimator est;
	int64_t off, bound, b1, t4_old, t4_new;

	/* Bound grows by drift * age. */
	cks_reset(&est);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS, 50 * US, 0, 50 * US, &t4_old), 0);
	estimate(&est, BASE_NS, &off, &b1);
	ck_assert_int_eq(b1, 50 * US);
	estimate(&est, BASE_NS + SEC, &off, &bound);
	ck_assert_int_eq(bound, 50 * US + 100 * US);
	estimate(&est, BASE_NS + 60 * SEC, &off, &bound);
	ck_assert_int_eq(bound, 50 * US + 6 * MS);
	/* A builder clock stepped back still ages the sample. */
	estimate(&est, BASE_NS - SEC, &off, &bound);
	ck_assert_int_eq(bound, 50 * US + 100 * US);

	/* The old sample (bound 50 us) against a fresh worse one (delay 1 ms,
	 * asymmetric so its offset differs): after 10 s the old one is worth
	 * 1.05 ms, the fresh one 0.5 ms. */
	ck_assert_int_eq(exchange(&est, &m, BASE_NS + 10 * SEC, 900 * US, 0, 100 * US, &t4_new), 0);
	estimate(&est, t4_new, &off, &bound);
	ck_assert_int_eq(off, 5 * MS + 400 * US);
	ck_assert_int_eq(bound, 500 * US + 100);
	ck_assert_int_le(abs64(off - 5 * MS), bound);

	/* Two seconds on, the old one still wins: 250 us against 500 us. */
	cks_reset(&est);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS, 50 * US, 0, 50 * US, &t4_old), 0);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS + 2 * SEC, 900 * US, 0, 100 * US, &t4_new), 0);
	estimate(&est, t4_new, &off, &bound);
	ck_assert_int_eq(off, 5 * MS);
	ck_assert_int_eq(bound, 50 * US + (2 * SEC + 1 * MS) / 10000);

	/* Equal bounds: the newer sample wins. */
	cks_reset(&est);
	ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS, 100 * US, 0, 100 * US, NULL), 0);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS + SEC, 200 * US, 0, 0, &t4_new), 0);
	estimate(&est, t4_new, &off, &bound);
	ck_assert_int_eq(bound, 100 * US);
	ck_assert_int_eq(off, 5 * MS + 100 * US);
}
END_TEST

START_TEST(test_window_eviction)
{
	struct sim m = { .theta0_ns = -7 * MS };
	struct cks_estimator est;
	int64_t off, bound, t4;
	int i;

	cks_reset(&est);
	/* Without drift the best sample would win forever; only eviction
	 * can retire it. */
	ck_assert_int_eq(cks_set_drift_ppm(&est, 0.0), 0);
	ck_assert_int_eq(exchange(&est, &m, BASE_NS, 10 * US, 0, 10 * US, &t4), 0);
	for (i = 1; i < CKS_WINDOW; i++)
		ck_assert_int_eq(exchange(&est, &m, BASE_NS + i * SEC, 1 * MS, 0, i * US, &t4), 0);
	estimate(&est, t4, &off, &bound);
	ck_assert_int_eq(off, -7 * MS);
	ck_assert_int_eq(bound, 10 * US);
	ck_assert_uint_eq(est.count, CKS_WINDOW);
	ck_assert_uint_eq(est.evicted, 0);

	ck_assert_int_eq(exchange(&est, &m, BASE_NS + CKS_WINDOW * SEC, 1 * MS, 0, 2 * MS, &t4), 0);
	estimate(&est, t4, &off, &bound);
	/* The best left is the second sample: 1 ms out, 1 us back. */
	ck_assert_int_eq(bound, (1 * MS + 1 * US + 1) / 2);
	ck_assert_int_eq(off, -7 * MS + (1 * MS - 1 * US) / 2);
	ck_assert_uint_eq(est.count, CKS_WINDOW);
	ck_assert_uint_eq(est.evicted, 1);
	ck_assert_uint_eq(est.accepted, CKS_WINDOW + 1);

	/* A long run keeps exactly the last CKS_WINDOW. */
	for (i = 0; i < 1000; i++)
		ck_assert_int_eq(exchange(&est, &m, BASE_NS + (100 + i) * SEC, 1 * MS, 0,
					  (1000 - i) * US, &t4), 0);
	estimate(&est, t4, &off, &bound);
	ck_assert_int_eq(bound, (1 * MS + 1 * US + 1) / 2);
	ck_assert_uint_eq(est.evicted, 1 + 1000);
}
END_TEST

START_TEST(test_rejects_impossible)
{
	struct cks_estimator est;
	int64_t off = 42, bound = 42;

	cks_reset(&est);
	ck_assert_int_eq(cks_estimate(&est, BASE_NS, &off, &bound), -ENODATA);
	ck_assert_int_eq(off, 42);

	/* Received before it was sent. */
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS, BASE_NS + 10, BASE_NS + 20, BASE_NS - 1),
			 -EINVAL);
	/* The peer answered before it received. */
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS, BASE_NS + 20, BASE_NS + 10, BASE_NS + 30),
			 -EINVAL);
	/* The peer held it longer than the round trip: negative delay. */
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS, BASE_NS + 5 * MS, BASE_NS + 7 * MS,
					BASE_NS + 1 * MS), -EINVAL);
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS, BASE_NS, BASE_NS + 1001, BASE_NS + 1000),
			 -EINVAL);
	/* Garbage timestamps whose differences do not fit. */
	ck_assert_int_eq(cks_add_sample(&est, INT64_MIN, 0, 0, INT64_MAX), -ERANGE);
	ck_assert_int_eq(cks_add_sample(&est, -10, INT64_MAX, INT64_MAX, 10), -ERANGE);
	ck_assert_int_eq(cks_add_sample(&est, 10, INT64_MIN, INT64_MIN, 20), -ERANGE);

	ck_assert_uint_eq(est.rejected, 7);
	ck_assert_uint_eq(est.accepted, 0);
	ck_assert_uint_eq(est.count, 0);
	ck_assert_int_eq(cks_estimate(&est, BASE_NS, &off, &bound), -ENODATA);

	/* Zero delay is possible (coarse clocks) and exact. */
	ck_assert_int_eq(cks_add_sample(&est, BASE_NS, BASE_NS + 3, BASE_NS + 3, BASE_NS), 0);
	estimate(&est, BASE_NS, &off, &bound);
	ck_assert_int_eq(off, 3);
	ck_assert_int_eq(bound, 0);
}
END_TEST

START_TEST(test_extreme_values)
{
	struct cks_estimator est;
	int64_t off, bound;

	/* Offsets near the int64 limits: (t2-t1)+(t3-t4) would overflow if
	 * formed directly. */
	cks_reset(&est);
	ck_assert_int_eq(cks_add_sample(&est, 0, INT64_MAX - 10, INT64_MAX - 5, 100), 0);
	estimate(&est, 100, &off, &bound);
	ck_assert_int_eq(off, INT64_MAX - 58);
	/* ceil(95 / 2), and 100 ppm of 100 ns rounds up to 1. */
	ck_assert_int_eq(bound, 48 + 1);

	/* Exact half-sum MIN + 62.5. */
	cks_reset(&est);
	ck_assert_int_eq(cks_add_sample(&est, -100, INT64_MIN + 10, INT64_MIN + 15, 0), 0);
	estimate(&est, 0, &off, &bound);
	ck_assert(off == INT64_MIN + 62 || off == INT64_MIN + 63);

	/* Odd half-sums in every sign combination stay within half a ns.
	 * out = t2 - t1 = a, back = t3 - t4 = b; delay = a - b must be >= 0. */
	for (int64_t a = -5; a <= 5; a++) {
		for (int64_t b = -5; b <= a; b++) {
			cks_reset(&est);
			ck_assert_int_eq(cks_add_sample(&est, 0, a, a + 10, a + 10 - b), 0);
			estimate(&est, 0, &off, &bound);
			ck_assert_msg(fabs((double)off - (double)(a + b) / 2.0) <= 0.5,
				      "a %" PRId64 " b %" PRId64 " offset %" PRId64, a, b, off);
		}
	}

	/* Age and drift at their limits saturate instead of wrapping. */
	cks_reset(&est);
	ck_assert_int_eq(cks_set_drift_ppm(&est, CKS_MAX_DRIFT_PPM), 0);
	ck_assert_int_eq(cks_add_sample(&est, INT64_MIN + 1, INT64_MIN + 1, INT64_MIN + 1,
					INT64_MIN + 1), 0);
	estimate(&est, INT64_MAX, &off, &bound);
	ck_assert_int_eq(bound, INT64_MAX);
}
END_TEST

START_TEST(test_set_drift)
{
	struct cks_estimator est;

	cks_reset(&est);
	ck_assert(est.drift_ppm == CKS_DEFAULT_DRIFT_PPM);
	ck_assert_int_eq(cks_set_drift_ppm(&est, NAN), -EINVAL);
	ck_assert_int_eq(cks_set_drift_ppm(&est, -0.1), -EINVAL);
	ck_assert_int_eq(cks_set_drift_ppm(&est, INFINITY), -EINVAL);
	ck_assert_int_eq(cks_set_drift_ppm(&est, CKS_MAX_DRIFT_PPM * 2), -EINVAL);
	ck_assert(est.drift_ppm == CKS_DEFAULT_DRIFT_PPM);
	ck_assert_int_eq(cks_set_drift_ppm(&est, 0.5), 0);
	ck_assert(est.drift_ppm == 0.5);
}
END_TEST

START_TEST(test_correct)
{
	int i;

	ck_assert_int_eq(cks_correct(BASE_NS + 5 * MS, 5 * MS), BASE_NS);
	ck_assert_int_eq(cks_correct(BASE_NS - 5 * MS, -5 * MS), BASE_NS);
	ck_assert_int_eq(cks_correct(INT64_MIN + 5, 10), INT64_MIN);
	ck_assert_int_eq(cks_correct(INT64_MAX - 5, -10), INT64_MAX);
	ck_assert_int_eq(cks_correct(0, INT64_MIN), INT64_MAX);

	/* A peer event stamped on the peer clock lands on the builder's
	 * within the estimate's bound. */
	for (i = 0; i < 1000; i++) {
		struct sim m = { .theta0_ns = rnd_range(-SEC, SEC) };
		struct cks_estimator est;
		int64_t off, bound, t4, event = BASE_NS + rnd_range(0, SEC);

		cks_reset(&est);
		ck_assert_int_eq(exchange(&est, &m, BASE_NS, rnd_range(0, MS), 0,
					  rnd_range(0, MS), &t4), 0);
		estimate(&est, t4, &off, &bound);
		ck_assert_int_le(abs64(cks_correct(event + m.theta0_ns, off) - event), bound);
	}
}
END_TEST

/* ---- against chrony ---- */

START_TEST(test_consistent)
{
	ck_assert_int_eq(cks_check_consistent(5 * MS, 100 * US, 3 * US, 4 * US), CKS_INCONSISTENT);
	ck_assert_int_eq(cks_check_consistent(5 * US, 1 * US, 2 * US, 2 * US), CKS_CONSISTENT);
	ck_assert_int_eq(cks_check_consistent(-5 * US, 1 * US, 2 * US, 2 * US), CKS_CONSISTENT);
	ck_assert_int_eq(cks_check_consistent(-5 * US - 1, 1 * US, 2 * US, 2 * US),
			 CKS_INCONSISTENT);
	ck_assert_int_eq(cks_check_consistent(0, 0, 0, 0), CKS_CONSISTENT);
	ck_assert_int_eq(cks_check_consistent(1, 0, 0, 0), CKS_INCONSISTENT);
	ck_assert_int_eq(cks_check_consistent(0, 0, CKS_NO_BOUND, 0), CKS_UNKNOWN);
	ck_assert_int_eq(cks_check_consistent(0, 0, 0, CKS_NO_BOUND), CKS_UNKNOWN);
	ck_assert_int_eq(cks_check_consistent(0, -1, 0, 0), CKS_UNKNOWN);
	ck_assert_int_eq(cks_check_consistent(INT64_MIN, INT64_MAX, INT64_MAX, INT64_MAX),
			 CKS_CONSISTENT);
	ck_assert_int_eq(cks_check_consistent(INT64_MIN, INT64_MAX, 0, 0), CKS_INCONSISTENT);
	ck_assert_int_eq(cks_check_consistent(INT64_MIN, INT64_MAX, 1, 0), CKS_CONSISTENT);
}
END_TEST

START_TEST(test_drift_from_chrony)
{
	struct cks_chrony client, local, unsync, odd;

	ck_assert(cks_chrony_parse(&client, line_client));
	ck_assert(cks_chrony_parse(&local, line_local));
	ck_assert(cks_chrony_parse(&unsync, line_unsync));

	/* skew 0.090 + residual 0.001 + 552 ns slewed over 0.1 s (5.52 ppm);
	 * the reference contributes nothing. */
	ck_assert_double_eq_tol(cks_drift_ppm_from_chrony(&client, &local), 5.611, 1e-9);
	ck_assert_double_eq_tol(cks_drift_ppm_from_chrony(&local, &client), 5.611, 1e-9);
	ck_assert_double_eq_tol(cks_drift_ppm_from_chrony(&client, &client), 11.222, 1e-9);
	ck_assert(cks_drift_ppm_from_chrony(&local, &local) == 0.0);

	ck_assert(cks_drift_ppm_from_chrony(&client, &unsync) == CKS_DEFAULT_DRIFT_PPM);
	ck_assert(cks_drift_ppm_from_chrony(NULL, &client) == CKS_DEFAULT_DRIFT_PPM);
	ck_assert(cks_drift_ppm_from_chrony(&client, NULL) == CKS_DEFAULT_DRIFT_PPM);

	/* A pending correction with no update interval to spread it over. */
	odd = client;
	odd.update_interval_s = 0.0;
	ck_assert(cks_drift_ppm_from_chrony(&odd, &local) == CKS_DEFAULT_DRIFT_PPM);
	/* chrony claiming more than the estimator accepts: the maximum. */
	odd = client;
	odd.skew_ppm = 5e6;
	ck_assert(cks_drift_ppm_from_chrony(&odd, &local) == CKS_MAX_DRIFT_PPM);
}
END_TEST

static Suite *clockoffset_suite(void)
{
	Suite *s = suite_create("clockoffset");
	TCase *tc;

	tc = tcase_create("estimator");
	tcase_add_checked_fixture(tc, reseed, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_symmetric_recovers_exactly);
	tcase_add_test(tc, test_asymmetric_within_half_delay);
	tcase_add_test(tc, test_outliers_ignored);
	tcase_add_test(tc, test_drift_within_widened_bound);
	tcase_add_test(tc, test_range_intersects_samples);
	tcase_add_test(tc, test_ageing);
	tcase_add_test(tc, test_window_eviction);
	tcase_add_test(tc, test_rejects_impossible);
	tcase_add_test(tc, test_extreme_values);
	tcase_add_test(tc, test_set_drift);
	tcase_add_test(tc, test_correct);
	suite_add_tcase(s, tc);

	tc = tcase_create("against chrony");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_consistent);
	tcase_add_test(tc, test_drift_from_chrony);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	SRunner *sr;
	int failed;

	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	fprintf(stderr, "test_clockoffset: seed %" PRIu64 " (ES_TEST_SEED=%" PRIu64
		" repeats this run)\n", seed, seed);

	sr = srunner_create(clockoffset_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
