/* Unit tests of common/clocksync: the in-band offset estimator against a
 * simulated peer clock with a known offset and drift, chrony tracking lines
 * as chronyc 4.3 prints them, and running a stand-in for chronyc.
 * Randomised tests draw from one seed, printed at start; ES_TEST_SEED=N
 * repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "core/clockoffset.h"
#include "wire/control.h"

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

/* ---- chrony ---- */

/* Captured from chronyc 4.3 on this machine: a client synchronised to a
 * chronyd with "local stratum 8" over loopback, that server itself, and a
 * client whose server never answered. */
static const char line_client[] =
	"7F000001,127.0.0.1,9,1795980992.461039091,-0.000000552,0.000000006,0.000000047,"
	"-0.003,0.001,0.090,0.000004005,0.000001060,0.1,Normal\n";
static const char line_local[] =
	"7F7F0101,,8,1795980982.548867548,0.000000000,0.000000000,0.000000000,0.000,0.000,"
	"0.000,0.000000000,0.000000000,0.0,Normal\n";
static const char line_unsync[] =
	"00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,"
	"1.000000000,1.000000000,0.0,Not synchronised\n";
/* The chronyc(1) tracking example in CSV form (positive System time is
 * "slow", negative Frequency is "slow"). */
static const char line_manpage[] =
	"CB00710F,203.0.113.15,3,1485510557.000000000,0.000006523,-0.000006747,0.000035822,"
	"-3.225,-0.000,0.129,0.013639022,0.001100737,64.2,Normal";

START_TEST(test_chrony_parse_real)
{
	struct cks_chrony c;

	ck_assert(cks_chrony_parse(&c, line_client));
	ck_assert(c.available);
	ck_assert(c.synchronised);
	ck_assert_str_eq(c.reason, "");
	ck_assert_uint_eq(c.ref_id, 0x7F000001);
	ck_assert_str_eq(c.reference, "127.0.0.1");
	ck_assert_int_eq(c.stratum, 9);
	ck_assert_double_eq_tol(c.ref_time_s, 1795980992.461039091, 1e-6);
	ck_assert_double_eq_tol(c.offset_s, -552e-9, 1e-15);
	ck_assert_double_eq_tol(c.last_offset_s, 6e-9, 1e-15);
	ck_assert_double_eq_tol(c.rms_offset_s, 47e-9, 1e-15);
	ck_assert_double_eq_tol(c.frequency_ppm, -0.003, 1e-12);
	ck_assert_double_eq_tol(c.residual_freq_ppm, 0.001, 1e-12);
	ck_assert_double_eq_tol(c.skew_ppm, 0.090, 1e-12);
	ck_assert_double_eq_tol(c.root_delay_s, 4005e-9, 1e-15);
	ck_assert_double_eq_tol(c.root_dispersion_s, 1060e-9, 1e-15);
	ck_assert_double_eq_tol(c.update_interval_s, 0.1, 1e-12);
	ck_assert_str_eq(c.leap, "Normal");
	/* 552 + 1060 + 4005/2 rounded up. */
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 552 + 1060 + 2003);

	/* The local reference: empty name, its own clock, bound 0. */
	ck_assert(cks_chrony_parse(&c, line_local));
	ck_assert(c.available && c.synchronised);
	ck_assert_uint_eq(c.ref_id, 0x7F7F0101);
	ck_assert_str_eq(c.reference, "");
	ck_assert_int_eq(c.stratum, 8);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 0);

	/* Unsynchronised: parsed, but its 1 s placeholders are no bound. */
	ck_assert(cks_chrony_parse(&c, line_unsync));
	ck_assert(c.available);
	ck_assert(!c.synchronised);
	ck_assert_str_eq(c.leap, "Not synchronised");
	ck_assert_double_eq(c.root_delay_s, 1.0);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);

	ck_assert(cks_chrony_parse(&c, line_manpage));
	ck_assert_uint_eq(c.ref_id, 0xCB00710F);
	ck_assert_double_eq_tol(c.offset_s, 6523e-9, 1e-15);
	ck_assert_double_eq_tol(c.frequency_ppm, -3.225, 1e-12);
	ck_assert(c.residual_freq_ppm == 0.0);
	ck_assert_double_eq_tol(c.update_interval_s, 64.2, 1e-12);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 6523 + 1100737 + 6819511);
}
END_TEST

