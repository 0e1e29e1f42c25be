/* Unit tests of builderd/data/ownroute.c, the builder role's view of the plan:
 * a plan that is not this builder's refused with its sentence, and the
 * verdict on each fragment (build at its local ID, hold past the assigned
 * end, misrouted with its owner, late once forgotten, invalid outside the
 * run) over a static plan of two builders; decided_below from local IDs. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "builderd/data/ownroute.h"

static struct ctl_routing plan(uint32_t builders, uint64_t events, uint32_t batch)
{
	return (struct ctl_routing){ .mode = CTL_ROUTING_STATIC, .builders = builders,
				     .first_event = 0, .events = events, .batch = batch,
				     .window_batches = 1024 };
}

static int assign(struct ownroute *w, uint64_t first, uint32_t count, uint32_t builder,
		  uint64_t retired, bool *mine)
{
	struct ctl_assign a = { .first = first, .count = count, .builder = builder,
				.retired_below = retired };
	char why[256];
	return ownroute_assign(w, &a, mine, why, sizeof why);
}

START_TEST(test_refuses_another_plan)
{
	char why[256];
	struct ctl_routing r = plan(3, 100, 4);
	ck_assert_ptr_null(ownroute_create(&r, 2, 0, 64, why, sizeof why));
	ck_assert_str_eq(why, "the hub's routing has 3 builders, but this is builder 0 of --builders 2");
	r = plan(2, 100, 4);
	ck_assert_ptr_null(ownroute_create(&r, 2, 2, 64, why, sizeof why));
	r = plan(2, 0, 4);
	ck_assert_ptr_null(ownroute_create(&r, 2, 1, 64, why, sizeof why));
	ck_assert(strstr(why, "cannot be set up") != NULL);
	ownroute_destroy(NULL);
}
END_TEST

START_TEST(test_verdicts)
{
	char why[256];
	struct ctl_routing r = plan(2, 1000, 4);
	/* Window 8, batch 4: the map keeps 2 * 8 / 4 + 4 = 8 runs of mine. */
	struct ownroute *w = ownroute_create(&r, 2, 1, 8, why, sizeof why);
	ck_assert_ptr_nonnull(w);
	uint64_t local = 0;
	uint32_t owner = 0;
	ck_assert_int_eq(ownroute_map(w, 0, &local, &owner), OWNROUTE_HOLD);
	ck_assert_int_eq(ownroute_map(w, 1000, &local, &owner), OWNROUTE_INVALID);
	ck_assert_uint_eq(ownroute_decided_below(w, 0), 0);
	bool mine;
	for (uint64_t k = 0; k < 40; k++) {
		uint64_t retired = k >= 4 ? (k - 4) * 4 : 0;
		ck_assert_int_eq(assign(w, k * 4, 4, (uint32_t)(k % 2), retired, &mine), 0);
		ck_assert(mine == (k % 2 == 1));
	}
	ck_assert_uint_eq(ownroute_assigned(w), 80);
	ck_assert_uint_eq(ownroute_assigned_end(w), 160);
	ck_assert_int_eq(ownroute_map(w, 160, &local, &owner), OWNROUTE_HOLD);
	/* Batch 39 (156..159) is my 20th run: local 76..79. */
	ck_assert_int_eq(ownroute_map(w, 157, &local, &owner), OWNROUTE_BUILD);
	ck_assert_uint_eq(local, 77);
	ck_assert_uint_eq(ownroute_to_global(w, 77), 157);
	ck_assert_int_eq(ownroute_map(w, 153, &local, &owner), OWNROUTE_MISROUTED);
	ck_assert_uint_eq(owner, 0);
	/* Retired, still remembered: built (the core says late or duplicate). */
	ck_assert_int_eq(ownroute_map(w, 133, &local, &owner), OWNROUTE_BUILD);
	ck_assert_uint_eq(local, 65);
	/* Retired and another's: misrouted, owner no longer known. */
	ck_assert_int_eq(ownroute_map(w, 128, &local, &owner), OWNROUTE_MISROUTED);
	ck_assert_uint_eq(owner, UINT32_MAX);
	/* Forgotten: 12 runs of mine back. */
	ck_assert_int_eq(ownroute_map(w, 5, &local, &owner), OWNROUTE_LATE);
	ck_assert_uint_eq(ownroute_to_global(w, 1), UINT64_MAX);
	/* A wrong assignment changes nothing. */
	ck_assert_int_eq(assign(w, 164, 4, 1, 0, &mine), -EINVAL);
	ck_assert_uint_eq(ownroute_assigned(w), 80);
	ck_assert_uint_eq(ownroute_decided_below(w, 70), 142);
	ck_assert_uint_eq(ownroute_decided_below(w, 80), 160);
	ck_assert_int_eq(ownroute_lose(w, 0), 0);
	ck_assert_int_eq(ownroute_map(w, 153, &local, &owner), OWNROUTE_MISROUTED);
	ck_assert_int_eq(ownroute_lose(w, 5), -ENOENT);
	ownroute_destroy(w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ownroute");
	TCase *tc = tcase_create("plan");
	tcase_add_test(tc, test_refuses_another_plan);
	tcase_add_test(tc, test_verdicts);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
