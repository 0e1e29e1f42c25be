#include "wire/evfile.h"

#include <string.h>

#include "wire/bigendian.h"
#include "wire/crc.h"
#include "wire/frame.h"

/* Byte offsets of docs/event-file-format.md. */
enum {
	EVF_OFF_MAGIC = 0,
	EVF_OFF_VERSION = 8,
	EVF_OFF_HEADER_BYTES = 10,
	EVF_OFF_RUN = 12,
	EVF_OFF_BUILDER = 16,
	EVF_OFF_SOURCES = 18,
	EVF_OFF_FILE_SEQ = 20,
	EVF_OFF_SLICE = 24,
	EVF_OFF_CREATED = 32,
	EVF_OFF_CONFIG = 40,
	EVF_OFF_SOFTWARE = 72,
	EVF_OFF_HEADER_CRC = 124,

	REC_OFF_MAGIC = 0,
	REC_OFF_BYTES = 4,
	REC_OFF_RUN = 8,
	REC_OFF_EVENT = 12,
	REC_OFF_FRAGMENTS = 20,
	REC_OFF_FLAGS = 22,
	REC_OFF_EARLIEST = 24,
	REC_OFF_CRC = 32,

	TRL_OFF_MAGIC = 0,
	TRL_OFF_BYTES = 4,
	TRL_OFF_EVENTS = 8,
	TRL_OFF_RECORD_BYTES = 16,
	TRL_OFF_FIRST = 24,
	TRL_OFF_LAST = 32,
	TRL_OFF_FILE_CRC = 40,
};

const char *evf_status_name(enum evf_status status)
{
	switch (status) {
	case EVF_OK:
		return "ok";
	case EVF_ERR_MAGIC:
		return "not an event file";
	case EVF_ERR_VERSION:
		return "unknown format version";
	case EVF_ERR_HEADER:
		return "file header damaged";
	case EVF_ERR_RECORD_MAGIC:
		return "no record where one must start";
	case EVF_ERR_RECORD_LENGTH:
		return "record length out of bounds";
	case EVF_ERR_RECORD_CRC:
		return "record checksum mismatch";
	case EVF_ERR_FRAME:
		return "bad frame in record";
	case EVF_ERR_FRAME_MISMATCH:
		return "frame does not belong to its record";
	case EVF_ERR_ORDER:
		return "event IDs out of order";
	case EVF_ERR_TRUNCATED:
		return "truncated";
	case EVF_ERR_TRAILER:
		return "trailer disagrees with the records";
	case EVF_ERR_FILE_CRC:
		return "file checksum mismatch";
	case EVF_ERR_AFTER_TRAILER:
		return "bytes after the trailer";
	}
	return "unknown";
}

void evf_encode_file_header(uint8_t *dst, const struct evf_file_header *h)
{
	memset(dst, 0, EVF_HEADER_BYTES);
	memcpy(dst + EVF_OFF_MAGIC, EVF_MAGIC, 8);
	be_put(dst + EVF_OFF_VERSION, EVF_FORMAT_VERSION, 2);
	be_put(dst + EVF_OFF_HEADER_BYTES, EVF_HEADER_BYTES, 2);
	be_put(dst + EVF_OFF_RUN, h->run, 4);
	be_put(dst + EVF_OFF_BUILDER, h->builder_id, 2);
	be_put(dst + EVF_OFF_SOURCES, h->sources, 2);
	be_put(dst + EVF_OFF_FILE_SEQ, h->file_seq, 4);
	be_put(dst + EVF_OFF_SLICE, h->slice, 4);
	be_put(dst + EVF_OFF_CREATED, h->created_ns, 8);
	memcpy(dst + EVF_OFF_CONFIG, h->config_sha256, EVF_SHA256_BYTES);
	memcpy(dst + EVF_OFF_SOFTWARE, h->software, strnlen(h->software, EVF_SOFTWARE_BYTES));
	be_put(dst + EVF_OFF_HEADER_CRC, crc_update(0, dst, EVF_OFF_HEADER_CRC), 4);
}

