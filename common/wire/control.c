/* Control message codec. One field table per message type drives both the
 * encoder and the decoder, so the two cannot disagree about key names or
 * types; docs/PROTOCOL.md's tables are written from them
 * (ctl_field_describe, make docs). */
#include "wire/control.h"

#include "wire/text.h"

#include <inttypes.h>
#include <msgpack.h>
#include <msgpack/unpack_define.h>   /* MSGPACK_EMBED_STACK_SIZE, the library's depth limit */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CTL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Containers nested deeper than this are refused before msgpack sees them.
 * Our own messages need 3 levels; the rest is room for unknown fields of
 * newer peers. It stays below msgpack's own limit (MSGPACK_EMBED_STACK_SIZE)
 * so the library never fails on a body the scan accepted. */
#define CTL_MAX_DEPTH 16u

/* Room for one peer-supplied string quoted in an error message. */
#define CTL_QUOTE_BYTES 48u

static const char *const ctl_type_names[] = {
	[CTL_HELLO] = "hello",
	[CTL_WELCOME] = "welcome",
	[CTL_ERROR] = "error",
	[CTL_CREDIT] = "credit",
	[CTL_PING] = "ping",
	[CTL_PONG] = "pong",
	[CTL_STATS] = "stats",
	[CTL_END] = "end",
	[CTL_BYE] = "bye",
	[CTL_START] = "start",
	[CTL_CHALLENGE] = "challenge",
	[CTL_STOP] = "stop",
};

static const char *const ctl_role_names[] = {
	[CTL_ROLE_SOURCE] = "source",
	[CTL_ROLE_READER] = "reader",
	[CTL_ROLE_BUILDER] = "builder",
};

static const char *const ctl_channel_names[] = {
	[CTL_CHANNEL_CONTROL] = "control",
	[CTL_CHANNEL_DATA] = "data",
};

enum ctl_kind {
	CTL_KIND_U64,
	CTL_KIND_U32,
	CTL_KIND_I32,
	CTL_KIND_STR,           /* char[size], NUL-terminated */
	CTL_KIND_ROLE,
	CTL_KIND_CHANNEL,
	CTL_KIND_SOURCES,       /* struct ctl_hello: source_count, sources */
	CTL_KIND_GROUPS,        /* struct ctl_report: group_count, groups */
};

/* What a peer string may contain beyond "no NUL" (docs/PROTOCOL.md,
 * Strings). Names and host names end up as JSON keys and values, log words,
 * HTML and Prometheus labels at the builder: a set that needs no escaping
 * anywhere keeps them readable and unforgeable. Free text (reasons) only
 * reaches logs, through their escaper. */
enum ctl_charset {
	CTL_CHARSET_ANY,        /* any byte but NUL */
	CTL_CHARSET_HOST,       /* text_host_char(), at most TEXT_HOST_MAX bytes */
	CTL_CHARSET_NAME,       /* text_name_char(): group and counter names */
};

struct ctl_charset_rule {
	bool (*allowed)(unsigned char c);
	size_t max_bytes;       /* 0: the buffer's capacity is the only limit */
	const char *says;       /* what the set is, for error text */
};

