/* Unit tests of common/core/evm.c, the event manager, with time passed in:
 * round-robin, batch boundaries, the busy/free hysteresis, token
 * accounting, the window and the lookup of live IDs, a dead builder and its
 * loss, static routing against its formula, and a long randomised run in
 * which every event ID must be assigned exactly once. Randomised tests log
 * their seed; ES_TEST_SEED repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/evm.h"

#include "seeded.h"

static struct evm_config config(enum evm_mode mode, uint32_t builders, uint64_t first,
				uint64_t events, uint32_t batch, uint32_t window, uint32_t low,
				uint32_t high)
{
	return (struct evm_config){
		.plan = { .builders = builders, .first_event = first, .events = events,
			  .batch = batch, .window_batches = window },
		.mode = mode,
		.low_water = low,
		.high_water = high,
	};
}

/* A manager whose builders have all joined with slots each. */
static struct evm *make(const struct evm_config *c, uint32_t slots)
{
	struct evm *m = evm_create(c);
	ck_assert_ptr_nonnull(m);
	for (uint32_t b = 0; b < c->plan.builders; b++)
		ck_assert_int_eq(evm_join(m, b, slots, 0), 0);
	return m;
}

static struct evm_builder_view view(const struct evm *m, uint32_t b)
{
	struct evm_builder_view v;
	ck_assert(evm_builder_view(m, b, &v));
	return v;
}

/* Builder b has decided everything it was given, up to assigned_end. */
static void settle(struct evm *m, uint32_t b, uint64_t now)
{
	struct evm_builder_view v = view(m, b);
	ck_assert_int_eq(evm_tokens(m, b, v.assigned - v.lost, evm_totals(m).assigned_end, now), 0);
}

static void expect_assign(struct evm *m, uint64_t first, uint32_t count, uint32_t builder)
{
	struct evm_assignment a;
	ck_assert_int_eq(evm_next(m, &a), EVM_ASSIGNED);
	ck_assert_uint_eq(a.first, first);
	ck_assert_uint_eq(a.count, count);
	ck_assert_uint_eq(a.builder, builder);
}

START_TEST(test_create_refuses)
{
	struct evm_config good = config(EVM_MANAGER, 2, 0, 100, 10, 8, 10, 20);
	struct evm *m = evm_create(&good);
	ck_assert_ptr_nonnull(m);
	evm_destroy(m);
	evm_destroy(NULL);
	struct evm_config bad[] = {
		config(EVM_MANAGER, 0, 0, 100, 10, 8, 10, 20),            /* no builder */
		config(EVM_MANAGER, EVM_MAX_BUILDERS + 1, 0, 100, 10, 8, 10, 20),
		config(EVM_MANAGER, 2, 0, 0, 10, 8, 10, 20),              /* no events */
		config(EVM_MANAGER, 2, 0, 100, 0, 8, 10, 20),             /* no batch */
		config(EVM_MANAGER, 2, 0, 100, EVM_MAX_BATCH + 1, 8, EVM_MAX_BATCH + 1,
		       EVM_MAX_BATCH + 2),
		config(EVM_MANAGER, 2, 0, 100, 10, 0, 10, 20),            /* no window */
		config(EVM_MANAGER, 2, 0, 100, 10, EVM_MAX_WINDOW_BATCHES + 1, 10, 20),
		config(EVM_MANAGER, 2, 0, 100, 10, 8, 9, 20),             /* low below a batch */
		config(EVM_MANAGER, 2, 0, 100, 10, 8, 10, 10),            /* high not above low */
		config(EVM_MANAGER, 2, UINT64_MAX - 100, 100, 10, 8, 10, 20), /* past 2^64 */
		config((enum evm_mode)7, 2, 0, 100, 10, 8, 10, 20),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		ck_assert_msg(evm_create(&bad[i]) == NULL, "config %zu accepted", i);
		ck_assert_int_eq(errno, EINVAL);
	}
	/* The highest run that fits. */
	struct evm_config top = config(EVM_STATIC, 2, UINT64_MAX - 110, 100, 10, 8, 10, 20);
	m = make(&top, 30);
	struct evm_assignment a;
	uint64_t ids = 0;
	while (evm_next(m, &a) == EVM_ASSIGNED) {
		ids += a.count;
		settle(m, a.builder, 0);
	}
	ck_assert_uint_eq(ids, 100);
	evm_destroy(m);
}
END_TEST

START_TEST(test_round_robin)
{
	struct evm_config c = config(EVM_MANAGER, 3, 0, 64 * 9, 64, 64, 64, 128);
	struct evm *m = make(&c, 1024);
	for (uint32_t k = 0; k < 9; k++)
		expect_assign(m, 64u * k, 64, k % 3);
	struct evm_assignment a;
	ck_assert_int_eq(evm_next(m, &a), EVM_ALL_ASSIGNED);
	for (uint32_t b = 0; b < 3; b++) {
		struct evm_builder_view v = view(m, b);
		ck_assert_uint_eq(v.assigned, 192);
		ck_assert_uint_eq(v.batches, 3);
		ck_assert_uint_eq(v.tokens, 1024 - 192);
		ck_assert_uint_eq(v.in_flight, 192);
	}
	ck_assert_uint_eq(evm_totals(m).records, 9);
	evm_destroy(m);

	/* A builder that has not joined is passed over, and taken in turn
	 * once it joins. */
	m = evm_create(&c);
	ck_assert_int_eq(evm_join(m, 0, 1024, 0), 0);
	ck_assert_int_eq(evm_join(m, 2, 1024, 0), 0);
	expect_assign(m, 0, 64, 0);
	expect_assign(m, 64, 64, 2);
	expect_assign(m, 128, 64, 0);
	ck_assert_int_eq(evm_join(m, 1, 1024, 5), 0);
	expect_assign(m, 192, 64, 1);
	expect_assign(m, 256, 64, 2);
	ck_assert_uint_eq(view(m, 1).last_token_ns, 5);
	evm_destroy(m);
}
END_TEST

