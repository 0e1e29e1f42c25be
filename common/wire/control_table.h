/* The control codec's tables, shared by its parts (control_table.c,
 * control_encode.c, control_decode.c, control_report.c) and by nothing else:
 * one field table per message type drives the encoder, the decoder and the
 * documents, so the three cannot disagree about key names or types. */
#ifndef ES_WIRE_CONTROL_TABLE_H
#define ES_WIRE_CONTROL_TABLE_H

#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Entries of each name table; control_table.c checks that every table has
 * exactly this many. */
#define CTL_TYPE_COUNT ((size_t)CTL_SHUTDOWN + 1)
#define CTL_ROLE_COUNT ((size_t)CTL_ROLE_BUILDER + 1)
#define CTL_CHANNEL_COUNT ((size_t)CTL_CHANNEL_SESSION + 1)
#define CTL_ROUTING_MODE_COUNT ((size_t)CTL_ROUTING_STATIC + 1)
#define CTL_SESSION_STATE_COUNT ((size_t)CTL_SESSION_ERROR + 1)

/* The wire names of the enums, indexed by value. */
extern const char *const ctl_type_names[];
extern const char *const ctl_role_names[];
extern const char *const ctl_channel_names[];
extern const char *const ctl_routing_mode_names[];
extern const char *const ctl_session_state_names[];

enum ctl_kind {
	CTL_KIND_U64,
	CTL_KIND_U32,
	CTL_KIND_I32,
	CTL_KIND_I64,           /* min and max as int64_t; both 0: the whole range */
	CTL_KIND_STR,           /* char[size], NUL-terminated */
	CTL_KIND_ROLE,
	CTL_KIND_CHANNEL,
	CTL_KIND_ROUTING_MODE,
	CTL_KIND_SESSION_STATE,
	CTL_KIND_BOOL,          /* bool field, a msgpack bool */
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
	CTL_CHARSET_ARGS,       /* text_args_char(): a command line, '\n' between arguments */
};

struct ctl_charset_rule {
	bool (*allowed)(unsigned char c);
	size_t max_bytes;       /* 0: the buffer's capacity is the only limit */
	const char *says;       /* what the set is, for error text */
};

struct ctl_field {
	const char *key;
	enum ctl_kind kind;
	size_t offset;          /* into struct ctl_msg */
	size_t size;            /* of the member; the capacity of a string */
	enum ctl_charset charset;       /* CTL_KIND_STR: what it may contain */
	const char *doc;        /* what it means, for docs/PROTOCOL.md (ctl_field_describe) */
	uint64_t min, max;      /* CTL_KIND_U32/U64: the range; max 0: the kind's whole range */
};

struct ctl_spec {
	const struct ctl_field *fields;
	size_t count;
	size_t offset;          /* of the union member */
	size_t size;
	bool clear;             /* zero the member before decoding into it */
};

/* Indexed by enum ctl_type, CTL_TYPE_COUNT entries. */
extern const struct ctl_spec ctl_specs[];
extern const struct ctl_charset_rule ctl_charsets[];

/* The wire names of an enum kind (ROLE, CHANNEL, ROUTING_MODE,
 * SESSION_STATE) and their count; NULL for any other kind. Every such field
 * is an enum, stored as an unsigned int. */
const char *const *ctl_enum_names(enum ctl_kind kind, size_t *count);

/* Whether the n bytes at s belong to the set; else *bad is the offset of
 * the first byte outside it, or n when the string is too long for it. */
bool ctl_charset_ok(enum ctl_charset cs, const char *s, size_t n, size_t *bad);

/* The range of an integer field: [min, max] as the table gives it, else
 * the whole range of its kind. */
void ctl_field_range(const struct ctl_field *f, uint64_t *min, uint64_t *max);
/* The same of a CTL_KIND_I64 field. */
void ctl_field_srange(const struct ctl_field *f, int64_t *min, int64_t *max);

/* A group or counter name: fits CTL_MAX_NAME and is of the name set. */
bool ctl_name_ok(const char *name);

#endif
