/* Frame codec: the frame vectors of tests/data/vectors.json encoded and
 * decoded (whole and one byte at a time), every refusal reported as early
 * as the contract allows, back-to-back frames, and the payload CRC derived
 * from the frame CRC.
 *
 * The back-to-back test cuts its stream at random points; the seed is
 * printed and TEST_SEED=n repeats a run. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire/crc.h"
#include "wire/frame.h"
#include "core/gen.h"
#include "vectors.h"

#define BASE_RUN 42u
#define BASE_PAYLOAD_BYTES 64u
#define BASE_FRAME_BYTES (FRM_HEADER_BYTES + BASE_PAYLOAD_BYTES)
#define STREAM_FRAMES 40
#define STREAM_MAX_PAYLOAD_BYTES 300u
#define STREAM_BYTES 65536u

static uint64_t test_seed;

/* Per-test scratch, from a checked fixture so every test starts clean. */
static uint8_t *stream;

static void setup_stream(void)
{
	stream = calloc(1, STREAM_BYTES);
	ck_assert_ptr_nonnull(stream);
}

static void teardown_stream(void)
{
	free(stream);
	stream = NULL;
}

static uint64_t rng_next(uint64_t *state)
{
	*state += 0x9E3779B97F4A7C15ULL;
	return gen_mix64(*state);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void vec_header(const struct vec_frames *v, struct frm_header *h)
{
	memset(h, 0, sizeof(*h));
	h->flags = (uint8_t)v->flags;
	h->source_id = (uint16_t)v->source;
	h->run_id = (uint32_t)v->run;
	h->event_id = v->event;
	h->sequence = v->sequence;
	h->timestamp_ns = v->timestamp_ns;
	h->payload_len = (uint32_t)v->payload_len;
}

static void check_header_eq(const struct frm_header *got, const struct frm_header *want)
{
	ck_assert_uint_eq(got->flags, want->flags);
	ck_assert_uint_eq(got->source_id, want->source_id);
	ck_assert_uint_eq(got->run_id, want->run_id);
	ck_assert_uint_eq(got->event_id, want->event_id);
	ck_assert_uint_eq(got->sequence, want->sequence);
	ck_assert_uint_eq(got->timestamp_ns, want->timestamp_ns);
	ck_assert_uint_eq(got->payload_len, want->payload_len);
	ck_assert_uint_eq(got->crc32, want->crc32);
}

/* Header of vector v with the CRC its frame_hex carries. */
static void vec_header_with_crc(const struct vec_frames *v, struct frm_header *h)
{
	vec_header(v, h);
	h->crc32 = get_be32(v->frame + 38);
}

/* Encodes a frame of run BASE_RUN with a generated payload at dst. */
static size_t make_frame(uint8_t *dst, uint8_t flags, uint64_t event, uint64_t sequence,
			 uint32_t payload_len, struct frm_header *h)
{
	memset(h, 0, sizeof(*h));
	h->flags = flags;
	h->source_id = 3;
	h->run_id = BASE_RUN;
	h->event_id = event;
	h->sequence = sequence;
	h->timestamp_ns = 1700000000000000000ULL + event;
	h->payload_len = payload_len;
	gen_payload(dst + FRM_HEADER_BYTES, payload_len, 5, BASE_RUN, event, 3);
	return frm_encode_in_place(dst, h);
}

/* Recomputes the CRC of a frame whose header bytes were altered, so the
 * alteration alone, not a checksum, is what the decoder has to catch. */
static void fix_crc(uint8_t *frame, uint32_t payload_present)
{
	uint32_t crc = crc_update(0, frame, FRM_CRC_COVERED_HEADER_BYTES);

	crc = crc_update(crc, frame + FRM_HEADER_BYTES, payload_present);
	put_be32(frame + 38, crc);
}

/* Offers the decoder the first 1, 2, … bytes of frame as they would arrive,
 * each time from a heap block of exactly that size so that reading past
 * avail trips AddressSanitizer or valgrind. Checks need_bytes on the way
 * and returns the first answer that is not FRM_NEED_MORE, with *at set to
 * the bytes offered then (FRM_NEED_MORE and len if none). */
static enum frm_status feed_bytewise(struct frm_decoder *d, const uint8_t *frame, size_t len,
				     size_t *at, struct frm_header *out, size_t *frame_bytes)
{
	struct frm_header claimed;
	size_t n;

	frm_parse_header(frame, &claimed);
	for (n = 1; n <= len; n++) {
		uint8_t *copy = malloc(n);
		size_t need = 0;
		enum frm_status st;

		ck_assert_ptr_nonnull(copy);
		memcpy(copy, frame, n);
		st = frm_decoder_next(d, copy, n, out, frame_bytes, &need);
		free(copy);
		if (st != FRM_NEED_MORE) {
			*at = n;
			return st;
		}
		if (n < FRM_HEADER_BYTES)
			ck_assert_uint_eq(need, FRM_HEADER_BYTES);
		else
			ck_assert_uint_eq(need, FRM_HEADER_BYTES + (size_t)claimed.payload_len);
		ck_assert_uint_gt(need, n);
	}
	*at = len;
	return FRM_NEED_MORE;
}

START_TEST(test_encode_vectors)
{
	const struct vec_frames *v = &vec_frames[_i];
	uint8_t buf[FRM_HEADER_BYTES + 256];
	struct frm_header h;
	size_t n;

	ck_assert_uint_le(v->payload_len, 256);
	vec_header(v, &h);
	h.crc32 = 0xdeadbeef; /* must be ignored */
	n = frm_encode(buf, &h, v->payload_len ? v->payload : NULL);
	ck_assert_uint_eq(n, v->frame_len);
	ck_assert_mem_eq(buf, v->frame, v->frame_len);
	ck_assert_uint_eq(h.crc32, get_be32(v->frame + 38));
}
END_TEST

START_TEST(test_encode_in_place_vectors)
{
	const struct vec_frames *v = &vec_frames[_i];
	uint8_t buf[FRM_HEADER_BYTES + 256];
	struct frm_header h;

	memset(buf, 0xee, sizeof(buf));
	memcpy(buf + FRM_HEADER_BYTES, v->payload, v->payload_len);
	vec_header(v, &h);
	ck_assert_uint_eq(frm_encode_in_place(buf, &h), v->frame_len);
	ck_assert_mem_eq(buf, v->frame, v->frame_len);

	/* frm_encode() handed the payload already in place copies nothing. */
	memset(buf, 0xee, FRM_HEADER_BYTES);
	vec_header(v, &h);
	ck_assert_uint_eq(frm_encode(buf, &h, buf + FRM_HEADER_BYTES), v->frame_len);
	ck_assert_mem_eq(buf, v->frame, v->frame_len);
}
END_TEST

START_TEST(test_parse_vectors)
{
	const struct vec_frames *v = &vec_frames[_i];
	struct frm_header got, want;

	vec_header_with_crc(v, &want);
	frm_parse_header(v->frame, &got);
	check_header_eq(&got, &want);
}
END_TEST

START_TEST(test_decode_vectors_whole)
{
	const struct vec_frames *v = &vec_frames[_i];
	struct frm_decoder d;
	struct frm_header got, want;
	size_t frame_bytes = 0, need = 0;

	vec_header_with_crc(v, &want);
	frm_decoder_init(&d, (uint32_t)v->run, FRM_MAX_PAYLOAD_BYTES);
	ck_assert_int_eq(frm_decoder_next(&d, v->frame, v->frame_len, &got, &frame_bytes, &need),
			 FRM_OK);
	ck_assert_uint_eq(frame_bytes, v->frame_len);
	check_header_eq(&got, &want);

	/* Bytes of a next frame behind it change nothing. */
	memcpy(stream, v->frame, v->frame_len);
	memset(stream + v->frame_len, 0x45, 100);
	ck_assert_int_eq(frm_decoder_next(&d, stream, v->frame_len + 100, &got, &frame_bytes,
					  &need),
			 FRM_OK);
	ck_assert_uint_eq(frame_bytes, v->frame_len);
	check_header_eq(&got, &want);
}
END_TEST

START_TEST(test_decode_vectors_bytewise)
{
	const struct vec_frames *v = &vec_frames[_i];
	struct frm_decoder d;
	struct frm_header got, want;
	size_t at = 0, frame_bytes = 0;

	vec_header_with_crc(v, &want);
	frm_decoder_init(&d, (uint32_t)v->run, FRM_MAX_PAYLOAD_BYTES);
	ck_assert_int_eq(feed_bytewise(&d, v->frame, v->frame_len, &at, &got, &frame_bytes),
			 FRM_OK);
	ck_assert_uint_eq(at, v->frame_len);
	ck_assert_uint_eq(frame_bytes, v->frame_len);
	check_header_eq(&got, &want);
	/* The decoder hands over the payload's own CRC with the header. */
	ck_assert_uint_eq(got.payload_crc, crc_update(0, v->payload, v->payload_len));
}
END_TEST

/* The payload CRC comes from the frame CRC and the 42 header bytes alone:
 * only those are handed over, in an exact-size block. */
static void check_payload_crc(const uint8_t *frame, const struct frm_header *h,
			      const uint8_t *payload)
{
	uint8_t *header_only = malloc(FRM_HEADER_BYTES);

	ck_assert_ptr_nonnull(header_only);
	memcpy(header_only, frame, FRM_HEADER_BYTES);
	ck_assert_uint_eq(frm_payload_crc(header_only, h), crc_update(0, payload, h->payload_len));
	free(header_only);
}

START_TEST(test_payload_crc_vectors)
{
	const struct vec_frames *v = &vec_frames[_i];
	struct frm_header h;

	vec_header_with_crc(v, &h);
	check_payload_crc(v->frame, &h, v->payload);
}
END_TEST

START_TEST(test_payload_crc_lengths)
{
	static const uint32_t lens[] = { 0, 1, 3, 7, 8, 9, 63, 64, 65, 1000, 4096, 20000 };
	size_t i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct frm_decoder d;
		struct frm_header h, got;
		size_t len, frame_bytes, need;

		ck_assert_uint_le(FRM_HEADER_BYTES + lens[i], STREAM_BYTES);
		len = make_frame(stream, 0, i, i, lens[i], &h);
		frm_decoder_init(&d, BASE_RUN, FRM_MAX_PAYLOAD_BYTES);
		ck_assert_int_eq(frm_decoder_next(&d, stream, len, &got, &frame_bytes, &need),
				 FRM_OK);
		check_payload_crc(stream, &got, stream + FRM_HEADER_BYTES);
	}
}
END_TEST

