/* Unit tests of common/wire/probemsg: the clock probe datagram round trip,
 * byte order, and every refusal of the decoder. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "wire/probemsg.h"

START_TEST(test_roundtrip)
{
	struct prb_msg m = { .type = PRB_REPLY, .flags = PRB_F_T2_KERNEL | PRB_F_FOLLOWUP,
			     .token = 0x0123456789abcdefULL, .sequence = 42,
			     .t2_ns = 1795980992123456789ULL, .t3_ns = UINT64_MAX }, d;
	uint8_t buf[PRB_MSG_SIZE];

	prb_encode(&m, buf);
	ck_assert_int_eq(buf[0], 'E');
	ck_assert_int_eq(buf[3], 'B');
	ck_assert(prb_decode(&d, buf, sizeof buf));
	ck_assert_int_eq(d.type, m.type);
	ck_assert_int_eq(d.flags, m.flags);
	ck_assert_uint_eq(d.token, m.token);
	ck_assert_uint_eq(d.sequence, m.sequence);
	ck_assert_uint_eq(d.t2_ns, m.t2_ns);
	ck_assert_uint_eq(d.t3_ns, m.t3_ns);
	/* Big-endian on the wire. */
	ck_assert_int_eq(buf[23], 42);
}
END_TEST

START_TEST(test_decode_refuses)
{
	struct prb_msg m = { .type = PRB_PROBE, .sequence = 1 }, d;
	uint8_t buf[PRB_MSG_SIZE + 1];

	prb_encode(&m, buf);
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE - 1));
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE + 1));
	buf[0] ^= 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
	buf[0] ^= 1;
	buf[4] = PRB_VERSION + 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
	buf[4] = PRB_VERSION;
	for (int t = 0; t < 256; t++) {
		buf[5] = (uint8_t)t;
		ck_assert_int_eq(prb_decode(&d, buf, PRB_MSG_SIZE), t >= PRB_PROBE && t <= PRB_FOLLOWUP);
	}
	buf[5] = PRB_PROBE;
	buf[6] = 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("probemsg");
	TCase *tc = tcase_create("format");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_decode_refuses);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