START_TEST(test_batch_boundaries)
{
	/* Batches are aligned to multiples of the batch: the first and the
	 * last are cut by the run. */
	struct evm_config c = config(EVM_MANAGER, 2, 5, 200, 64, 16, 64, 100);
	struct evm *m = make(&c, 1000);
	expect_assign(m, 5, 59, 0);
	expect_assign(m, 64, 64, 1);
	expect_assign(m, 128, 64, 0);
	expect_assign(m, 192, 13, 1);
	struct evm_assignment a;
	ck_assert_int_eq(evm_next(m, &a), EVM_ALL_ASSIGNED);
	ck_assert_uint_eq(view(m, 0).assigned + view(m, 1).assigned, 200);
	ck_assert_uint_eq(evm_totals(m).assigned_end, 205);
	evm_destroy(m);

	/* A run shorter than one batch, inside one. */
	c = config(EVM_MANAGER, 2, 10, 3, 64, 16, 64, 100);
	m = make(&c, 1000);
	expect_assign(m, 10, 3, 0);
	ck_assert_int_eq(evm_next(m, &a), EVM_ALL_ASSIGNED);
	evm_destroy(m);

	/* Batches of one ID. */
	c = config(EVM_MANAGER, 3, 7, 5, 1, 16, 1, 2);
	m = make(&c, 3);
	for (uint64_t id = 7; id < 12; id++)
		expect_assign(m, id, 1, (uint32_t)(id % 3));
	evm_destroy(m);

	/* The plan's batches outside the run are empty. */
	struct evm_plan p = { .builders = 2, .first_event = 100, .events = 50, .batch = 32,
			      .window_batches = 4 };
	uint64_t first;
	uint32_t count;
	evm_plan_batch(&p, 2, &first, &count);
	ck_assert_uint_eq(first, 100);
	ck_assert_uint_eq(count, 0);
	evm_plan_batch(&p, 3, &first, &count);
	ck_assert_uint_eq(first, 100);
	ck_assert_uint_eq(count, 28);
	evm_plan_batch(&p, 4, &first, &count);
	ck_assert_uint_eq(first, 128);
	ck_assert_uint_eq(count, 22);
	evm_plan_batch(&p, 5, &first, &count);
	ck_assert_uint_eq(count, 0);
	evm_plan_batch(&p, UINT64_MAX, &first, &count);
	ck_assert_uint_eq(first, 150);
	ck_assert_uint_eq(count, 0);
}
END_TEST

/* Builder 0's tokens hover around each mark in turn; builder 1 always has
 * tokens. Busy below low, free only above high: no flapping at either. */
START_TEST(test_hysteresis)
{
	enum { B = 8, LOW = 16, HIGH = 40, SLOTS = 64 };
	struct evm_config c = config(EVM_MANAGER, 2, 0, 1u << 20, B, 1u << 16, LOW, HIGH);
	struct evm *m = make(&c, SLOTS);
	struct evm_assignment a;
	/* Round-robin until builder 0 drops below low: 64 - 7 x 8 = 8 < 16. */
	uint32_t to0 = 0;
	while (!view(m, 0).busy) {
		ck_assert_int_eq(evm_next(m, &a), EVM_ASSIGNED);
		to0 += a.builder == 0;
		settle(m, 1, 0);
	}
	ck_assert_uint_eq(to0, 7);
	ck_assert_uint_eq(view(m, 0).tokens, 8);
	ck_assert_uint_eq(view(m, 0).busy_spells, 1);
	/* One token at a time up to high: builder 0 stays busy and every
	 * batch goes to builder 1; past low, past the batch, at high. */
	uint64_t decided = 0;
	for (uint32_t t = 9; t <= HIGH; t++) {
		ck_assert_int_eq(evm_tokens(m, 0, ++decided, 0, t), 0);
		ck_assert_uint_eq(view(m, 0).tokens, t);
		ck_assert(view(m, 0).busy);
		expect_assign(m, evm_totals(m).assigned_end, B, 1);
		settle(m, 1, t);
	}
	/* One more: free, and it is its turn. */
	ck_assert_int_eq(evm_tokens(m, 0, ++decided, 0, 100), 0);
	ck_assert(!view(m, 0).busy);
	ck_assert_uint_eq(view(m, 0).tokens, HIGH + 1);
	expect_assign(m, evm_totals(m).assigned_end, B, 0);
	/* 41 - 8 = 33: between the marks it stays free, taking its turns
	 * down to 41 - 24 = 17 >= low, then one more takes it below. */
	for (int i = 0; i < 3; i++) {
		expect_assign(m, evm_totals(m).assigned_end, B, 1);
		settle(m, 1, 0);
		ck_assert(!view(m, 0).busy);
		expect_assign(m, evm_totals(m).assigned_end, B, 0);
	}
	ck_assert_uint_eq(view(m, 0).tokens, 9);
	ck_assert(view(m, 0).busy);
	ck_assert_uint_eq(view(m, 0).busy_spells, 2);

	/* A long run where builder 0 frees one slot per step: each busy spell
	 * takes high - low tokens to end, so the spells are few, and every
	 * batch builder 0 takes finds it free above low. */
	uint64_t spells0 = view(m, 0).busy_spells;
	enum { STEPS = 20000 };
	for (uint32_t step = 0; step < STEPS; step++) {
		if (view(m, 0).in_flight > 0)
			ck_assert_int_eq(evm_tokens(m, 0, ++decided, 0, step), 0);
		for (;;) {
			bool free0 = !view(m, 0).busy;
			uint32_t tokens0 = view(m, 0).tokens;
			enum evm_next r = evm_next(m, &a);
			REQUIRE(r == EVM_ASSIGNED);
			if (a.builder == 1) {
				settle(m, 1, step);
				break;
			}
			REQUIRE(free0 && tokens0 >= LOW);
		}
	}
	uint64_t spells = view(m, 0).busy_spells - spells0;
	/* STEPS tokens returned, a spell per HIGH - LOW + 1 of them at most. */
	ck_assert_uint_le(spells, STEPS / (HIGH - LOW + 1) + 1);
	ck_assert_uint_ge(spells, STEPS / (SLOTS + B) - 1);
	evm_destroy(m);
}
END_TEST