START_TEST(test_chrony_parse_variants)
{
	struct cks_chrony c;

	/* CRLF, IPv6 and refclock names, leap announcements, lower-case hex. */
	ck_assert(cks_chrony_parse(&c, "0A000001,2001:db8::1,2,1.5,+0.000000100,0.0,0.0,1.0,"
				   "0.0,0.5,0.000000002,0.000000003,16.0,Insert second\r\n"));
	ck_assert_str_eq(c.reference, "2001:db8::1");
	ck_assert_str_eq(c.leap, "Insert second");
	ck_assert(c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 100 + 3 + 1);

	ck_assert(cks_chrony_parse(&c, "50505300,PPS,1,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
				   "1.0,Delete second"));
	ck_assert_uint_eq(c.ref_id, 0x50505300);
	ck_assert_str_eq(c.reference, "PPS");
	ck_assert(c.synchronised);

	ck_assert(cks_chrony_parse(&c, "deadbeef,x,16,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
				   "Invalid"));
	ck_assert_uint_eq(c.ref_id, 0xDEADBEEF);
	ck_assert(c.available && !c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
}
END_TEST

START_TEST(test_chrony_parse_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"506 Cannot talk to daemon",
		"Reference ID    : 7F000001 (127.0.0.1)",
		/* 13 and 15 fields */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal,x",
		/* reference ID */
		"7F00001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F0000011,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7G000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* stratum */
		"7F000001,127.0.0.1,,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,17,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,-1,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* numbers: text, exponent, nan, empty, bare dot, spaces */
		"7F000001,127.0.0.1,9,1.0,abc,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,1e-6,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,nan,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,.5,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,1.,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0, 0.1,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1 ,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* negative where chrony never prints one: delay, dispersion,
		 * skew, RMS */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,-0.001,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,-0.001,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,-0.1,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,-0.1,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* leap status */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal ",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,",
		/* a name with a space, or too long */
		"7F000001,foo bar,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,9,1.0,"
		"0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* two lines glued */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal\n"
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* 19 integer digits */
		"7F000001,127.0.0.1,9,1234567890123456789.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,"
		"Normal",
	};
	struct cks_chrony c, zero;
	char longline[1024];

	memset(&zero, 0, sizeof(zero));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* The one line above that is well-formed is a control. */
		bool good = strcmp(bad[i], "7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
					   "0.0,0.1,Normal") == 0;

		memset(&c, 0xA5, sizeof(c));
		ck_assert_msg(cks_chrony_parse(&c, bad[i]) == good, "line %zu: %s", i, bad[i]);
		if (good)
			continue;
		ck_assert(!c.available && !c.synchronised);
		ck_assert_msg(c.reason[0] != '\0', "line %zu has no reason", i);
		/* Never a half-filled struct: everything but the reason is 0. */
		memcpy(zero.reason, c.reason, sizeof(zero.reason));
		ck_assert_msg(memcmp(&c, &zero, sizeof(c)) == 0, "line %zu left data behind", i);
		ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
	}

	ck_assert(!cks_chrony_parse(&c, NULL));
	ck_assert(!c.available);

	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	ck_assert(!cks_chrony_parse(&c, longline));
	ck_assert_ptr_nonnull(strstr(c.reason, "too long"));

	ck_assert(!cks_chrony_parse(&c, "506 Cannot talk to daemon"));
	ck_assert_ptr_nonnull(strstr(c.reason, "fields"));
}
END_TEST

START_TEST(test_chrony_bound_formula)
{
	struct cks_chrony c;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
	ck_assert_int_eq(cks_chrony_bound_ns(NULL), CKS_NO_BOUND);

	c.available = c.synchronised = true;
	c.offset_s = -0.001;
	c.root_dispersion_s = 0.0002;
	c.root_delay_s = 0.0003;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 1000000 + 200000 + 150000);
	/* The sign of the offset does not matter. */
	c.offset_s = 0.001;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 1000000 + 200000 + 150000);
	/* Half a ns of root delay rounds up. */
	c.offset_s = 0.0;
	c.root_dispersion_s = 0.0;
	c.root_delay_s = 0.000000003;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 2);
	/* Absurd values saturate rather than wrap. */
	c.root_delay_s = 1e12;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), INT64_MAX);

	c.root_delay_s = 0.0003;
	c.synchronised = false;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
}
END_TEST

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

