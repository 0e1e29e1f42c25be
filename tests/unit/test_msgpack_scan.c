/* Unit tests of common/wire/msgpack_scan: the walk accepts every complete
 * object msgpack-c packs (and says how long it is), and refuses truncated
 * bodies, byte 0xc1, counts the bytes cannot hold and nesting past
 * MPS_MAX_DEPTH, naming the offset; the byte kinds match what msgpack-c
 * builds from each format byte. */
#include <check.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "wire/msgpack_scan.h"

/* A packed object with every kind in it: ints of each width, a float, a
 * str, a bin, an ext, nil, bools, nested arrays and maps. */
static size_t pack_sample(msgpack_sbuffer *sb)
{
	msgpack_packer pk;
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "ints", 4);
	msgpack_pack_array(&pk, 8);
	msgpack_pack_uint8(&pk, 7);
	msgpack_pack_uint16(&pk, 300);
	msgpack_pack_uint32(&pk, 70000);
	msgpack_pack_uint64(&pk, UINT64_MAX);
	msgpack_pack_int8(&pk, -3);
	msgpack_pack_int64(&pk, INT64_MIN);
	msgpack_pack_double(&pk, 1.5);
	msgpack_pack_float(&pk, 2.5f);
	msgpack_pack_str_with_body(&pk, "other", 5);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_nil(&pk);
	msgpack_pack_true(&pk);
	msgpack_pack_false(&pk);
	msgpack_pack_bin_with_body(&pk, "\x01\x02", 2);
	msgpack_pack_ext_with_body(&pk, "abcd", 4, 1);
	msgpack_pack_str_with_body(&pk, "empty", 5);
	msgpack_pack_map(&pk, 0);
	return sb->size;
}

START_TEST(test_complete)
{
	msgpack_sbuffer sb;
	size_t n = pack_sample(&sb), used = 0;
	char err[160] = "";

	ck_assert(mps_scan((const uint8_t *)sb.data, n, &used, err, sizeof err));
	ck_assert_uint_eq(used, n);
	/* The object's length, not the buffer's: what follows is not read. */
	uint8_t more[512];
	memcpy(more, sb.data, n);
	more[n] = 0xc1;
	ck_assert(mps_scan(more, n + 1, &used, NULL, 0));
	ck_assert_uint_eq(used, n);
	/* Every shorter prefix is refused, with a reason. */
	for (size_t k = 0; k < n; k++) {
		err[0] = '\0';
		ck_assert(!mps_scan((const uint8_t *)sb.data, k, &used, err, sizeof err));
		ck_assert_msg(strstr(err, "truncated") != NULL || strstr(err, "declares") != NULL,
			      "prefix %zu: %s", k, err);
	}
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

START_TEST(test_refused)
{
	char err[160];
	size_t used;
	/* array32 of 2^32-1 elements and one byte after it */
	const uint8_t huge[] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01 };
	const uint8_t invalid[] = { 0x92, 0x01, 0xc1 };
	const uint8_t str_past[] = { 0xd9, 0x10, 'a' };

	ck_assert(!mps_scan(huge, sizeof huge, &used, err, sizeof err));
	ck_assert_str_eq(err, "array at body offset 0 declares 4294967295 elements but only 1 byte(s) follow");
	ck_assert(!mps_scan(invalid, sizeof invalid, &used, err, sizeof err));
	ck_assert_str_eq(err, "invalid msgpack byte 0xc1 at body offset 2");
	ck_assert(!mps_scan(str_past, sizeof str_past, &used, err, sizeof err));
	ck_assert_str_eq(err, "msgpack data truncated: a str at body offset 0 runs past the end of the 3-byte body");
	/* A NULL or empty err buffer is fine. */
	ck_assert(!mps_scan(invalid, sizeof invalid, &used, NULL, 0));
	ck_assert(!mps_scan(invalid, sizeof invalid, &used, err, 0));
}
END_TEST

START_TEST(test_depth)
{
	uint8_t buf[MPS_MAX_DEPTH + 2];
	char err[160];
	size_t used;

	/* MPS_MAX_DEPTH nested one-element arrays around a 0: accepted. */
	memset(buf, 0x91, MPS_MAX_DEPTH);
	buf[MPS_MAX_DEPTH] = 0x00;
	ck_assert(mps_scan(buf, MPS_MAX_DEPTH + 1, &used, err, sizeof err));
	ck_assert_uint_eq(used, MPS_MAX_DEPTH + 1);
	/* One more: refused where the container too many begins. */
	memset(buf, 0x91, MPS_MAX_DEPTH + 1);
	buf[MPS_MAX_DEPTH + 1] = 0x00;
	ck_assert(!mps_scan(buf, MPS_MAX_DEPTH + 2, &used, err, sizeof err));
	ck_assert_str_eq(err, "msgpack containers nested deeper than 16 at body offset 16");
}
END_TEST

/* Each format byte named as msgpack-c names the object it builds from it. */
START_TEST(test_byte_kinds)
{
	static const struct {
		uint8_t b;
		const char *kind;
	} cases[] = {
		{ 0x00, "a uint" }, { 0x7f, "a uint" }, { 0xcc, "a uint" }, { 0xcf, "a uint" },
		{ 0xe0, "an int" }, { 0xd0, "an int" }, { 0xd3, "an int" },
		{ 0x80, "a map" }, { 0xde, "a map" }, { 0xdf, "a map" },
		{ 0x90, "an array" }, { 0xdc, "an array" }, { 0xdd, "an array" },
		{ 0xa0, "a str" }, { 0xd9, "a str" }, { 0xdb, "a str" },
		{ 0xc0, "a nil" }, { 0xc2, "a bool" }, { 0xc3, "a bool" },
		{ 0xc4, "a bin" }, { 0xc6, "a bin" }, { 0xca, "a float" }, { 0xcb, "a float" },
		{ 0xc1, "an invalid byte" }, { 0xc7, "an ext" }, { 0xd4, "an ext" }, { 0xd8, "an ext" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_msg(strcmp(mps_byte_kind(cases[i].b), cases[i].kind) == 0, "0x%02x: %s",
			      cases[i].b, mps_byte_kind(cases[i].b));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("msgpack_scan");
	TCase *tc = tcase_create("scan");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_complete);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_byte_kinds);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
