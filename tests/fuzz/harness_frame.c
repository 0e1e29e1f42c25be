/* Frame decoder harness: a reader's loop over one connection (as in
 * readoutd), fed the stream whole, one byte at a time and in random-sized
 * pieces. The unconsumed bytes stay contiguous at the start of the reader's
 * buffer; everything beyond them is poisoned for AddressSanitizer.
 *
 * Every call of frm_decoder_next() is judged against an independent reading
 * of docs/fragment-format.md §1 (the header rules re-coded here, the CRCs
 * from zlib rather than the module's libdeflate and shift cache): an OK
 * frame is exactly 42 + payload_len bytes, within the configured limit, of
 * this run, with the right CRC and payload CRC, and re-encodes to the same
 * bytes; an error names a rule
 * the bytes really break; NEED_MORE asks for exactly the rest of the frame,
 * and never once a bad header is complete. The three splits must then
 * agree on every frame and on where and how the stream ended. */
#include "harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "wire/frame.h"

#define T "frame"
#define CHECK(cond, ...) FUZZ_CHECK(T, cond, __VA_ARGS__)

#define FRAME_CONFIG_BYTES 12u

struct frame_cfg {
	uint32_t run_id;
	uint32_t max_cfg;   /* as configured, possibly over 1 MiB */
	uint32_t limit;     /* what the contract allows: min(max_cfg, 1 MiB) */
	uint64_t seed;      /* piece sizes */
};

enum frame_split { SPLIT_WHOLE, SPLIT_BYTES, SPLIT_RANDOM };

/* What one split saw; every split must see the same. */
struct frame_trace {
	size_t frames;
	size_t consumed;    /* bytes of the frames taken */
	int last;           /* NEED_MORE at the end of the stream, or the error */
	size_t need;        /* need_bytes of that last NEED_MORE */
	uint64_t digest;    /* of every frame's header and length, in order */
};

/* Rules a header breaks, one bit each, from the bytes alone. */
enum {
	FAULT_MAGIC = 1,
	FAULT_VERSION = 2,
	FAULT_FLAGS = 4,
	FAULT_RUN = 8,
	FAULT_LENGTH = 16,
};

static uint64_t get_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static unsigned header_faults(const struct frame_cfg *c, const uint8_t *p)
{
	unsigned f = 0;
	uint8_t flags = p[3];
	uint64_t len = get_be(p + 34, 4);

	if (get_be(p, 2) != 0x4553)
		f |= FAULT_MAGIC;
	if (p[2] != 1)
		f |= FAULT_VERSION;
	if (flags & 0xfe)
		f |= FAULT_FLAGS;
	if (get_be(p + 6, 4) != c->run_id)
		f |= FAULT_RUN;
	if (len > c->limit || ((flags & 1) && len != 0))
		f |= FAULT_LENGTH;
	return f;
}

static unsigned status_fault(enum frm_status st)
{
	switch (st) {
	case FRM_ERR_MAGIC:
		return FAULT_MAGIC;
	case FRM_ERR_VERSION:
		return FAULT_VERSION;
	case FRM_ERR_FLAGS:
		return FAULT_FLAGS;
	case FRM_ERR_RUN:
		return FAULT_RUN;
	case FRM_ERR_LENGTH:
		return FAULT_LENGTH;
	default:
		return 0;
	}
}

/* CRC of a frame's covered bytes, computed apart from the module. */
static uint32_t reference_crc(const uint8_t *p, size_t payload_len)
{
	uLong crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, p, FRM_CRC_COVERED_HEADER_BYTES);
	crc = crc32(crc, p + FRM_HEADER_BYTES, (uInt)payload_len);
	return (uint32_t)crc;
}

