/* Unit tests of common/core/ownids.c, a builder's own numbering of the IDs
 * the hub assigned it: the verdicts at the edges (before any run, between
 * runs, forgotten, ahead), refusals, and randomised runs of assignments
 * over several builders against a plain oracle (an owner and a local ID per
 * global ID), with a ring too small to hold them all: every lookup agrees,
 * both ways, and nothing is allocated after the create. Randomised tests
 * log their seed; ES_TEST_SEED repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ownids.h"

#include "seeded.h"

START_TEST(test_edges)
{
	ck_assert_ptr_null(ownids_create(0));
	ck_assert_ptr_null(ownids_create(OWNIDS_MAX_CAPACITY + 1));
	ownids_destroy(NULL);
	struct ownids *o = ownids_create(2);
	uint64_t local = 77, global = 77;
	ck_assert_int_eq(ownids_to_local(o, 0, &local), OWNIDS_AHEAD);
	ck_assert(!ownids_to_global(o, 0, &global));
	ck_assert_int_eq(ownids_add(o, 100, 10), 0);      /* 100..109 -> 0..9 */
	ck_assert_int_eq(ownids_add(o, 130, 5), 0);       /* 130..134 -> 10..14 */
	ck_assert_int_eq(ownids_to_local(o, 99, &local), OWNIDS_OTHER);
	ck_assert_int_eq(ownids_to_local(o, 100, &local), OWNIDS_MINE);
	ck_assert_uint_eq(local, 0);
	ck_assert_int_eq(ownids_to_local(o, 120, &local), OWNIDS_OTHER);
	ck_assert_int_eq(ownids_to_local(o, 134, &local), OWNIDS_MINE);
	ck_assert_uint_eq(local, 14);
	ck_assert_int_eq(ownids_to_local(o, 135, &local), OWNIDS_AHEAD);
	ck_assert(ownids_to_global(o, 12, &global));
	ck_assert_uint_eq(global, 132);
	ck_assert(!ownids_to_global(o, 15, &global));
	/* Refused: empty, going back, overlapping, past 2^64. */
	ck_assert_int_eq(ownids_add(o, 200, 0), -EINVAL);
	ck_assert_int_eq(ownids_add(o, 134, 1), -EINVAL);
	ck_assert_int_eq(ownids_add(o, UINT64_MAX - 1, 2), -EINVAL);
	ck_assert_uint_eq(ownids_count(o), 15);
	ck_assert_uint_eq(ownids_end(o), 135);
	/* A third run forgets the first. */
	ck_assert_int_eq(ownids_add(o, 135, 3), 0);       /* 135..137 -> 15..17 */
	ck_assert_uint_eq(ownids_runs(o), 2);
	ck_assert_int_eq(ownids_to_local(o, 105, &local), OWNIDS_FORGOTTEN);
	ck_assert_int_eq(ownids_to_local(o, 110, &local), OWNIDS_OTHER);
	ck_assert(!ownids_to_global(o, 9, &global));
	ck_assert(ownids_to_global(o, 10, &global));
	ck_assert_uint_eq(global, 130);
	ck_assert_int_eq(ownids_to_local(o, 136, &local), OWNIDS_MINE);
	ck_assert_uint_eq(local, 16);
	ck_assert_str_eq(ownids_verdict_name(OWNIDS_FORGOTTEN), "forgotten");
	ownids_destroy(o);
}
END_TEST

/* The oracle of one randomised run: who owns each global ID, its local ID
 * when it is builder 0's, and the index of its run among builder 0's. */
struct oracle {
	uint64_t ids;
	int32_t *owner;       /* [ids], -1 past the last assignment */
	uint64_t *local;      /* [ids] */
	uint64_t *run_of;     /* [ids], builder 0's run index */
	uint64_t *run_end;    /* [runs] global end of builder 0's run k */
	uint64_t runs;
};