START_TEST(test_token_errors)
{
	struct evm_config c = config(EVM_MANAGER, 2, 0, 1000, 10, 16, 10, 20);
	struct evm *m = evm_create(&c);
	ck_assert_int_eq(evm_join(m, 2, 30, 0), -ENOENT);
	ck_assert_int_eq(evm_join(m, 0, 20, 0), -EINVAL);     /* never free again once busy */
	ck_assert_int_eq(evm_tokens(m, 0, 0, 0, 0), -ENOTCONN);
	ck_assert_int_eq(evm_join(m, 0, 30, 0), 0);
	ck_assert_int_eq(evm_join(m, 0, 30, 0), -EALREADY);
	ck_assert_int_eq(evm_tokens(m, 5, 0, 0, 0), -ENOENT);
	expect_assign(m, 0, 10, 0);
	expect_assign(m, 10, 10, 0);
	/* More decided than given, or decided past what is assigned. */
	ck_assert_int_eq(evm_tokens(m, 0, 21, 0, 0), -ERANGE);
	ck_assert_int_eq(evm_tokens(m, 0, 5, 21, 0), -ERANGE);
	ck_assert_int_eq(evm_tokens(m, 0, 12, 10, 7), 0);
	/* Totals never go back; an error changes nothing. */
	ck_assert_int_eq(evm_tokens(m, 0, 11, 10, 8), -EINVAL);
	ck_assert_int_eq(evm_tokens(m, 0, 12, 9, 8), -EINVAL);
	struct evm_builder_view v = view(m, 0);
	ck_assert_uint_eq(v.decided, 12);
	ck_assert_uint_eq(v.decided_below, 10);
	ck_assert_uint_eq(v.tokens, 30 - 8);
	ck_assert_uint_eq(v.last_token_ns, 7);
	/* The same totals again are harmless. */
	ck_assert_int_eq(evm_tokens(m, 0, 12, 10, 9), 0);
	ck_assert_int_eq(evm_dead(m, 0, NULL), 0);
	ck_assert_int_eq(evm_tokens(m, 0, 20, 20, 9), -ESRCH);
	ck_assert_int_eq(evm_dead(m, 0, NULL), -EALREADY);
	ck_assert_int_eq(evm_dead(m, 9, NULL), -ENOENT);
	ck_assert(!evm_builder_view(m, 2, &v));
	evm_destroy(m);
}
END_TEST

/* Nothing returns a token: each builder is given exactly what its slots
 * hold and no more, whatever the order. */
START_TEST(test_tokens_bound_in_flight)
{
	struct evm_config c = config(EVM_MANAGER, 3, 0, 100000, 10, 1000, 10, 25);
	struct evm *m = evm_create(&c);
	uint32_t slots[3] = { 26, 57, 100 };
	for (uint32_t b = 0; b < 3; b++)
		ck_assert_int_eq(evm_join(m, b, slots[b], 0), 0);
	struct evm_assignment a;
	enum evm_next r;
	while ((r = evm_next(m, &a)) == EVM_ASSIGNED)
		ck_assert_uint_le(view(m, a.builder).in_flight, slots[a.builder]);
	ck_assert_int_eq(r, EVM_WAIT_TOKENS);
	/* Down to below low_water (10): 26 -> 6, 57 -> 7, 100 -> 0. */
	ck_assert_uint_eq(view(m, 0).in_flight, 20);
	ck_assert_uint_eq(view(m, 1).in_flight, 50);
	ck_assert_uint_eq(view(m, 2).in_flight, 100);
	for (uint32_t b = 0; b < 3; b++) {
		ck_assert(view(m, b).busy);
		ck_assert_uint_eq(view(m, b).tokens + view(m, b).in_flight, slots[b]);
	}
	evm_destroy(m);
}
END_TEST

