/* A bounded walk over msgpack bytes before anything is built from them.
 * msgpack-c allocates a container's element array from the count on the
 * wire before reading a single element, so a 5-byte array header could ask
 * it for 100 GB; a body that passed mps_scan() declares no element that is
 * not there, so what msgpack then allocates is bounded by the body's size.
 * Pure: no allocation, no I/O. */
#ifndef ES_WIRE_MSGPACK_SCAN_H
#define ES_WIRE_MSGPACK_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Containers nested deeper than this are refused. The control messages
 * need 3 levels; the rest is room for unknown fields of newer peers. It
 * stays below msgpack's own limit (MSGPACK_EMBED_STACK_SIZE, checked in
 * msgpack_scan.c) so the library never fails on a body the scan accepted. */
#define MPS_MAX_DEPTH 16u

/* Walks the one msgpack object at p (n bytes available) and sets *used to
 * its length: true when it is whole (every element it declares present,
 * no byte 0xc1, nested at most MPS_MAX_DEPTH deep). false with the reason,
 * naming the body offset, in err (capacity errlen; err may be NULL). */
bool mps_scan(const uint8_t *p, size_t n, size_t *used, char *err, size_t errlen);

/* What a msgpack format byte begins, with its article ("a uint", "a map",
 * "an invalid byte"), for error text about bytes nothing was built from. */
const char *mps_byte_kind(uint8_t b);

#endif
