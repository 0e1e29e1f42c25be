/* The control message decoder: the length prefix judged first, the body
 * walked by the pre-allocation scan (msgpack_scan.h), then unpacked and
 * matched against its type's field table (control_table.h); every refusal
 * names the field and quotes the peer's bytes escaped. */
#include "wire/control_table.h"

#include "wire/msgpack_scan.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Room for one peer-supplied string quoted in an error message. */
#define CTL_QUOTE_BYTES 48u

struct ctl_ctx {
	char *err;
	size_t errlen;
	const char *what;       /* message type, for error text */
};

__attribute__((format(printf, 2, 3)))
static bool ctl_fail(struct ctl_ctx *cx, const char *fmt, ...)
{
	if (cx->err != NULL && cx->errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(cx->err, cx->errlen, fmt, ap);
		va_end(ap);
	}
	return false;
}

/* Peer bytes go into log lines through the error text: keep them printable
 * and short. */
static const char *ctl_quote(const char *s, size_t n, char out[CTL_QUOTE_BYTES])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		size_t width = (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') ? 1 : 4;
		if (o + width + 4 > CTL_QUOTE_BYTES) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (width == 1) {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}

/* With its article, for "key 'x' in hello is a str, expected uint". */
static const char *ctl_object_kind(msgpack_object_type type)
{
	switch (type) {
	case MSGPACK_OBJECT_NIL:
		return "a nil";
	case MSGPACK_OBJECT_BOOLEAN:
		return "a bool";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return "a uint";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return "a negative int";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return "a float";
	case MSGPACK_OBJECT_STR:
		return "a str";
	case MSGPACK_OBJECT_ARRAY:
		return "an array";
	case MSGPACK_OBJECT_MAP:
		return "a map";
	case MSGPACK_OBJECT_BIN:
		return "a bin";
	case MSGPACK_OBJECT_EXT:
		return "an ext";
	}
	return "an unknown object";
}

static bool ctl_str_is(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       memcmp(o->via.str.ptr, s, n) == 0;
}

/* Copies a peer string of set cs into a fixed buffer; what names it in the
 * error. */
static bool ctl_copy_text(struct ctl_ctx *cx, const msgpack_object *o, char *dst, size_t cap,
			  enum ctl_charset cs, const char *what)
{
	char q[CTL_QUOTE_BYTES];
	size_t bad;

	if (o->type != MSGPACK_OBJECT_STR)
		return ctl_fail(cx, "%s in %s is %s, expected str", what, cx->what,
				ctl_object_kind(o->type));
	if (o->via.str.size > cap - 1)
		return ctl_fail(cx, "%s in %s is %" PRIu32 " bytes, longer than %zu", what,
				cx->what, o->via.str.size, cap - 1);
	/* A NUL would silently cut the string short on our side. */
	if (memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL)
		return ctl_fail(cx, "%s in %s contains a NUL byte ('%s')", what, cx->what,
				ctl_quote(o->via.str.ptr, o->via.str.size, q));
	if (!ctl_charset_ok(cs, o->via.str.ptr, o->via.str.size, &bad)) {
		const struct ctl_charset_rule *rule = &ctl_charsets[cs];
		ctl_quote(o->via.str.ptr, o->via.str.size, q);
		if (bad == o->via.str.size)
			return ctl_fail(cx, "%s in %s is %" PRIu32 " bytes, longer than %zu ('%s')",
					what, cx->what, o->via.str.size, rule->max_bytes, q);
		return ctl_fail(cx, "%s in %s has byte 0x%02x at offset %zu ('%s'): %s", what,
				cx->what, (unsigned char)o->via.str.ptr[bad], bad, q, rule->says);
	}
	memcpy(dst, o->via.str.ptr, o->via.str.size);
	dst[o->via.str.size] = '\0';
	return true;
}

static bool ctl_get_uint(struct ctl_ctx *cx, const msgpack_object *o, uint64_t max, uint64_t *v,
			 const char *what)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return ctl_fail(cx, "%s in %s is negative (%" PRId64 ")", what, cx->what,
				o->via.i64);
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return ctl_fail(cx, "%s in %s is %s, expected uint", what, cx->what,
				ctl_object_kind(o->type));
	if (o->via.u64 > max)
		return ctl_fail(cx, "%s in %s is %" PRIu64 ", more than %" PRIu64, what, cx->what,
				o->via.u64, max);
	*v = o->via.u64;
	return true;
}

