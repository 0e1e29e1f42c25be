/* Unit tests of sourced/faults.c: each --inject kind's bad frame is refused
 * by the real frame decoder for the reason it is named after (while the
 * same frame unharmed decodes), the KIND@N parsers of their options
 * (sourced/options.c), and when an injection or a stall is due. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sourced/faults.h"
#include "wire/frame.h"

#define PAYLOAD 64u

static struct src_options opt;
static uint8_t frame[2 * (FRM_HEADER_BYTES + PAYLOAD)];

static void setup(void)
{
	memset(&opt, 0, sizeof opt);
	opt.id = 3;
	opt.run_id = 11;
	opt.seed = 42;
	opt.events = 100;
	opt.first_event = 7;
	opt.payload_bytes = PAYLOAD;
	memset(frame, 0, sizeof frame);
}

/* What the reader's decoder says of the n bytes at frame. */
static enum frm_status decode(size_t n)
{
	struct frm_decoder d;
	frm_decoder_init(&d, opt.run_id, FRM_MAX_PAYLOAD_BYTES);
	struct frm_header h;
	size_t frame_bytes = 0, need = 0;
	return frm_decoder_next(&d, frame, n, &h, &frame_bytes, &need);
}

START_TEST(test_bad_frames_refused_for_their_reason)
{
	static const struct {
		enum src_inject kind;
		enum frm_status want;
	} cases[] = {
		{ SRC_INJECT_CRC, FRM_ERR_CRC },         { SRC_INJECT_MAGIC, FRM_ERR_MAGIC },
		{ SRC_INJECT_VERSION, FRM_ERR_VERSION }, { SRC_INJECT_FLAGS, FRM_ERR_FLAGS },
		{ SRC_INJECT_LENGTH, FRM_ERR_LENGTH },   { SRC_INJECT_RUN, FRM_ERR_RUN },
		{ SRC_INJECT_TRUNCATE, FRM_NEED_MORE },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		opt.inject = cases[i].kind;
		size_t n = fault_encode_bad(&opt, 5, 1234, frame);
		ck_assert_uint_le(n, FRM_HEADER_BYTES + PAYLOAD);
		ck_assert_msg(decode(n) == cases[i].want, "inject kind %d: %s", (int)cases[i].kind,
			      frm_status_name(decode(n)));
	}
	opt.inject = SRC_INJECT_LENGTH;
	ck_assert_uint_eq(fault_encode_bad(&opt, 5, 1234, frame), FRM_HEADER_BYTES);
	opt.inject = SRC_INJECT_TRUNCATE;
	ck_assert_uint_eq(fault_encode_bad(&opt, 5, 1234, frame), (FRM_HEADER_BYTES + PAYLOAD) / 2);
}
END_TEST

START_TEST(test_unharmed_frame_decodes)
{
	/* Without a kind that harms it, the same frame is a good one of event
	 * first_event: the harm, not the setup, is what the decoder refuses. */
	opt.inject = SRC_INJECT_NONE;
	size_t n = fault_encode_bad(&opt, 5, 1234, frame);
	ck_assert_uint_eq(n, FRM_HEADER_BYTES + PAYLOAD);
	ck_assert_int_eq(decode(n), FRM_OK);
	struct frm_header h;
	frm_parse_header(frame, &h);
	ck_assert_uint_eq(h.event_id, 7);
	ck_assert_uint_eq(h.source_id, 3);
	ck_assert_uint_eq(h.sequence, 5);
	ck_assert_uint_eq(h.timestamp_ns, 1234);
}
END_TEST

START_TEST(test_parsers)
{
	enum src_inject kind;
	uint64_t after;
	ck_assert(src_parse_inject("crc@100", &kind, &after));
	ck_assert_int_eq(kind, SRC_INJECT_CRC);
	ck_assert_uint_eq(after, 100);
	ck_assert(src_parse_inject("noend", &kind, &after));
	ck_assert_int_eq(kind, SRC_INJECT_NOEND);
	ck_assert_uint_eq(after, 0);
	ck_assert(src_parse_inject("truncate@0", &kind, &after));
	ck_assert_int_eq(kind, SRC_INJECT_TRUNCATE);
	ck_assert(!src_parse_inject("checksum@1", &kind, &after));
	ck_assert(!src_parse_inject("crc@x", &kind, &after));
	enum src_stall stall;
	ck_assert(src_parse_stall("dribble@300", &stall, &after));
	ck_assert_int_eq(stall, SRC_STALL_DRIBBLE);
	ck_assert_uint_eq(after, 300);
	ck_assert(src_parse_stall("blackhole", &stall, &after));
	ck_assert_int_eq(stall, SRC_STALL_BLACKHOLE);
	ck_assert(!src_parse_stall("drizzle@1", &stall, &after));
}
END_TEST

START_TEST(test_when_due)
{
	struct src_counters c;
	memset(&c, 0, sizeof c);
	ck_assert(!fault_inject_due(&opt, &c));
	ck_assert(!fault_stall_due(&opt, &c));
	opt.inject = SRC_INJECT_CRC;
	opt.inject_after = 10;
	opt.stall = SRC_STALL_BLACKHOLE;
	opt.stall_after = 20;
	c.frames_wire = 9;
	ck_assert(!fault_inject_due(&opt, &c));
	c.frames_wire = 10;
	ck_assert(fault_inject_due(&opt, &c));
	/* Good frames count, the bad one does not. */
	c.frames_bad_injected = 1;
	ck_assert(!fault_inject_due(&opt, &c));
	ck_assert(!fault_stall_due(&opt, &c));
	c.frames_wire = 20;
	ck_assert(fault_stall_due(&opt, &c));
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_bad_frames_refused_for_their_reason);
	tcase_add_test(tc, test_unharmed_frame_decodes);
	tcase_add_test(tc, test_parsers);
	tcase_add_test(tc, test_when_due);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(faults_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
