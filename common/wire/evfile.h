/* The event file of docs/event-file-format.md: a 128-byte file header,
 * per event a 36-byte record header followed by the event's frames as they
 * arrived, a 44-byte trailer. Encoders write into a caller's buffer; the
 * scan verifies a whole file in memory (a mapped file) and says where the
 * last complete record ends, which is all recovery needs. Nothing here
 * allocates, reads a clock or does I/O. */
#ifndef ES_WIRE_EVFILE_H
#define ES_WIRE_EVFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVF_MAGIC "ESEVFILE"
#define EVF_RECORD_MAGIC "EVNT"
#define EVF_TRAILER_MAGIC "EVFT"
#define EVF_FORMAT_VERSION 1u
#define EVF_HEADER_BYTES 128u
#define EVF_RECORD_HEADER_BYTES 36u
#define EVF_TRAILER_BYTES 44u
#define EVF_RECORD_CRC_COVERED_BYTES 32u  /* record header bytes the record CRC starts with */
#define EVF_FILE_CRC_OFFSET_IN_TRAILER 40u
#define EVF_SHA256_BYTES 32u
#define EVF_SOFTWARE_BYTES 32u
#define EVF_FLAG_INCOMPLETE 0x0001u

struct evf_file_header {
	uint16_t format_version;   /* set by the encoder; what the decoder read */
	uint32_t run;
	uint16_t builder_id;
	uint16_t sources;
	uint32_t file_seq;
	uint32_t slice;
	uint64_t created_ns;
	uint8_t config_sha256[EVF_SHA256_BYTES];
	char software[EVF_SOFTWARE_BYTES + 1];   /* NUL-terminated */
};

struct evf_record_header {
	uint32_t record_bytes;     /* this header and its frames */
	uint32_t run;
	uint64_t event_id;
	uint16_t fragments;
	uint16_t flags;
	uint64_t earliest_ns;
	uint32_t record_crc;
};

struct evf_trailer {
	uint64_t events;
	uint64_t record_bytes;
	uint64_t first_event;
	uint64_t last_event;
	uint32_t file_crc;
};

/* Why a file was refused; EVF_OK is not an error. */
enum evf_status {
	EVF_OK = 0,
	EVF_ERR_MAGIC = -1,          /* not an event file */
	EVF_ERR_VERSION = -2,        /* another format version */
	EVF_ERR_HEADER = -3,         /* header_bytes or header CRC wrong */
	EVF_ERR_RECORD_MAGIC = -4,   /* no record (nor trailer) where one must start */
	EVF_ERR_RECORD_LENGTH = -5,  /* record_bytes too small or past the end */
	EVF_ERR_RECORD_CRC = -6,
	EVF_ERR_FRAME = -7,          /* a frame inside fails its own checks */
	EVF_ERR_FRAME_MISMATCH = -8, /* a frame of another run or event, or a wrong count */
	EVF_ERR_ORDER = -9,          /* event IDs do not increase */
	EVF_ERR_TRUNCATED = -10,     /* ends without a trailer, or inside a record */
	EVF_ERR_TRAILER = -11,       /* the trailer's counts differ from the records' */
	EVF_ERR_FILE_CRC = -12,
	EVF_ERR_AFTER_TRAILER = -13, /* bytes after the trailer */
};

/* Short lowercase name of a status, e.g. "record checksum mismatch". */
const char *evf_status_name(enum evf_status status);

/* Writes the 128 header bytes, header CRC included. */
void evf_encode_file_header(uint8_t *dst, const struct evf_file_header *h);

/* Reads and checks the header at src (n bytes available). */
enum evf_status evf_decode_file_header(const uint8_t *src, size_t n, struct evf_file_header *h);

/* Writes the 36 record header bytes; h->record_crc is written as given
 * (evf_record_crc() makes it). */
void evf_encode_record_header(uint8_t *dst, const struct evf_record_header *h);

/* Parses 36 record header bytes without checking them. */
void evf_parse_record_header(const uint8_t *src, struct evf_record_header *h);

/* The record CRC of an encoded record header (its first 32 bytes) and of
 * its frames, given as their CRC and length: the writer never reads a
 * payload again to make it. */
uint32_t evf_record_crc(const uint8_t *header, uint32_t frames_crc, uint64_t frames_bytes);

/* Writes the 44 trailer bytes. file_crc is computed here from crc_before,
 * the CRC of every byte of the file before the trailer. */
void evf_encode_trailer(uint8_t *dst, struct evf_trailer *t, uint32_t crc_before);

/* What a scan found: everything up to good_bytes is a valid header and
 * whole records (the trailer too when complete is set); the rest is where
 * it stopped and why. */
struct evf_scan {
	enum evf_status status;
	bool has_header;          /* the file header is valid */
	bool complete;            /* a valid trailer ends the file */
	struct evf_file_header header;
	struct evf_trailer records;   /* counts of the valid records; file_crc unused */
	size_t good_bytes;        /* header and the valid records, trailer excluded */
	uint32_t good_crc;        /* CRC of those good_bytes */
	size_t bad_offset;        /* where the first problem is (status != EVF_OK) */
	bool bad_event_known;
	uint64_t bad_event;       /* the record's event ID, when bad_event_known */
};

/* Verifies the file in buf[0..n): header, every record and its frames
 * (payloads at most max_payload_bytes), the trailer. Stops at the first
 * problem, with the records before it counted. */
void evf_scan(const uint8_t *buf, size_t n, uint32_t max_payload_bytes, struct evf_scan *out);

#endif