static bool ctl_get_i32(struct ctl_ctx *cx, const msgpack_object *o, int32_t *v, const char *what)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (o->via.i64 < INT32_MIN)
			return ctl_fail(cx, "%s in %s is %" PRId64 ", less than %" PRId32, what,
					cx->what, o->via.i64, INT32_MIN);
		*v = (int32_t)o->via.i64;
		return true;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return ctl_fail(cx, "%s in %s is %s, expected int", what, cx->what,
				ctl_object_kind(o->type));
	if (o->via.u64 > INT32_MAX)
		return ctl_fail(cx, "%s in %s is %" PRIu64 ", more than %" PRId32, what, cx->what,
				o->via.u64, INT32_MAX);
	*v = (int32_t)o->via.u64;
	return true;
}

/* An int64 within [lo, hi]; what names the field in errors. */
static bool ctl_get_i64(struct ctl_ctx *cx, const msgpack_object *o, int64_t lo, int64_t hi,
			int64_t *v, const char *what)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (o->via.i64 < lo)
			return ctl_fail(cx, "%s in %s is %" PRId64 ", less than %" PRId64, what,
					cx->what, o->via.i64, lo);
		*v = o->via.i64;
		return true;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return ctl_fail(cx, "%s in %s is %s, expected int", what, cx->what,
				ctl_object_kind(o->type));
	if (o->via.u64 > (uint64_t)hi)
		return ctl_fail(cx, "%s in %s is %" PRIu64 ", more than %" PRId64, what, cx->what,
				o->via.u64, hi);
	if ((int64_t)o->via.u64 < lo)
		return ctl_fail(cx, "%s in %s is %" PRIu64 ", less than %" PRId64, what, cx->what,
				o->via.u64, lo);
	*v = (int64_t)o->via.u64;
	return true;
}

/* Matches a str against a name table; what names the field in errors. */
static bool ctl_get_enum(struct ctl_ctx *cx, const msgpack_object *o, const char *const *names,
			 size_t count, unsigned *v, const char *what)
{
	char q[CTL_QUOTE_BYTES];

	if (o->type != MSGPACK_OBJECT_STR)
		return ctl_fail(cx, "%s in %s is %s, expected str", what, cx->what,
				ctl_object_kind(o->type));
	for (size_t i = 0; i < count; i++) {
		if (ctl_str_is(o, names[i])) {
			*v = (unsigned)i;
			return true;
		}
	}
	return ctl_fail(cx, "%s in %s is '%s', not a known value", what, cx->what,
			ctl_quote(o->via.str.ptr, o->via.str.size, q));
}

static bool ctl_get_sources(struct ctl_ctx *cx, const msgpack_object *o, struct ctl_hello *h)
{
	char what[48];

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return ctl_fail(cx, "key 'sources' in %s is %s, expected array", cx->what,
				ctl_object_kind(o->type));
	if (o->via.array.size > CTL_MAX_SOURCE_LIST)
		return ctl_fail(cx, "key 'sources' in %s has %" PRIu32 " entries, more than %u",
				cx->what, o->via.array.size, CTL_MAX_SOURCE_LIST);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		uint64_t v;
		snprintf(what, sizeof what, "element %" PRIu32 " of 'sources'", i);
		if (!ctl_get_uint(cx, &o->via.array.ptr[i], UINT16_MAX, &v, what))
			return false;
		h->sources[i] = (uint16_t)v;
	}
	h->source_count = o->via.array.size;
	return true;
}

/* qname: the group's name, already quoted for error text. */
static bool ctl_get_group(struct ctl_ctx *cx, const msgpack_object *o, struct ctl_group *g,
			  const char *qname)
{
	char what[160];
	char q[CTL_QUOTE_BYTES];

	if (o->type != MSGPACK_OBJECT_MAP)
		return ctl_fail(cx, "group '%s' in %s is %s, expected map", qname, cx->what,
				ctl_object_kind(o->type));
	if (o->via.map.size > CTL_MAX_COUNTERS)
		return ctl_fail(cx, "group '%s' in %s has %" PRIu32 " counters, more than %u",
				qname, cx->what, o->via.map.size, CTL_MAX_COUNTERS);
	g->count = 0;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		struct ctl_counter *c = &g->counters[i];
		snprintf(what, sizeof what, "counter name %" PRIu32 " of group '%s'", i, qname);
		if (!ctl_copy_text(cx, &kv->key, c->name, sizeof c->name, CTL_CHARSET_NAME, what))
			return false;
		ctl_quote(c->name, strlen(c->name), q);
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(g->counters[j].name, c->name) == 0)
				return ctl_fail(cx, "duplicate counter '%s' in group '%s' of %s", q,
						qname, cx->what);
		}
		snprintf(what, sizeof what, "counter '%s' of group '%s'", q, qname);
		if (!ctl_get_uint(cx, &kv->val, UINT64_MAX, &c->value, what))
			return false;
		g->count = i + 1;
	}
	return true;
}

