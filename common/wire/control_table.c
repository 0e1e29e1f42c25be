/* The control codec's tables: message, role and channel names, the
 * character sets of peer strings, one field table per message type, and
 * the same tables as text for docs/PROTOCOL.md (ctl_field_describe, make
 * docs). See control_table.h. */
#include "wire/control_table.h"

#include "wire/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *const ctl_type_names[] = {
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
	[CTL_ROUTING] = "routing",
	[CTL_TOKEN] = "token",
	[CTL_ASSIGN] = "assign",
	[CTL_LOST] = "lost",
	[CTL_CLOCK] = "clock",
	[CTL_CONFIGURE] = "configure",
	[CTL_STATE] = "state",
	[CTL_RESET] = "reset",
	[CTL_SHUTDOWN] = "shutdown",
};

const char *const ctl_role_names[] = {
	[CTL_ROLE_SOURCE] = "source",
	[CTL_ROLE_READER] = "reader",
	[CTL_ROLE_BUILDER] = "builder",
};

const char *const ctl_channel_names[] = {
	[CTL_CHANNEL_CONTROL] = "control",
	[CTL_CHANNEL_DATA] = "data",
	[CTL_CHANNEL_SESSION] = "session",
};

const char *const ctl_routing_mode_names[] = {
	[CTL_ROUTING_MANAGER] = "manager",
	[CTL_ROUTING_STATIC] = "static",
};

const char *const ctl_session_state_names[] = {
	[CTL_SESSION_IDLE] = "idle",
	[CTL_SESSION_CONFIGURED] = "configured",
	[CTL_SESSION_ERROR] = "error",
};

_Static_assert(CTL_ARRAY_SIZE(ctl_type_names) == CTL_TYPE_COUNT, "a name for every message type");
_Static_assert(CTL_ARRAY_SIZE(ctl_role_names) == CTL_ROLE_COUNT, "a name for every role");
_Static_assert(CTL_ARRAY_SIZE(ctl_channel_names) == CTL_CHANNEL_COUNT, "a name for every channel");
_Static_assert(CTL_ARRAY_SIZE(ctl_routing_mode_names) == CTL_ROUTING_MODE_COUNT,
	       "a name for every routing mode");
_Static_assert(CTL_ARRAY_SIZE(ctl_session_state_names) == CTL_SESSION_STATE_COUNT,
	       "a name for every session state");
_Static_assert(sizeof(enum ctl_role) == sizeof(unsigned) && sizeof(enum ctl_channel) == sizeof(unsigned) &&
	       sizeof(enum ctl_routing_mode) == sizeof(unsigned) &&
	       sizeof(enum ctl_session_state) == sizeof(unsigned),
	       "the codec reads and writes an enum field as an unsigned int");

const char *const *ctl_enum_names(enum ctl_kind kind, size_t *count)
{
	switch (kind) {
	case CTL_KIND_ROLE:
		*count = CTL_ROLE_COUNT;
		return ctl_role_names;
	case CTL_KIND_CHANNEL:
		*count = CTL_CHANNEL_COUNT;
		return ctl_channel_names;
	case CTL_KIND_ROUTING_MODE:
		*count = CTL_ROUTING_MODE_COUNT;
		return ctl_routing_mode_names;
	case CTL_KIND_SESSION_STATE:
		*count = CTL_SESSION_STATE_COUNT;
		return ctl_session_state_names;
	default:
		*count = 0;
		return NULL;
	}
}

