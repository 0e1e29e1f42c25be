/* The msgpack pre-allocation scan; see msgpack_scan.h. */
#include "wire/msgpack_scan.h"

#include <inttypes.h>
#include <msgpack/unpack_define.h>   /* MSGPACK_EMBED_STACK_SIZE, the library's depth limit */
#include <stdarg.h>
#include <stdio.h>

_Static_assert(MPS_MAX_DEPTH < MSGPACK_EMBED_STACK_SIZE,
	       "the scan must refuse nesting before msgpack does");

struct mps_err {
	char *buf;
	size_t len;
};

__attribute__((format(printf, 2, 3)))
static bool mps_fail(struct mps_err *e, const char *fmt, ...)
{
	if (e->buf != NULL && e->len > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->buf, e->len, fmt, ap);
		va_end(ap);
	}
	return false;
}

const char *mps_byte_kind(uint8_t b)
{
	if (b <= 0x7f || (b >= 0xcc && b <= 0xcf))
		return "a uint";
	if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3))
		return "an int";
	if (b <= 0x8f || b == 0xde || b == 0xdf)
		return "a map";
	if (b <= 0x9f || b == 0xdc || b == 0xdd)
		return "an array";
	if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb))
		return "a str";
	switch (b) {
	case 0xc0:
		return "a nil";
	case 0xc2:
	case 0xc3:
		return "a bool";
	case 0xc4:
	case 0xc5:
	case 0xc6:
		return "a bin";
	case 0xca:
	case 0xcb:
		return "a float";
	case 0xc1:
		return "an invalid byte";
	}
	return "an ext";
}

static bool mps_fail_truncated(struct mps_err *e, uint8_t b, size_t at, size_t n)
{
	return mps_fail(e, "msgpack data truncated: %s at body offset %zu runs past the end of the %zu-byte body",
			mps_byte_kind(b), at, n);
}

static uint64_t mps_load_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

bool mps_scan(const uint8_t *p, size_t n, size_t *used, char *err, size_t errlen)
{
	struct mps_err e = { err, errlen };
	uint64_t left[MPS_MAX_DEPTH + 1];
	unsigned depth = 0;
	size_t off = 0;

	left[0] = 1;
	for (;;) {
		while (left[depth] == 0) {
			if (depth == 0) {
				*used = off;
				return true;
			}
			depth--;
		}
		left[depth]--;
		if (off >= n)
			return mps_fail(&e, "msgpack data truncated: body of %zu bytes ends before a container is complete",
					n);

		size_t at = off;
		uint8_t b = p[off++];
		size_t width = 0;       /* of the length or count after b */
		uint64_t skip = 0;      /* payload bytes after that */
		uint64_t items = 0;     /* child objects of a container */
		bool container = false;

		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* the whole object is this byte */
		} else if (b <= 0x8f) {
			container = true;
			items = 2u * (b & 0x0fu);
		} else if (b <= 0x9f) {
			container = true;
			items = b & 0x0fu;
		} else if (b <= 0xbf) {
			skip = b & 0x1fu;
		} else {
			switch (b) {
			case 0xc1:
				return mps_fail(&e, "invalid msgpack byte 0xc1 at body offset %zu", at);
			case 0xc4: case 0xd9:
				width = 1;
				break;
			case 0xc5: case 0xda:
				width = 2;
				break;
			case 0xc6: case 0xdb:
				width = 4;
				break;
			case 0xc7:
				width = 1;
				skip = 1;
				break;
			case 0xc8:
				width = 2;
				skip = 1;
				break;
			case 0xc9:
				width = 4;
				skip = 1;
				break;
			case 0xca: case 0xce: case 0xd2:
				skip = 4;
				break;
			case 0xcb: case 0xcf: case 0xd3:
				skip = 8;
				break;
			case 0xcc: case 0xd0:
				skip = 1;
				break;
			case 0xcd: case 0xd1:
				skip = 2;
				break;
			case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
				skip = 1 + (1u << (b - 0xd4));
				break;
			case 0xdc: case 0xde:
				width = 2;
				container = true;
				break;
			case 0xdd: case 0xdf:
				width = 4;
				container = true;
				break;
			}
		}

		if (width > 0) {
			if (n - off < width)
				return mps_fail_truncated(&e, b, at, n);
			uint64_t v = mps_load_be(p + off, width);
			off += width;
			if (container)
				items = (b == 0xde || b == 0xdf) ? 2 * v : v;
			else
				skip += v;
		}

		if (!container) {
			if (skip > n - off)
				return mps_fail_truncated(&e, b, at, n);
			off += (size_t)skip;
			continue;
		}
		if (depth + 1 > MPS_MAX_DEPTH)
			return mps_fail(&e, "msgpack containers nested deeper than %u at body offset %zu",
					MPS_MAX_DEPTH, at);
		if (items == 0)
			continue;
		/* Every element takes at least one byte. */
		if (items > n - off) {
			bool map = b <= 0x8f || b == 0xde || b == 0xdf;
			return mps_fail(&e, "%s at body offset %zu declares %" PRIu64 " %s but only %zu byte(s) follow",
					map ? "map" : "array", at, map ? items / 2 : items,
					map ? "entries" : "elements", n - off);
		}
		left[++depth] = items;
	}
}
