/* Unit tests of common/wire/text.c: the name sets, the UTF-8 check, and each
 * escaper with the bytes of a hostile peer (quote, backslash, newline,
 * bytes >= 0x80 that are not UTF-8), including truncation, which must never
 * cut an escape or a character in half. Random bytes: every escaper's output
 * is valid UTF-8 with no control byte of its kind. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/prom.h"
#include "wire/text.h"

static uint64_t test_seed;

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

START_TEST(test_sets)
{
	for (unsigned c = 0; c < 256; c++) {
		bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		ck_assert_int_eq(text_host_char((unsigned char)c),
				 alnum || c == '-' || c == '.' || c == '_' || c == ':');
		ck_assert_int_eq(text_name_char((unsigned char)c),
				 alnum || c == '-' || c == '.' || c == '_');
	}
}
END_TEST

START_TEST(test_utf8)
{
	static const struct {
		const char *s;
		bool valid;
	} cases[] = {
		{ "", true }, { "plain", true }, { "h\xc3\xa9te", true }, { "\xe2\x82\xac", true },
		{ "\xf0\x9f\x98\x80", true }, { "\xef\xbf\xbd", true },
		{ "\xff", false }, { "\x80", false }, { "\xc3", false }, { "\xc0\xaf", false },
		{ "\xe0\x80\xaf", false }, { "\xed\xa0\x80", false }, { "\xf4\x90\x80\x80", false },
		{ "\xf8\x88\x80\x80\x80", false }, { "ok\xe2\x82", false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_msg(text_utf8_valid(cases[i].s, strlen(cases[i].s)) == cases[i].valid,
			      "case %zu", i);
}
END_TEST

START_TEST(test_escapers)
{
	char out[128];
	const char *hostile = "a\"b\\c\nd\xff" "e\xc3\xa9";

	text_to_utf8(out, sizeof out, hostile);
	ck_assert_str_eq(out, "a\"b\\c\nd\xef\xbf\xbd" "e\xc3\xa9");
	text_json_escape(out, sizeof out, hostile);
	ck_assert_str_eq(out, "a\\\"b\\\\c\\u000ad\\ufffde\xc3\xa9");
	text_log_escape(out, sizeof out, hostile, strlen(hostile));
	ck_assert_str_eq(out, "a\"b\\c\\x0ad\\xffe\xc3\xa9");
	text_prom_label_escape(out, sizeof out, hostile);
	ck_assert_str_eq(out, "a\\\"b\\\\c\\nd\xef\xbf\xbd" "e\xc3\xa9");

	/* Truncation stops before an escape or a character that does not fit. */
	ck_assert_uint_eq(text_json_escape(out, 4, "ab\n"), 2);
	ck_assert_str_eq(out, "ab");
	ck_assert_uint_eq(text_log_escape(out, 5, "a\r", 2), 1);
	ck_assert_str_eq(out, "a");
	ck_assert_uint_eq(text_to_utf8(out, 4, "ab\xc3\xa9"), 2);
	ck_assert_str_eq(out, "ab");
	ck_assert_uint_eq(text_prom_label_escape(out, 1, "x"), 0);
	ck_assert_str_eq(out, "");

	/* A label list as the exposition format wants it. */
	char labels[64] = "";
	prom_label_add(labels, sizeof labels, "host", "a\"b\\c\nd");
	prom_label_add(labels, sizeof labels, "id", "3");
	ck_assert_str_eq(labels, "host=\"a\\\"b\\\\c\\nd\",id=\"3\"");
}
END_TEST

/* Whether out[0..k) is UTF-8 without control bytes (newline allowed when
 * nl); the per-escaper rules are checked by the caller. */
static bool clean(const char *out, size_t k, bool nl)
{
	if (!text_utf8_valid(out, k))
		return false;
	for (size_t i = 0; i < k; i++) {
		unsigned char c = (unsigned char)out[i];
		if ((c < 0x20 && !(nl && c == '\n')) || c == 0x7f)
			return false;
	}
	return true;
}

START_TEST(test_random_bytes)
{
	uint64_t s = test_seed;
	char in[64], out[512];
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = rng_next(&s) % sizeof in;
		for (size_t i = 0; i < n; i++)
			in[i] = (char)(1 + rng_next(&s) % 255);
		in[n] = '\0';
		size_t k = text_to_utf8(out, sizeof out, in);
		bool ok = text_utf8_valid(out, k);
		k = text_json_escape(out, sizeof out, in);
		ok = ok && clean(out, k, false);
		k = text_log_escape(out, sizeof out, in, n);
		ok = ok && clean(out, k, false);
		k = text_prom_label_escape(out, sizeof out, in);
		ok = ok && clean(out, k, false);
		for (size_t i = 0; ok && i < k; i++) {
			if (out[i] == '\\') {
				ok = out[i + 1] == '\\' || out[i + 1] == '"' || out[i + 1] == 'n';
				i++;
			} else {
				ok = out[i] != '"';
			}
		}
		ck_assert_msg(ok, "iteration %d (seed %" PRIu64 ")", iter, test_seed);
	}
}
END_TEST

START_TEST(test_duration)
{
	char d[TEXT_DURATION_BYTES];
	ck_assert_str_eq(text_duration(d, 0), "0 ns");
	ck_assert_str_eq(text_duration(d, 9999), "9999 ns");
	ck_assert_str_eq(text_duration(d, 10000), "10.0 us");
	ck_assert_str_eq(text_duration(d, -12345), "-12.3 us");
	ck_assert_str_eq(text_duration(d, 9999999), "10000.0 us");
	ck_assert_str_eq(text_duration(d, 10000000), "10.00 ms");
	ck_assert_str_eq(text_duration(d, -4560000000), "-4560.00 ms");
	ck_assert_ptr_eq(text_duration(d, INT64_MIN), d);
	ck_assert_str_eq(d, "-9223372036854.78 ms");
}
END_TEST

static Suite *text_suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");
	tcase_add_test(tc, test_sets);
	tcase_add_test(tc, test_utf8);
	tcase_add_test(tc, test_escapers);
	tcase_add_test(tc, test_random_bytes);
	tcase_add_test(tc, test_duration);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_text: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(text_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