START_TEST(test_window_and_lookup)
{
	struct evm_config c = config(EVM_MANAGER, 2, 3, 200, 10, 4, 10, 20);
	struct evm *m = make(&c, 1000);
	struct evm_assignment a;
	/* Four live batches fill the window: [3, 10) [10, 20) [20, 30) [30, 40). */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(evm_next(m, &a), EVM_ASSIGNED);
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_WINDOW);
	ck_assert_uint_eq(evm_totals(m).live_batches, 4);
	ck_assert_int_eq(evm_owner(m, 2, &a), EVM_OUTSIDE);
	ck_assert_int_eq(evm_owner(m, 203, &a), EVM_OUTSIDE);
	ck_assert_int_eq(evm_owner(m, 40, &a), EVM_UNASSIGNED);
	ck_assert_int_eq(evm_owner(m, 3, &a), EVM_OWNED);
	ck_assert_uint_eq(a.first, 3);
	ck_assert_uint_eq(a.count, 7);
	ck_assert_uint_eq(a.builder, 0);
	ck_assert_int_eq(evm_owner(m, 39, &a), EVM_OWNED);
	ck_assert_uint_eq(a.first, 30);
	ck_assert_uint_eq(a.builder, 1);
	/* Builder 1 (batches 10.. and 30..) has decided everything: nothing
	 * retires while builder 0's first batch is undecided, and the window
	 * stays full although builder 1 has tokens. */
	settle(m, 1, 0);
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_WINDOW);
	ck_assert_uint_eq(evm_totals(m).retired_below, 3);
	/* Builder 0 decides its first batch: [3, 20) retire, 2 more fit. */
	ck_assert_int_eq(evm_tokens(m, 0, 7, 10, 0), 0);
	ck_assert_uint_eq(evm_totals(m).retired_below, 20);
	ck_assert_int_eq(evm_owner(m, 19, &a), EVM_RETIRED);
	ck_assert_int_eq(evm_owner(m, 20, &a), EVM_OWNED);
	expect_assign(m, 40, 10, 0);
	expect_assign(m, 50, 10, 1);
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_WINDOW);
	/* Everything decided: the live range is empty. */
	settle(m, 0, 0);
	settle(m, 1, 0);
	struct evm_totals t = evm_totals(m);
	ck_assert_uint_eq(t.retired_below, 60);
	ck_assert_uint_eq(t.assigned_end, 60);
	ck_assert_uint_eq(t.live_batches, 0);
	ck_assert_int_eq(evm_owner(m, 59, &a), EVM_RETIRED);
	ck_assert_int_eq(evm_owner(m, 60, &a), EVM_UNASSIGNED);
	/* To the end of the run, the window never exceeded. */
	enum evm_next r;
	while ((r = evm_next(m, &a)) != EVM_ALL_ASSIGNED) {
		if (r == EVM_WAIT_WINDOW) {
			settle(m, 0, 0);
			settle(m, 1, 0);
		}
		ck_assert_uint_le(evm_totals(m).live_batches, 4);
	}
	ck_assert_uint_eq(evm_totals(m).assigned_end, 203);
	evm_destroy(m);
}
END_TEST

START_TEST(test_dead_builder)
{
	struct evm_config c = config(EVM_MANAGER, 3, 0, 1000, 10, 100, 10, 20);
	struct evm *m = make(&c, 50);
	struct evm_assignment a;
	/* Five batches each (50 -> 0), round-robin: builder 1 has 10.., 40..,
	 * 70.., 100.., 130... */
	for (int i = 0; i < 15; i++)
		ck_assert_int_eq(evm_next(m, &a), EVM_ASSIGNED);
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_TOKENS);
	/* It decided 10..19 and 40..44, then died. */
	ck_assert_int_eq(evm_tokens(m, 1, 15, 45, 0), 0);
	struct evm_loss loss;
	ck_assert_int_eq(evm_dead(m, 1, &loss), 0);
	ck_assert_uint_eq(loss.events, 35);
	ck_assert_uint_eq(loss.batches, 4);
	ck_assert_uint_eq(loss.lowest, 45);
	ck_assert_uint_eq(loss.end, 140);
	struct evm_builder_view v = view(m, 1);
	ck_assert(v.dead);
	ck_assert_uint_eq(v.tokens, 0);
	ck_assert_uint_eq(v.in_flight, 0);
	ck_assert_uint_eq(v.lost, 35);
	ck_assert_uint_eq(v.assigned, v.decided + v.lost);
	ck_assert_uint_eq(evm_totals(m).lost, 35);
	ck_assert_uint_eq(evm_totals(m).alive, 2);
	/* Its batches are still live (builder 0's first is not decided): a
	 * reader asks and learns they are builder 1's. */
	ck_assert_int_eq(evm_owner(m, 45, &a), EVM_OWNED);
	ck_assert_uint_eq(a.builder, 1);
	/* The others go on; builder 1 is given nothing more. */
	enum evm_next r;
	while ((r = evm_next(m, &a)) != EVM_ALL_ASSIGNED) {
		if (r == EVM_WAIT_TOKENS) {
			settle(m, 0, 0);
			settle(m, 2, 0);
			continue;
		}
		ck_assert_int_eq(r, EVM_ASSIGNED);
		ck_assert_uint_ne(a.builder, 1);
	}
	ck_assert_uint_eq(view(m, 1).assigned, 50);
	ck_assert_uint_eq(view(m, 0).assigned + view(m, 2).assigned, 950);
	/* Lost batches do not hold the window: everything retires. */
	settle(m, 0, 0);
	settle(m, 2, 0);
	ck_assert_uint_eq(evm_totals(m).retired_below, 1000);
	ck_assert_int_eq(evm_owner(m, 45, &a), EVM_RETIRED);
	evm_destroy(m);

	/* A builder that never joined dies with nothing; when every builder
	 * is dead the manager says so. */
	m = evm_create(&c);
	ck_assert_int_eq(evm_dead(m, 0, &loss), 0);
	ck_assert_uint_eq(loss.events, 0);
	ck_assert_uint_eq(loss.batches, 0);
	ck_assert_uint_eq(loss.lowest, UINT64_MAX);
	ck_assert_uint_eq(loss.end, 0);
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_TOKENS);
	ck_assert_int_eq(evm_dead(m, 1, NULL), 0);
	ck_assert_int_eq(evm_dead(m, 2, NULL), 0);
	ck_assert_int_eq(evm_next(m, &a), EVM_NO_BUILDERS);
	evm_destroy(m);
}
END_TEST