/* Each enum ctl_charset (control_table.h says why they are so narrow). */
const struct ctl_charset_rule ctl_charsets[] = {
	[CTL_CHARSET_ANY] = { NULL, 0, "any byte but NUL" },
	[CTL_CHARSET_HOST] = { text_host_char, TEXT_HOST_MAX,
			       "a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
	[CTL_CHARSET_NAME] = { text_name_char, 0,
			       "a name is ASCII letters, digits, '_', '.' and '-'" },
	[CTL_CHARSET_ARGS] = { text_args_char, 0,
			       "arguments are printable, with a newline between them" },
};
_Static_assert(CTL_ARRAY_SIZE(ctl_charsets) == (size_t)CTL_CHARSET_ARGS + 1, "a rule for every set");

#define CTL_FIELD(key, kind, member, doc) \
	{ key, kind, offsetof(struct ctl_msg, u.member), sizeof(((struct ctl_msg *)0)->u.member), \
	  CTL_CHARSET_ANY, doc, 0, 0 }
/* An integer narrower than its kind: the decoder refuses, and the encoder
 * will not write, a value outside [lo, hi]. */
#define CTL_FIELD_RANGE(key, kind, member, lo, hi, doc) \
	{ key, kind, offsetof(struct ctl_msg, u.member), sizeof(((struct ctl_msg *)0)->u.member), \
	  CTL_CHARSET_ANY, doc, lo, hi }
#define CTL_FIELD_TEXT(key, member, charset, doc) \
	{ key, CTL_KIND_STR, offsetof(struct ctl_msg, u.member), \
	  sizeof(((struct ctl_msg *)0)->u.member), charset, doc, 0, 0 }

static const struct ctl_field ctl_hello_fields[] = {
	CTL_FIELD("role", CTL_KIND_ROLE, hello.role, "sender's role"),
	CTL_FIELD("id", CTL_KIND_U32, hello.id,
		  "sender's id within its role (a source's, a reader's or a builder's number)"),
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
	CTL_FIELD_RANGE("rail", CTL_KIND_U32, hello.rail, 0, CTL_MAX_RAILS - 1,
			"which of the link's rails this data connection is, 0 .. `rails`-1; "
			"0 on any other connection"),
	CTL_FIELD_RANGE("rails", CTL_KIND_U32, hello.rails, 1, CTL_MAX_RAILS,
			"data connections of this reader-builder link, one per rail (Rails); "
			"on a builder's control connection to its hub, the rails it listens on "
			"(the event manager queues a batch per rail); 1 on any other connection"),
	CTL_FIELD("nonce", CTL_KIND_STR, hello.nonce,
		  "the client's own fresh nonce, 32 random bytes as 64 lowercase hex digits: "
		  "with the challenge's, it makes the connection's session key (Sealed control messages)"),
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
	CTL_FIELD("last_event", CTL_KIND_U64, stop.last_event,
		  "to a source, the operator's drained stop: generate every event up to and "
		  "including this ID, then END (the rest counted `frags_cut_by_stop`); "
		  "18446744073709551615 (`CTL_STOP_NOW`): stop at once; from a source, its "
		  "answer to a proposal: the last event it will have generated"),
	CTL_FIELD("confirm", CTL_KIND_BOOL, stop.confirm,
		  "to a source, the drained stop's proposal: answer with a `stop` giving the "
		  "last event it will have generated (`last_event`, or where it is if past it), "
		  "generate up to that, and hold for the final `stop` (`confirm` false)"),
	CTL_FIELD("reason", CTL_KIND_STR, stop.reason, "why, for the receiver's log"),
};

/* Several builders (docs/BUILDERS.md). */
static const struct ctl_field ctl_routing_fields[] = {
	CTL_FIELD("mode", CTL_KIND_ROUTING_MODE, routing.mode,
		  "who chooses a batch's builder: the hub's event manager over the builders' "
		  "tokens, or the formula (event_id / `batch`) mod `builders`"),
	CTL_FIELD_RANGE("builders", CTL_KIND_U32, routing.builders, 1, CTL_MAX_BUILDERS,
			"builders of the run, ids 0 .. `builders` − 1; the top is `CTL_MAX_BUILDERS`"),
	CTL_FIELD("first_event", CTL_KIND_U64, routing.first_event, "lowest event ID of the run"),
	CTL_FIELD_RANGE("events", CTL_KIND_U64, routing.events, 1, UINT64_MAX,
			"event IDs of the run, from `first_event` on"),
	CTL_FIELD_RANGE("batch", CTL_KIND_U32, routing.batch, 1, CTL_MAX_BATCH,
			"IDs per batch: batch k is the IDs of [k × `batch`, (k + 1) × `batch`) in "
			"the run; the top is `CTL_MAX_BATCH`"),
	CTL_FIELD_RANGE("window_batches", CTL_KIND_U32, routing.window_batches, 1,
			CTL_MAX_WINDOW_BATCHES,
			"the most batches live at once (assigned, not yet retired); the top is "
			"`CTL_MAX_WINDOW_BATCHES`"),
};

static const struct ctl_field ctl_token_fields[] = {
	CTL_FIELD("slots", CTL_KIND_U32, token.slots,
		  "the builder's window of events in flight (`--max-inflight`); the hub takes it from "
		  "the first token, which joins the builder"),
	CTL_FIELD("decided", CTL_KIND_U64, token.decided,
		  "running total of its IDs decided: recorded, expired or given up as never "
		  "observed"),
	CTL_FIELD("decided_below", CTL_KIND_U64, token.decided_below,
		  "every ID of its own below this is decided"),
	CTL_FIELD("sequence", CTL_KIND_U64, token.sequence,
		  "the builder's count of tokens sent (1, 2, ...); the first joins it"),
};

static const struct ctl_field ctl_assign_fields[] = {
	CTL_FIELD("first", CTL_KIND_U64, assign.first, "first event ID of the batch"),
	CTL_FIELD_RANGE("count", CTL_KIND_U32, assign.count, 1, CTL_MAX_BATCH,
			"IDs `first` .. `first` + `count` − 1"),
	CTL_FIELD_RANGE("builder", CTL_KIND_U32, assign.builder, 0, CTL_MAX_BUILDERS - 1,
			"the builder that builds them"),
	CTL_FIELD("retired_below", CTL_KIND_U64, assign.retired_below,
		  "the hub's oldest live ID: a fragment of an ID below it is late"),
	CTL_FIELD("sequence", CTL_KIND_U64, assign.sequence,
		  "the hub's count of assignments (1, 2, ...), the same for every receiver"),
};

static const struct ctl_field ctl_lost_fields[] = {
	CTL_FIELD_RANGE("builder", CTL_KIND_U32, lost.builder, 0, CTL_MAX_BUILDERS - 1,
			"the builder given up"),
	CTL_FIELD("reason", CTL_KIND_STR, lost.reason, "why, for the receiver's log"),
};

static const struct ctl_field ctl_clock_fields[] = {
	CTL_FIELD_RANGE("source", CTL_KIND_U32, clock.source, 0, UINT16_MAX,
			"the source whose timestamps this corrects"),
	CTL_FIELD("offset_ns", CTL_KIND_I64, clock.offset_ns,
		  "the source's clock minus the builder's, off(source) − off(builder) of the hub's "
		  "estimates: subtracted from the source's timestamps"),
	CTL_FIELD_RANGE("bound_ns", CTL_KIND_I64, clock.bound_ns, (uint64_t)(int64_t)-1, INT64_MAX,
			"how far the true offset may be from `offset_ns` at `at_ns`: the sum of the two "
			"estimates' bounds; −1 when either is unknown"),
	CTL_FIELD("at_ns", CTL_KIND_U64, clock.at_ns,
		  "the builder's CLOCK_REALTIME at which `bound_ns` holds"),
	CTL_FIELD("drift_ppb", CTL_KIND_U32, clock.drift_ppb,
		  "the bound grows by `drift_ppb` ns per second between `at_ns` and the time it is used"),
};

/* Run control on the session link (docs/RUNCONTROL.md). */
static const struct ctl_field ctl_configure_fields[] = {
	CTL_FIELD_RANGE("run", CTL_KIND_U32, configure.run, 1, UINT32_MAX,
			"the run number of the run object to make"),
	CTL_FIELD_TEXT("args", configure.args, CTL_CHARSET_ARGS,
		       "the run's command line for this daemon, a newline between arguments; "
		       "its fixed options must be the daemon's own (RUNCONTROL.md, Options)"),
};

static const struct ctl_field ctl_state_fields[] = {
	CTL_FIELD("run", CTL_KIND_U32, state.run, "the run of the peer's run object; 0 with none"),
	CTL_FIELD("state", CTL_KIND_SESSION_STATE, state.state,
		  "no run object, one made for `run`, or a transition that failed"),
	CTL_FIELD("accepted", CTL_KIND_BOOL, state.accepted,
		  "whether the last transition asked of it was done"),
	CTL_FIELD("reason", CTL_KIND_STR, state.reason,
		  "why it was refused (the option parser's sentence), or why the state changed"),
	CTL_FIELD("status", CTL_KIND_I32, state.status,
		  "the exit status of its last run object; 0 before any"),
};

static const struct ctl_field ctl_order_fields[] = {
	CTL_FIELD("reason", CTL_KIND_STR, order.reason, "why, for the receiver's log"),
};

/* The report is 78 kB, too much to clear for every STATS; its decoder sets
 * the counts of what it fills instead. */
#define CTL_SPEC(fields, member, clear) \
	{ fields, CTL_ARRAY_SIZE(fields), offsetof(struct ctl_msg, u.member), \
	  sizeof(((struct ctl_msg *)0)->u.member), clear }

const struct ctl_spec ctl_specs[] = {
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
	[CTL_ROUTING] = CTL_SPEC(ctl_routing_fields, routing, true),
	[CTL_TOKEN] = CTL_SPEC(ctl_token_fields, token, true),
	[CTL_ASSIGN] = CTL_SPEC(ctl_assign_fields, assign, true),
	[CTL_LOST] = CTL_SPEC(ctl_lost_fields, lost, true),
	[CTL_CLOCK] = CTL_SPEC(ctl_clock_fields, clock, true),
	[CTL_CONFIGURE] = CTL_SPEC(ctl_configure_fields, configure, true),
	[CTL_STATE] = CTL_SPEC(ctl_state_fields, state, true),
	[CTL_RESET] = CTL_SPEC(ctl_order_fields, order, true),
	[CTL_SHUTDOWN] = CTL_SPEC(ctl_order_fields, order, true),
};

_Static_assert(CTL_ARRAY_SIZE(ctl_specs) == CTL_TYPE_COUNT,
	       "every message type needs a name and a field table");
_Static_assert(CTL_ARRAY_SIZE(ctl_hello_fields) <= 32, "the decoder's seen mask is 32 bits");

bool ctl_charset_ok(enum ctl_charset cs, const char *s, size_t n, size_t *bad)
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

void ctl_field_srange(const struct ctl_field *f, int64_t *min, int64_t *max)
{
	bool whole = f->min == 0 && f->max == 0;
	*min = whole ? INT64_MIN : (int64_t)f->min;
	*max = whole ? INT64_MAX : (int64_t)f->max;
}

void ctl_field_range(const struct ctl_field *f, uint64_t *min, uint64_t *max)
{
	*min = f->min;
	*max = f->max != 0 ? f->max : f->kind == CTL_KIND_U32 ? UINT32_MAX : UINT64_MAX;
}

bool ctl_name_ok(const char *name)
{
	size_t n = strnlen(name, CTL_MAX_NAME), bad;
	return n < CTL_MAX_NAME && ctl_charset_ok(CTL_CHARSET_NAME, name, n, &bad);
}

const char *ctl_role_title(enum ctl_role role)
{
	static const char *const titles[] = {
		[CTL_ROLE_SOURCE] = "Source",
		[CTL_ROLE_READER] = "Reader",
		[CTL_ROLE_BUILDER] = "Builder",
	};
	_Static_assert(CTL_ARRAY_SIZE(titles) == CTL_ROLE_COUNT,
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

const char *ctl_session_state_name(enum ctl_session_state state)
{
	if ((unsigned)state >= CTL_ARRAY_SIZE(ctl_session_state_names))
		return "unknown";
	return ctl_session_state_names[state];
}

bool ctl_session_state_parse(const char *name, enum ctl_session_state *state)
{
	for (size_t i = 0; i < CTL_ARRAY_SIZE(ctl_session_state_names); i++) {
		if (strcmp(name, ctl_session_state_names[i]) == 0) {
			*state = (enum ctl_session_state)i;
			return true;
		}
	}
	return false;
}

const char *ctl_routing_mode_name(enum ctl_routing_mode mode)
{
	if ((unsigned)mode >= CTL_ARRAY_SIZE(ctl_routing_mode_names))
		return "unknown";
	return ctl_routing_mode_names[mode];
}

bool ctl_routing_mode_parse(const char *name, enum ctl_routing_mode *mode)
{
	for (size_t i = 0; i < CTL_ARRAY_SIZE(ctl_routing_mode_names); i++) {
		if (strcmp(name, ctl_routing_mode_names[i]) == 0) {
			*mode = (enum ctl_routing_mode)i;
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

/* "2^64−1" and "2^32−1" for the tops of the kinds, other bounds in digits. */
static void ctl_describe_bound(char *out, size_t cap, uint64_t v)
{
	if (v == UINT64_MAX)
		snprintf(out, cap, "2^64−1");
	else if (v == UINT32_MAX)
		snprintf(out, cap, "2^32−1");
	else
		snprintf(out, cap, "%" PRIu64, v);
}

static void ctl_describe_range(char *out, size_t cap, const struct ctl_field *f)
{
	char lo[24], hi[24];
	uint64_t min, max;
	ctl_field_range(f, &min, &max);
	ctl_describe_bound(lo, sizeof lo, min);
	ctl_describe_bound(hi, sizeof hi, max);
	snprintf(out, cap, "%s .. %s", lo, hi);
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
	case CTL_KIND_U32:
		d->type = "uint";
		ctl_describe_range(d->range, sizeof d->range, f);
		break;
	case CTL_KIND_I32:
		d->type = "int";
		snprintf(d->range, sizeof d->range, "int32");
		break;
	case CTL_KIND_I64: {
		int64_t lo, hi;
		ctl_field_srange(f, &lo, &hi);
		d->type = "int";
		char top[24];
		if (hi == INT64_MAX)
			snprintf(top, sizeof top, "2^63−1");
		else
			snprintf(top, sizeof top, "%" PRId64, hi);
		if (lo == INT64_MIN && hi == INT64_MAX)
			snprintf(d->range, sizeof d->range, "int64");
		else
			snprintf(d->range, sizeof d->range, "%" PRId64 " .. %s", lo, top);
		break;
	}
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
	case CTL_KIND_CHANNEL:
	case CTL_KIND_ROUTING_MODE:
	case CTL_KIND_SESSION_STATE: {
		size_t count;
		const char *const *names = ctl_enum_names(f->kind, &count);
		d->type = "str";
		ctl_describe_enum(d->range, sizeof d->range, names, count);
		break;
	}
	case CTL_KIND_BOOL:
		d->type = "bool";
		snprintf(d->range, sizeof d->range, "true, false");
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