static bool ctl_get_groups(struct ctl_ctx *cx, const msgpack_object *o, struct ctl_report *r)
{
	char what[48];
	char q[CTL_QUOTE_BYTES];

	if (o->type != MSGPACK_OBJECT_MAP)
		return ctl_fail(cx, "key 'groups' in %s is %s, expected map", cx->what,
				ctl_object_kind(o->type));
	if (o->via.map.size > CTL_MAX_GROUPS)
		return ctl_fail(cx, "key 'groups' in %s has %" PRIu32 " groups, more than %u",
				cx->what, o->via.map.size, CTL_MAX_GROUPS);
	r->group_count = 0;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		struct ctl_group *g = &r->groups[i];
		snprintf(what, sizeof what, "group name %" PRIu32, i);
		if (!ctl_copy_text(cx, &kv->key, g->name, sizeof g->name, CTL_CHARSET_NAME, what))
			return false;
		ctl_quote(g->name, strlen(g->name), q);
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(r->groups[j].name, g->name) == 0)
				return ctl_fail(cx, "duplicate group '%s' in %s", q, cx->what);
		}
		if (!ctl_get_group(cx, &kv->val, g, q))
			return false;
		r->group_count = i + 1;
	}
	return true;
}

static bool ctl_get_field(struct ctl_ctx *cx, const struct ctl_field *f, const msgpack_object *o,
			  struct ctl_msg *msg)
{
	char *p = (char *)msg + f->offset;
	char what[48];
	uint64_t v, lo, hi;
	unsigned e = 0;

	snprintf(what, sizeof what, "key '%s'", f->key);
	switch (f->kind) {
	case CTL_KIND_U64:
	case CTL_KIND_U32:
		ctl_field_range(f, &lo, &hi);
		if (!ctl_get_uint(cx, o, hi, &v, what))
			return false;
		if (v < lo)
			return ctl_fail(cx, "%s in %s is %" PRIu64 ", less than %" PRIu64, what,
					cx->what, v, lo);
		if (f->kind == CTL_KIND_U64)
			*(uint64_t *)p = v;
		else
			*(uint32_t *)p = (uint32_t)v;
		return true;
	case CTL_KIND_I32:
		return ctl_get_i32(cx, o, (int32_t *)p, what);
	case CTL_KIND_I64: {
		int64_t slo, shi;
		ctl_field_srange(f, &slo, &shi);
		return ctl_get_i64(cx, o, slo, shi, (int64_t *)p, what);
	}
	case CTL_KIND_STR:
		return ctl_copy_text(cx, o, p, f->size, f->charset, what);
	case CTL_KIND_ROLE:
	case CTL_KIND_CHANNEL:
	case CTL_KIND_ROUTING_MODE:
	case CTL_KIND_SESSION_STATE: {
		size_t count;
		const char *const *names = ctl_enum_names(f->kind, &count);
		if (!ctl_get_enum(cx, o, names, count, &e, what))
			return false;
		*(unsigned *)p = e;
		return true;
	}
	case CTL_KIND_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			return ctl_fail(cx, "%s in %s is %s, expected bool", what, cx->what,
					ctl_object_kind(o->type));
		*(bool *)p = o->via.boolean;
		return true;
	case CTL_KIND_SOURCES:
		return ctl_get_sources(cx, o, (struct ctl_hello *)p);
	case CTL_KIND_GROUPS:
		return ctl_get_groups(cx, o, (struct ctl_report *)p);
	}
	return ctl_fail(cx, "internal error: field '%s' has no decoder", f->key);
}