START_TEST(test_static_waits_for_its_builder)
{
	/* Builder 1 returns nothing: static routing stops at its next batch
	 * though builder 0 has tokens; the manager gives that batch to 0. */
	for (int mode = 0; mode < 2; mode++) {
		struct evm_config c = config(mode ? EVM_STATIC : EVM_MANAGER, 2, 0, 1000, 10, 100,
					     10, 20);
		struct evm *m = make(&c, 30);
		struct evm_assignment a;
		for (int i = 0; i < 6; i++)
			expect_assign(m, 10u * i, 10, i % 2);
		ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_TOKENS);
		settle(m, 0, 0);
		expect_assign(m, 60, 10, 0);
		if (mode) {
			ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_TOKENS);
			ck_assert_uint_eq(view(m, 0).tokens, 20);
		} else {
			expect_assign(m, 70, 10, 0);
		}
		evm_destroy(m);
	}
	/* Static, a dead builder: its batches are still its own (the formula)
	 * and lost at once; a static batch waits for a builder to join. */
	struct evm_config c = config(EVM_STATIC, 2, 0, 100, 10, 4, 10, 20);
	struct evm *m = evm_create(&c);
	struct evm_assignment a;
	ck_assert_int_eq(evm_next(m, &a), EVM_WAIT_TOKENS);
	ck_assert_int_eq(evm_join(m, 0, 1000, 0), 0);
	ck_assert_int_eq(evm_dead(m, 1, NULL), 0);
	for (uint32_t k = 0; k < 10; k++) {
		enum evm_next r = evm_next(m, &a);
		if (r == EVM_WAIT_WINDOW) {
			settle(m, 0, 0);
			r = evm_next(m, &a);
		}
		ck_assert_int_eq(r, EVM_ASSIGNED);
		ck_assert_uint_eq(a.first, 10u * k);
		ck_assert_uint_eq(a.builder, k % 2);
	}
	ck_assert_uint_eq(view(m, 1).assigned, 50);
	ck_assert_uint_eq(view(m, 1).lost, 50);
	ck_assert_uint_eq(evm_totals(m).lost, 50);
	evm_destroy(m);
}
END_TEST

/* Tokens to spare: the manager's round-robin is the static formula, also
 * when the run starts inside a batch whose formula builder is not 0. */
START_TEST(test_manager_equals_static_with_tokens_to_spare)
{
	uint64_t rng = test_seed ^ 0x57A7;
	for (int round = 0; round < 50; round++) {
		uint32_t M = 1 + (uint32_t)rng_below(&rng, 7);
		uint32_t B = 1 + (uint32_t)rng_below(&rng, 50);
		uint64_t first = rng_below(&rng, 10000);
		uint64_t events = 1 + rng_below(&rng, 5000);
		struct evm_config cm = config(EVM_MANAGER, M, first, events, B, 8, B, 2 * B);
		struct evm_config cs = cm;
		cs.mode = EVM_STATIC;
		struct evm *mm = make(&cm, 4 * B), *ms = make(&cs, 4 * B);
		struct evm_assignment am, as;
		enum evm_next rm, rs;
		uint64_t ids = 0;
		while ((rm = evm_next(mm, &am)) == EVM_ASSIGNED) {
			rs = evm_next(ms, &as);
			REQUIRE(rs == EVM_ASSIGNED);
			REQUIRE(am.first == as.first && am.count == as.count && am.builder == as.builder);
			REQUIRE(as.builder == (as.first / B) % M);
			ids += am.count;
			settle(mm, am.builder, 0);
			settle(ms, as.builder, 0);
		}
		REQUIRE(rm == EVM_ALL_ASSIGNED);
		REQUIRE(evm_next(ms, &as) == EVM_ALL_ASSIGNED);
		REQUIRE(ids == events);
		evm_destroy(mm);
		evm_destroy(ms);
	}
}
END_TEST

/* ---- Randomised runs against a model of the builders ---- */

#define MODEL_MAX_BUILDERS 6u

/* A builder as the test plays it: the IDs it holds, what it decided and
 * what it told the manager. */
struct model_builder {
	uint64_t *held;          /* assigned, not decided: never more than slots */
	uint32_t held_count;
	uint32_t slots;
	uint64_t decided;
	uint64_t reported;       /* decided, as its last TOKEN said */
	uint64_t reported_below;
	bool joined;
	bool dead;
};

struct model {
	struct evm *m;
	struct evm_config c;
	uint64_t end;
	int16_t *owner;          /* [events]: each ID's builder, -1 unassigned */
	uint8_t *done;           /* [events]: decided by its builder */
	struct model_builder b[MODEL_MAX_BUILDERS];
	uint64_t assigned_end;
	uint64_t retired_below;
	uint32_t cursor;         /* manager: where round-robin looks first */
	uint32_t alive;
	uint64_t now;
};

/* What evm_next() must answer now, and to which builder. */
static enum evm_next model_expect(const struct model *md, uint32_t *builder)
{
	const struct evm_plan *p = &md->c.plan;
	if (md->assigned_end == md->end)
		return EVM_ALL_ASSIGNED;
	if (md->c.mode == EVM_MANAGER && md->alive == 0)
		return EVM_NO_BUILDERS;
	if (evm_totals(md->m).live_batches >= p->window_batches)
		return EVM_WAIT_WINDOW;
	uint64_t first;
	uint32_t count;
	evm_plan_batch(p, md->assigned_end / p->batch, &first, &count);
	struct evm_builder_view v;
	if (md->c.mode == EVM_STATIC) {
		*builder = (uint32_t)((md->assigned_end / p->batch) % p->builders);
		evm_builder_view(md->m, *builder, &v);
		return v.dead || (v.joined && v.tokens >= count) ? EVM_ASSIGNED : EVM_WAIT_TOKENS;
	}
	for (uint32_t i = 0; i < p->builders; i++) {
		*builder = (md->cursor + i) % p->builders;
		evm_builder_view(md->m, *builder, &v);
		if (v.joined && !v.dead && !v.busy) {
			REQUIRE(v.tokens >= count);
			return EVM_ASSIGNED;
		}
	}
	return EVM_WAIT_TOKENS;
}

/* Assigns while the manager will, checking each record; returns why it
 * stopped. */
