/* Event file harness: a recovery's view of a file (common/wire/evfile.c).
 * Input: the largest payload the reader allows (4 bytes, big-endian), then
 * the file's bytes, copied to a buffer of exactly that size (AddressSanitizer
 * catches a read past it).
 *
 * Whatever the bytes, the scan must stop inside them with a verdict that
 * fits: OK exactly when a valid trailer ends the file; the good prefix is
 * the header and whole records, and a second scan of that prefix alone
 * finds the same records, cut where the first stopped. And recovery's
 * promise: that prefix with a trailer made from the scan's counts and CRC is
 * a complete, valid file of the same records. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "wire/evfile.h"

#define T "evfile"
#define CHECK(cond, ...) FUZZ_CHECK(T, cond, __VA_ARGS__)

static void check_recovered(const uint8_t *file, const struct evf_scan *s, uint32_t max_payload)
{
	size_t n = s->good_bytes + EVF_TRAILER_BYTES;
	uint8_t *closed = malloc(n);
	struct evf_trailer t = s->records;
	struct evf_scan again;

	CHECK(closed != NULL, "out of memory");
	memcpy(closed, file, s->good_bytes);
	evf_encode_trailer(closed + s->good_bytes, &t, s->good_crc);
	evf_scan(closed, n, max_payload, &again);
	CHECK(again.status == EVF_OK && again.complete, "recovered file scans as \"%s\"",
	      evf_status_name(again.status));
	CHECK(again.records.events == s->records.events, "recovered file has %llu events, not %llu",
	      (unsigned long long)again.records.events, (unsigned long long)s->records.events);
	free(closed);
}

void fuzz_evfile_input(const uint8_t *data, size_t size)
{
	struct evf_scan s, prefix;
	uint32_t max_payload;
	uint8_t *file;
	size_t n;

	if (size < 4)
		return;
	max_payload = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 |
		      data[3];
	n = size - 4;
	file = malloc(n ? n : 1);
	CHECK(file != NULL, "out of memory");
	memcpy(file, data + 4, n);
	evf_scan(file, n, max_payload, &s);
	CHECK((s.status == EVF_OK) == s.complete, "status \"%s\" with complete %d",
	      evf_status_name(s.status), s.complete);
	CHECK(s.good_bytes <= n && s.bad_offset <= n, "good %zu, bad at %zu of %zu", s.good_bytes,
	      s.bad_offset, n);
	if (s.complete)
		CHECK(s.good_bytes + EVF_TRAILER_BYTES == n, "complete, but %zu + trailer != %zu",
		      s.good_bytes, n);
	if (!s.has_header) {
		CHECK(s.good_bytes == 0 && s.records.events == 0, "records without a header");
		free(file);
		return;
	}
	CHECK(s.good_bytes >= EVF_HEADER_BYTES, "good prefix %zu shorter than a header",
	      s.good_bytes);
	CHECK(s.complete || s.bad_offset >= s.good_bytes, "stopped at %zu inside the good %zu",
	      s.bad_offset, s.good_bytes);
	evf_scan(file, s.good_bytes, max_payload, &prefix);
	CHECK(prefix.status == EVF_ERR_TRUNCATED && prefix.records.events == s.records.events &&
		      prefix.good_bytes == s.good_bytes && prefix.good_crc == s.good_crc,
	      "the good prefix scans as \"%s\" with %llu events", evf_status_name(prefix.status),
	      (unsigned long long)prefix.records.events);
	check_recovered(file, &s, max_payload);
	free(file);
}
