/* Unit tests of common/core/route.c, a reader's side of several builders:
 * the table of assignments (in order, bounded by the window, "not yet
 * assigned", late and lost IDs, each refusal with its sentence), the same
 * table fed by the real event manager over randomised runs (the reader's
 * pending queues and their limits are readoutd/outq's, test_outq.c).
 * Randomised tests log their seed; ES_TEST_SEED repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/evm.h"
#include "core/route.h"

#include "seeded.h"

static struct evm_plan plan(uint32_t builders, uint64_t first, uint64_t events, uint32_t batch,
			    uint32_t window)
{
	return (struct evm_plan){ .builders = builders, .first_event = first, .events = events,
				  .batch = batch, .window_batches = window };
}

static int assign(struct route *rt, uint64_t first, uint32_t count, uint32_t builder,
		  uint64_t retired_below, char *why, size_t n)
{
	struct evm_assignment a = { .first = first, .count = count, .builder = builder };
	return route_assign(rt, &a, retired_below, why, n);
}

static enum route_verdict lookup(const struct route *rt, uint64_t id, uint32_t *b)
{
	*b = UINT32_MAX;
	return route_lookup(rt, id, b);
}

START_TEST(test_create_refuses)
{
	struct evm_plan bad[] = {
		plan(0, 0, 100, 10, 4), plan(EVM_MAX_BUILDERS + 1, 0, 100, 10, 4),
		plan(2, 0, 0, 10, 4), plan(2, 0, 100, 0, 4), plan(2, 0, 100, 10, 0),
		plan(2, UINT64_MAX - 50, 100, 10, 4),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		ck_assert_msg(route_create(&bad[i]) == NULL, "plan %zu accepted", i);
		ck_assert_int_eq(errno, EINVAL);
	}
	route_destroy(NULL);
	ck_assert_str_eq(route_verdict_name(ROUTE_HOLD), "hold");
	ck_assert_str_eq(route_verdict_name(ROUTE_LOST), "lost");
}
END_TEST

START_TEST(test_not_yet_assigned)
{
	struct evm_plan p = plan(3, 5, 200, 64, 4);
	struct route *rt = route_create(&p);
	ck_assert_ptr_nonnull(rt);
	uint32_t b;
	/* Before any assignment every ID of the run is held. */
	ck_assert_int_eq(lookup(rt, 5, &b), ROUTE_HOLD);
	ck_assert_int_eq(lookup(rt, 204, &b), ROUTE_HOLD);
	ck_assert_int_eq(lookup(rt, 4, &b), ROUTE_INVALID);
	ck_assert_int_eq(lookup(rt, 205, &b), ROUTE_INVALID);
	ck_assert_int_eq(lookup(rt, UINT64_MAX, &b), ROUTE_INVALID);
	ck_assert_uint_eq(route_assigned_end(rt), 5);
	ck_assert_uint_eq(route_retired_below(rt), 5);
	ck_assert_int_eq(assign(rt, 5, 59, 2, 5, NULL, 0), 0);
	ck_assert_int_eq(lookup(rt, 5, &b), ROUTE_SEND);
	ck_assert_uint_eq(b, 2);
	ck_assert_int_eq(lookup(rt, 63, &b), ROUTE_SEND);
	ck_assert_uint_eq(b, 2);
	ck_assert_int_eq(lookup(rt, 64, &b), ROUTE_HOLD);
	ck_assert_int_eq(assign(rt, 64, 64, 0, 5, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 128, 64, 1, 5, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 192, 13, 0, 5, NULL, 0), 0);
	uint32_t want[] = { 2, 0, 1, 0 };
	for (uint64_t id = 5; id < 205; id++) {
		REQUIRE(lookup(rt, id, &b) == ROUTE_SEND);
		REQUIRE(b == want[id / 64]);
	}
	route_destroy(rt);
}
END_TEST

