/* Unit tests of common/core/saturate.h: sums and differences stick at the
 * int64 and uint64 limits instead of wrapping, and the distance of any two
 * int64 is exact. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/saturate.h"

START_TEST(test_in_range)
{
	ck_assert_int_eq(sat_add_i64(2, 3), 5);
	ck_assert_int_eq(sat_add_i64(-2, -3), -5);
	ck_assert_int_eq(sat_sub_i64(2, 3), -1);
	ck_assert_int_eq(sat_sub_i64(INT64_MIN, -1), INT64_MIN + 1);
	ck_assert_uint_eq(sat_add_u64(UINT64_MAX - 1, 1), UINT64_MAX);
	ck_assert_uint_eq(abs_diff_i64(-3, 4), 7);
	ck_assert_uint_eq(abs_diff_i64(4, -3), 7);
}
END_TEST

START_TEST(test_limits)
{
	ck_assert_int_eq(sat_add_i64(INT64_MAX, 1), INT64_MAX);
	ck_assert_int_eq(sat_add_i64(INT64_MIN, -1), INT64_MIN);
	ck_assert_int_eq(sat_add_i64(INT64_MAX, INT64_MAX), INT64_MAX);
	ck_assert_int_eq(sat_sub_i64(INT64_MIN, 1), INT64_MIN);
	ck_assert_int_eq(sat_sub_i64(INT64_MAX, -1), INT64_MAX);
	/* The sign of the first operand says which end was passed. */
	ck_assert_int_eq(sat_sub_i64(-1, INT64_MAX), INT64_MIN);
	ck_assert_int_eq(sat_sub_i64(0, INT64_MIN), INT64_MAX);
	ck_assert_uint_eq(sat_add_u64(UINT64_MAX, 1), UINT64_MAX);
	ck_assert_uint_eq(sat_add_u64(1, UINT64_MAX), UINT64_MAX);
	ck_assert_uint_eq(abs_diff_i64(INT64_MIN, INT64_MAX), UINT64_MAX);
	ck_assert_uint_eq(abs_diff_i64(INT64_MAX, INT64_MIN), UINT64_MAX);
	ck_assert_uint_eq(abs_diff_i64(INT64_MIN, 0), (uint64_t)INT64_MAX + 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("saturate");
	TCase *tc = tcase_create("arithmetic");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_in_range);
	tcase_add_test(tc, test_limits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
