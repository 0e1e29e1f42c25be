/* Unit tests of builderd/clock/clockfan.c: a source's clock as a builder
 * applies it, from the hub's estimates of both: off(s) − off(b), the sum
 * of the bounds grown by their drift, unknown when either is, at the
 * builder's clock. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "builderd/clock/clockfan.h"

#define NOW INT64_C(1700000000000000000)

START_TEST(test_same_clock)
{
	struct output_clock zero = { .bound_ns = 0 };
	struct ctl_clock m;
	clockfan_message(&m, 7, &zero, &zero, NOW);
	ck_assert_uint_eq(m.source, 7);
	ck_assert_int_eq(m.offset_ns, 0);
	ck_assert_int_eq(m.bound_ns, 0);
	ck_assert_uint_eq(m.at_ns, (uint64_t)NOW);
	ck_assert_uint_eq(m.drift_ppb, 0);
}
END_TEST

START_TEST(test_offsets_and_bounds_combine)
{
	/* The source 1.5 ms ahead of the hub, the builder 0.5 ms behind. */
	struct output_clock src = { .offset_ns = 1500000, .bound_ns = 20000, .at_ns = NOW };
	struct output_clock bld = { .offset_ns = -500000, .bound_ns = 5000, .at_ns = NOW };
	struct ctl_clock m;
	clockfan_message(&m, 2, &src, &bld, NOW);
	ck_assert_int_eq(m.offset_ns, 2000000);
	ck_assert_int_eq(m.bound_ns, 25000);
	ck_assert_uint_eq(m.at_ns, (uint64_t)(NOW - 500000));
	/* One second later at 10 ppm each: 10 us more on each side. */
	src.drift_ppm = bld.drift_ppm = 10.0;
	clockfan_message(&m, 2, &src, &bld, NOW + 1000000000);
	ck_assert_int_eq(m.bound_ns, 25000 + 2 * 10000);
	ck_assert_uint_eq(m.drift_ppb, 20000);
}
END_TEST

START_TEST(test_unknown_either_side)
{
	struct output_clock known = { .offset_ns = 10, .bound_ns = 100, .at_ns = NOW };
	struct output_clock unknown = { .bound_ns = OUTPUT_UNBOUNDED };
	struct ctl_clock m;
	clockfan_message(&m, 0, &known, &unknown, NOW);
	ck_assert_int_eq(m.bound_ns, CTL_CLOCK_UNBOUNDED);
	clockfan_message(&m, 0, &unknown, &known, NOW);
	ck_assert_int_eq(m.bound_ns, CTL_CLOCK_UNBOUNDED);
	ck_assert_int_eq(m.offset_ns, -10);
}
END_TEST

START_TEST(test_saturates)
{
	struct output_clock src = { .offset_ns = INT64_MAX, .bound_ns = INT64_MAX, .at_ns = 1,
				 .drift_ppm = 1e9 };
	struct output_clock bld = { .offset_ns = INT64_MIN, .bound_ns = INT64_MAX };
	struct ctl_clock m;
	clockfan_message(&m, 0, &src, &bld, NOW);
	ck_assert_int_eq(m.offset_ns, INT64_MAX);
	ck_assert_int_eq(m.bound_ns, INT64_MAX);
	ck_assert_uint_eq(m.drift_ppb, UINT32_MAX);
	/* What the codec will encode. */
	struct ctl_msg msg = { .type = CTL_CLOCK };
	msg.u.clock = m;
	static uint8_t buf[256];
	ck_assert_uint_gt(ctl_encode(&msg, buf, sizeof buf), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("clockfan");
	TCase *tc = tcase_create("clockfan");
	tcase_add_test(tc, test_same_clock);
	tcase_add_test(tc, test_offsets_and_bounds_combine);
	tcase_add_test(tc, test_unknown_either_side);
	tcase_add_test(tc, test_saturates);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