/* A refused frame: the base frame (run 42, 64-byte payload) altered one way,
 * and when the refusal must come. */
struct bad_frame {
	const char *what;
	uint8_t flags;          /* written by frm_encode, CRC valid */
	uint32_t claim_len;     /* if not 0, poked into payload_len */
	size_t poke_off;        /* byte XORed with poke_xor after encoding */
	uint8_t poke_xor;
	bool fix_crc;           /* CRC recomputed after the poke */
	uint32_t decoder_run;
	uint32_t decoder_max;
	enum frm_status want;
	size_t want_at;         /* bytes present when the error must be reported */
};

static const struct bad_frame bad_frames[] = {
	{ "magic, first byte", 0, 0, 0, 0x01, true, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_MAGIC, FRM_HEADER_BYTES },
	{ "magic, second byte", 0, 0, 1, 0x80, true, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_MAGIC, FRM_HEADER_BYTES },
	{ "version 0", 0, 0, 2, 0x01, true, BASE_RUN, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_VERSION,
	  FRM_HEADER_BYTES },
	{ "version 3", 0, 0, 2, 0x02, true, BASE_RUN, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_VERSION,
	  FRM_HEADER_BYTES },
	{ "flag bit 1", 0x02, 0, 0, 0, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_FLAGS,
	  FRM_HEADER_BYTES },
	{ "flag bit 7", 0x80, 0, 0, 0, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_FLAGS,
	  FRM_HEADER_BYTES },
	{ "END and an unknown flag", 0x81, 0, 0, 0, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_FLAGS, FRM_HEADER_BYTES },
	{ "END with a payload", FRM_FLAG_END, 0, 0, 0, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_LENGTH, FRM_HEADER_BYTES },
	{ "one byte over the configured size", 0, 0, 0, 0, false, BASE_RUN,
	  BASE_PAYLOAD_BYTES - 1, FRM_ERR_LENGTH, FRM_HEADER_BYTES },
	{ "one byte over 1 MiB, configured higher", 0, FRM_MAX_PAYLOAD_BYTES + 1, 0, 0, false,
	  BASE_RUN, UINT32_MAX, FRM_ERR_LENGTH, FRM_HEADER_BYTES },
	{ "length 2^32-1", 0, UINT32_MAX, 0, 0, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_LENGTH, FRM_HEADER_BYTES },
	{ "wrong run", 0, 0, 0, 0, false, BASE_RUN + 1, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_RUN,
	  FRM_HEADER_BYTES },
	{ "run field altered", 0, 0, 9, 0x04, true, BASE_RUN, FRM_MAX_PAYLOAD_BYTES, FRM_ERR_RUN,
	  FRM_HEADER_BYTES },
	{ "CRC, sequence byte flipped", 0, 0, 20, 0x10, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_CRC, BASE_FRAME_BYTES },
	{ "CRC, source byte flipped", 0, 0, 5, 0x01, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_CRC, BASE_FRAME_BYTES },
	{ "CRC, crc field flipped", 0, 0, 41, 0x01, false, BASE_RUN, FRM_MAX_PAYLOAD_BYTES,
	  FRM_ERR_CRC, BASE_FRAME_BYTES },
	{ "CRC, first payload byte", 0, 0, FRM_HEADER_BYTES, 0x01, false, BASE_RUN,
	  FRM_MAX_PAYLOAD_BYTES, FRM_ERR_CRC, BASE_FRAME_BYTES },
	{ "CRC, last payload byte", 0, 0, BASE_FRAME_BYTES - 1, 0x80, false, BASE_RUN,
	  FRM_MAX_PAYLOAD_BYTES, FRM_ERR_CRC, BASE_FRAME_BYTES },
};

