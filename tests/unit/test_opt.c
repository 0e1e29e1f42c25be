/* Unit tests of common/sys/opt.c: each parser accepts what --help promises and
 * refuses the rest, naming the flag. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sys/opt.h"

/* The last message opt_error() printed, captured from stderr. */
static char captured[512];

static bool capture(bool (*fn)(void))
{
	fflush(stderr);
	int saved = dup(2);
	FILE *tmp = tmpfile();
	dup2(fileno(tmp), 2);
	bool ok = fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(captured, 1, sizeof captured - 1, tmp);
	captured[n] = '\0';
	fclose(tmp);
	return ok;
}

static uint64_t u64_out;
static const char *arg;
static bool call_u64(void)
{
	return opt_u64("--rate", arg, 0, 1000000, &u64_out);
}

START_TEST(test_u64)
{
	static const struct {
		const char *arg;
		bool ok;
		uint64_t value;
	} cases[] = {
		{ "0", true, 0 }, { "42", true, 42 }, { "1000000", true, 1000000 },
		{ "50k", true, 50000 }, { "1M", true, 1000000 }, { "4Ki", true, 4096 },
		{ "1000001", false, 0 }, { "2M", false, 0 }, { "-1", false, 0 }, { "", false, 0 },
		{ "fast", false, 0 }, { "12x", false, 0 }, { "99999999999999999999999", false, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		arg = cases[i].arg;
		u64_out = 7;
		ck_assert_msg(capture(call_u64) == cases[i].ok, "'%s'", arg);
		if (cases[i].ok) {
			ck_assert_uint_eq(u64_out, cases[i].value);
		} else {
			ck_assert_uint_eq(u64_out, 7);
			ck_assert_msg(strstr(captured, "--rate: expected an integer from 0 to 1000000") != NULL,
				      "message for '%s': %s", arg, captured);
		}
	}
}
END_TEST

static char host[64];
static uint16_t port;
static bool allow_zero;
static bool call_hostport(void)
{
	return opt_hostport("--listen", arg, host, sizeof host, &port, allow_zero);
}

START_TEST(test_hostport)
{
	allow_zero = true;
	arg = "127.0.0.1:7000";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_uint_eq(port, 7000);
	arg = "[::1]:0";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "::1");
	ck_assert_uint_eq(port, 0);
	arg = "node-3.cluster:65535";
	ck_assert(capture(call_hostport));
	ck_assert_str_eq(host, "node-3.cluster");
	allow_zero = false;
	arg = "127.0.0.1:0";
	ck_assert(!capture(call_hostport));
	ck_assert(strstr(captured, "--listen: expected HOST:PORT with a port from 1") != NULL);
	const char *bad[] = { "127.0.0.1", ":80", "host:", "host:65536", "host:8x", "[::1]80" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		arg = bad[i];
		ck_assert_msg(!capture(call_hostport), "'%s' accepted", arg);
		ck_assert(strstr(captured, "--listen:") != NULL);
	}
}
END_TEST

static uint16_t ids[8];
static size_t id_count;
static bool call_ids(void)
{
	return opt_id_list("--sources", arg, ids, 8, &id_count, 100);
}

START_TEST(test_id_list)
{
	arg = "0,1,4-6";
	ck_assert(capture(call_ids));
	ck_assert_uint_eq(id_count, 5);
	ck_assert_uint_eq(ids[0], 0);
	ck_assert_uint_eq(ids[4], 6);
	arg = "3";
	ck_assert(capture(call_ids));
	ck_assert_uint_eq(id_count, 1);
	arg = "1,1";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "ID 1 is listed twice") != NULL);
	arg = "0-8";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "more than 8 IDs") != NULL);
	arg = "99,100";
	ck_assert(!capture(call_ids));
	ck_assert(strstr(captured, "ID 100 is out of range") != NULL);
	const char *bad[] = { "", ",", "a", "3-1", "1,,2", "1;2" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		arg = bad[i];
		ck_assert_msg(!capture(call_ids), "'%s' accepted", arg);
	}
}
END_TEST

static int64_t i64_out;
static bool call_i64(void)
{
	return opt_i64("--clock-offset-ns", arg, &i64_out);
}

START_TEST(test_i64)
{
	arg = "-5000000";
	ck_assert(capture(call_i64));
	ck_assert_int_eq(i64_out, -5000000);
	arg = "5e6";
	ck_assert(!capture(call_i64));
	ck_assert(strstr(captured, "--clock-offset-ns: expected a signed integer") != NULL);
}
END_TEST

/* The fault options' KIND@N (sourced --stall/--inject, readoutd --shm-inject). */
START_TEST(test_kind_at)
{
	static const char *const names[] = { "crc", "crcx", "head" };
	size_t k = 99;
	uint64_t n = 99;
	ck_assert(opt_kind_at("crc", names, 3, &k, &n));
	ck_assert_uint_eq(k, 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(opt_kind_at("crcx@17", names, 3, &k, &n));
	ck_assert_uint_eq(k, 1);
	ck_assert_uint_eq(n, 17);
	ck_assert(opt_kind_at("head@18446744073709551615", names, 3, &k, &n));
	ck_assert_uint_eq(n, UINT64_MAX);
	const char *bad[] = { "cr", "crcxx", "head@", "head@x", "head@5x", "head@-1", "head@+1",
			      "head@ 1", "head@18446744073709551616", "", "@5" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(!opt_kind_at(bad[i], names, 3, &k, &n), "'%s' accepted", bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("opt");
	TCase *tc = tcase_create("parsers");
	tcase_add_test(tc, test_u64);
	tcase_add_test(tc, test_hostport);
	tcase_add_test(tc, test_id_list);
	tcase_add_test(tc, test_i64);
	tcase_add_test(tc, test_kind_at);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