static void check_all(const struct ownids *o, const struct oracle *or, uint32_t cap)
{
	uint64_t forgotten_end = or->runs > cap ? or->run_end[or->runs - cap - 1] : 0;
	uint64_t end = or->runs ? or->run_end[or->runs - 1] : 0;
	for (uint64_t g = 0; g < or->ids; g++) {
		uint64_t local = UINT64_MAX, back = UINT64_MAX;
		enum ownids_verdict v = ownids_to_local(o, g, &local);
		enum ownids_verdict want;
		if (g < forgotten_end)
			want = OWNIDS_FORGOTTEN;
		else if (g >= end)
			want = OWNIDS_AHEAD;
		else
			want = or->owner[g] == 0 ? OWNIDS_MINE : OWNIDS_OTHER;
		REQUIRE(v == want);
		if (v != OWNIDS_MINE)
			continue;
		REQUIRE(local == or->local[g]);
		REQUIRE(ownids_to_global(o, local, &back) && back == g);
	}
}

START_TEST(test_random_against_oracle)
{
	uint64_t rng = test_seed ^ 0x0417 ^ (uint64_t)_i;
	uint32_t builders = 1 + (uint32_t)rng_below(&rng, 4);
	uint32_t batch = 1 + (uint32_t)rng_below(&rng, 40);
	uint32_t cap = 1 + (uint32_t)rng_below(&rng, 30);
	uint64_t first = rng_below(&rng, 100);
	struct oracle or = { .ids = first + 1 + rng_below(&rng, 6000) };
	or.owner = malloc(or.ids * sizeof *or.owner);
	or.local = calloc(or.ids, sizeof *or.local);
	or.run_of = calloc(or.ids, sizeof *or.run_of);
	or.run_end = calloc(or.ids, sizeof *or.run_end);
	for (uint64_t g = 0; g < or.ids; g++)
		or.owner[g] = -1;
	struct ownids *o = ownids_create(cap);
	size_t bytes = ownids_memory_bytes(o);
	struct mallinfo2 before = mallinfo2();
	uint64_t next_local = 0;
	/* Aligned batches over [first, ids), each to a random builder. */
	for (uint64_t id = first; id < or.ids;) {
		uint64_t end = (id / batch + 1) * batch;
		if (end > or.ids)
			end = or.ids;
		uint32_t b = (uint32_t)rng_below(&rng, builders);
		for (uint64_t g = id; g < end; g++) {
			or.owner[g] = (int32_t)b;
			if (b == 0) {
				or.local[g] = next_local++;
				or.run_of[g] = or.runs;
			}
		}
		if (b == 0) {
			REQUIRE(ownids_add(o, id, (uint32_t)(end - id)) == 0);
			or.run_end[or.runs++] = end;
		}
		id = end;
		REQUIRE(ownids_count(o) == next_local);
		REQUIRE(ownids_runs(o) == (or.runs < cap ? or.runs : cap));
		if (rng_below(&rng, 8) == 0)
			check_all(o, &or, cap);
	}
	check_all(o, &or, cap);
	struct mallinfo2 after = mallinfo2();
	REQUIRE(after.uordblks == before.uordblks);
	REQUIRE(ownids_memory_bytes(o) == bytes);
	ownids_destroy(o);
	free(or.owner);
	free(or.local);
	free(or.run_of);
	free(or.run_end);
}
END_TEST

/* A million runs through a ring of 64: memory stays what the create took. */
START_TEST(test_bounded)
{
	struct ownids *o = ownids_create(64);
	struct mallinfo2 before = mallinfo2();
	uint64_t rng = test_seed ^ 0xB0B;
	for (uint64_t k = 0; k < 1000000; k++) {
		REQUIRE(ownids_add(o, k * 128, 64) == 0);
		uint64_t local;
		uint64_t g = k * 128 - (k > 63 ? rng_below(&rng, 63 * 128) : 0);
		enum ownids_verdict v = ownids_to_local(o, g, &local);
		REQUIRE(v == ((g % 128) < 64 ? OWNIDS_MINE : OWNIDS_OTHER));
	}
	struct mallinfo2 after = mallinfo2();
	ck_assert_uint_eq(after.uordblks, before.uordblks);
	ck_assert_uint_eq(ownids_runs(o), 64);
	ck_assert_uint_eq(ownids_count(o), 64000000);
	ownids_destroy(o);
}
END_TEST

static Suite *ownids_suite(void)
{
	Suite *s = suite_create("ownids");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_edges);
	tcase_add_loop_test(tc, test_random_against_oracle, 0, 40);
	tcase_add_test(tc, test_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_ownids: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(ownids_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