#define BAD_FRAME_COUNT ((int)(sizeof(bad_frames) / sizeof(bad_frames[0])))

static void build_bad_frame(const struct bad_frame *c, uint8_t *frame)
{
	struct frm_header h;

	ck_assert_uint_eq(make_frame(frame, c->flags, 7, 0, BASE_PAYLOAD_BYTES, &h),
			  BASE_FRAME_BYTES);
	if (c->claim_len != 0)
		put_be32(frame + 34, c->claim_len);
	frame[c->poke_off] ^= c->poke_xor;
	if (c->fix_crc)
		fix_crc(frame, BASE_PAYLOAD_BYTES);
}

START_TEST(test_bad_frame_bytewise)
{
	const struct bad_frame *c = &bad_frames[_i];
	uint8_t frame[BASE_FRAME_BYTES];
	struct frm_decoder d;
	struct frm_header out;
	size_t at = 0, frame_bytes = 0;
	enum frm_status st;

	build_bad_frame(c, frame);
	frm_decoder_init(&d, c->decoder_run, c->decoder_max);
	st = feed_bytewise(&d, frame, sizeof(frame), &at, &out, &frame_bytes);
	ck_assert_msg(st == c->want, "%s: got %s, want %s", c->what, frm_status_name(st),
		      frm_status_name(c->want));
	ck_assert_msg(at == c->want_at, "%s: reported with %zu bytes, want %zu", c->what, at,
		      c->want_at);
}
END_TEST

