/* Unit tests of common/core/hist.c: bucket edges, exact small values, quantiles
 * against a sorted reference, exact max and min, merge. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/hist.h"

static uint64_t test_seed;

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static struct hist h;

static void hist_setup(void)
{
	hist_reset(&h);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* What hist_quantile must answer, from the sorted values themselves. */
static uint64_t ref_quantile(const uint64_t *sorted, size_t n, double q)
{
	double want = ceil(q * (double)n);
	size_t rank = want < 1.0 ? 1 : want > (double)n ? n : (size_t)want;
	uint64_t upper = hist_bucket_upper(hist_bucket_of(sorted[rank - 1]));
	return upper < sorted[n - 1] ? upper : sorted[n - 1];
}

START_TEST(test_bucket_edges)
{
	ck_assert_uint_eq(hist_bucket_lower(0), 0);
	ck_assert_uint_eq(hist_bucket_upper(HIST_BUCKETS - 1), UINT64_MAX);
	ck_assert_uint_eq(hist_bucket_of(UINT64_MAX), HIST_BUCKETS - 1);
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		uint64_t lo = hist_bucket_lower(i), hi = hist_bucket_upper(i);
		ck_assert_uint_le(lo, hi);
		ck_assert_uint_eq(hist_bucket_of(lo), i);
		ck_assert_uint_eq(hist_bucket_of(hi), i);
		if (i + 1 < HIST_BUCKETS)
			ck_assert_uint_eq(hist_bucket_lower(i + 1), hi + 1);
		/* A bucket is at most 1/16 of its lower edge wide. */
		if (i >= 16)
			ck_assert_uint_le((hi - lo + 1) * 16, lo);
	}
	/* Hand-checked edges around the first split powers. */
	ck_assert_uint_eq(hist_bucket_of(15), 15);
	ck_assert_uint_eq(hist_bucket_of(16), 16);
	ck_assert_uint_eq(hist_bucket_of(31), 31);
	ck_assert_uint_eq(hist_bucket_of(32), 32);
	ck_assert_uint_eq(hist_bucket_of(33), 32);
	ck_assert_uint_eq(hist_bucket_of(34), 33);
	ck_assert_uint_eq(hist_bucket_of(63), 47);
	ck_assert_uint_eq(hist_bucket_of(64), 48);
	ck_assert_uint_eq(hist_bucket_lower(48), 64);
	ck_assert_uint_eq(hist_bucket_upper(48), 67);
	ck_assert_uint_eq(hist_bucket_lower(hist_bucket_of(1000)), 992);
	ck_assert_uint_eq(hist_bucket_upper(hist_bucket_of(1000)), 1023);
}
END_TEST

START_TEST(test_empty)
{
	ck_assert_uint_eq(h.samples, 0);
	ck_assert_uint_eq(h.min, UINT64_MAX);
	ck_assert_uint_eq(h.max, 0);
	ck_assert_uint_eq(hist_quantile(&h, 0.5), 0);
	ck_assert_uint_eq(hist_quantile(&h, 1.0), 0);
}
END_TEST

START_TEST(test_exact_small)
{
	for (uint64_t v = 0; v < 16; v++)
		hist_add(&h, v);
	ck_assert_uint_eq(h.samples, 16);
	ck_assert_uint_eq(h.min, 0);
	ck_assert_uint_eq(h.max, 15);
	ck_assert_uint_eq(h.sum, 120);
	for (uint64_t v = 0; v < 16; v++) {
		ck_assert_uint_eq(h.counts[v], 1);
		/* ceil(q * 16) = v + 1 picks exactly value v. */
		ck_assert_uint_eq(hist_quantile(&h, (double)(v + 1) / 16.0), v);
	}
	ck_assert_uint_eq(hist_quantile(&h, 0.5), 7);
	ck_assert_uint_eq(hist_quantile(&h, 0.01), 0);
}
END_TEST

START_TEST(test_quantiles)
{
	for (uint64_t v = 1; v <= 1000; v++)
		hist_add(&h, v);
	/* 500 is in [496, 511], 990 in [960, 991], 1000 in [992, 1023]. */
	ck_assert_uint_eq(hist_quantile(&h, 0.5), 511);
	ck_assert_uint_eq(hist_quantile(&h, 0.99), 991);
	ck_assert_uint_eq(hist_quantile(&h, 1.0), 1000);
	ck_assert_uint_eq(hist_quantile(&h, 0.001), 1);
	/* Out of range q is clamped. */
	ck_assert_uint_eq(hist_quantile(&h, 0.0), 1);
	ck_assert_uint_eq(hist_quantile(&h, 2.0), 1000);
}
END_TEST

