/* Unit tests of common/io/ctlowner.c, one operator in control of the
 * control endpoint: names checked, control taken when free, refused to a
 * second operator with both names, taken over only when asked, released
 * only by its holder, and requests allowed while nobody holds it. */
#include <check.h>
#include <string.h>

#include "io/ctlowner.h"

START_TEST(test_names)
{
	char why[256];
	json_t *good = json_string("alice@stand");
	json_t *empty = json_string("");
	json_t *number = json_integer(3);
	json_t *ctrl = json_string("bad\tname");
	char longer[CTLOWNER_NAME_MAX + 2];
	memset(longer, 'x', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	json_t *too_long = json_string(longer);
	ck_assert(ctlowner_name_ok(good, why, sizeof why));
	ck_assert(!ctlowner_name_ok(NULL, why, sizeof why));
	ck_assert(!ctlowner_name_ok(empty, why, sizeof why));
	ck_assert(!ctlowner_name_ok(number, why, sizeof why));
	ck_assert(!ctlowner_name_ok(ctrl, why, sizeof why));
	ck_assert(!ctlowner_name_ok(too_long, why, sizeof why));
	json_decref(good);
	json_decref(empty);
	json_decref(number);
	json_decref(ctrl);
	json_decref(too_long);
}
END_TEST

START_TEST(test_one_operator_at_a_time)
{
	struct ctlowner o = { 0 };
	char why[256];
	/* Free: every request may go on, counted nowhere. */
	ck_assert(ctlowner_allows(&o, NULL, 1, why, sizeof why));
	ck_assert(ctlowner_allows(&o, "bob", 1, why, sizeof why));
	ck_assert(ctlowner_take(&o, "alice", false, 1000, why, sizeof why));
	ck_assert(ctlowner_take(&o, "alice", false, 1001, why, sizeof why));   /* one's own again */
	ck_assert(ctlowner_allows(&o, "alice", 1002, why, sizeof why));
	/* Another, or nobody named: refused with the holder's name. */
	ck_assert(!ctlowner_allows(&o, "bob", 1003, why, sizeof why));
	ck_assert_ptr_nonnull(strstr(why, "alice"));
	ck_assert(!ctlowner_allows(&o, NULL, 1004, why, sizeof why));
	ck_assert_uint_eq(o.refused, 2);
	/* Taking it from alice needs asking. */
	ck_assert(!ctlowner_take(&o, "bob", false, 1005, why, sizeof why));
	ck_assert_ptr_nonnull(strstr(why, "alice"));
	ck_assert(ctlowner_take(&o, "bob", true, 1006, why, sizeof why));
	ck_assert_str_eq(o.name, "bob");
	ck_assert_str_eq(o.previous, "alice");
	ck_assert_uint_eq(o.takeovers, 1);
	/* Only the holder releases. */
	ck_assert(!ctlowner_release(&o, "alice", why, sizeof why));
	ck_assert(ctlowner_release(&o, "bob", why, sizeof why));
	ck_assert(!o.held);
	ck_assert(ctlowner_allows(&o, "carol", 1007, why, sizeof why));
	json_t *j = ctlowner_json(&o);
	ck_assert(json_is_null(json_object_get(j, "operator")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "releases")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "refused")), 2);
	json_decref(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctlowner");
	TCase *tc = tcase_create("control");
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_one_operator_at_a_time);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