START_TEST(test_bad_frame_whole)
{
	const struct bad_frame *c = &bad_frames[_i];
	uint8_t frame[BASE_FRAME_BYTES];
	struct frm_decoder d;
	struct frm_header out;
	size_t frame_bytes = 0, need = 0;
	enum frm_status st;

	build_bad_frame(c, frame);
	frm_decoder_init(&d, c->decoder_run, c->decoder_max);
	st = frm_decoder_next(&d, frame, sizeof(frame), &out, &frame_bytes, &need);
	ck_assert_msg(st == c->want, "%s: got %s, want %s", c->what, frm_status_name(st),
		      frm_status_name(c->want));
}
END_TEST

START_TEST(test_status_names)
{
	ck_assert_str_eq(frm_status_name(FRM_ERR_MAGIC), "bad magic");
	ck_assert_str_eq(frm_status_name(FRM_ERR_VERSION), "bad version");
	ck_assert_str_eq(frm_status_name(FRM_ERR_FLAGS), "bad flags");
	ck_assert_str_eq(frm_status_name(FRM_ERR_LENGTH), "oversized length");
	ck_assert_str_eq(frm_status_name(FRM_ERR_CRC), "checksum mismatch");
	ck_assert_str_eq(frm_status_name(FRM_ERR_RUN), "wrong run");
	ck_assert_str_eq(frm_status_name(FRM_OK), "ok");
	ck_assert_ptr_nonnull(frm_status_name(FRM_NEED_MORE));
	ck_assert_ptr_nonnull(frm_status_name((enum frm_status)-99));
}
END_TEST

