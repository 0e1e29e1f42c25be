/* Unit tests of common/interval: intersection of the in-band and chrony
 * bounds (overlapping, nested, touching, disjoint), the midpoint and
 * half-width applied, and the limits of int64. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/interval.h"

static struct ivl iv(int64_t lo, int64_t hi)
{
	return (struct ivl){ lo, hi };
}

/* Whatever the combination, mid +- half covers the whole range. */
static void assert_covers(const struct ivl_estimate *e)
{
	ck_assert_int_le(e->offset_ns - e->bound_ns, e->range.lo);
	ck_assert_int_ge(e->offset_ns + e->bound_ns, e->range.hi);
}

START_TEST(test_overlapping)
{
	/* In band 10 +- 5 = [5, 15], chrony 0 +- 8 = [-8, 8]: [5, 8]. */
	struct ivl_estimate e = ivl_combine(true, ivl_around(10, 5), true, ivl_around(0, 8));
	ck_assert_int_eq(e.basis, IVL_BASIS_BOTH);
	ck_assert_int_eq(e.range.lo, 5);
	ck_assert_int_eq(e.range.hi, 8);
	ck_assert_int_eq(e.offset_ns, 6);
	ck_assert_int_eq(e.bound_ns, 2);
	assert_covers(&e);
	/* The same from the other side. */
	e = ivl_combine(true, ivl_around(-10, 5), true, ivl_around(0, 8));
	ck_assert_int_eq(e.basis, IVL_BASIS_BOTH);
	ck_assert_int_eq(e.range.lo, -8);
	ck_assert_int_eq(e.range.hi, -5);
	assert_covers(&e);
}
END_TEST

START_TEST(test_nested)
{
	/* A tight in-band bound inside chrony's: the in-band one is it. */
	struct ivl_estimate e = ivl_combine(true, ivl_around(-300, 1500), true,
					    ivl_around(0, 9000));
	ck_assert_int_eq(e.basis, IVL_BASIS_INBAND);
	ck_assert_int_eq(e.offset_ns, -300);
	ck_assert_int_eq(e.bound_ns, 1500);
	/* chrony's inside a wide in-band bound. */
	e = ivl_combine(true, ivl_around(2000, 80000), true, ivl_around(0, 9000));
	ck_assert_int_eq(e.basis, IVL_BASIS_CHRONY);
	ck_assert_int_eq(e.offset_ns, 0);
	ck_assert_int_eq(e.bound_ns, 9000);
	/* Equal intervals: in band (the estimate the builder measured). */
	e = ivl_combine(true, iv(-5, 5), true, iv(-5, 5));
	ck_assert_int_eq(e.basis, IVL_BASIS_INBAND);
	ck_assert_int_eq(e.bound_ns, 5);
}
END_TEST

START_TEST(test_touching)
{
	/* [0, 10] and [10, 20] share 10: a point, bound 0, consistent. */
	struct ivl_estimate e = ivl_combine(true, iv(0, 10), true, iv(10, 20));
	ck_assert_int_eq(e.basis, IVL_BASIS_BOTH);
	ck_assert_int_eq(e.offset_ns, 10);
	ck_assert_int_eq(e.bound_ns, 0);
	struct ivl out;
	ck_assert(ivl_intersect(iv(-3, -1), iv(-1, 4), &out));
	ck_assert_int_eq(out.lo, -1);
	ck_assert_int_eq(out.hi, -1);
	/* One apart is disjoint. */
	ck_assert(!ivl_intersect(iv(0, 9), iv(10, 20), &out));
}
END_TEST

START_TEST(test_disjoint)
{
	/* In band 5 ms +- 2 us against chrony's 0 +- 9 us: one is wrong, the
	 * union is used. */
	struct ivl_estimate e = ivl_combine(true, ivl_around(5000000, 2000), true,
					    ivl_around(0, 9000));
	ck_assert_int_eq(e.basis, IVL_BASIS_UNION);
	ck_assert_int_eq(e.range.lo, -9000);
	ck_assert_int_eq(e.range.hi, 5002000);
	ck_assert_int_eq(e.offset_ns, 2496500);
	ck_assert_int_eq(e.bound_ns, 2505500);
	assert_covers(&e);
	/* Either way round. */
	e = ivl_combine(true, iv(100, 200), true, iv(-50, -10));
	ck_assert_int_eq(e.basis, IVL_BASIS_UNION);
	ck_assert_int_eq(e.range.lo, -50);
	ck_assert_int_eq(e.range.hi, 200);
	assert_covers(&e);
}
END_TEST

START_TEST(test_one_or_none)
{
	struct ivl_estimate e = ivl_combine(true, ivl_around(7, 3), false, iv(0, 0));
	ck_assert_int_eq(e.basis, IVL_BASIS_INBAND);
	ck_assert_int_eq(e.offset_ns, 7);
	ck_assert_int_eq(e.bound_ns, 3);
	e = ivl_combine(false, iv(0, 0), true, ivl_around(0, 11));
	ck_assert_int_eq(e.basis, IVL_BASIS_CHRONY);
	ck_assert_int_eq(e.bound_ns, 11);
	e = ivl_combine(false, iv(0, 0), false, iv(0, 0));
	ck_assert_int_eq(e.basis, IVL_BASIS_NONE);
	ck_assert_str_eq(ivl_basis_name(IVL_BASIS_BOTH), "both");
	ck_assert_str_eq(ivl_basis_name(IVL_BASIS_INBAND), "in band");
}
END_TEST

START_TEST(test_rounding_and_limits)
{
	/* Odd width: midpoint rounded down, half rounded up, still covering. */
	struct ivl_estimate e = ivl_combine(true, iv(0, 7), false, iv(0, 0));
	ck_assert_int_eq(e.offset_ns, 3);
	ck_assert_int_eq(e.bound_ns, 4);
	e = ivl_combine(true, iv(-7, 0), false, iv(0, 0));
	ck_assert_int_eq(e.offset_ns, -4);
	ck_assert_int_eq(e.bound_ns, 4);
	assert_covers(&e);
	/* Saturation instead of wrapping. */
	struct ivl a = ivl_around(INT64_MAX - 1, 10);
	ck_assert_int_eq(a.hi, INT64_MAX);
	a = ivl_around(INT64_MIN + 1, 10);
	ck_assert_int_eq(a.lo, INT64_MIN);
	a = ivl_around(5, -3);
	ck_assert_int_eq(a.lo, 5);
	ck_assert_int_eq(a.hi, 5);
	e = ivl_combine(true, iv(INT64_MIN, INT64_MAX), false, iv(0, 0));
	ck_assert_int_eq(e.offset_ns, -1);
	ck_assert_int_eq(e.bound_ns, INT64_MAX);
	e = ivl_combine(true, iv(INT64_MIN, INT64_MIN + 2), true, iv(INT64_MAX - 2, INT64_MAX));
	ck_assert_int_eq(e.basis, IVL_BASIS_UNION);
	ck_assert_int_eq(e.bound_ns, INT64_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("interval");
	TCase *tc = tcase_create("combine");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_overlapping);
	tcase_add_test(tc, test_nested);
	tcase_add_test(tc, test_touching);
	tcase_add_test(tc, test_disjoint);
	tcase_add_test(tc, test_one_or_none);
	tcase_add_test(tc, test_rounding_and_limits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
