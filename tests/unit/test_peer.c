/* Unit tests of builderd/peer.c: the run's peer table, sources first then
 * readers, found by role and id, counted and indexed alike. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/hub/credits.h"
#include "builderd/peer.h"

START_TEST(test_layout)
{
	struct peer_table t;
	ck_assert_int_eq(peer_table_init(&t, 3, 2), 0);
	ck_assert_uint_eq(peer_count(&t), 5);
	for (uint32_t i = 0; i < peer_count(&t); i++) {
		const struct peer *p = peer_at(&t, i);
		ck_assert_int_eq(p->role, i < 3 ? CTL_ROLE_SOURCE : CTL_ROLE_READER);
		ck_assert_uint_eq(p->id, i < 3 ? i : i - 3);
		ck_assert_uint_eq(peer_index(&t, p), i);
		ck_assert(!p->connected && !p->reported && !p->lost && p->conn == NULL);
		ck_assert_ptr_eq(peer_find(&t, p->role, p->id), p);
	}
	ck_assert_ptr_eq(peer_source(&t, 2), peer_at(&t, 2));
	ck_assert_ptr_eq(peer_reader(&t, 0), peer_at(&t, 3));
	ck_assert_ptr_eq(peer_reader(&t, 1), peer_at(&t, 4));
	peer_table_free(&t);
	ck_assert_ptr_null(t.peers);
}
END_TEST

/* --role hub: the builders after the readers, found by role and id. */
START_TEST(test_builders_layout)
{
	struct peer_table t;
	ck_assert_int_eq(peer_table_init_builders(&t, 2, 1, 3), 0);
	ck_assert_uint_eq(peer_count(&t), 6);
	for (uint32_t b = 0; b < 3; b++) {
		struct peer *p = peer_at(&t, 3 + b);
		ck_assert_int_eq(p->role, CTL_ROLE_BUILDER);
		ck_assert_uint_eq(p->id, b);
		ck_assert_ptr_eq(peer_builder(&t, b), p);
		ck_assert_ptr_eq(peer_find(&t, CTL_ROLE_BUILDER, b), p);
	}
	ck_assert_ptr_null(peer_find(&t, CTL_ROLE_BUILDER, 3));
	ck_assert_int_eq(peer_reader(&t, 0)->role, CTL_ROLE_READER);
	peer_table_free(&t);
}
END_TEST

/* An id beyond the run, or a role the run has no table for, is no peer:
 * the greeting refuses it as unknown_peer. */
START_TEST(test_find_out_of_range)
{
	struct peer_table t;
	ck_assert_int_eq(peer_table_init(&t, 2, 1), 0);
	ck_assert_ptr_null(peer_find(&t, CTL_ROLE_SOURCE, 2));
	ck_assert_ptr_null(peer_find(&t, CTL_ROLE_READER, 1));
	ck_assert_ptr_null(peer_find(&t, CTL_ROLE_READER, UINT32_MAX));
	ck_assert_ptr_null(peer_find(&t, CTL_ROLE_BUILDER, 0));
	ck_assert_ptr_nonnull(peer_find(&t, CTL_ROLE_READER, 0));
	peer_table_free(&t);
}
END_TEST

/* Reports are the table's: freed with it. */
START_TEST(test_free_reports)
{
	struct peer_table t;
	ck_assert_int_eq(peer_table_init(&t, 1, 1), 0);
	peer_at(&t, 0)->report = calloc(1, sizeof *peer_at(&t, 0)->report);
	peer_at(&t, 1)->report = calloc(1, sizeof *peer_at(&t, 1)->report);
	peer_table_free(&t);
	peer_table_free(&t);   /* twice is harmless */
}
END_TEST

START_TEST(test_words)
{
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_SOURCE), "Source");
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_READER), "Reader");
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_BUILDER), "Builder");
	struct peer p;
	memset(&p, 0, sizeof p);
	ck_assert_str_eq(peer_how_gone(&p), "died");
	p.stuck = true;
	ck_assert_str_eq(peer_how_gone(&p), "stuck");
	p.stalled = true;
	ck_assert_str_eq(peer_how_gone(&p), "stalled");
}
END_TEST

/* When a reader is due a new admission limit (builderd/hub/credits.c). */
START_TEST(test_credits_due)
{
	struct peer p;
	memset(&p, 0, sizeof p);
	const uint64_t t0 = 10 * CREDITS_MIN_INTERVAL_NS;
	ck_assert(!credits_due(&p, 100, 64, true, t0));          /* no control link */
	p.conn = (struct msgconn *)(uintptr_t)1;                 /* up; not dereferenced */
	p.credit_sent = 100;
	ck_assert(!credits_due(&p, 100, 64, true, t0));          /* nothing new */
	ck_assert(!credits_due(&p, 99, 64, true, t0));
	ck_assert(credits_due(&p, 101, 64, true, t0));           /* the tick sends any advance */
	ck_assert(!credits_due(&p, 107, 64, false, t0));         /* between ticks: window/8 */
	ck_assert(credits_due(&p, 108, 64, false, t0));
	p.credit_sent_ns = t0 - CREDITS_MIN_INTERVAL_NS + 1;     /* one just went out */
	ck_assert(!credits_due(&p, 1000, 64, true, t0));
	p.credit_sent_ns = t0 - CREDITS_MIN_INTERVAL_NS;
	ck_assert(credits_due(&p, 1000, 64, true, t0));
	ck_assert(credits_due(&p, 101, 4, false, t0));           /* a window under 8: step 1 */
}
END_TEST

static Suite *peers_suite(void)
{
	Suite *s = suite_create("peers");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_find_out_of_range);
	tcase_add_test(tc, test_builders_layout);
	tcase_add_test(tc, test_free_reports);
	tcase_add_test(tc, test_words);
	tcase_add_test(tc, test_credits_due);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peers_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