static enum evm_next model_assign(struct model *md)
{
	const struct evm_plan *p = &md->c.plan;
	for (;;) {
		uint32_t want = UINT32_MAX;
		enum evm_next expect = model_expect(md, &want);
		struct evm_assignment a;
		enum evm_next r = evm_next(md->m, &a);
		REQUIRE(r == expect);
		if (r != EVM_ASSIGNED)
			return r;
		uint64_t first;
		uint32_t count;
		evm_plan_batch(p, md->assigned_end / p->batch, &first, &count);
		REQUIRE(a.first == md->assigned_end && a.first == first && a.count == count);
		REQUIRE(a.builder == want);
		if (md->c.mode == EVM_STATIC)
			REQUIRE(a.builder == (a.first / p->batch) % p->builders);
		md->cursor = (a.builder + 1) % p->builders;
		struct model_builder *mb = &md->b[a.builder];
		for (uint64_t id = a.first; id < a.first + a.count; id++) {
			REQUIRE(md->owner[id - p->first_event] == -1);   /* exactly once */
			md->owner[id - p->first_event] = (int16_t)a.builder;
			if (mb->dead)
				continue;
			REQUIRE(mb->held_count < mb->slots);             /* never past its slots */
			mb->held[mb->held_count++] = id;
		}
		md->assigned_end += a.count;
	}
}

/* Builder b decides up to n of the IDs it holds, in any order. */
static void model_decide(struct model *md, uint64_t *rng, uint32_t b, uint32_t n)
{
	struct model_builder *mb = &md->b[b];
	for (uint32_t i = 0; i < n && mb->held_count > 0; i++) {
		uint32_t j = (uint32_t)rng_below(rng, mb->held_count);
		md->done[mb->held[j] - md->c.plan.first_event] = 1;
		mb->held[j] = mb->held[--mb->held_count];
		mb->decided++;
	}
}

/* Builder b's TOKEN: its total and the lowest ID it still holds. */
static void model_report(struct model *md, uint32_t b)
{
	struct model_builder *mb = &md->b[b];
	uint64_t below = md->assigned_end;
	for (uint32_t i = 0; i < mb->held_count; i++)
		if (mb->held[i] < below)
			below = mb->held[i];
	REQUIRE(evm_tokens(md->m, b, mb->decided, below, ++md->now) == 0);
	mb->reported = mb->decided;
	mb->reported_below = below;
}

static void model_kill(struct model *md, uint32_t b)
{
	struct model_builder *mb = &md->b[b];
	struct evm_builder_view before;
	evm_builder_view(md->m, b, &before);
	struct evm_loss loss;
	REQUIRE(evm_dead(md->m, b, &loss) == 0);
	/* The loss is what it was given less what it said it decided. */
	REQUIRE(loss.events == before.assigned - mb->reported);
	REQUIRE(loss.events == 0 || loss.batches > 0);
	for (uint32_t i = 0; i < mb->held_count; i++)
		REQUIRE(loss.lowest <= mb->held[i] && mb->held[i] < loss.end);
	mb->dead = true;
	mb->held_count = 0;
	md->alive--;
}

/* The manager's books against the model's. */
static void model_check(struct model *md, uint64_t *rng)
{
	const struct evm_plan *p = &md->c.plan;
	struct evm_totals t = evm_totals(md->m);
	REQUIRE(t.assigned_end == md->assigned_end);
	REQUIRE(t.live_batches <= p->window_batches);
	REQUIRE(t.retired_below >= md->retired_below && t.retired_below <= t.assigned_end);
	/* Every ID retired was decided by its builder, or lost with it. */
	for (uint64_t id = md->retired_below; id < t.retired_below; id++) {
		int16_t o = md->owner[id - p->first_event];
		REQUIRE(o >= 0 && (md->done[id - p->first_event] || md->b[o].dead));
	}
	md->retired_below = t.retired_below;
	for (int i = 0; i < 8; i++) {
		uint64_t id = p->first_event + rng_below(rng, p->events);
		struct evm_assignment a;
		enum evm_lookup l = evm_owner(md->m, id, &a);
		if (id >= t.assigned_end)
			REQUIRE(l == EVM_UNASSIGNED);
		else if (id < t.retired_below)
			REQUIRE(l == EVM_RETIRED);
		else
			REQUIRE(l == EVM_OWNED && a.builder == (uint32_t)md->owner[id - p->first_event] &&
				a.first <= id && id < a.first + a.count);
	}
	for (uint32_t b = 0; b < p->builders; b++) {
		struct evm_builder_view v;
		evm_builder_view(md->m, b, &v);
		REQUIRE(v.assigned == v.decided + v.lost + v.in_flight);
		REQUIRE(v.decided == md->b[b].reported);
		if (v.joined && !v.dead)
			REQUIRE(v.in_flight <= v.slots && v.tokens + v.in_flight == v.slots);
		if (v.dead)
			REQUIRE(v.in_flight == 0 && v.tokens == 0);
	}
}

static void model_init(struct model *md, uint64_t *rng, enum evm_mode mode)
{
	uint32_t M = 1 + (uint32_t)rng_below(rng, MODEL_MAX_BUILDERS);
	uint32_t B = 1 + (uint32_t)rng_below(rng, rng_below(rng, 2) ? 8 : 100);
	uint32_t low = B + (uint32_t)rng_below(rng, B);
	uint32_t high = low + 1 + (uint32_t)rng_below(rng, 2 * B);
	*md = (struct model){
		.c = config(mode, M, rng_below(rng, 1000), 1 + rng_below(rng, 20000), B,
			    1 + (uint32_t)rng_below(rng, 64), low, high),
	};
	md->m = evm_create(&md->c);
	ck_assert_ptr_nonnull(md->m);
	md->end = md->c.plan.first_event + md->c.plan.events;
	md->owner = malloc(md->c.plan.events * sizeof *md->owner);
	md->done = calloc(md->c.plan.events, 1);
	ck_assert(md->owner != NULL && md->done != NULL);
	memset(md->owner, 0xff, md->c.plan.events * sizeof *md->owner);
	md->assigned_end = md->retired_below = md->c.plan.first_event;
	md->cursor = (uint32_t)((md->c.plan.first_event / B) % M);
	md->alive = M;
	for (uint32_t b = 0; b < M; b++) {
		md->b[b].slots = high + 1 + (uint32_t)rng_below(rng, 4 * B);
		md->b[b].held = malloc(md->b[b].slots * sizeof *md->b[b].held);
		ck_assert_ptr_nonnull(md->b[b].held);
	}
}