static void check_ok_frame(const struct frame_cfg *c, const uint8_t *buf, size_t avail,
			   const struct frm_header *h, size_t fb)
{
	struct frm_header parsed, again;

	CHECK(fb == FRM_HEADER_BYTES + (size_t)h->payload_len,
	      "OK frame of %zu bytes with payload_len %u", fb, h->payload_len);
	CHECK(fb <= avail, "OK frame of %zu bytes out of %zu given", fb, avail);
	CHECK(h->payload_len <= c->limit, "OK frame with payload_len %u over the limit %u",
	      h->payload_len, c->limit);
	CHECK(header_faults(c, buf) == 0, "OK frame breaking header rules (faults 0x%x)",
	      header_faults(c, buf));
	CHECK(!(h->flags & FRM_FLAG_END) || h->payload_len == 0, "OK END frame with a payload");

	/* The header handed out is the one at buf[0], however many calls ago it
	 * was parsed. */
	frm_parse_header(buf, &parsed);
	CHECK(parsed.flags == h->flags && parsed.source_id == h->source_id &&
		      parsed.run_id == h->run_id && parsed.event_id == h->event_id &&
		      parsed.sequence == h->sequence && parsed.timestamp_ns == h->timestamp_ns &&
		      parsed.payload_len == h->payload_len && parsed.crc32 == h->crc32,
	      "OK frame's header differs from the bytes at the start of the buffer");

	uint32_t crc = reference_crc(buf, h->payload_len);
	CHECK(crc == h->crc32, "OK frame with CRC 0x%08x, the bytes have 0x%08x", h->crc32, crc);
	uLong pcrc = crc32(crc32(0L, Z_NULL, 0), buf + FRM_HEADER_BYTES, (uInt)h->payload_len);
	CHECK(h->payload_crc == (uint32_t)pcrc, "decoded payload_crc 0x%08x, zlib says 0x%08lx",
	      h->payload_crc, pcrc);
	CHECK(frm_payload_crc(buf, h) == (uint32_t)pcrc, "frm_payload_crc 0x%08x, zlib says 0x%08lx",
	      frm_payload_crc(buf, h), pcrc);

	/* Re-encoding gives the same bytes. */
	uint8_t *enc = malloc(fb);
	CHECK(enc != NULL, "out of memory");
	again = *h;
	size_t n = frm_encode(enc, &again, buf + FRM_HEADER_BYTES);
	CHECK(n == fb && again.crc32 == h->crc32 && memcmp(enc, buf, fb) == 0,
	      "OK frame of %zu bytes re-encodes differently (%zu bytes)", fb, n);
	free(enc);
}

/* Judges one call of frm_decoder_next() on the avail bytes at buf. */
static void check_call(const struct frame_cfg *c, const uint8_t *buf, size_t avail,
		       enum frm_status st, const struct frm_header *h, size_t fb, size_t need)
{
	unsigned faults;

	CHECK(strcmp(frm_status_name(st), "unknown status") != 0, "status %d has no name", st);
	if (avail < FRM_HEADER_BYTES) {
		CHECK(st == FRM_NEED_MORE, "status %d (%s) with only %zu bytes", st,
		      frm_status_name(st), avail);
		CHECK(need == FRM_HEADER_BYTES, "need %zu with %zu bytes, expected the header's 42",
		      need, avail);
		return;
	}
	faults = header_faults(c, buf);
	size_t total = FRM_HEADER_BYTES + (size_t)get_be(buf + 34, 4);
	switch (st) {
	case FRM_OK:
		check_ok_frame(c, buf, avail, h, fb);
		return;
	case FRM_NEED_MORE:
		CHECK(faults == 0, "NEED_MORE with a complete header breaking rules 0x%x", faults);
		CHECK(need == total && need > avail,
		      "need %zu with %zu bytes of a %zu-byte frame", need, avail, total);
		CHECK(need <= (size_t)c->limit + FRM_HEADER_BYTES,
		      "need %zu beyond the limit %u + 42: a reader would have to grow", need,
		      c->limit);
		return;
	case FRM_ERR_CRC:
		CHECK(faults == 0, "CRC error on a header breaking rules 0x%x", faults);
		CHECK(total <= avail, "CRC error before the %zu-byte frame is complete (%zu)", total,
		      avail);
		CHECK(reference_crc(buf, total - FRM_HEADER_BYTES) != (uint32_t)get_be(buf + 38, 4),
		      "CRC error on a frame whose CRC is right");
		return;
	case FRM_ERR_MAGIC:
	case FRM_ERR_VERSION:
	case FRM_ERR_FLAGS:
	case FRM_ERR_RUN:
	case FRM_ERR_LENGTH:
		CHECK(faults & status_fault(st), "%s on a header that does not break it (faults 0x%x)",
		      frm_status_name(st), faults);
		return;
	}
	CHECK(false, "unknown status %d", st);
}

