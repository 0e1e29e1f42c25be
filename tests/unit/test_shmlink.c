/* Unit tests of common/io/shmlink.c: what builderd and readoutd agree on for a
 * shared-memory data path (names and the ring capacity rule), checked
 * against the ring itself: a ring of the computed capacity holds a largest
 * frame, and one of half that does not. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/frame.h"
#include "io/shmlink.h"
#include "io/shmring.h"

START_TEST(test_names)
{
	ck_assert(shl_name_valid("run1"));
	ck_assert(shl_name_valid("daq12345"));
	ck_assert(shl_name_valid("a.b_c-D9"));
	ck_assert(shl_name_valid("x123456789012345678901234567890123456789012345678") == false);
	ck_assert(shl_name_valid("x12345678901234567890123456789012345678901234567"));
	ck_assert(!shl_name_valid(""));
	ck_assert(!shl_name_valid("a/b"));
	ck_assert(!shl_name_valid("."));
	ck_assert(!shl_name_valid(".."));
	ck_assert(!shl_name_valid(".hidden"));
	ck_assert(!shl_name_valid("a b"));
	ck_assert(!shl_name_valid("a\tb"));
	ck_assert(!shl_name_valid("caf\xc3\xa9"));

	char buf[96];
	shl_socket_name(buf, sizeof buf, "run1");
	ck_assert_str_eq(buf, "es-run1");
	shl_segment_name(buf, sizeof buf, "run1", 7);
	ck_assert_str_eq(buf, "/es-run1-r7");
}
END_TEST

START_TEST(test_capacity_rule)
{
	bool raised;
	/* Defaults: 4 MiB holds the largest fragment, unchanged. */
	ck_assert_uint_eq(shl_capacity(4u << 20, FRM_MAX_PAYLOAD_BYTES, &raised), 4u << 20);
	ck_assert(!raised);
	/* Not a power of two: rounded up. */
	ck_assert_uint_eq(shl_capacity(5000, 1000, &raised), 8192);
	ck_assert(raised);
	/* Too small for two records of the largest frame: raised. 4000 B of
	 * payload make a record of 8 + 42 + 4000 = 4050, aligned 4056. */
	ck_assert_uint_eq(shl_capacity(4096, 4000, &raised), 8192);
	ck_assert(raised);
	/* 8 + 42 + 1998 = 2048: two fill 4096 exactly. */
	ck_assert_uint_eq(shl_capacity(4096, 1998, &raised), 4096);
	ck_assert(!raised);
	ck_assert_uint_eq(shl_capacity(4096, 1999, &raised), 8192);
	ck_assert(raised);
	/* Never below the ring's minimum nor above its maximum. */
	ck_assert_uint_eq(shl_capacity(1, 0, &raised), SHR_MIN_CAPACITY_BYTES);
	ck_assert_uint_eq(shl_capacity(SHR_MAX_CAPACITY_BYTES * 2, 0, &raised),
			  SHR_MAX_CAPACITY_BYTES);
}
END_TEST

/* The rule agrees with the ring: the computed capacity takes a largest
 * frame, half of it would not. */
START_TEST(test_capacity_fits_ring)
{
	static const uint32_t payloads[] = { 0, 64, 1000, 1998, 1999, 4000, 65536,
					     FRM_MAX_PAYLOAD_BYTES };
	uint32_t payload = payloads[_i];
	bool raised;
	uint64_t cap = shl_capacity(SHR_MIN_CAPACITY_BYTES, payload, &raised);
	char name[64];
	snprintf(name, sizeof name, "/es-unit-shmlink-%d", (int)getpid());
	struct shr_ring r;
	ck_assert_int_ge(shr_create(&r, name, 1, cap), 0);
	ck_assert_uint_ge(shr_max_payload(&r), FRM_HEADER_BYTES + payload);
	shr_close(&r, -1);
	if (cap > SHR_MIN_CAPACITY_BYTES) {
		ck_assert_int_ge(shr_create(&r, name, 1, cap / 2), 0);
		ck_assert_uint_lt(shr_max_payload(&r), FRM_HEADER_BYTES + payload);
		shr_close(&r, -1);
	}
	ck_assert_int_eq(shr_unlink(name), 0);
}
END_TEST

static Suite *shmlink_suite(void)
{
	Suite *s = suite_create("shmlink");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_capacity_rule);
	tcase_add_loop_test(tc, test_capacity_fits_ring, 0, 8);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(shmlink_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
