/* The control message encoder: a message's field table (control_table.h)
 * walked into msgpack, into the caller's buffer, refusing what the decoder
 * would refuse. */
#include "wire/control_table.h"

#include <msgpack.h>
#include <string.h>

_Static_assert(CTL_MAX_MESSAGE_BYTES <= UINT32_MAX, "the length prefix is 32 bits");

/* msgpack_packer output over the caller's buffer: no allocation, and a
 * refusal (not a partial write past the end) once it is full. */
struct ctl_writer {
	uint8_t *dst;
	size_t cap;
	size_t len;
};

static int ctl_write(void *data, const char *buf, size_t n)
{
	struct ctl_writer *w = data;
	if (n > w->cap - w->len)
		return -1;
	memcpy(w->dst + w->len, buf, n);
	w->len += n;
	return 0;
}

static bool ctl_pack_cstr(msgpack_packer *pk, const char *s)
{
	return msgpack_pack_str_with_body(pk, s, strlen(s)) == 0;
}

/* A string the decoder would accept: terminated inside its buffer, and of
 * its field's set. */
static bool ctl_pack_text(msgpack_packer *pk, const char *s, size_t cap, enum ctl_charset cs)
{
	size_t n = strnlen(s, cap), bad;
	if (n == cap || !ctl_charset_ok(cs, s, n, &bad))
		return false;
	return msgpack_pack_str_with_body(pk, s, n) == 0;
}

static bool ctl_pack_sources(msgpack_packer *pk, const struct ctl_hello *h)
{
	if (h->source_count > CTL_MAX_SOURCE_LIST)
		return false;
	if (msgpack_pack_array(pk, h->source_count) != 0)
		return false;
	for (uint32_t i = 0; i < h->source_count; i++) {
		if (msgpack_pack_uint16(pk, h->sources[i]) != 0)
			return false;
	}
	return true;
}

/* The decoder refuses duplicate names (a map with two equal keys means
 * nothing sensible), so the encoder must not produce them either. */
static bool ctl_group_valid(const struct ctl_group *g)
{
	if (g->count > CTL_MAX_COUNTERS || !ctl_name_ok(g->name))
		return false;
	for (uint32_t i = 0; i < g->count; i++) {
		const char *name = g->counters[i].name;
		if (!ctl_name_ok(name))
			return false;
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(g->counters[j].name, name) == 0)
				return false;
		}
	}
	return true;
}

static bool ctl_pack_groups(msgpack_packer *pk, const struct ctl_report *r)
{
	if (r->group_count > CTL_MAX_GROUPS)
		return false;
	for (uint32_t i = 0; i < r->group_count; i++) {
		if (!ctl_group_valid(&r->groups[i]))
			return false;
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(r->groups[j].name, r->groups[i].name) == 0)
				return false;
		}
	}
	if (msgpack_pack_map(pk, r->group_count) != 0)
		return false;
	for (uint32_t i = 0; i < r->group_count; i++) {
		const struct ctl_group *g = &r->groups[i];
		if (!ctl_pack_cstr(pk, g->name) || msgpack_pack_map(pk, g->count) != 0)
			return false;
		for (uint32_t j = 0; j < g->count; j++) {
			if (!ctl_pack_cstr(pk, g->counters[j].name) ||
			    msgpack_pack_uint64(pk, g->counters[j].value) != 0)
				return false;
		}
	}
	return true;
}

static bool ctl_pack_field(msgpack_packer *pk, const struct ctl_field *f, const struct ctl_msg *msg)
{
	const char *p = (const char *)msg + f->offset;

	switch (f->kind) {
	case CTL_KIND_U64:
	case CTL_KIND_U32: {
		uint64_t v = f->kind == CTL_KIND_U64 ? *(const uint64_t *)p : *(const uint32_t *)p;
		uint64_t lo, hi;
		ctl_field_range(f, &lo, &hi);
		if (v < lo || v > hi)
			return false;
		return msgpack_pack_uint64(pk, v) == 0;
	}
	case CTL_KIND_I32:
		return msgpack_pack_int32(pk, *(const int32_t *)p) == 0;
	case CTL_KIND_I64: {
		int64_t v = *(const int64_t *)p, lo, hi;
		ctl_field_srange(f, &lo, &hi);
		if (v < lo || v > hi)
			return false;
		return msgpack_pack_int64(pk, v) == 0;
	}
	case CTL_KIND_STR:
		return ctl_pack_text(pk, p, f->size, f->charset);
	case CTL_KIND_ROLE:
	case CTL_KIND_CHANNEL:
	case CTL_KIND_ROUTING_MODE:
	case CTL_KIND_SESSION_STATE: {
		size_t count;
		const char *const *names = ctl_enum_names(f->kind, &count);
		unsigned v = *(const unsigned *)p;
		if (v >= count)
			return false;
		return ctl_pack_cstr(pk, names[v]);
	}
	case CTL_KIND_BOOL:
		return (*(const bool *)p ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) == 0;
	case CTL_KIND_SOURCES:
		return ctl_pack_sources(pk, (const struct ctl_hello *)p);
	case CTL_KIND_GROUPS:
		return ctl_pack_groups(pk, (const struct ctl_report *)p);
	}
	return false;
}

size_t ctl_encode(const struct ctl_msg *msg, uint8_t *dst, size_t cap)
{
	if (msg == NULL || dst == NULL || cap <= CTL_LENGTH_BYTES)
		return 0;
	if ((unsigned)msg->type >= CTL_TYPE_COUNT)
		return 0;

	/* Never produce a body the receiving decoder would refuse as oversized,
	 * however large the caller's buffer is. */
	size_t room = cap - CTL_LENGTH_BYTES;
	struct ctl_writer w = {
		.dst = dst + CTL_LENGTH_BYTES,
		.cap = room < CTL_MAX_MESSAGE_BYTES ? room : CTL_MAX_MESSAGE_BYTES,
		.len = 0,
	};
	msgpack_packer pk;
	msgpack_packer_init(&pk, &w, ctl_write);

	const struct ctl_spec *spec = &ctl_specs[msg->type];
	if (msgpack_pack_map(&pk, spec->count + 1) != 0 || !ctl_pack_cstr(&pk, "type") ||
	    !ctl_pack_cstr(&pk, ctl_type_names[msg->type]))
		return 0;
	for (size_t i = 0; i < spec->count; i++) {
		if (!ctl_pack_cstr(&pk, spec->fields[i].key) ||
		    !ctl_pack_field(&pk, &spec->fields[i], msg))
			return 0;
	}

	dst[0] = (uint8_t)(w.len >> 24);
	dst[1] = (uint8_t)(w.len >> 16);
	dst[2] = (uint8_t)(w.len >> 8);
	dst[3] = (uint8_t)w.len;
	return CTL_LENGTH_BYTES + w.len;
}
