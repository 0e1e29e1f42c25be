/* Event file codec: the vectors of tests/data/evfile-vectors.json (made by
 * the Python reader, analysis/evfile.py) encoded to the same bytes and
 * scanned to the same verdicts; a file written record by record, as the
 * builder will, scanned whole; every cut of a good file scanned as a file
 * left open, which recovery relies on. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/crc.h"
#include "wire/evfile.h"
#include "evfile_vectors.h"

START_TEST(test_file_headers_encode_and_decode)
{
	for (size_t i = 0; i < VEC_FILE_HEADER_COUNT; i++) {
		const struct vec_file_header *v = &vec_file_header[i];
		struct evf_file_header h = { .run = (uint32_t)v->run,
					     .builder_id = (uint16_t)v->builder_id,
					     .sources = (uint16_t)v->sources,
					     .file_seq = (uint32_t)v->file_seq,
					     .slice = (uint32_t)v->slice,
					     .created_ns = v->created_ns };
		struct evf_file_header back;
		uint8_t out[EVF_HEADER_BYTES];

		ck_assert_uint_eq(v->config_sha256_len, EVF_SHA256_BYTES);
		memcpy(h.config_sha256, v->config_sha256, EVF_SHA256_BYTES);
		snprintf(h.software, sizeof(h.software), "%s", v->software);
		evf_encode_file_header(out, &h);
		ck_assert_uint_eq(v->bytes_len, EVF_HEADER_BYTES);
		ck_assert_msg(memcmp(out, v->bytes, EVF_HEADER_BYTES) == 0, "header %zu differs", i);
		ck_assert_int_eq(evf_decode_file_header(out, sizeof(out), &back), EVF_OK);
		ck_assert_uint_eq(back.run, h.run);
		ck_assert_uint_eq(back.file_seq, h.file_seq);
		ck_assert_uint_eq(back.created_ns, h.created_ns);
		ck_assert_str_eq(back.software, v->software);
	}
}
END_TEST

START_TEST(test_records_encode_from_frame_crcs)
{
	for (size_t i = 0; i < VEC_RECORD_COUNT; i++) {
		const struct vec_record *v = &vec_record[i];
		struct evf_record_header r = {
			.record_bytes = (uint32_t)(EVF_RECORD_HEADER_BYTES + v->frames_len),
			.run = (uint32_t)v->run, .event_id = v->event_id,
			.fragments = (uint16_t)v->fragments, .flags = (uint16_t)v->flags,
			.earliest_ns = v->earliest_ns };
		uint8_t head[EVF_RECORD_HEADER_BYTES];

		evf_encode_record_header(head, &r);
		r.record_crc = evf_record_crc(head, crc_update(0, v->frames, v->frames_len),
					      v->frames_len);
		evf_encode_record_header(head, &r);
		ck_assert_uint_eq(v->bytes_len, sizeof(head) + v->frames_len);
		ck_assert_msg(memcmp(head, v->bytes, sizeof(head)) == 0, "record %zu differs", i);
		ck_assert(memcmp(v->bytes + sizeof(head), v->frames, v->frames_len) == 0);
	}
}
END_TEST

START_TEST(test_files_scan_to_their_verdicts)
{
	for (size_t i = 0; i < VEC_FILE_COUNT; i++) {
		const struct vec_file *v = &vec_file[i];
		struct evf_scan s;

		evf_scan(v->bytes, v->bytes_len, (uint32_t)v->max_payload, &s);
		ck_assert_msg(strcmp(evf_status_name(s.status), v->status) == 0,
			      "%s: \"%s\", the vector says \"%s\"", v->name,
			      evf_status_name(s.status), v->status);
		ck_assert_msg(s.bad_offset == v->bad_offset, "%s: offset %zu, the vector says %llu",
			      v->name, s.bad_offset, (unsigned long long)v->bad_offset);
		ck_assert_msg(s.bad_event_known == v->bad_event_known, "%s: event known", v->name);
		if (v->bad_event_known)
			ck_assert_uint_eq(s.bad_event, v->bad_event);
		ck_assert_msg(s.records.events == v->events, "%s: %llu events", v->name,
			      (unsigned long long)s.records.events);
		ck_assert_msg(s.good_bytes == v->good_bytes, "%s: good bytes %zu", v->name,
			      s.good_bytes);
		ck_assert_int_eq(s.complete, v->complete);
	}
}
END_TEST

/* The good vector file less its trailer, then its trailer written from
 * the scan's counts and CRC: the bytes recovery would write. */
START_TEST(test_trailer_from_a_scan_equals_the_writers)
{
	const struct vec_file *good = &vec_file[0];
	struct evf_scan s;
	struct evf_trailer t;
	uint8_t trailer[EVF_TRAILER_BYTES];

	ck_assert_str_eq(good->name, "good");
	evf_scan(good->bytes, good->bytes_len - EVF_TRAILER_BYTES, 1u << 20, &s);
	ck_assert_int_eq(s.status, EVF_ERR_TRUNCATED);
	ck_assert_uint_eq(s.good_bytes, good->bytes_len - EVF_TRAILER_BYTES);
	t = s.records;
	evf_encode_trailer(trailer, &t, s.good_crc);
	ck_assert(memcmp(trailer, good->bytes + s.good_bytes, EVF_TRAILER_BYTES) == 0);
}
END_TEST

/* Every prefix of a good file: never a crash, never a record past the
 * cut, and the records kept are exactly those wholly before it. */
START_TEST(test_every_cut_keeps_the_whole_records_before_it)
{
	const struct vec_file *good = &vec_file[0];
	size_t ends[VEC_RECORD_COUNT + 1], at = EVF_HEADER_BYTES;

	ends[0] = at;
	for (size_t i = 0; i < VEC_RECORD_COUNT; i++) {
		at += vec_record[i].bytes_len;
		ends[i + 1] = at;
	}
	for (size_t cut = 0; cut < good->bytes_len; cut++) {
		struct evf_scan s;
		size_t kept = 0;

		evf_scan(good->bytes, cut, 1u << 20, &s);
		ck_assert(!s.complete);
		if (cut < EVF_HEADER_BYTES) {
			ck_assert(!s.has_header);
			continue;
		}
		while (kept < VEC_RECORD_COUNT && ends[kept + 1] <= cut)
			kept++;
		ck_assert_int_eq(s.status, EVF_ERR_TRUNCATED);
		ck_assert_uint_eq(s.records.events, kept);
		ck_assert_uint_eq(s.good_bytes, ends[kept]);
		ck_assert_uint_eq(s.good_crc, crc_update(0, good->bytes, ends[kept]));
	}
}
END_TEST

static Suite *evfile_suite(void)
{
	Suite *s = suite_create("evfile");
	TCase *tc = tcase_create("vectors");

	tcase_add_test(tc, test_file_headers_encode_and_decode);
	tcase_add_test(tc, test_records_encode_from_frame_crcs);
	tcase_add_test(tc, test_files_scan_to_their_verdicts);
	suite_add_tcase(s, tc);
	tc = tcase_create("recovery");
	tcase_add_test(tc, test_trailer_from_a_scan_equals_the_writers);
	tcase_add_test(tc, test_every_cut_keeps_the_whole_records_before_it);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(evfile_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