START_TEST(test_need_more_when_empty)
{
	struct frm_decoder d;
	struct frm_header out;
	size_t frame_bytes = 0, need = 0;

	frm_decoder_init(&d, BASE_RUN, FRM_MAX_PAYLOAD_BYTES);
	ck_assert_int_eq(frm_decoder_next(&d, stream, 0, &out, &frame_bytes, &need),
			 FRM_NEED_MORE);
	ck_assert_uint_eq(need, FRM_HEADER_BYTES);
}
END_TEST

START_TEST(test_length_limits)
{
	struct frm_decoder d;
	struct frm_header h, out;
	size_t len, frame_bytes = 0, need = 0;
	uint8_t *big;

	frm_decoder_init(&d, BASE_RUN, UINT32_MAX);
	ck_assert_uint_eq(d.max_payload_bytes, FRM_MAX_PAYLOAD_BYTES);
	ck_assert(!d.have_header);

	/* Exactly the configured size is fine. */
	len = make_frame(stream, 0, 1, 0, BASE_PAYLOAD_BYTES, &h);
	frm_decoder_init(&d, BASE_RUN, BASE_PAYLOAD_BYTES);
	ck_assert_int_eq(frm_decoder_next(&d, stream, len, &out, &frame_bytes, &need), FRM_OK);

	/* Configured 0: only empty frames pass. */
	frm_decoder_init(&d, BASE_RUN, 0);
	len = make_frame(stream, 0, 1, 0, 0, &h);
	ck_assert_int_eq(frm_decoder_next(&d, stream, len, &out, &frame_bytes, &need), FRM_OK);
	len = make_frame(stream, 0, 1, 0, 1, &h);
	ck_assert_int_eq(frm_decoder_next(&d, stream, len, &out, &frame_bytes, &need),
			 FRM_ERR_LENGTH);

	/* Exactly 1 MiB passes: asked for after the header, accepted whole. */
	big = malloc(FRM_HEADER_BYTES + FRM_MAX_PAYLOAD_BYTES);
	ck_assert_ptr_nonnull(big);
	len = make_frame(big, 0, 2, 0, FRM_MAX_PAYLOAD_BYTES, &h);
	frm_decoder_init(&d, BASE_RUN, UINT32_MAX);
	ck_assert_int_eq(frm_decoder_next(&d, big, FRM_HEADER_BYTES, &out, &frame_bytes, &need),
			 FRM_NEED_MORE);
	ck_assert_uint_eq(need, len);
	ck_assert_int_eq(frm_decoder_next(&d, big, len - 1, &out, &frame_bytes, &need),
			 FRM_NEED_MORE);
	ck_assert_int_eq(frm_decoder_next(&d, big, len, &out, &frame_bytes, &need), FRM_OK);
	ck_assert_uint_eq(frame_bytes, len);
	check_payload_crc(big, &out, big + FRM_HEADER_BYTES);
	free(big);
}
END_TEST

