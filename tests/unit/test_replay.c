/* Unit tests of common/sys/replay.c with time passed in: a nonce is fresh
 * once and a replay while its request's time is within the skew; it is
 * forgotten only after that, when its request would be refused as stale
 * anyway; when every entry is still in its window a new nonce is refused
 * as full (never an old one forgotten), and taken again once one expires. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "sys/replay.h"

#define SKEW_MS 30000u

static void nonce_of(unsigned i, char out[REPLAY_NONCE_HEX + 1])
{
	snprintf(out, REPLAY_NONCE_HEX + 1, "%032x", i);
}

START_TEST(test_fresh_once_then_replayed)
{
	struct replay_set *s = replay_new(SKEW_MS);
	ck_assert_ptr_nonnull(s);
	char a[REPLAY_NONCE_HEX + 1], b[REPLAY_NONCE_HEX + 1];
	nonce_of(1, a);
	nonce_of(2, b);
	uint64_t t = 1000000;
	ck_assert_int_eq(replay_check(s, a, t, t), REPLAY_FRESH);
	ck_assert_int_eq(replay_check(s, a, t, t + 1000), REPLAY_REPLAYED);
	ck_assert_int_eq(replay_check(s, b, t, t + 1000), REPLAY_FRESH);
	/* Signed 30 s ahead of us: kept until 30 s past its time, 60 s from now. */
	ck_assert_int_eq(replay_check(s, a, t, t + SKEW_MS), REPLAY_REPLAYED);
	char c[REPLAY_NONCE_HEX + 1];
	nonce_of(3, c);
	ck_assert_int_eq(replay_check(s, c, t + SKEW_MS, t), REPLAY_FRESH);
	ck_assert_int_eq(replay_check(s, c, t + SKEW_MS, t + 2 * SKEW_MS), REPLAY_REPLAYED);
	ck_assert_uint_eq(replay_live(s, t + SKEW_MS), 3);
	ck_assert_uint_eq(replay_live(s, t + SKEW_MS + 1), 1);
	ck_assert_uint_eq(replay_live(s, t + 2 * SKEW_MS + 1), 0);
	replay_free(s);
}
END_TEST

START_TEST(test_full_refuses_rather_than_forgets)
{
	struct replay_set *s = replay_new(SKEW_MS);
	char n[REPLAY_NONCE_HEX + 1];
	uint64_t t = 5000000;
	for (unsigned i = 0; i < REPLAY_MAX_NONCES; i++) {
		nonce_of(i, n);
		/* The first one signed earliest: it expires first. */
		ck_assert_int_eq(replay_check(s, n, t + (i == 0 ? 0 : 1000), t), REPLAY_FRESH);
	}
	nonce_of(REPLAY_MAX_NONCES, n);
	ck_assert_int_eq(replay_check(s, n, t, t + 10), REPLAY_FULL);
	/* Every one still a replay. */
	nonce_of(0, n);
	ck_assert_int_eq(replay_check(s, n, t, t + 20), REPLAY_REPLAYED);
	/* Once the first is past its window its place is free. */
	nonce_of(REPLAY_MAX_NONCES, n);
	ck_assert_int_eq(replay_check(s, n, t + SKEW_MS, t + SKEW_MS + 1), REPLAY_FRESH);
	nonce_of(REPLAY_MAX_NONCES + 1, n);
	ck_assert_int_eq(replay_check(s, n, t + SKEW_MS, t + SKEW_MS + 1), REPLAY_FULL);
	ck_assert_uint_eq(replay_live(s, t + SKEW_MS + 1), REPLAY_MAX_NONCES);
	replay_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("replay");
	TCase *tc = tcase_create("replay");
	tcase_add_test(tc, test_fresh_once_then_replayed);
	tcase_add_test(tc, test_full_refuses_rather_than_forgets);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
