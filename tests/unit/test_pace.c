/* Unit tests of sourced/pace.c: which positions are due when, and how long
 * a paced source sleeps: to the next position or delayed fragment, rounded
 * up to the run's grid, never a grid point late. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "sourced/pace.h"

#define MS 1000000u
#define START (5000u * MS)

START_TEST(test_unpaced_all_due)
{
	struct pace p = { .start_ns = START, .rate = 0, .events = 1000, .tick_ns = 0 };
	ck_assert_uint_eq(pace_due(&p, 0), 1000);
	ck_assert_uint_eq(pace_due(&p, START + 1), 1000);
}
END_TEST

START_TEST(test_paced_due)
{
	/* 1000 positions per second: one every millisecond, the first at start. */
	struct pace p = { .start_ns = START, .rate = 1000, .events = 100, .tick_ns = 0 };
	ck_assert_uint_eq(pace_due(&p, START), 1);
	ck_assert_uint_eq(pace_due(&p, START + MS - 1), 1);
	ck_assert_uint_eq(pace_due(&p, START + MS), 2);
	ck_assert_uint_eq(pace_due(&p, START + 10 * MS + 5), 11);
	/* A timer that fires a little early: no time elapsed, not 2^64 ns. */
	ck_assert_uint_eq(pace_due(&p, START - 3), 1);
	ck_assert_uint_eq(pace_due(&p, START + 1000 * MS), 100);
	/* A rate and an elapsed time whose product overflows 64 bits. */
	p.rate = UINT64_MAX / 2;
	p.events = UINT64_MAX;
	ck_assert_uint_gt(pace_due(&p, START + 1000 * MS), UINT64_MAX / 4);
}
END_TEST

START_TEST(test_wait_for_next_position)
{
	struct pace p = { .start_ns = START, .rate = 1000, .events = 100, .tick_ns = MS / 4 };
	/* Position 3 is due at start + 3 ms, a grid point. */
	ck_assert_uint_eq(pace_wait(&p, START + 2 * MS + MS / 10, 3, UINT64_MAX), MS - MS / 10);
	/* On a 2 ms grid it waits for start + 4 ms. */
	p.tick_ns = 2 * MS;
	ck_assert_uint_eq(pace_wait(&p, START + 2 * MS + MS / 10, 3, UINT64_MAX),
			  2 * MS - MS / 10);
	/* Without a grid, exactly the position's time. */
	p.tick_ns = 0;
	ck_assert_uint_eq(pace_wait(&p, START + 2 * MS + 7, 3, UINT64_MAX), MS - 7);
}
END_TEST

START_TEST(test_woken_after_a_grid_point)
{
	/* Woken 1 ns after grid point 1 with position 1 already due: the next
	 * grid point is 2, not 3 (sources would then wake on alternate ticks
	 * and an event's fragments leave a tick apart). */
	struct pace p = { .start_ns = START, .rate = 1000, .events = 100, .tick_ns = MS };
	ck_assert_uint_eq(pace_wait(&p, START + MS + 1, 1, UINT64_MAX), MS - 1);
	/* Exactly on a grid point with nothing due before the next. */
	ck_assert_uint_eq(pace_wait(&p, START + MS, 1, UINT64_MAX), MS);
}
END_TEST

START_TEST(test_wait_for_delayed)
{
	struct pace p = { .start_ns = START, .rate = 1000, .events = 100, .tick_ns = MS / 2 };
	/* A delayed fragment due before the next position wakes us first. */
	ck_assert_uint_eq(pace_wait(&p, START + 2 * MS, 10, START + 3 * MS), MS);
	/* All positions out: only the delayed fragment is left. */
	ck_assert_uint_eq(pace_wait(&p, START + 200 * MS, 100, START + 201 * MS + 1),
			  MS + MS / 2);
	/* Unpaced: the delayed fragment alone decides, on the grid. */
	p.rate = 0;
	ck_assert_uint_eq(pace_wait(&p, START + 2 * MS, 10, START + 2 * MS + 10), MS / 2);
}
END_TEST

static Suite *pace_suite(void)
{
	Suite *s = suite_create("pace");
	TCase *tc = tcase_create("pace");
	tcase_add_test(tc, test_unpaced_all_due);
	tcase_add_test(tc, test_paced_due);
	tcase_add_test(tc, test_wait_for_next_position);
	tcase_add_test(tc, test_woken_after_a_grid_point);
	tcase_add_test(tc, test_wait_for_delayed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pace_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
