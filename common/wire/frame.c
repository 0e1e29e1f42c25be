#include "wire/frame.h"

#include <string.h>

#include "wire/bigendian.h"
#include "wire/crc.h"

/* Up to this payload size the decoder sums the frame directly; beyond it it
 * combines the header and payload CRCs. */
#define FRM_RECHECK_PAYLOAD_BYTES 2048u

/* Byte offsets of docs/fragment-format.md §1. */
enum {
	FRM_OFF_MAGIC = 0,
	FRM_OFF_VERSION = 2,
	FRM_OFF_FLAGS = 3,
	FRM_OFF_SOURCE = 4,
	FRM_OFF_RUN = 6,
	FRM_OFF_EVENT = 10,
	FRM_OFF_SEQUENCE = 18,
	FRM_OFF_TIMESTAMP = 26,
	FRM_OFF_LENGTH = 34,
	FRM_OFF_CRC = 38,
};

const char *frm_status_name(enum frm_status status)
{
	switch (status) {
	case FRM_OK:
		return "ok";
	case FRM_NEED_MORE:
		return "incomplete frame";
	case FRM_ERR_MAGIC:
		return "bad magic";
	case FRM_ERR_VERSION:
		return "bad version";
	case FRM_ERR_FLAGS:
		return "bad flags";
	case FRM_ERR_LENGTH:
		/* END's limit is 0, so an END with a payload is oversized too. */
		return "oversized length";
	case FRM_ERR_CRC:
		return "checksum mismatch";
	case FRM_ERR_RUN:
		return "wrong run";
	}
	return "unknown status";
}

size_t frm_frame_bytes(const uint8_t *src)
{
	return FRM_HEADER_BYTES + (size_t)be_get(src + FRM_OFF_LENGTH, 4);
}

size_t frm_encode(uint8_t *dst, struct frm_header *h, const uint8_t *payload)
{
	/* payload == dst + FRM_HEADER_BYTES is an in-place encode, and memcpy
	 * onto itself is undefined. */
	if (h->payload_len > 0 && payload != dst + FRM_HEADER_BYTES)
		memcpy(dst + FRM_HEADER_BYTES, payload, h->payload_len);
	return frm_encode_in_place(dst, h);
}

size_t frm_encode_in_place(uint8_t *dst, struct frm_header *h)
{
	uint32_t crc;

	be_put(dst + FRM_OFF_MAGIC, FRM_MAGIC, 2);
	dst[FRM_OFF_VERSION] = FRM_VERSION;
	dst[FRM_OFF_FLAGS] = h->flags;
	be_put(dst + FRM_OFF_SOURCE, h->source_id, 2);
	be_put(dst + FRM_OFF_RUN, h->run_id, 4);
	be_put(dst + FRM_OFF_EVENT, h->event_id, 8);
	be_put(dst + FRM_OFF_SEQUENCE, h->sequence, 8);
	be_put(dst + FRM_OFF_TIMESTAMP, h->timestamp_ns, 8);
	be_put(dst + FRM_OFF_LENGTH, h->payload_len, 4);
	crc = crc_update(0, dst, FRM_CRC_COVERED_HEADER_BYTES);
	crc = crc_update(crc, dst + FRM_HEADER_BYTES, h->payload_len);
	be_put(dst + FRM_OFF_CRC, crc, 4);
	h->crc32 = crc;
	return FRM_HEADER_BYTES + (size_t)h->payload_len;
}

void frm_parse_header(const uint8_t *src, struct frm_header *h)
{
	h->flags = src[FRM_OFF_FLAGS];
	h->source_id = (uint16_t)be_get(src + FRM_OFF_SOURCE, 2);
	h->run_id = (uint32_t)be_get(src + FRM_OFF_RUN, 4);
	h->event_id = be_get(src + FRM_OFF_EVENT, 8);
	h->sequence = be_get(src + FRM_OFF_SEQUENCE, 8);
	h->timestamp_ns = be_get(src + FRM_OFF_TIMESTAMP, 8);
	h->payload_len = (uint32_t)be_get(src + FRM_OFF_LENGTH, 4);
	h->crc32 = (uint32_t)be_get(src + FRM_OFF_CRC, 4);
}