static size_t piece_bytes(uint64_t *rng, size_t left)
{
	static const size_t limits[] = { 1, 2, 7, 41, 42, 43, 100, 1000 };
	uint64_t r = fuzz_rand(rng);
	size_t k = 1 + (size_t)((r >> 8) % limits[r & 7]);
	return k < left ? k : left;
}

static void feed(const struct frame_cfg *c, const uint8_t *stream, size_t n, enum frame_split how,
		 struct frame_trace *t)
{
	size_t cap = n ? n : 1, plen = 0, fed = 0;
	uint8_t *buf = malloc(cap);
	uint64_t rng = c->seed;
	struct frm_decoder d;

	CHECK(buf != NULL, "out of memory");
	FUZZ_POISON(buf, cap);
	memset(t, 0, sizeof *t);
	t->digest = FUZZ_HASH_INIT;
	frm_decoder_init(&d, c->run_id, c->max_cfg);
	for (;;) {
		enum frm_status st;
		for (;;) {
			struct frm_header h;
			size_t fb = 0, need = 0;

			st = frm_decoder_next(&d, buf, plen, &h, &fb, &need);
			check_call(c, buf, plen, st, &h, fb, need);
			if (st == FRM_NEED_MORE && how == SPLIT_RANDOM && (fuzz_rand(&rng) & 3) == 0) {
				/* A wake-up with nothing new changes nothing. */
				size_t fb2 = 0, need2 = 0;
				enum frm_status st2 = frm_decoder_next(&d, buf, plen, &h, &fb2, &need2);
				CHECK(st2 == FRM_NEED_MORE && need2 == need,
				      "asking again with the same %zu bytes: %d need %zu, first NEED_MORE need %zu",
				      plen, st2, need2, need);
			}
			if (st != FRM_OK) {
				t->need = st == FRM_NEED_MORE ? need : 0;
				break;
			}
			t->digest = fuzz_hash(t->digest, &t->consumed, sizeof t->consumed);
			t->digest = fuzz_hash(t->digest, &fb, sizeof fb);
			t->digest = fuzz_hash(t->digest, buf, FRM_HEADER_BYTES);
			t->frames++;
			t->consumed += fb;
			memmove(buf, buf + fb, plen - fb);
			FUZZ_POISON(buf + plen - fb, fb);
			plen -= fb;
		}
		t->last = st;
		if (st != FRM_NEED_MORE || fed == n)
			break;      /* an error closes the connection */
		size_t k = how == SPLIT_WHOLE ? n - fed : how == SPLIT_BYTES ? 1 : piece_bytes(&rng, n - fed);
		FUZZ_UNPOISON(buf + plen, k);
		memcpy(buf + plen, stream + fed, k);
		plen += k;
		fed += k;
	}
	FUZZ_UNPOISON(buf, cap);
	free(buf);
}

static void compare(const struct frame_trace *a, const struct frame_trace *b, const char *what)
{
	CHECK(a->frames == b->frames && a->consumed == b->consumed && a->last == b->last &&
		      a->need == b->need && a->digest == b->digest,
	      "whole stream: %zu frames, %zu bytes, ended %d need %zu; %s: %zu frames, %zu bytes, ended %d need %zu%s",
	      a->frames, a->consumed, a->last, a->need, what, b->frames, b->consumed, b->last,
	      b->need, a->digest != b->digest ? ", other frames" : "");
}

void fuzz_frame_input(const uint8_t *data, size_t size)
{
	struct frame_cfg c;
	struct frame_trace whole, bytes, pieces;

	if (size < FRAME_CONFIG_BYTES)
		return;
	c.run_id = (uint32_t)get_be(data, 4);
	c.max_cfg = (uint32_t)get_be(data + 4, 4);
	c.limit = c.max_cfg < FRM_MAX_PAYLOAD_BYTES ? c.max_cfg : FRM_MAX_PAYLOAD_BYTES;
	c.seed = get_be(data + 8, 4);
	data += FRAME_CONFIG_BYTES;
	size -= FRAME_CONFIG_BYTES;

	feed(&c, data, size, SPLIT_WHOLE, &whole);
	feed(&c, data, size, SPLIT_BYTES, &bytes);
	feed(&c, data, size, SPLIT_RANDOM, &pieces);
	compare(&whole, &bytes, "one byte at a time");
	compare(&whole, &pieces, "random pieces");
}