/* Every field the builder uses comes back exactly, signs included, and
 * survives the control message codec. */
START_TEST(test_chrony_group_roundtrip)
{
	const char *const lines[] = { line_client, line_local, line_unsync, line_manpage };
	static struct ctl_msg msg, back;
	struct cks_chrony c, d;
	uint8_t buf[4096];

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		ck_assert(cks_chrony_parse(&c, lines[i]));
		memset(&msg, 0, sizeof(msg));
		msg.type = CTL_STATS;
		ck_assert(cks_chrony_encode(&c, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
		size_t n = ctl_encode(&msg, buf, sizeof(buf));
		ck_assert_uint_gt(n, 0);
		ck_assert_int_eq(ctl_decode(buf, n, &back, NULL, NULL, 0), (long)n);
		ck_assert(cks_chrony_decode(&d, ctl_report_find(&back.u.report, CKS_CHRONY_GROUP)));
		ck_assert(d.available);
		ck_assert(d.synchronised == c.synchronised);
		ck_assert_int_eq(d.stratum, c.stratum);
		ck_assert_str_eq(d.leap, c.leap);
		ck_assert_uint_eq(d.ref_id, c.ref_id);
		ck_assert_double_eq_tol(d.offset_s, c.offset_s, 1e-12);
		ck_assert_double_eq_tol(d.frequency_ppm, c.frequency_ppm, 1e-9);
		ck_assert_double_eq_tol(d.residual_freq_ppm, c.residual_freq_ppm, 1e-9);
		ck_assert_double_eq_tol(d.skew_ppm, c.skew_ppm, 1e-9);
		ck_assert_double_eq_tol(d.update_interval_s, c.update_interval_s, 1e-9);
		ck_assert_int_eq(cks_chrony_bound_ns(&d), cks_chrony_bound_ns(&c));
		ck_assert(cks_drift_ppm_from_chrony(&d, &d) == cks_drift_ppm_from_chrony(&c, &c));
	}

	/* Unavailable: sent as such, read back without a bound. */
	ck_assert(!cks_chrony_parse(&c, "506 Cannot talk to daemon"));
	memset(&msg, 0, sizeof(msg));
	ck_assert(cks_chrony_encode(&c, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(cks_chrony_decode(&d, ctl_report_find(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(!d.available);
	ck_assert(d.reason[0] != '\0');
	ck_assert_int_eq(cks_chrony_bound_ns(&d), CKS_NO_BOUND);

	/* Nothing received at all. */
	ck_assert(!cks_chrony_decode(&d, NULL));
	ck_assert(!d.available);
	ck_assert(!cks_chrony_encode(&c, NULL));
}
END_TEST

/* ---- running chronyc ---- */

static int run_sh(struct cks_chrony *c, const char *script, int timeout_ms)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };

	return cks_chrony_run(c, argv, timeout_ms);
}

static bool no_children_left(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

START_TEST(test_chrony_run_fake)
{
	char script[512];
	struct cks_chrony c;

	snprintf(script, sizeof(script), "printf '%%s' '%s'", line_client);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert(c.available && c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 3615);

	/* A warning on stderr before the line does not hide it. */
	snprintf(script, sizeof(script), "echo 'Warning: something' >&2; printf '%%s' '%s'",
		 line_local);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert_int_eq(c.stratum, 8);

	ck_assert_int_eq(run_sh(&c, "echo '506 Cannot talk to daemon'; exit 1", 5000),
			 -ECONNREFUSED);
	ck_assert(!c.available);
	ck_assert_str_eq(c.reason, "506 Cannot talk to daemon");

	ck_assert_int_eq(run_sh(&c, "echo 'Could not open connection to daemon' >&2; exit 1",
				5000), -ECONNREFUSED);
	ck_assert_str_eq(c.reason, "Could not open connection to daemon");

	ck_assert_int_eq(run_sh(&c, "echo hello; exit 0", 5000), -EBADMSG);
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "hello"));

	ck_assert_int_eq(run_sh(&c, "echo '7F000001,x,9,1.0'", 5000), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(c.reason, "fields"));

	ck_assert_int_eq(run_sh(&c, "exit 3", 5000), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(c.reason, "status 3"));

	/* More output than the buffer: drained, refused, no hang. */
	ck_assert_int_eq(run_sh(&c, "head -c 200000 /dev/zero | tr '\\0' x", 5000), -EBADMSG);
	ck_assert(!c.available);

	ck_assert(no_children_left());
}
END_TEST

START_TEST(test_chrony_run_missing_and_slow)
{
	char *missing[] = { "es-no-such-chronyc", "-c", "tracking", NULL };
	char *missing_path[] = { "/nonexistent/chronyc", "-c", "tracking", NULL };
	char *slow[] = { "sleep", "10", NULL };
	struct cks_chrony c;
	struct timespec a, b;
	double took;

	ck_assert_int_eq(cks_chrony_run(&c, missing, 1000), -ENOENT);
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "not found"));
	ck_assert_int_eq(cks_chrony_run(&c, missing_path, 1000), -ENOENT);

	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(cks_chrony_run(&c, slow, 200), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "200 ms"));
	ck_assert_msg(took >= 0.19 && took < 3.0, "timeout took %.3f s", took);
	/* Killed and reaped, not left behind. */
	ck_assert(no_children_left());
}
END_TEST