void frm_decoder_init(struct frm_decoder *d, uint32_t run_id, uint32_t max_payload_bytes)
{
	d->run_id = run_id;
	d->max_payload_bytes = max_payload_bytes < FRM_MAX_PAYLOAD_BYTES ? max_payload_bytes
									 : FRM_MAX_PAYLOAD_BYTES;
	d->have_header = false;
	memset(&d->header, 0, sizeof(d->header));
	d->shift.valid = false;
}

/* Everything that can be judged from the 42 header bytes alone, so that a
 * bad peer is cut off before its claimed payload is waited for or stored. */
static enum frm_status frm_check_header(const struct frm_decoder *d, const uint8_t *src,
					const struct frm_header *h)
{
	if (be_get(src + FRM_OFF_MAGIC, 2) != FRM_MAGIC)
		return FRM_ERR_MAGIC;
	if (src[FRM_OFF_VERSION] != FRM_VERSION)
		return FRM_ERR_VERSION;
	if (h->flags & ~FRM_FLAG_END)
		return FRM_ERR_FLAGS;
	if (h->run_id != d->run_id)
		return FRM_ERR_RUN;
	if (h->payload_len > d->max_payload_bytes)
		return FRM_ERR_LENGTH;
	if ((h->flags & FRM_FLAG_END) && h->payload_len != 0)
		return FRM_ERR_LENGTH;
	return FRM_OK;
}

enum frm_status frm_decoder_next(struct frm_decoder *d, const uint8_t *buf, size_t avail,
				 struct frm_header *out, size_t *frame_bytes, size_t *need_bytes)
{
	enum frm_status status;
	size_t total;
	uint32_t crc;

	if (!d->have_header) {
		if (avail < FRM_HEADER_BYTES) {
			*need_bytes = FRM_HEADER_BYTES;
			return FRM_NEED_MORE;
		}
		frm_parse_header(buf, &d->header);
		status = frm_check_header(d, buf, &d->header);
		if (status != FRM_OK)
			return status;
		d->have_header = true;
	}

	total = FRM_HEADER_BYTES + (size_t)d->header.payload_len;
	if (avail < total) {
		*need_bytes = total;
		return FRM_NEED_MORE;
	}

	/* Checking once the whole frame is there reads each byte once, as a
	 * running CRC would, without keeping partial state between calls. The
	 * header and the payload are summed apart and combined, so the builder
	 * gets the payload's own CRC, which its filter needs, for free. */
	d->have_header = false;
	uint32_t header_crc = crc_update(0, buf, FRM_CRC_COVERED_HEADER_BYTES);
	d->header.payload_crc = crc_update(0, buf + FRM_HEADER_BYTES, d->header.payload_len);
	/* Combining costs a 32-step GF(2) product, more than reading a small
	 * payload twice at libdeflate's speed; past a few KiB it is the
	 * cheaper way to the frame CRC. */
	if (d->header.payload_len <= FRM_RECHECK_PAYLOAD_BYTES)
		crc = crc_update(header_crc, buf + FRM_HEADER_BYTES, d->header.payload_len);
	else
		crc = crc_combine_cached(&d->shift, header_crc, d->header.payload_crc,
					 d->header.payload_len);
	if (crc != d->header.crc32)
		return FRM_ERR_CRC;

	*out = d->header;
	*frame_bytes = total;
	return FRM_OK;
}

uint32_t frm_payload_crc(const uint8_t *src, const struct frm_header *h)
{
	/* 38 header bytes are re-read; the payload is not. */
	uint32_t header_crc = crc_update(0, src, FRM_CRC_COVERED_HEADER_BYTES);

	return crc_split_suffix(h->crc32, header_crc, h->payload_len);
}