enum evf_status evf_decode_file_header(const uint8_t *src, size_t n, struct evf_file_header *h)
{
	memset(h, 0, sizeof(*h));
	if (n < 8 || memcmp(src + EVF_OFF_MAGIC, EVF_MAGIC, 8) != 0)
		return EVF_ERR_MAGIC;
	if (n < EVF_OFF_HEADER_BYTES)
		return EVF_ERR_TRUNCATED;
	h->format_version = (uint16_t)be_get(src + EVF_OFF_VERSION, 2);
	/* The version is judged before the rest: a later format may lay the
	 * header out otherwise, and "version 2" says more than "damaged". */
	if (h->format_version != EVF_FORMAT_VERSION)
		return EVF_ERR_VERSION;
	if (n < EVF_HEADER_BYTES)
		return EVF_ERR_TRUNCATED;
	if (be_get(src + EVF_OFF_HEADER_BYTES, 2) != EVF_HEADER_BYTES ||
	    be_get(src + EVF_OFF_HEADER_CRC, 4) != crc_update(0, src, EVF_OFF_HEADER_CRC))
		return EVF_ERR_HEADER;
	h->run = (uint32_t)be_get(src + EVF_OFF_RUN, 4);
	h->builder_id = (uint16_t)be_get(src + EVF_OFF_BUILDER, 2);
	h->sources = (uint16_t)be_get(src + EVF_OFF_SOURCES, 2);
	h->file_seq = (uint32_t)be_get(src + EVF_OFF_FILE_SEQ, 4);
	h->slice = (uint32_t)be_get(src + EVF_OFF_SLICE, 4);
	h->created_ns = be_get(src + EVF_OFF_CREATED, 8);
	memcpy(h->config_sha256, src + EVF_OFF_CONFIG, EVF_SHA256_BYTES);
	memcpy(h->software, src + EVF_OFF_SOFTWARE, EVF_SOFTWARE_BYTES);
	h->software[EVF_SOFTWARE_BYTES] = '\0';
	return EVF_OK;
}

void evf_encode_record_header(uint8_t *dst, const struct evf_record_header *h)
{
	memcpy(dst + REC_OFF_MAGIC, EVF_RECORD_MAGIC, 4);
	be_put(dst + REC_OFF_BYTES, h->record_bytes, 4);
	be_put(dst + REC_OFF_RUN, h->run, 4);
	be_put(dst + REC_OFF_EVENT, h->event_id, 8);
	be_put(dst + REC_OFF_FRAGMENTS, h->fragments, 2);
	be_put(dst + REC_OFF_FLAGS, h->flags, 2);
	be_put(dst + REC_OFF_EARLIEST, h->earliest_ns, 8);
	be_put(dst + REC_OFF_CRC, h->record_crc, 4);
}

void evf_parse_record_header(const uint8_t *src, struct evf_record_header *h)
{
	h->record_bytes = (uint32_t)be_get(src + REC_OFF_BYTES, 4);
	h->run = (uint32_t)be_get(src + REC_OFF_RUN, 4);
	h->event_id = be_get(src + REC_OFF_EVENT, 8);
	h->fragments = (uint16_t)be_get(src + REC_OFF_FRAGMENTS, 2);
	h->flags = (uint16_t)be_get(src + REC_OFF_FLAGS, 2);
	h->earliest_ns = be_get(src + REC_OFF_EARLIEST, 8);
	h->record_crc = (uint32_t)be_get(src + REC_OFF_CRC, 4);
}

uint32_t evf_record_crc(const uint8_t *header, uint32_t frames_crc, uint64_t frames_bytes)
{
	uint32_t head = crc_update(0, header, EVF_RECORD_CRC_COVERED_BYTES);

	return frames_bytes == 0 ? head : crc_combine(head, frames_crc, frames_bytes);
}

void evf_encode_trailer(uint8_t *dst, struct evf_trailer *t, uint32_t crc_before)
{
	memcpy(dst + TRL_OFF_MAGIC, EVF_TRAILER_MAGIC, 4);
	be_put(dst + TRL_OFF_BYTES, EVF_TRAILER_BYTES, 4);
	be_put(dst + TRL_OFF_EVENTS, t->events, 8);
	be_put(dst + TRL_OFF_RECORD_BYTES, t->record_bytes, 8);
	be_put(dst + TRL_OFF_FIRST, t->first_event, 8);
	be_put(dst + TRL_OFF_LAST, t->last_event, 8);
	t->file_crc = crc_update(crc_before, dst, TRL_OFF_FILE_CRC);
	be_put(dst + TRL_OFF_FILE_CRC, t->file_crc, 4);
}

/* The frames of one record, each checked by the frame decoder (magic,
 * version, flags, run, length, CRC) and against the record. */
static enum evf_status evf_check_frames(const uint8_t *p, size_t n, const struct evf_record_header *r,
					uint32_t max_payload_bytes)
{
	struct frm_decoder d;
	struct frm_header f;
	size_t frame_bytes, need, at = 0;
	unsigned int count = 0;

	frm_decoder_init(&d, r->run, max_payload_bytes);
	while (at < n) {
		enum frm_status st = frm_decoder_next(&d, p + at, n - at, &f, &frame_bytes, &need);

		if (st == FRM_ERR_RUN)
			return EVF_ERR_FRAME_MISMATCH;
		if (st != FRM_OK || (f.flags & FRM_FLAG_END))
			return EVF_ERR_FRAME;
		if (f.event_id != r->event_id)
			return EVF_ERR_FRAME_MISMATCH;
		at += frame_bytes;
		count++;
	}
	return count == r->fragments ? EVF_OK : EVF_ERR_FRAME_MISMATCH;
}