/* The contract validates a header once per frame: a validated header is not
 * judged again on later calls, even if the decoder's run has changed. */
START_TEST(test_header_validated_once)
{
	struct frm_decoder d;
	struct frm_header h, out;
	size_t len, frame_bytes = 0, need = 0;

	len = make_frame(stream, 0, 9, 4, 100, &h);
	frm_decoder_init(&d, BASE_RUN, FRM_MAX_PAYLOAD_BYTES);
	ck_assert_int_eq(frm_decoder_next(&d, stream, FRM_HEADER_BYTES + 10, &out, &frame_bytes,
					  &need),
			 FRM_NEED_MORE);
	ck_assert(d.have_header);
	ck_assert_uint_eq(need, len);
	d.run_id = BASE_RUN + 1;
	ck_assert_int_eq(frm_decoder_next(&d, stream, len, &out, &frame_bytes, &need), FRM_OK);
	ck_assert(!d.have_header);
	check_header_eq(&out, &h);

	/* The next frame is judged afresh, against the new run. */
	len = make_frame(stream, 0, 10, 5, 0, &h);
	ck_assert_int_eq(frm_decoder_next(&d, stream, len, &out, &frame_bytes, &need),
			 FRM_ERR_RUN);
}
END_TEST

/* Builds a stream of generated frames of random lengths (0 and the maximum
 * included) followed by the run-42 vector frames, the last an END; returns
 * its length and the headers in order. */
static size_t build_stream(struct frm_header *hs, const uint8_t **payloads, int *count)
{
	uint64_t rng = test_seed;
	size_t len = 0;
	int n = 0, i;

	for (i = 0; i < STREAM_FRAMES; i++, n++) {
		uint32_t plen = (uint32_t)(rng_next(&rng) % (STREAM_MAX_PAYLOAD_BYTES + 1));

		if (i == 0)
			plen = 0;
		else if (i == 1)
			plen = STREAM_MAX_PAYLOAD_BYTES;
		payloads[n] = stream + len + FRM_HEADER_BYTES;
		len += make_frame(stream + len, 0, 1000 + (uint64_t)i, (uint64_t)i, plen, &hs[n]);
	}
	for (i = 0; i < VEC_FRAMES_COUNT; i++) {
		const struct vec_frames *v = &vec_frames[i];

		if (v->run != BASE_RUN)
			continue;
		vec_header_with_crc(v, &hs[n]);
		payloads[n] = v->payload;
		memcpy(stream + len, v->frame, v->frame_len);
		len += v->frame_len;
		n++;
	}
	ck_assert_uint_le(len, STREAM_BYTES);
	ck_assert_uint_eq(hs[n - 1].flags, FRM_FLAG_END);
	*count = n;
	return len;
}

START_TEST(test_back_to_back_whole)
{
	struct frm_header hs[STREAM_FRAMES + VEC_FRAMES_COUNT], out;
	const uint8_t *payloads[STREAM_FRAMES + VEC_FRAMES_COUNT];
	struct frm_decoder d;
	size_t len, pos = 0, frame_bytes = 0, need = 0;
	int count, n = 0;

	len = build_stream(hs, payloads, &count);
	frm_decoder_init(&d, BASE_RUN, FRM_MAX_PAYLOAD_BYTES);
	while (pos < len) {
		ck_assert_int_eq(frm_decoder_next(&d, stream + pos, len - pos, &out, &frame_bytes,
						  &need),
				 FRM_OK);
		ck_assert_int_lt(n, count);
		check_header_eq(&out, &hs[n]);
		ck_assert_mem_eq(stream + pos + FRM_HEADER_BYTES, payloads[n], out.payload_len);
		pos += frame_bytes;
		n++;
	}
	ck_assert_uint_eq(pos, len);
	ck_assert_int_eq(n, count);
	ck_assert_int_eq(frm_decoder_next(&d, stream + pos, 0, &out, &frame_bytes, &need),
			 FRM_NEED_MORE);
}
END_TEST