static bool ctl_decode_map(struct ctl_ctx *cx, const msgpack_object_map *map, struct ctl_msg *msg)
{
	const msgpack_object *type = NULL;
	char q[CTL_QUOTE_BYTES];

	for (uint32_t i = 0; i < map->size; i++) {
		if (!ctl_str_is(&map->ptr[i].key, "type"))
			continue;
		if (type != NULL)
			return ctl_fail(cx, "duplicate key 'type'");
		type = &map->ptr[i].val;
	}
	if (type == NULL)
		return ctl_fail(cx, "missing key 'type'");
	if (type->type != MSGPACK_OBJECT_STR)
		return ctl_fail(cx, "key 'type' is %s, expected str", ctl_object_kind(type->type));

	size_t t;
	for (t = 0; t < CTL_TYPE_COUNT; t++) {
		if (ctl_str_is(type, ctl_type_names[t]))
			break;
	}
	if (t == CTL_TYPE_COUNT)
		return ctl_fail(cx, "unknown type '%s'",
				ctl_quote(type->via.str.ptr, type->via.str.size, q));

	const struct ctl_spec *spec = &ctl_specs[t];
	msg->type = (enum ctl_type)t;
	cx->what = ctl_type_names[t];
	if (spec->clear)
		memset((char *)msg + spec->offset, 0, spec->size);

	uint32_t seen = 0;
	/* control_table.c checks that no message has more than 32 fields. */
	for (uint32_t i = 0; i < map->size; i++) {
		const msgpack_object *key = &map->ptr[i].key;
		if (key->type != MSGPACK_OBJECT_STR)
			continue;       /* unknown key: a newer peer's business */
		for (size_t k = 0; k < spec->count; k++) {
			const struct ctl_field *f = &spec->fields[k];
			if (!ctl_str_is(key, f->key))
				continue;
			if (seen & (1u << k))
				return ctl_fail(cx, "duplicate key '%s' in %s", f->key, cx->what);
			if (!ctl_get_field(cx, f, &map->ptr[i].val, msg))
				return false;
			seen |= 1u << k;
			break;
		}
	}
	for (size_t k = 0; k < spec->count; k++) {
		if (!(seen & (1u << k)))
			return ctl_fail(cx, "missing key '%s' in %s", spec->fields[k].key,
					cx->what);
	}
	return true;
}

static bool ctl_decode_body(struct ctl_ctx *cx, const uint8_t *body, size_t len,
			    struct ctl_msg *msg)
{
	size_t used = 0;

	if (!mps_scan(body, len, &used, cx->err, cx->errlen))
		return false;
	if (!(body[0] >= 0x80 && body[0] <= 0x8f) && body[0] != 0xde && body[0] != 0xdf)
		return ctl_fail(cx, "body is %s, not a map", mps_byte_kind(body[0]));
	if (used != len)
		return ctl_fail(cx, "%zu trailing byte(s) after the map in a body of %zu bytes",
				len - used, len);

	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	size_t off = 0;
	bool ok;
	msgpack_unpack_return ret = msgpack_unpack_next(&up, (const char *)body, len, &off);
	if (ret == MSGPACK_UNPACK_NOMEM_ERROR)
		ok = ctl_fail(cx, "msgpack ran out of memory unpacking a body of %zu bytes", len);
	else if (ret != MSGPACK_UNPACK_SUCCESS || off != len || up.data.type != MSGPACK_OBJECT_MAP)
		ok = ctl_fail(cx, "msgpack refused a body of %zu bytes (error %d)", len, (int)ret);
	else
		ok = ctl_decode_map(cx, &up.data.via.map, msg);
	msgpack_unpacked_destroy(&up);
	return ok;
}

long ctl_decode(const uint8_t *buf, size_t avail, struct ctl_msg *msg, size_t *need, char *err,
		size_t errlen)
{
	struct ctl_ctx cx = { .err = err, .errlen = errlen, .what = "message" };
	size_t dummy;

	if (need == NULL)
		need = &dummy;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	*need = CTL_LENGTH_BYTES;
	if (avail < CTL_LENGTH_BYTES)
		return 0;

	/* Judge the length before waiting for (or buffering) the body. */
	uint32_t len = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
	if (len == 0) {
		ctl_fail(&cx, "body length 0");
		return -1;
	}
	if (len > CTL_MAX_MESSAGE_BYTES) {
		ctl_fail(&cx, "body length %" PRIu32 " exceeds %u", len, CTL_MAX_MESSAGE_BYTES);
		return -1;
	}
	*need = CTL_LENGTH_BYTES + (size_t)len;
	if (avail < *need)
		return 0;
	if (!ctl_decode_body(&cx, buf + CTL_LENGTH_BYTES, len, msg))
		return -1;
	return (long)*need;
}