/* The record at buf + at, whose magic is there; its status. */
static enum evf_status evf_check_record(const uint8_t *buf, size_t n, size_t at,
					const struct evf_scan *s, uint32_t max_payload_bytes,
					struct evf_record_header *r)
{
	size_t left = n - at;

	if (left < EVF_RECORD_HEADER_BYTES)
		return EVF_ERR_TRUNCATED;
	evf_parse_record_header(buf + at, r);
	if (r->record_bytes < EVF_RECORD_HEADER_BYTES)
		return EVF_ERR_RECORD_LENGTH;
	if (r->record_bytes > left)
		return EVF_ERR_TRUNCATED;
	const uint8_t *frames = buf + at + EVF_RECORD_HEADER_BYTES;
	size_t frames_bytes = r->record_bytes - EVF_RECORD_HEADER_BYTES;
	uint32_t crc = crc_update(crc_update(0, buf + at, EVF_RECORD_CRC_COVERED_BYTES), frames,
				  frames_bytes);

	if (crc != r->record_crc)
		return EVF_ERR_RECORD_CRC;
	if (r->run != s->header.run || (r->flags & ~EVF_FLAG_INCOMPLETE))
		return EVF_ERR_FRAME_MISMATCH;
	if (s->records.events > 0 && r->event_id <= s->records.last_event)
		return EVF_ERR_ORDER;
	return evf_check_frames(frames, frames_bytes, r, max_payload_bytes);
}

/* The trailer at buf + at against the records counted before it. */
static enum evf_status evf_check_trailer(const uint8_t *buf, size_t n, size_t at,
					 const struct evf_scan *s)
{
	const uint8_t *t = buf + at;

	if (n - at < EVF_TRAILER_BYTES)
		return EVF_ERR_TRUNCATED;
	if (be_get(t + TRL_OFF_BYTES, 4) != EVF_TRAILER_BYTES ||
	    be_get(t + TRL_OFF_EVENTS, 8) != s->records.events ||
	    be_get(t + TRL_OFF_RECORD_BYTES, 8) != s->records.record_bytes ||
	    be_get(t + TRL_OFF_FIRST, 8) != s->records.first_event ||
	    be_get(t + TRL_OFF_LAST, 8) != s->records.last_event)
		return EVF_ERR_TRAILER;
	if (be_get(t + TRL_OFF_FILE_CRC, 4) != crc_update(s->good_crc, t, TRL_OFF_FILE_CRC))
		return EVF_ERR_FILE_CRC;
	if (n - at > EVF_TRAILER_BYTES)
		return EVF_ERR_AFTER_TRAILER;
	return EVF_OK;
}

static void evf_fail(struct evf_scan *s, enum evf_status status, size_t at)
{
	s->status = status;
	s->bad_offset = at;
}

void evf_scan(const uint8_t *buf, size_t n, uint32_t max_payload_bytes, struct evf_scan *out)
{
	struct evf_record_header r;
	enum evf_status st;
	size_t at = EVF_HEADER_BYTES;

	memset(out, 0, sizeof(*out));
	st = evf_decode_file_header(buf, n, &out->header);
	if (st != EVF_OK) {
		/* Where a reader would point: the version field, the end of a
		 * cut header, or the header's start. */
		evf_fail(out, st, st == EVF_ERR_VERSION ? EVF_OFF_VERSION : st == EVF_ERR_TRUNCATED ? n : 0);
		return;
	}
	out->has_header = true;
	out->good_bytes = EVF_HEADER_BYTES;
	out->good_crc = crc_update(0, buf, EVF_HEADER_BYTES);
	for (;;) {
		if (n - at < 4) {
			evf_fail(out, EVF_ERR_TRUNCATED, at);
			return;
		}
		if (memcmp(buf + at, EVF_TRAILER_MAGIC, 4) == 0) {
			st = evf_check_trailer(buf, n, at, out);
			out->complete = st == EVF_OK;
			if (st != EVF_OK)
				evf_fail(out, st, at);
			return;
		}
		if (memcmp(buf + at, EVF_RECORD_MAGIC, 4) != 0) {
			evf_fail(out, EVF_ERR_RECORD_MAGIC, at);
			return;
		}
		st = evf_check_record(buf, n, at, out, max_payload_bytes, &r);
		if (st != EVF_OK) {
			evf_fail(out, st, at);
			out->bad_event_known = n - at >= EVF_RECORD_HEADER_BYTES;
			out->bad_event = out->bad_event_known ? r.event_id : 0;
			return;
		}
		if (out->records.events++ == 0)
			out->records.first_event = r.event_id;
		out->records.last_event = r.event_id;
		out->records.record_bytes += r.record_bytes;
		out->good_crc = crc_update(out->good_crc, buf + at, r.record_bytes);
		at += r.record_bytes;
		out->good_bytes = at;
	}
}