static const struct ctl_charset_rule ctl_charsets[] = {
	[CTL_CHARSET_ANY] = { NULL, 0, "any byte but NUL" },
	[CTL_CHARSET_HOST] = { text_host_char, TEXT_HOST_MAX,
			       "a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
	[CTL_CHARSET_NAME] = { text_name_char, 0,
			       "a name is ASCII letters, digits, '_', '.' and '-'" },
};

struct ctl_field {
	const char *key;
	enum ctl_kind kind;
	size_t offset;          /* into struct ctl_msg */
	size_t size;            /* of the member; the capacity of a string */
	enum ctl_charset charset;       /* CTL_KIND_STR: what it may contain */
	const char *doc;        /* what it means, for docs/PROTOCOL.md (ctl_field_describe) */
};

#define CTL_FIELD(key, kind, member, doc) \
	{ key, kind, offsetof(struct ctl_msg, u.member), sizeof(((struct ctl_msg *)0)->u.member), \
	  CTL_CHARSET_ANY, doc }
#define CTL_FIELD_TEXT(key, member, charset, doc) \
	{ key, CTL_KIND_STR, offsetof(struct ctl_msg, u.member), \
	  sizeof(((struct ctl_msg *)0)->u.member), charset, doc }

static const struct ctl_field ctl_hello_fields[] = {
	CTL_FIELD("role", CTL_KIND_ROLE, hello.role, "sender's role"),
	CTL_FIELD("id", CTL_KIND_U32, hello.id,
		  "sender's id within its role (a source's number, a reader's number)"),
	CTL_FIELD("channel", CTL_KIND_CHANNEL, hello.channel, "what this connection carries"),
	CTL_FIELD("run_id", CTL_KIND_U32, hello.run_id, "run the sender belongs to"),
	CTL_FIELD("protocol", CTL_KIND_U32, hello.protocol,
		  "sender's protocol version, `CTL_PROTOCOL_VERSION` (above)"),
	CTL_FIELD("pid", CTL_KIND_U32, hello.pid, "sender's process id"),
	CTL_FIELD_TEXT("host", hello.host, CTL_CHARSET_HOST,
		       "sender's host name; informational only: the builder decides whether a peer "
		       "shares its clock from the connection's addresses (docs/CLOCKS.md)"),
	CTL_FIELD("sources", CTL_KIND_SOURCES, hello,
		  "a reader's served source ids; `[]` for other roles"),
	CTL_FIELD("proof", CTL_KIND_STR, hello.proof,
		  "HMAC-SHA256 of the challenge's nonce and these fields, lowercase hex; "
		  "`\"\"` without a run key (Authentication)"),
};

static const struct ctl_field ctl_welcome_fields[] = {
	CTL_FIELD("run_id", CTL_KIND_U32, welcome.run_id, "the listener's run"),
	CTL_FIELD("role", CTL_KIND_ROLE, welcome.role, "the listener's role"),
	CTL_FIELD("id", CTL_KIND_U32, welcome.id, "the listener's id"),
};

static const struct ctl_field ctl_error_fields[] = {
	CTL_FIELD_TEXT("code", error.code, CTL_CHARSET_NAME,
		       "machine-readable, e.g. `wrong_run`, `duplicate_id`, `expected_hello`, "
		       "`bad_message`"),
	CTL_FIELD("reason", CTL_KIND_STR, error.reason, "a sentence a person can act on"),
};

static const struct ctl_field ctl_credit_fields[] = {
	CTL_FIELD("limit", CTL_KIND_U64, credit.limit,
		  "forward fragments whose event_id is below this"),
	CTL_FIELD("sequence", CTL_KIND_U64, credit.sequence,
		  "the builder's count of credits sent to this reader (1, 2, ...), for logs and "
		  "ordering checks"),
};

static const struct ctl_field ctl_ping_fields[] = {
	CTL_FIELD("sequence", CTL_KIND_U64, ping.sequence, "matches the pong to its ping"),
	CTL_FIELD("t1_ns", CTL_KIND_U64, ping.t1_ns,
		  "builder's CLOCK_REALTIME at send, ns since the epoch"),
};

static const struct ctl_field ctl_pong_fields[] = {
	CTL_FIELD("sequence", CTL_KIND_U64, pong.sequence, "the ping's"),
	CTL_FIELD("t1_ns", CTL_KIND_U64, pong.t1_ns, "the ping's, echoed"),
	CTL_FIELD("t2_ns", CTL_KIND_U64, pong.t2_ns, "peer's CLOCK_REALTIME when the ping arrived"),
	CTL_FIELD("t3_ns", CTL_KIND_U64, pong.t3_ns, "peer's CLOCK_REALTIME when the pong was sent"),
};

static const struct ctl_field ctl_report_fields[] = {
	CTL_FIELD("status", CTL_KIND_I32, report.status,
		  "`end`: 0 clean, else the daemon's error count"),
	CTL_FIELD("groups", CTL_KIND_GROUPS, report, "group name → group (below)"),
};

static const struct ctl_field ctl_bye_fields[] = {
	CTL_FIELD("status", CTL_KIND_I32, bye.status, "the run's exit status"),
};

static const struct ctl_field ctl_start_fields[] = {
	CTL_FIELD("delay_ns", CTL_KIND_U64, start.delay_ns,
		  "start this long after receipt, when `at_realtime_ns` is 0 or more than 10 s "
		  "from the source's clock"),
	CTL_FIELD("at_realtime_ns", CTL_KIND_U64, start.at_realtime_ns,
		  "start at this CLOCK_REALTIME of the builder's host (without any injected offset), "
		  "ns since the epoch; 0: unset"),
};

static const struct ctl_field ctl_challenge_fields[] = {
	CTL_FIELD("nonce", CTL_KIND_STR, challenge.nonce,
		  "32 random bytes (libsodium) as 64 lowercase hex digits"),
};

static const struct ctl_field ctl_stop_fields[] = {
	CTL_FIELD("source", CTL_KIND_U32, stop.source,
		  "a source id, or 4294967295 (`CTL_STOP_ALL`)"),
	CTL_FIELD("reason", CTL_KIND_STR, stop.reason, "why, for the receiver's log"),
};

struct ctl_spec {
	const struct ctl_field *fields;
	size_t count;
	size_t offset;          /* of the union member */
	size_t size;
	bool clear;             /* zero the member before decoding into it */
};

/* The report is 78 kB, too much to clear for every STATS; its decoder sets
 * the counts of what it fills instead. */
#define CTL_SPEC(fields, member, clear) \
	{ fields, CTL_ARRAY_SIZE(fields), offsetof(struct ctl_msg, u.member), \
	  sizeof(((struct ctl_msg *)0)->u.member), clear }

static const struct ctl_spec ctl_specs[] = {
	[CTL_HELLO] = CTL_SPEC(ctl_hello_fields, hello, true),
	[CTL_WELCOME] = CTL_SPEC(ctl_welcome_fields, welcome, true),
	[CTL_ERROR] = CTL_SPEC(ctl_error_fields, error, true),
	[CTL_CREDIT] = CTL_SPEC(ctl_credit_fields, credit, true),
	[CTL_PING] = CTL_SPEC(ctl_ping_fields, ping, true),
	[CTL_PONG] = CTL_SPEC(ctl_pong_fields, pong, true),
	[CTL_STATS] = CTL_SPEC(ctl_report_fields, report, false),
	[CTL_END] = CTL_SPEC(ctl_report_fields, report, false),
	[CTL_BYE] = CTL_SPEC(ctl_bye_fields, bye, true),
	[CTL_START] = CTL_SPEC(ctl_start_fields, start, true),
	[CTL_CHALLENGE] = CTL_SPEC(ctl_challenge_fields, challenge, true),
	[CTL_STOP] = CTL_SPEC(ctl_stop_fields, stop, true),
};

_Static_assert(CTL_ARRAY_SIZE(ctl_specs) == CTL_ARRAY_SIZE(ctl_type_names),
	       "every message type needs a name and a field table");
_Static_assert(CTL_MAX_DEPTH < MSGPACK_EMBED_STACK_SIZE,
	       "the scan must refuse nesting before msgpack does");
_Static_assert(CTL_MAX_MESSAGE_BYTES <= UINT32_MAX, "the length prefix is 32 bits");

const char *ctl_role_title(enum ctl_role role)
{
	static const char *const titles[] = {
		[CTL_ROLE_SOURCE] = "Source",
		[CTL_ROLE_READER] = "Reader",
		[CTL_ROLE_BUILDER] = "Builder",
	};
	_Static_assert(CTL_ARRAY_SIZE(titles) == CTL_ARRAY_SIZE(ctl_role_names),
		       "every role needs a title");
	return (size_t)role < CTL_ARRAY_SIZE(titles) ? titles[role] : "Unknown";
}

const char *ctl_role_name(enum ctl_role role)
{
	if ((unsigned)role >= CTL_ARRAY_SIZE(ctl_role_names))
		return "unknown";
	return ctl_role_names[role];
}

bool ctl_role_parse(const char *name, enum ctl_role *role)
{
	for (size_t i = 0; i < CTL_ARRAY_SIZE(ctl_role_names); i++) {
		if (strcmp(name, ctl_role_names[i]) == 0) {
			*role = (enum ctl_role)i;
			return true;
		}
	}
	return false;
}

const char *ctl_channel_name(enum ctl_channel channel)
{
	if ((unsigned)channel >= CTL_ARRAY_SIZE(ctl_channel_names))
		return "unknown";
	return ctl_channel_names[channel];
}

bool ctl_channel_parse(const char *name, enum ctl_channel *channel)
{
	for (size_t i = 0; i < CTL_ARRAY_SIZE(ctl_channel_names); i++) {
		if (strcmp(name, ctl_channel_names[i]) == 0) {
			*channel = (enum ctl_channel)i;
			return true;
		}
	}
	return false;
}

const char *ctl_type_name(enum ctl_type type)
{
	if ((unsigned)type >= CTL_ARRAY_SIZE(ctl_type_names))
		return "unknown";
	return ctl_type_names[type];
}

/* ---- encoding ---------------------------------------------------------- */

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

/* Whether the n bytes at s belong to the set; else *bad is the offset of
 * the first byte outside it, or n when the string is too long for it. */
static bool ctl_charset_ok(enum ctl_charset cs, const char *s, size_t n, size_t *bad)
{
	const struct ctl_charset_rule *rule = &ctl_charsets[cs];
	if (rule->max_bytes != 0 && n > rule->max_bytes) {
		*bad = n;
		return false;
	}
	if (rule->allowed == NULL)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (!rule->allowed((unsigned char)s[i])) {
			*bad = i;
			return false;
		}
	}
	return true;
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

static bool ctl_name_ok(const char *name)
{
	size_t n = strnlen(name, CTL_MAX_NAME), bad;
	return n < CTL_MAX_NAME && ctl_charset_ok(CTL_CHARSET_NAME, name, n, &bad);
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
		return msgpack_pack_uint64(pk, *(const uint64_t *)p) == 0;
	case CTL_KIND_U32:
		return msgpack_pack_uint32(pk, *(const uint32_t *)p) == 0;
	case CTL_KIND_I32:
		return msgpack_pack_int32(pk, *(const int32_t *)p) == 0;
	case CTL_KIND_STR:
		return ctl_pack_text(pk, p, f->size, f->charset);
	case CTL_KIND_ROLE: {
		enum ctl_role role = *(const enum ctl_role *)p;
		if ((unsigned)role >= CTL_ARRAY_SIZE(ctl_role_names))
			return false;
		return ctl_pack_cstr(pk, ctl_role_names[role]);
	}
	case CTL_KIND_CHANNEL: {
		enum ctl_channel channel = *(const enum ctl_channel *)p;
		if ((unsigned)channel >= CTL_ARRAY_SIZE(ctl_channel_names))
			return false;
		return ctl_pack_cstr(pk, ctl_channel_names[channel]);
	}
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
	if ((unsigned)msg->type >= CTL_ARRAY_SIZE(ctl_specs))
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

/* ---- decoding ---------------------------------------------------------- */

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

/* The same names for a msgpack format byte, for errors raised before
 * msgpack has built any object. */
static const char *ctl_byte_kind(uint8_t b)
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

static bool ctl_fail_truncated(struct ctl_ctx *cx, uint8_t b, size_t at, size_t n)
{
	return ctl_fail(cx, "msgpack data truncated: %s at body offset %zu runs past the end of the %zu-byte body",
			ctl_byte_kind(b), at, n);
}

static uint64_t ctl_load_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Walks one msgpack object at p without building it, and fails unless every
 * element it declares is present. msgpack-c allocates a container's element
 * array from the count on the wire before reading a single element, so
 * without this walk a 5-byte array header could ask for 100 GB; after it,
 * what msgpack allocates is bounded by the body's size. */
static bool ctl_scan(struct ctl_ctx *cx, const uint8_t *p, size_t n, size_t *used)
{
	uint64_t left[CTL_MAX_DEPTH + 1];
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
			return ctl_fail(cx, "msgpack data truncated: body of %zu bytes ends before a container is complete",
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
				return ctl_fail(cx, "invalid msgpack byte 0xc1 at body offset %zu", at);
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
				return ctl_fail_truncated(cx, b, at, n);
			uint64_t v = ctl_load_be(p + off, width);
			off += width;
			if (container)
				items = (b == 0xde || b == 0xdf) ? 2 * v : v;
			else
				skip += v;
		}

		if (!container) {
			if (skip > n - off)
				return ctl_fail_truncated(cx, b, at, n);
			off += (size_t)skip;
			continue;
		}
		if (depth + 1 > CTL_MAX_DEPTH)
			return ctl_fail(cx, "msgpack containers nested deeper than %u at body offset %zu",
					CTL_MAX_DEPTH, at);
		if (items == 0)
			continue;
		/* Every element takes at least one byte. */
		if (items > n - off) {
			bool map = b <= 0x8f || b == 0xde || b == 0xdf;
			return ctl_fail(cx, "%s at body offset %zu declares %" PRIu64 " %s but only %zu byte(s) follow",
					map ? "map" : "array", at, map ? items / 2 : items,
					map ? "entries" : "elements", n - off);
		}
		left[++depth] = items;
	}
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
	uint64_t v;
	unsigned e;

	snprintf(what, sizeof what, "key '%s'", f->key);
	switch (f->kind) {
	case CTL_KIND_U64:
		if (!ctl_get_uint(cx, o, UINT64_MAX, &v, what))
			return false;
		*(uint64_t *)p = v;
		return true;
	case CTL_KIND_U32:
		if (!ctl_get_uint(cx, o, UINT32_MAX, &v, what))
			return false;
		*(uint32_t *)p = (uint32_t)v;
		return true;
	case CTL_KIND_I32:
		return ctl_get_i32(cx, o, (int32_t *)p, what);
	case CTL_KIND_STR:
		return ctl_copy_text(cx, o, p, f->size, f->charset, what);
	case CTL_KIND_ROLE:
		if (!ctl_get_enum(cx, o, ctl_role_names, CTL_ARRAY_SIZE(ctl_role_names), &e, what))
			return false;
		*(enum ctl_role *)p = (enum ctl_role)e;
		return true;
	case CTL_KIND_CHANNEL:
		if (!ctl_get_enum(cx, o, ctl_channel_names, CTL_ARRAY_SIZE(ctl_channel_names), &e,
				  what))
			return false;
		*(enum ctl_channel *)p = (enum ctl_channel)e;
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
	for (t = 0; t < CTL_ARRAY_SIZE(ctl_type_names); t++) {
		if (ctl_str_is(type, ctl_type_names[t]))
			break;
	}
	if (t == CTL_ARRAY_SIZE(ctl_type_names))
		return ctl_fail(cx, "unknown type '%s'",
				ctl_quote(type->via.str.ptr, type->via.str.size, q));

	const struct ctl_spec *spec = &ctl_specs[t];
	msg->type = (enum ctl_type)t;
	cx->what = ctl_type_names[t];
	if (spec->clear)
		memset((char *)msg + spec->offset, 0, spec->size);

	uint32_t seen = 0;
	_Static_assert(CTL_ARRAY_SIZE(ctl_hello_fields) <= 32, "seen is a 32-bit mask");
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

	if (!ctl_scan(cx, body, len, &used))
		return false;
	if (!(body[0] >= 0x80 && body[0] <= 0x8f) && body[0] != 0xde && body[0] != 0xdf)
		return ctl_fail(cx, "body is %s, not a map", ctl_byte_kind(body[0]));
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
	uint32_t len = (uint32_t)ctl_load_be(buf, CTL_LENGTH_BYTES);
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

/* ---- report helpers ---------------------------------------------------- */

struct ctl_group *ctl_report_group(struct ctl_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->group_count && i < CTL_MAX_GROUPS; i++) {
		if (strcmp(r->groups[i].name, name) == 0)
			return &r->groups[i];
	}
	size_t n = strlen(name);
	if (r->group_count >= CTL_MAX_GROUPS || !ctl_name_ok(name))
		return NULL;
	struct ctl_group *g = &r->groups[r->group_count++];
	memcpy(g->name, name, n + 1);
	g->count = 0;
	return g;
}

const struct ctl_group *ctl_report_find(const struct ctl_report *r, const char *name)
{
	if (r == NULL)
		return NULL;
	for (uint32_t i = 0; i < r->group_count && i < CTL_MAX_GROUPS; i++) {
		if (strcmp(r->groups[i].name, name) == 0)
			return &r->groups[i];
	}
	return NULL;
}

/* g and r may be NULL below, so that a group refused by a full report can be
 * passed on without a check at every call: the counter is then refused too. */
bool ctl_group_set(struct ctl_group *g, const char *name, uint64_t value)
{
	if (g == NULL)
		return false;
	for (uint32_t i = 0; i < g->count && i < CTL_MAX_COUNTERS; i++) {
		if (strcmp(g->counters[i].name, name) == 0) {
			g->counters[i].value = value;
			return true;
		}
	}
	size_t n = strlen(name);
	if (g->count >= CTL_MAX_COUNTERS || !ctl_name_ok(name))
		return false;
	struct ctl_counter *c = &g->counters[g->count++];
	memcpy(c->name, name, n + 1);
	c->value = value;
	return true;
}

bool ctl_group_get(const struct ctl_group *g, const char *name, uint64_t *value)
{
	if (g == NULL)
		return false;
	for (uint32_t i = 0; i < g->count && i < CTL_MAX_COUNTERS; i++) {
		if (strcmp(g->counters[i].name, name) == 0) {
			*value = g->counters[i].value;
			return true;
		}
	}
	return false;
}

/* The tables above as text, so that docs/PROTOCOL.md is written from them
 * (tools/docgen.c) and cannot drift from what the codec does. */
static void ctl_describe_enum(char *out, size_t cap, const char *const *names, size_t count)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < count && used < cap; i++) {
		int n = snprintf(out + used, cap - used, "%s`\"%s\"`", i ? ", " : "", names[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

size_t ctl_field_count(enum ctl_type type)
{
	if ((size_t)type >= CTL_ARRAY_SIZE(ctl_specs))
		return 0;
	return ctl_specs[type].count;
}

bool ctl_field_describe(enum ctl_type type, size_t i, struct ctl_field_doc *d)
{
	if (i >= ctl_field_count(type))
		return false;
	const struct ctl_field *f = &ctl_specs[type].fields[i];
	d->key = f->key;
	d->doc = f->doc;
	switch (f->kind) {
	case CTL_KIND_U64:
		d->type = "uint";
		snprintf(d->range, sizeof d->range, "0 .. 2^64−1");
		break;
	case CTL_KIND_U32:
		d->type = "uint";
		snprintf(d->range, sizeof d->range, "0 .. 2^32−1");
		break;
	case CTL_KIND_I32:
		d->type = "int";
		snprintf(d->range, sizeof d->range, "int32");
		break;
	case CTL_KIND_STR: {
		const struct ctl_charset_rule *rule = &ctl_charsets[f->charset];
		size_t max = rule->max_bytes ? rule->max_bytes : f->size - 1;
		d->type = "str";
		snprintf(d->range, sizeof d->range, "≤ %zu bytes%s", max,
			 f->charset == CTL_CHARSET_HOST ? " of the host name set (Strings)"
			 : f->charset == CTL_CHARSET_NAME ? " of the name set (Strings)" : "");
		break;
	}
	case CTL_KIND_ROLE:
		d->type = "str";
		ctl_describe_enum(d->range, sizeof d->range, ctl_role_names,
				  CTL_ARRAY_SIZE(ctl_role_names));
		break;
	case CTL_KIND_CHANNEL:
		d->type = "str";
		ctl_describe_enum(d->range, sizeof d->range, ctl_channel_names,
				  CTL_ARRAY_SIZE(ctl_channel_names));
		break;
	case CTL_KIND_SOURCES:
		d->type = "array of uint";
		snprintf(d->range, sizeof d->range, "≤ %u elements, each 0 .. %u", CTL_MAX_SOURCE_LIST,
			 (unsigned)UINT16_MAX);
		break;
	case CTL_KIND_GROUPS:
		d->type = "map";
		snprintf(d->range, sizeof d->range, "≤ %u entries", CTL_MAX_GROUPS);
		break;
	}
	return true;
}
