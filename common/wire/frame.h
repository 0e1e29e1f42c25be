/* The fragment frame of docs/fragment-format.md §1: a 42-byte big-endian
 * header, then the payload. Encoding writes straight into a caller's batch
 * buffer; decoding is incremental and never allocates. */
#ifndef ES_WIRE_FRAME_H
#define ES_WIRE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/crc.h"

#define FRM_MAGIC 0x4553u
#define FRM_VERSION 1u
#define FRM_HEADER_BYTES 42u
#define FRM_CRC_COVERED_HEADER_BYTES 38u
#define FRM_FLAG_END 0x01u
#define FRM_MAX_PAYLOAD_BYTES 1048576u

struct frm_header {
	uint8_t flags;
	uint16_t source_id;
	uint32_t run_id;
	uint64_t event_id;
	uint64_t sequence;
	uint64_t timestamp_ns;
	uint32_t payload_len;
	uint32_t crc32;
	uint32_t payload_crc;   /* CRC of the payload alone, set by the decoder */
};

/* Why a frame was refused. FRM_OK and FRM_NEED_MORE are not errors. */
enum frm_status {
	FRM_OK = 0,
	FRM_NEED_MORE = 1,
	FRM_ERR_MAGIC = -1,
	FRM_ERR_VERSION = -2,
	FRM_ERR_FLAGS = -3,
	FRM_ERR_LENGTH = -4,   /* payload_len over the limit, or END with a payload */
	FRM_ERR_CRC = -5,
	FRM_ERR_RUN = -6,      /* run_id differs from the decoder's run */
};

/* Short lowercase name of a status, e.g. "bad magic", "checksum mismatch". */
const char *frm_status_name(enum frm_status status);

/* Writes header and payload to dst (FRM_HEADER_BYTES + h->payload_len bytes)
 * and returns the frame length. The magic, version and CRC are filled in;
 * h->crc32 is ignored and set to the CRC written. payload may be NULL when
 * payload_len is 0. */
size_t frm_encode(uint8_t *dst, struct frm_header *h, const uint8_t *payload);

/* Writes only the header for a payload already placed at dst +
 * FRM_HEADER_BYTES (the generator writes payloads in place, so nothing is
 * copied) and returns the frame length. */
size_t frm_encode_in_place(uint8_t *dst, struct frm_header *h);

/* Parses the 42 header bytes at src without validating anything. */
void frm_parse_header(const uint8_t *src, struct frm_header *h);

/* Length of the frame at src (header + payload_len), read from its header
 * without validating anything: for frames already verified, which a reader
 * copies one by one into a shared-memory ring. */
size_t frm_frame_bytes(const uint8_t *src);

/* Incremental decoder of one connection's byte stream. The caller keeps the
 * unconsumed bytes contiguous in its own buffer and calls frm_decoder_next()
 * whenever more have arrived; a header is parsed and validated once, however
 * many calls the frame takes to complete. */
struct frm_decoder {
	uint32_t run_id;            /* expected run */
	uint32_t max_payload_bytes; /* configured limit, at most FRM_MAX_PAYLOAD_BYTES */
	bool have_header;           /* header of the frame at buf[0] validated */
	struct frm_header header;
	struct crc_shift_cache shift;
};

/* Starts a decoder for one connection. */
void frm_decoder_init(struct frm_decoder *d, uint32_t run_id, uint32_t max_payload_bytes);

/* Looks at the avail bytes at buf (the start of the next frame). Returns
 * FRM_NEED_MORE and sets *need_bytes to the total frame length known so far
 * (FRM_HEADER_BYTES before the header is complete); FRM_OK with *out filled
 * and *frame_bytes set when a whole valid frame is at buf (the caller then
 * consumes frame_bytes and calls again); or an error, after which the
 * connection is to be closed. Magic, version, flags, run and length are
 * checked as soon as the 42 header bytes are present, the CRC once the
 * payload is. */
enum frm_status frm_decoder_next(struct frm_decoder *d, const uint8_t *buf, size_t avail,
				 struct frm_header *out, size_t *frame_bytes, size_t *need_bytes);

/* The CRC of the payload alone, derived from a frame's CRC without reading
 * the payload again. src points at the frame's first byte. A decoded
 * header already carries it in payload_crc. */
uint32_t frm_payload_crc(const uint8_t *src, const struct frm_header *h);

#endif
