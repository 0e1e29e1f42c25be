/* Unit tests of builderd/data/recsink.h through its first sink, the JSON
 * lines of builderd/data/recsink_jsonl.c, on real files: the records exactly as
 * spec §4 has them, a batch written whole when full, a seal that drops what
 * is queued and writes nothing more, an unknown format refused. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builderd/data/recsink.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/es-recsink-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *name)
{
	static char text[65536];
	char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

static size_t lines(const char *text)
{
	size_t n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static struct recsink_event event(uint64_t id)
{
	return (struct recsink_event){ .run_id = 7, .event_id = id, .crc = 4294967295u, .bytes = 1024,
				   .latency_ns = 1500 + id, .uncertainty_ns = id % 2 ? -1 : 20,
				   .written_ns = 1764000000000000000ull };
}

START_TEST(test_records_as_the_spec_has_them)
{
	struct recsink s;
	struct recsink_stats st;
	static const uint16_t missing[] = { 1, 3 };
	struct bld_expired x = { .run_id = 7, .event_id = 9, .reason = BLD_EXPIRED_TIMEOUT,
				 .present = 2, .missing_count = 2, .missing = missing };

	ck_assert(recsink_open(&s, "jsonl", dir, 4, 4));
	ck_assert_str_eq(s.ops->format, "jsonl");
	struct recsink_event e0 = event(0), e1 = event(1);
	s.ops->add_event(s.self, &e0);
	s.ops->add_event(s.self, &e1);
	s.ops->add_expired(s.self, &x);
	ck_assert_int_eq(s.ops->flush(s.self), 0);
	ck_assert_str_eq(slurp("events.jsonl"),
			 "{\"run\":7,\"event\":0,\"crc\":4294967295,\"bytes\":1024,\"latency_ns\":1500,"
			 "\"uncertainty_ns\":20,\"t_ns\":1764000000000000000}\n"
			 "{\"run\":7,\"event\":1,\"crc\":4294967295,\"bytes\":1024,\"latency_ns\":1501,"
			 "\"uncertainty_ns\":null,\"t_ns\":1764000000000000000}\n");
	ck_assert_str_eq(slurp("expired.jsonl"),
			 "{\"run\":7,\"event\":9,\"reason\":\"timeout\",\"missing\":[1,3]}\n");
	s.ops->stats(s.self, &st);
	ck_assert_uint_eq(st.events, 2);
	ck_assert_uint_eq(st.expired, 1);
	ck_assert_uint_eq(st.write_calls, 2);
	ck_assert(!st.failed);
	ck_assert(s.ops->close(s.self));
}
END_TEST

/* A batch of 4: the 5th record writes the first 4 in one write. */
START_TEST(test_a_full_batch_is_written_whole)
{
	struct recsink s;
	struct recsink_stats st;

	ck_assert(recsink_open(&s, NULL, dir, 4, 2));
	for (uint64_t id = 0; id < 5; id++) {
		struct recsink_event e = event(id);
		s.ops->add_event(s.self, &e);
	}
	s.ops->stats(s.self, &st);
	ck_assert_uint_ge(st.buffer_bytes, 4 * 100);
	ck_assert_uint_le(lines(slurp("events.jsonl")), 4);
	ck_assert(s.ops->close(s.self));
	ck_assert_uint_eq(lines(slurp("events.jsonl")), 5);
}
END_TEST

START_TEST(test_a_seal_drops_what_is_queued)
{
	struct recsink s;
	static const uint16_t missing[] = { 0 };
	struct bld_expired x = { .run_id = 7, .event_id = 3, .reason = BLD_EXPIRED_TIMEOUT,
				 .missing_count = 1, .missing = missing };

	ck_assert(recsink_open(&s, NULL, dir, 16, 2));
	struct recsink_event e = event(1);
	s.ops->add_event(s.self, &e);
	ck_assert_int_eq(s.ops->flush(s.self), 0);
	s.ops->add_event(s.self, &e);
	s.ops->add_expired(s.self, &x);
	ck_assert_uint_eq(s.ops->seal(s.self), 2);
	s.ops->add_event(s.self, &e);
	ck_assert_int_eq(s.ops->flush(s.self), 0);
	ck_assert(s.ops->close(s.self));
	ck_assert_uint_eq(lines(slurp("events.jsonl")), 1);
	ck_assert_uint_eq(lines(slurp("expired.jsonl")), 0);
}
END_TEST

START_TEST(test_an_unknown_format_is_refused)
{
	struct recsink s;
	ck_assert(!recsink_open(&s, "parquet", dir, 4, 2));
	char path[128];
	snprintf(path, sizeof path, "%s/events.jsonl", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recsink");
	TCase *tc = tcase_create("jsonl");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_records_as_the_spec_has_them);
	tcase_add_test(tc, test_a_full_batch_is_written_whole);
	tcase_add_test(tc, test_a_seal_drops_what_is_queued);
	tcase_add_test(tc, test_an_unknown_format_is_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