/* The same stream arriving in random pieces that cut headers and payloads
 * anywhere; the reader calls the decoder after each piece until it asks for
 * more, as a connection's read callback does. */
START_TEST(test_back_to_back_pieces)
{
	struct frm_header hs[STREAM_FRAMES + VEC_FRAMES_COUNT], out;
	const uint8_t *payloads[STREAM_FRAMES + VEC_FRAMES_COUNT];
	struct frm_decoder d;
	uint64_t rng = test_seed ^ 0x5eed;
	size_t len, pos = 0, arrived = 0, frame_bytes = 0, need = 0, calls = 0;
	int count, n = 0;

	len = build_stream(hs, payloads, &count);
	frm_decoder_init(&d, BASE_RUN, FRM_MAX_PAYLOAD_BYTES);
	while (arrived < len) {
		enum frm_status st;

		arrived += 1 + rng_next(&rng) % 97;
		if (arrived > len)
			arrived = len;
		while ((st = frm_decoder_next(&d, stream + pos, arrived - pos, &out, &frame_bytes,
					      &need)) == FRM_OK) {
			ck_assert_int_lt(n, count);
			check_header_eq(&out, &hs[n]);
			ck_assert_uint_le(pos + frame_bytes, arrived);
			pos += frame_bytes;
			n++;
			calls++;
		}
		ck_assert_int_eq(st, FRM_NEED_MORE);
		ck_assert_uint_gt(need, arrived - pos);
		calls++;
	}
	ck_assert_uint_eq(pos, len);
	ck_assert_int_eq(n, count);
	ck_assert_uint_gt(calls, (size_t)count);
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc;

	tc = tcase_create("vectors");
	tcase_add_checked_fixture(tc, setup_stream, teardown_stream);
	tcase_add_loop_test(tc, test_encode_vectors, 0, VEC_FRAMES_COUNT);
	tcase_add_loop_test(tc, test_encode_in_place_vectors, 0, VEC_FRAMES_COUNT);
	tcase_add_loop_test(tc, test_parse_vectors, 0, VEC_FRAMES_COUNT);
	tcase_add_loop_test(tc, test_decode_vectors_whole, 0, VEC_FRAMES_COUNT);
	tcase_add_loop_test(tc, test_decode_vectors_bytewise, 0, VEC_FRAMES_COUNT);
	tcase_add_loop_test(tc, test_payload_crc_vectors, 0, VEC_FRAMES_COUNT);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, setup_stream, teardown_stream);
	tcase_add_loop_test(tc, test_bad_frame_bytewise, 0, BAD_FRAME_COUNT);
	tcase_add_loop_test(tc, test_bad_frame_whole, 0, BAD_FRAME_COUNT);
	tcase_add_test(tc, test_status_names);
	tcase_add_test(tc, test_length_limits);
	suite_add_tcase(s, tc);

	tc = tcase_create("decoder");
	tcase_add_checked_fixture(tc, setup_stream, teardown_stream);
	tcase_add_test(tc, test_need_more_when_empty);
	tcase_add_test(tc, test_header_validated_once);
	tcase_add_test(tc, test_payload_crc_lengths);
	tcase_add_test(tc, test_back_to_back_whole);
	tcase_add_test(tc, test_back_to_back_pieces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("TEST_SEED");
	SRunner *sr;
	int failed;

	test_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	printf("test_frame: seed %" PRIu64 " (TEST_SEED=%" PRIu64 " repeats this run)\n", test_seed,
	       test_seed);
	fflush(stdout);

	sr = srunner_create(frame_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