static void model_join(struct model *md, uint32_t b)
{
	REQUIRE(evm_join(md->m, b, md->b[b].slots, ++md->now) == 0);
	md->b[b].joined = true;
}

/* One step of the builders: someone joins, dies, or decides and reports. */
static void model_step(struct model *md, uint64_t *rng, uint32_t *kills_left)
{
	uint32_t M = md->c.plan.builders;
	uint32_t b = (uint32_t)rng_below(rng, M);
	uint64_t dice = rng_below(rng, 100);
	struct model_builder *mb = &md->b[b];
	if (mb->dead)
		return;
	if (!mb->joined) {
		if (dice < 10)
			model_join(md, b);
	} else if (dice < 2 && *kills_left > 0 && md->alive > 1) {
		(*kills_left)--;
		model_kill(md, b);
	} else {
		uint32_t n = dice < 30 ? mb->held_count : (uint32_t)rng_below(rng, mb->held_count + 1);
		model_decide(md, rng, b, n);
		if (dice % 4 != 0)
			model_report(md, b);
	}
}

static void model_run(uint64_t *rng, int round, enum evm_mode mode)
{
	struct model md;
	model_init(&md, rng, mode);
	uint32_t M = md.c.plan.builders;
	/* Some builders join at once, the rest later. */
	model_join(&md, (uint32_t)rng_below(rng, M));
	for (uint32_t b = 0; b < M; b++)
		if (!md.b[b].joined && rng_below(rng, 2))
			model_join(&md, b);
	uint32_t kills_left = (uint32_t)rng_below(rng, M);
	enum evm_next r;
	uint64_t steps = 0;
	while ((r = model_assign(&md)) != EVM_ALL_ASSIGNED) {
		REQUIRE(r != EVM_NO_BUILDERS);   /* one builder is always left */
		model_step(&md, rng, &kills_left);
		model_check(&md, rng);
		REQUIRE(++steps < 50000000u);
	}
	/* The end: the living decide the rest, everything retires. */
	for (uint32_t b = 0; b < M; b++) {
		if (!md.b[b].joined || md.b[b].dead)
			continue;
		model_decide(&md, rng, b, md.b[b].held_count);
		model_report(&md, b);
	}
	model_check(&md, rng);
	REQUIRE(evm_totals(md.m).retired_below == md.end);
	/* Every ID of the run assigned exactly once, and the books add up. */
	uint64_t per[MODEL_MAX_BUILDERS] = { 0 }, assigned = 0, lost = 0;
	for (uint64_t i = 0; i < md.c.plan.events; i++) {
		REQUIRE(md.owner[i] >= 0 && (uint32_t)md.owner[i] < M);
		per[md.owner[i]]++;
	}
	for (uint32_t b = 0; b < M; b++) {
		struct evm_builder_view v;
		evm_builder_view(md.m, b, &v);
		REQUIRE(v.assigned == per[b]);
		REQUIRE(v.in_flight == 0);
		assigned += v.assigned;
		lost += v.lost;
		free(md.b[b].held);
	}
	REQUIRE(assigned == md.c.plan.events);
	REQUIRE(evm_totals(md.m).lost == lost);
	if (round < 4)
		printf("test_evm: round %d, %s, %" PRIu32 " builders, batch %" PRIu32 ", window %" PRIu32
		       ", %" PRIu64 " events in %" PRIu64 " records, %" PRIu64 " lost, %" PRIu64 " steps\n",
		       round, evm_mode_name(mode), M, md.c.plan.batch, md.c.plan.window_batches,
		       md.c.plan.events, evm_totals(md.m).records, lost, steps);
	free(md.owner);
	free(md.done);
	evm_destroy(md.m);
}

/* A builder ten times slower than the other, both with a large window:
 * with backlog_ns its cap follows its pace, so it never holds more than
 * about backlog_ns of work and the fast one takes the rest; without, it
 * takes half of every batch until its window is full. */
static uint64_t slow_builder_share(uint64_t backlog_ns, uint64_t *slow_max_held)
{
	struct evm_config c = config(EVM_MANAGER, 2, 0, 200000, 64, 4096, 64, 256);
	c.backlog_ns = backlog_ns;
	struct evm *m = make(&c, 16384);
	uint64_t decided[2] = { 0, 0 };
	*slow_max_held = 0;
	/* 1 ms steps for 10 s: builder 0 decides 10 events a step, builder 1
	 * one, each a token per step. */
	for (uint64_t t = 1; t <= 10000; t++) {
		struct evm_assignment a;
		while (evm_next(m, &a) == EVM_ASSIGNED)
			;
		for (uint32_t b = 0; b < 2; b++) {
			struct evm_builder_view v = view(m, b);
			uint64_t step = b == 0 ? 10 : 1;
			uint64_t can = v.assigned - v.decided;
			decided[b] = v.decided + (can < step ? can : step);
			ck_assert_int_eq(evm_tokens(m, b, decided[b], 0, t * 1000000u), 0);
		}
		struct evm_builder_view slow = view(m, 1);
		if (t > 100 && slow.in_flight > *slow_max_held)
			*slow_max_held = slow.in_flight;
	}
	uint64_t share = view(m, 1).assigned;
	evm_destroy(m);
	return share;
}