START_TEST(test_max_exact)
{
	hist_add(&h, 1000);
	ck_assert_uint_eq(hist_quantile(&h, 0.5), 1000);
	ck_assert_uint_eq(hist_quantile(&h, 1.0), 1000);
	hist_add(&h, 123456789);
	ck_assert_uint_eq(h.max, 123456789);
	ck_assert_uint_eq(h.min, 1000);
	ck_assert_uint_eq(hist_quantile(&h, 0.5), 1023);
	ck_assert_uint_eq(hist_quantile(&h, 1.0), 123456789);
	hist_add(&h, UINT64_MAX);
	ck_assert_uint_eq(hist_quantile(&h, 1.0), UINT64_MAX);
	ck_assert_uint_eq(h.counts[HIST_BUCKETS - 1], 1);
}
END_TEST

START_TEST(test_random_against_sorted)
{
	uint64_t rng = test_seed;
	enum { N = 20000 };
	uint64_t *vals = malloc(N * sizeof(*vals));
	ck_assert_ptr_nonnull(vals);
	uint64_t sum = 0;
	for (size_t i = 0; i < N; i++) {
		/* Spread over many powers of two, as latencies are. */
		unsigned shift = (unsigned)(rng_next(&rng) % 64);
		vals[i] = rng_next(&rng) >> shift;
		sum += vals[i];
		hist_add(&h, vals[i]);
	}
	qsort(vals, N, sizeof(*vals), cmp_u64);
	ck_assert_uint_eq(h.samples, N);
	ck_assert_uint_eq(h.sum, sum);
	ck_assert_uint_eq(h.min, vals[0]);
	ck_assert_uint_eq(h.max, vals[N - 1]);
	static const double qs[] = { 0.0001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0 };
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t got = hist_quantile(&h, qs[i]);
		uint64_t want = ref_quantile(vals, N, qs[i]);
		ck_assert_msg(got == want, "q %g: got %" PRIu64 " want %" PRIu64 " (seed %" PRIu64 ")",
			      qs[i], got, want, test_seed);
		/* Never below the true quantile, at most 1/16 above it. */
		double want_rank = ceil(qs[i] * N);
		uint64_t exact = vals[(size_t)want_rank - 1];
		ck_assert_uint_ge(got, exact);
		ck_assert_uint_le(got - exact, exact / 16);
	}
	free(vals);
}
END_TEST

START_TEST(test_merge)
{
	uint64_t rng = test_seed ^ 0x5555;
	struct hist a, b, all;
	hist_reset(&a);
	hist_reset(&b);
	hist_reset(&all);
	for (int i = 0; i < 5000; i++) {
		uint64_t v = rng_next(&rng) >> (rng_next(&rng) % 60);
		hist_add(i % 3 ? &a : &b, v);
		hist_add(&all, v);
	}
	struct hist empty;
	hist_reset(&empty);
	hist_merge(&a, &empty);
	hist_merge(&a, &b);
	ck_assert_uint_eq(a.samples, all.samples);
	ck_assert_uint_eq(a.sum, all.sum);
	ck_assert_uint_eq(a.min, all.min);
	ck_assert_uint_eq(a.max, all.max);
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		ck_assert_uint_eq(a.counts[i], all.counts[i]);
	ck_assert_uint_eq(hist_quantile(&a, 0.5), hist_quantile(&all, 0.5));
	ck_assert_uint_eq(hist_quantile(&a, 0.99), hist_quantile(&all, 0.99));

	/* Merging into an empty histogram copies, min included. */
	hist_merge(&empty, &all);
	ck_assert_uint_eq(empty.min, all.min);
	ck_assert_uint_eq(empty.max, all.max);
	ck_assert_uint_eq(empty.samples, all.samples);
}
END_TEST

static Suite *hist_suite(void)
{
	Suite *s = suite_create("hist");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, hist_setup, NULL);
	tcase_add_test(tc, test_bucket_edges);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_exact_small);
	tcase_add_test(tc, test_quantiles);
	tcase_add_test(tc, test_max_exact);
	tcase_add_test(tc, test_random_against_sorted);
	tcase_add_test(tc, test_merge);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_hist: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(hist_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