START_TEST(test_refuses_what_the_plan_forbids)
{
	struct evm_plan p = plan(3, 0, 35, 10, 4);
	struct route *rt = route_create(&p);
	char why[200];
	ck_assert_int_eq(assign(rt, 0, 10, 0, 0, why, sizeof why), 0);
	/* A gap, and the same IDs twice. */
	ck_assert_int_eq(assign(rt, 20, 10, 1, 0, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 20..+10 to builder 1 does not start at 10, "
			      "where the assigned IDs end: a gap");
	ck_assert_int_eq(assign(rt, 0, 10, 1, 0, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 0..+10 to builder 1 does not start at 10, "
			      "where the assigned IDs end: IDs assigned twice");
	/* Not its batch. */
	ck_assert_int_eq(assign(rt, 10, 5, 1, 0, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 10..+5 does not cover its batch of 10 IDs "
			      "(batch 10, run 0..+35)");
	/* No such builder. */
	ck_assert_int_eq(assign(rt, 10, 10, 3, 0, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 10..+10 names builder 3 but the run has 3");
	/* retired_below past the new end, or back. */
	ck_assert_int_eq(assign(rt, 10, 10, 1, 21, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 10..+10 says retired below 21, outside 0 .. 20");
	ck_assert_int_eq(assign(rt, 10, 10, 1, 10, why, sizeof why), 0);
	ck_assert_int_eq(assign(rt, 20, 10, 2, 9, why, sizeof why), -EINVAL);
	/* No sentence asked for: the same answers. */
	ck_assert_int_eq(assign(rt, 20, 10, 2, 9, NULL, 0), -EINVAL);
	ck_assert_int_eq(assign(rt, 20, 10, 2, 10, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 30, 5, 0, 10, NULL, 0), 0);
	/* Past the run. */
	ck_assert_int_eq(assign(rt, 35, 10, 1, 10, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "assignment of events 35..+10 starts past the run's last ID 34");
	/* The refusals changed nothing. */
	ck_assert_uint_eq(route_assigned_end(rt), 35);
	ck_assert_uint_eq(route_retired_below(rt), 10);
	uint32_t b;
	uint32_t want[] = { 0, 1, 2, 0 };
	for (uint64_t id = 10; id < 35; id++) {
		REQUIRE(lookup(rt, id, &b) == ROUTE_SEND);
		REQUIRE(b == want[id / 10]);
	}
	route_destroy(rt);
}
END_TEST

START_TEST(test_table_bound)
{
	struct evm_plan p = plan(2, 0, 1000, 10, 4);
	struct route *rt = route_create(&p);
	/* 3 bytes per window batch, 2 per builder, and the struct. */
	ck_assert_uint_le(route_memory_bytes(rt), 128 + 4 * 3 + 2 * 2);
	ck_assert_uint_ge(route_memory_bytes(rt), 4 * 3 + 2 * 2);
	char why[200];
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_int_eq(assign(rt, 10 * k, 10, k % 2, 0, NULL, 0), 0);
	/* A fifth live batch would not fit: refused, nothing changes. */
	ck_assert_int_eq(assign(rt, 40, 10, 0, 0, why, sizeof why), -ENOSPC);
	ck_assert_str_eq(why, "assignment of events 40..+10 makes 5 batches live from 0, more "
			      "than the window of 4");
	ck_assert_uint_eq(route_assigned_end(rt), 40);
	uint32_t b;
	ck_assert_int_eq(lookup(rt, 0, &b), ROUTE_SEND);
	ck_assert_uint_eq(b, 0);
	/* The hub retired the first: it fits, and overwrites nothing live. */
	ck_assert_int_eq(assign(rt, 40, 10, 0, 10, NULL, 0), 0);
	ck_assert_int_eq(lookup(rt, 9, &b), ROUTE_LATE);
	for (uint64_t id = 10; id < 50; id++) {
		REQUIRE(lookup(rt, id, &b) == ROUTE_SEND);
		REQUIRE(b == (id / 10) % 2);
	}
	/* retired_below may empty the live range. */
	ck_assert_int_eq(assign(rt, 50, 10, 1, 60, NULL, 0), 0);
	ck_assert_int_eq(lookup(rt, 59, &b), ROUTE_LATE);
	ck_assert_int_eq(lookup(rt, 60, &b), ROUTE_HOLD);
	route_destroy(rt);
}
END_TEST

START_TEST(test_late_and_lost)
{
	struct evm_plan p = plan(3, 0, 100, 10, 8);
	struct route *rt = route_create(&p);
	for (uint32_t k = 0; k < 6; k++)
		ck_assert_int_eq(assign(rt, 10 * k, 10, k % 3, k >= 4 ? 20 : 0, NULL, 0), 0);
	uint32_t b;
	ck_assert_int_eq(lookup(rt, 19, &b), ROUTE_LATE);
	ck_assert_int_eq(lookup(rt, 20, &b), ROUTE_SEND);
	ck_assert_uint_eq(b, 2);
	ck_assert_int_eq(route_lose(rt, 1), 0);
	ck_assert_int_eq(route_lose(rt, 3), -ENOENT);
	/* Builder 1's live IDs (40..49) are lost; late stays late. */
	ck_assert_int_eq(lookup(rt, 45, &b), ROUTE_LOST);
	ck_assert_uint_eq(b, 1);
	ck_assert_int_eq(lookup(rt, 15, &b), ROUTE_LATE);
	ck_assert_int_eq(lookup(rt, 35, &b), ROUTE_SEND);
	ck_assert_uint_eq(b, 0);
	/* A later batch of the dead builder (static routing assigns it). */
	ck_assert_int_eq(assign(rt, 60, 10, 0, 20, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 70, 10, 1, 20, NULL, 0), 0);
	ck_assert_int_eq(lookup(rt, 75, &b), ROUTE_LOST);
	route_destroy(rt);
}
END_TEST

/* The real manager's records, each with its retired_below as the hub would
 * send it: the table never overflows a window of the same size, and
 * every answer agrees with the manager's own books. */
static void follow_round(uint64_t *rng, enum evm_mode mode)
{
	uint32_t M = 1 + (uint32_t)rng_below(rng, 6);
	uint32_t B = 1 + (uint32_t)rng_below(rng, 40);
	struct evm_config c = {
		.plan = plan(M, rng_below(rng, 500), 1 + rng_below(rng, 20000), B,
			     1 + (uint32_t)rng_below(rng, 32)),
		.mode = mode,
		.low_water = B,
		.high_water = B + 1 + (uint32_t)rng_below(rng, B),
	};
	const struct evm_plan *p = &c.plan;
	struct evm *m = evm_create(&c);
	struct route *rt = route_create(p);
	ck_assert(m != NULL && rt != NULL);
	int16_t *owner = malloc(p->events * sizeof *owner);
	ck_assert_ptr_nonnull(owner);
	for (uint32_t b = 0; b < M; b++)
		ck_assert_int_eq(evm_join(m, b, c.high_water + 1 + (uint32_t)rng_below(rng, 3 * B), 0), 0);
	uint32_t alive = M;
	struct evm_assignment a;
	enum evm_next r;
	while ((r = evm_next(m, &a)) != EVM_ALL_ASSIGNED) {
		if (r == EVM_ASSIGNED) {
			char why[200] = "";
			int rc = route_assign(rt, &a, evm_totals(m).retired_below, why, sizeof why);
			if (rc != 0)
				ck_abort_msg("refused: %s (seed %" PRIu64 ")", why, test_seed);
			for (uint64_t id = a.first; id < a.first + a.count; id++)
				owner[id - p->first_event] = (int16_t)a.builder;
		} else {
			/* A builder decides all it has, or (rarely) dies. */
			uint32_t b = (uint32_t)rng_below(rng, M);
			struct evm_builder_view v;
			evm_builder_view(m, b, &v);
			if (v.dead)
				continue;
			if (alive > 1 && rng_below(rng, 200) == 0) {
				REQUIRE(evm_dead(m, b, NULL) == 0);
				REQUIRE(route_lose(rt, b) == 0);
				alive--;
			} else {
				REQUIRE(evm_tokens(m, b, v.assigned, evm_totals(m).assigned_end, 0) == 0);
			}
		}
		for (int i = 0; i < 4; i++) {
			uint64_t id = p->first_event + rng_below(rng, p->events + 2) - 1;
			uint32_t b = UINT32_MAX;
			struct evm_assignment o;
			enum evm_lookup l = evm_owner(m, id, &o);
			enum route_verdict v = route_lookup(rt, id, &b);
			if (l == EVM_OUTSIDE) {
				REQUIRE(v == ROUTE_INVALID);
			} else if (l == EVM_UNASSIGNED) {
				REQUIRE(v == ROUTE_HOLD);
			} else if (v == ROUTE_LATE) {
				/* The reader learns retirements with the next record. */
				REQUIRE(l == EVM_RETIRED);
			} else {
				struct evm_builder_view bv;
				evm_builder_view(m, (uint32_t)owner[id - p->first_event], &bv);
				REQUIRE(v == (bv.dead ? ROUTE_LOST : ROUTE_SEND));
				REQUIRE(b == (uint32_t)owner[id - p->first_event]);
				REQUIRE(l == EVM_RETIRED || o.builder == b);
			}
		}
	}
	REQUIRE(route_assigned_end(rt) == p->first_event + p->events);
	free(owner);
	route_destroy(rt);
	evm_destroy(m);
}

START_TEST(test_follows_the_manager)
{
	uint64_t rng = test_seed;
	for (int round = 0; round < 60; round++)
		follow_round(&rng, round % 2 ? EVM_STATIC : EVM_MANAGER);
}
END_TEST

/* Each batch's lane phase is its ordinal among its builder's batches, mod
 * RAILS_PHASE_MODULUS, over interleaved assignments and many wraps of the
 * window's ring; route_lookup() agrees with route_lookup_lane(). */
START_TEST(test_lane_phase)
{
	uint64_t rng = test_seed;
	const uint32_t builders = 3, batch = 8, window = 5;
	struct evm_plan p = plan(builders, 3, 4000, batch, window);
	struct route *rt = route_create(&p);
	ck_assert_ptr_nonnull(rt);
	uint64_t ordinal[3] = { 0 };
	uint64_t first = 3;
	while (first < p.first_event + p.events) {
		uint64_t k = first / batch;
		uint64_t end = (k + 1) * batch;
		if (end > p.first_event + p.events)
			end = p.first_event + p.events;
		uint32_t b = (uint32_t)rng_below(&rng, builders);
		/* Keep at most two batches live: the ring wraps every 5. */
		uint64_t retired = first >= 2 * batch ? (k - 1) * batch : 3;
		if (retired < 3)
			retired = 3;
		REQUIRE(assign(rt, first, (uint32_t)(end - first), b, retired, NULL, 0) == 0);
		for (uint64_t id = first; id < end; id++) {
			uint32_t got_b = UINT32_MAX, phase = UINT32_MAX, plain_b = UINT32_MAX;
			REQUIRE(route_lookup_lane(rt, id, &got_b, &phase) == ROUTE_SEND);
			REQUIRE(got_b == b);
			REQUIRE(phase == ordinal[b] % RAILS_PHASE_MODULUS);
			REQUIRE(route_lookup(rt, id, &plain_b) == ROUTE_SEND && plain_b == b);
			/* Every rail count divides the modulus: the lane is the
			 * ordinal's, whatever the wrap. */
			for (uint32_t rails = 1; rails <= RAILS_MAX; rails++)
				REQUIRE(rails_lane(phase, rails) == ordinal[b] % rails);
		}
		/* The batch before (still live) kept its phase. */
		if (first >= batch + 3) {
			uint32_t pb, pph;
			REQUIRE(route_lookup_lane(rt, first - 1, &pb, &pph) == ROUTE_SEND);
			REQUIRE(pph < RAILS_PHASE_MODULUS);
		}
		ordinal[b]++;
		first = end;
	}
	for (uint32_t b = 0; b < builders; b++)
		ck_assert_uint_gt(ordinal[b], RAILS_PHASE_MODULUS);
	route_destroy(rt);
}
END_TEST

/* A refused assignment takes no ordinal: the next batch of that builder
 * has the phase it would have had. */
START_TEST(test_lane_phase_refusal)
{
	struct evm_plan p = plan(2, 0, 100, 10, 2);
	struct route *rt = route_create(&p);
	uint32_t b, phase;
	ck_assert_int_eq(assign(rt, 0, 10, 1, 0, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 10, 10, 1, 0, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 20, 10, 1, 0, NULL, 0), -ENOSPC);
	ck_assert_int_eq(assign(rt, 20, 10, 0, 10, NULL, 0), 0);
	ck_assert_int_eq(assign(rt, 30, 10, 1, 20, NULL, 0), 0);
	ck_assert_int_eq(route_lookup_lane(rt, 25, &b, &phase), ROUTE_SEND);
	ck_assert_uint_eq(b, 0);
	ck_assert_uint_eq(phase, 0);
	ck_assert_int_eq(route_lookup_lane(rt, 35, &b, &phase), ROUTE_SEND);
	ck_assert_uint_eq(b, 1);
	ck_assert_uint_eq(phase, 2);
	route_destroy(rt);
}
END_TEST

START_TEST(test_allocates_nothing)
{
	struct evm_plan p = plan(4, 0, 1u << 24, 16, 1024);
	struct route *rt = route_create(&p);
	uint64_t rng = test_seed ^ 0xA11;
	struct mallinfo2 before = mallinfo2();
	uint64_t next = 0;
	for (uint32_t k = 0; k < 100000; k++) {
		struct evm_assignment a = { .first = next, .count = 16, .builder = k % 4 };
		uint64_t retired = next >= 16 * 512 ? next - 16 * 512 : 0;
		route_assign(rt, &a, retired, NULL, 0);
		next += 16;
		uint32_t b;
		route_lookup(rt, retired + rng_below(&rng, next - retired + 1), &b);
	}
	struct mallinfo2 after = mallinfo2();
	ck_assert_uint_eq(after.uordblks, before.uordblks);
	ck_assert_uint_eq(after.hblkhd, before.hblkhd);
	ck_assert_uint_eq(route_assigned_end(rt), 1600000);
	route_destroy(rt);
}
END_TEST

static Suite *route_suite(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_refuses);
	tcase_add_test(tc, test_not_yet_assigned);
	tcase_add_test(tc, test_refuses_what_the_plan_forbids);
	tcase_add_test(tc, test_table_bound);
	tcase_add_test(tc, test_late_and_lost);
	tcase_add_test(tc, test_follows_the_manager);
	tcase_add_test(tc, test_lane_phase);
	tcase_add_test(tc, test_lane_phase_refusal);
	tcase_add_test(tc, test_allocates_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_route: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(route_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