START_TEST(test_backlog_follows_the_pace)
{
	uint64_t held_paced, held_slots;
	uint64_t paced = slow_builder_share(100000000u, &held_paced);
	uint64_t slots = slow_builder_share(0, &held_slots);
	/* 1 event/ms for 100 ms, or the floor of two batches (low_water + batch). */
	ck_assert_uint_le(held_paced, 128 + 64);
	ck_assert_uint_ge(held_slots, 16384 - 64);
	/* Paced, the slow builder gets about its pace: 10,000 in 10 s plus
	 * its backlog; by slots, its whole window at once. */
	ck_assert_uint_le(paced, 10000 + 400);
	ck_assert_uint_ge(slots, 16384);
	struct evm_builder_view v;
	struct evm_config c = config(EVM_MANAGER, 1, 0, 1000, 64, 64, 64, 256);
	c.backlog_ns = 100000000u;
	struct evm *m = make(&c, 16384);
	ck_assert(evm_builder_view(m, 0, &v));
	ck_assert_uint_eq(v.decided_per_s, 0);
	ck_assert_uint_eq(v.cap, 64 + 64);
	evm_destroy(m);
}
END_TEST

/* The cap of one builder fed over lanes, deciding per_ms events each 1 ms
 * step for a second. */
static uint64_t cap_with_lanes(uint32_t lanes, uint64_t per_ms)
{
	struct evm_config c = config(EVM_MANAGER, 1, 0, 2000000, 64, 4096, 64, 256);
	c.backlog_ns = 100000000u;
	struct evm *m = make(&c, 16384);
	ck_assert_int_eq(evm_set_lanes(m, 0, lanes), 0);
	for (uint64_t t = 1; t <= 1000; t++) {
		struct evm_assignment a;
		while (evm_next(m, &a) == EVM_ASSIGNED)
			;
		struct evm_builder_view v = view(m, 0);
		uint64_t can = v.assigned - v.decided;
		ck_assert_int_eq(evm_tokens(m, 0, v.decided + (can < per_ms ? can : per_ms), 0,
					    t * 1000000u), 0);
	}
	uint64_t cap = view(m, 0).cap;
	evm_destroy(m);
	return cap;
}

/* Over two rails a builder's batches alternate lanes: it holds a batch
 * arriving on each lane besides the one it builds, and backlog_ns per lane. */
START_TEST(test_backlog_per_lane)
{
	struct evm_config c = config(EVM_MANAGER, 2, 0, 1000, 64, 64, 64, 256);
	c.backlog_ns = 100000000u;
	struct evm *m = make(&c, 16384);
	ck_assert_int_eq(evm_set_lanes(m, 1, 2), 0);
	ck_assert_uint_eq(view(m, 0).cap, 64 + 64);
	ck_assert_uint_eq(view(m, 1).cap, 64 + 2 * 64);
	ck_assert_int_eq(evm_set_lanes(m, 2, 2), -ENOENT);
	ck_assert_int_eq(evm_set_lanes(m, 0, 0), -EINVAL);
	ck_assert_int_eq(evm_set_lanes(m, 0, EVM_MAX_LANES + 1), -EINVAL);
	evm_destroy(m);
	/* 10 events/ms: about 1000 in 100 ms on one lane, twice that on two. */
	uint64_t one = cap_with_lanes(1, 10), two = cap_with_lanes(2, 10);
	ck_assert_uint_ge(one, 900);
	ck_assert_uint_le(one, 1200);
	ck_assert_uint_ge(two, 2 * one - 20);
	ck_assert_uint_le(two, 2 * one + 20);
}
END_TEST

START_TEST(test_random_runs)
{
	uint64_t rng = test_seed;
	for (int round = 0; round < 40; round++)
		model_run(&rng, round, round % 2 ? EVM_STATIC : EVM_MANAGER);
}
END_TEST

START_TEST(test_allocates_nothing)
{
	struct evm_config c = config(EVM_MANAGER, 4, 0, 2000000, 16, 256, 16, 48);
	struct evm *m = make(&c, 256);
	/* 4 builders x 64 bytes and 256 window batches x 4 bytes. */
	ck_assert_uint_le(evm_memory_bytes(m), 256 + 4 * 64 + 256 * 4);
	ck_assert_uint_ge(evm_memory_bytes(m), 4 * 64 + 256 * 4);
	uint64_t rng = test_seed ^ 0xA11;
	uint64_t decided[4] = { 0 };
	struct mallinfo2 before = mallinfo2();
	struct evm_assignment a;
	enum evm_next r;
	uint64_t now = 0;
	while ((r = evm_next(m, &a)) != EVM_ALL_ASSIGNED) {
		if (r == EVM_ASSIGNED) {
			evm_owner(m, a.first, &a);
			continue;
		}
		uint32_t b = (uint32_t)rng_below(&rng, 4);
		struct evm_builder_view v;
		evm_builder_view(m, b, &v);
		decided[b] = v.assigned;
		evm_tokens(m, b, decided[b], evm_totals(m).assigned_end, ++now);
	}
	struct mallinfo2 after = mallinfo2();
	ck_assert_uint_eq(after.uordblks, before.uordblks);
	ck_assert_uint_eq(after.hblkhd, before.hblkhd);
	evm_destroy(m);
}
END_TEST

static Suite *evm_suite(void)
{
	Suite *s = suite_create("evm");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_refuses);
	tcase_add_test(tc, test_round_robin);
	tcase_add_test(tc, test_batch_boundaries);
	tcase_add_test(tc, test_hysteresis);
	tcase_add_test(tc, test_token_errors);
	tcase_add_test(tc, test_tokens_bound_in_flight);
	tcase_add_test(tc, test_window_and_lookup);
	tcase_add_test(tc, test_dead_builder);
	tcase_add_test(tc, test_static_waits_for_its_builder);
	tcase_add_test(tc, test_manager_equals_static_with_tokens_to_spare);
	tcase_add_test(tc, test_backlog_follows_the_pace);
	tcase_add_test(tc, test_backlog_per_lane);
	tcase_add_test(tc, test_random_runs);
	tcase_add_test(tc, test_allocates_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_evm: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(evm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