START_TEST(test_chrony_run_sigchld_ignored)
{
	char script[512];
	struct cks_chrony c;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;

	/* A daemon that ignores SIGCHLD has its children reaped by the
	 * kernel; the output must still count. */
	sigemptyset(&ign.sa_mask);
	ck_assert_int_eq(sigaction(SIGCHLD, &ign, &old), 0);
	snprintf(script, sizeof(script), "printf '%%s' '%s'", line_client);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert(c.available);
	ck_assert_int_eq(sigaction(SIGCHLD, &old, NULL), 0);
}
END_TEST

START_TEST(test_chrony_read_real)
{
	struct cks_chrony c;
	int ret;

	/* No chronyd listens there: chronyc says so (or is not installed). */
	ret = cks_chrony_read(&c, "/nonexistent-es-dir/chronyd.sock");
	ck_assert_msg(ret == -ECONNREFUSED || ret == -ENOENT, "ret %d: %s", ret, c.reason);
	ck_assert(!c.available);
	ck_assert(c.reason[0] != '\0');
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);

	/* The default socket: whatever this machine has, the result is
	 * either a parsed line or a reason, never a guess. */
	ret = cks_chrony_read(&c, NULL);
	fprintf(stderr, "test_clockoffset: chronyc -c tracking: %s\n",
		ret == 0 ? "parsed" : c.reason);
	ck_assert_int_eq(ret == 0, c.available);
	if (ret) {
		ck_assert(c.reason[0] != '\0');
		ck_assert(ret == -ENOENT || ret == -ECONNREFUSED || ret == -ETIMEDOUT ||
			  ret == -EBADMSG);
	}
	ck_assert(no_children_left());
}
END_TEST

static Suite *clocksync_suite(void)
{
	Suite *s = suite_create("clocksync");
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

	tc = tcase_create("chrony");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_chrony_parse_real);
	tcase_add_test(tc, test_chrony_parse_variants);
	tcase_add_test(tc, test_chrony_parse_malformed);
	tcase_add_test(tc, test_chrony_bound_formula);
	tcase_add_test(tc, test_consistent);
	tcase_add_test(tc, test_drift_from_chrony);
	tcase_add_test(tc, test_chrony_group_roundtrip);
	tcase_add_test(tc, test_chrony_run_fake);
	tcase_add_test(tc, test_chrony_run_missing_and_slow);
	tcase_add_test(tc, test_chrony_run_sigchld_ignored);
	tcase_add_test(tc, test_chrony_read_real);
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

	sr = srunner_create(clocksync_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
