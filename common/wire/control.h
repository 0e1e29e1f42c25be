/* Control messages: msgpack maps behind a 4-byte big-endian length, on the
 * control connection of every daemon to builderd, and as the greeting that
 * opens every data connection. Every map has a "type" string; unknown keys
 * are ignored so newer peers can add fields; a missing required key, a wrong
 * type or an oversized message is a decode error, never a crash. See
 * docs/PROTOCOL.md. */
#ifndef ES_WIRE_CONTROL_H
#define ES_WIRE_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_PROTOCOL_VERSION 5u
#define CTL_LENGTH_BYTES 4u
#define CTL_MAX_MESSAGE_BYTES 65536u   /* body, without the length prefix */
#define CTL_MAX_NAME 32u                /* counter and group names, with NUL */
#define CTL_MAX_TEXT 256u               /* host names (at most TEXT_HOST_MAX), reasons, with NUL */
#define CTL_MAX_COUNTERS 48u            /* per group */
#define CTL_MAX_GROUPS 40u              /* groups per END/STATS message */
#define CTL_MAX_SOURCE_LIST 256u
/* A reader-builder link is at most this many TCP connections, one per rail
 * (core/rails.h). */
#define CTL_MAX_RAILS 4u
#define CTL_NONCE_TEXT 65u               /* 32 random bytes in hex, with NUL */
#define CTL_PROOF_TEXT 65u               /* HMAC-SHA256 in hex, with NUL */
/* The limits of several builders (docs/BUILDERS.md): core/evm's
 * EVM_MAX_BUILDERS, EVM_MAX_BATCH and EVM_MAX_WINDOW_BATCHES, which must
 * agree (evm.c checks), so a plan the codec lets through is one the manager
 * and the readers' tables can take. */
#define CTL_MAX_BUILDERS 256u
#define CTL_MAX_BATCH (1u << 20)
#define CTL_MAX_WINDOW_BATCHES (1u << 20)

enum ctl_type {
	CTL_HELLO,    /* first message of every connection, client to listener */
	CTL_WELCOME,  /* listener accepts the HELLO */
	CTL_ERROR,    /* refusal or failure; the sender closes after it */
	CTL_CREDIT,   /* builder to reader: admission limit */
	CTL_PING,     /* builder to peer: clock probe */
	CTL_PONG,     /* peer to builder: answer to PING */
	CTL_STATS,    /* peer to builder: counters so far */
	CTL_END,      /* peer to builder: final counters */
	CTL_BYE,      /* builder to peer: run over, you may exit */
	CTL_START,    /* builder to source: every peer is up, start sending */
	CTL_CHALLENGE, /* listener to client, first on every connection: a nonce */
	CTL_STOP,     /* builder to peer: stop (a source) or drop a source (a reader) */
	/* Several builders (docs/BUILDERS.md). */
	CTL_ROUTING,  /* hub to reader and builder: the run's plan of batches */
	CTL_TOKEN,    /* builder to hub: its slots and the IDs it has decided */
	CTL_ASSIGN,   /* hub to every reader and builder: one batch's builder */
	CTL_LOST,     /* hub to every reader and builder: a builder given up */
	CTL_CLOCK,    /* hub to builder: a source's clock against the builder's */
	/* Run control on the session link (docs/RUNCONTROL.md). */
	CTL_CONFIGURE, /* hub to peer: make the run object of a run from these arguments */
	CTL_STATE,    /* peer to hub: its session state, the answer to each transition */
	CTL_RESET,    /* hub to peer: stop the run object, if any, and be idle */
	CTL_SHUTDOWN, /* hub to peer: stop the run object, if any, and exit */
};

enum ctl_role { CTL_ROLE_SOURCE, CTL_ROLE_READER, CTL_ROLE_BUILDER };

/* "source", "reader", "builder" ("unknown" for a value outside the enum);
 * and back (false when unknown). */
const char *ctl_role_name(enum ctl_role role);
/* The same capitalised, to start a sentence of a log line: "Source",
 * "Reader", "Builder" ("Unknown" outside the enum). */
const char *ctl_role_title(enum ctl_role role);
bool ctl_role_parse(const char *name, enum ctl_role *role);
/* "hello", "welcome", ... ("unknown" for a value outside the enum) */
const char *ctl_type_name(enum ctl_type type);

/* session: a process's link to its hub across runs (docs/RUNCONTROL.md). */
enum ctl_channel { CTL_CHANNEL_CONTROL, CTL_CHANNEL_DATA, CTL_CHANNEL_SESSION };

/* A serving peer's state on its session link: no run object, one made for
 * a run, or a transition that failed. */
enum ctl_session_state { CTL_SESSION_IDLE, CTL_SESSION_CONFIGURED, CTL_SESSION_ERROR };

/* "idle", "configured", "error" ("unknown" outside the enum); and back
 * (false when unknown). */
const char *ctl_session_state_name(enum ctl_session_state state);
bool ctl_session_state_parse(const char *name, enum ctl_session_state *state);

/* A configure's arguments: the run's command line, '\n' between
 * arguments, at most this many bytes with the NUL. */
#define CTL_MAX_ARGS_TEXT 4001u

/* How the hub chooses a batch's builder: its event manager over the
 * builders' tokens, or the formula (event_id / batch) mod builders. */
enum ctl_routing_mode { CTL_ROUTING_MANAGER, CTL_ROUTING_STATIC };

/* "manager", "static" ("unknown" for a value outside the enum); and back
 * (false when unknown). */
const char *ctl_routing_mode_name(enum ctl_routing_mode mode);
bool ctl_routing_mode_parse(const char *name, enum ctl_routing_mode *mode);

/* "control", "data" ("unknown" for a value outside the enum); and back
 * (false when unknown). */
const char *ctl_channel_name(enum ctl_channel channel);
bool ctl_channel_parse(const char *name, enum ctl_channel *channel);

struct ctl_hello {
	enum ctl_role role;
	uint32_t id;
	enum ctl_channel channel;
	uint32_t run_id;
	uint32_t protocol;                  /* CTL_PROTOCOL_VERSION */
	uint32_t pid;
	char host[CTL_MAX_TEXT];
	uint32_t source_count;              /* reader: sources it serves */
	uint16_t sources[CTL_MAX_SOURCE_LIST];
	uint32_t rail;                      /* a data connection's rail, 0 .. rails-1; 0 otherwise */
	uint32_t rails;                     /* the data connections of this link (core/rails.h); 1 otherwise */
	char nonce[CTL_NONCE_TEXT];         /* the client's own nonce: its share of the session key */
	char proof[CTL_PROOF_TEXT];         /* HMAC of the challenge and this hello; "" without a run key */
};

/* The listener's first words: the client proves it holds the run key by
 * answering with an HMAC of this nonce (docs/PROTOCOL.md, Authentication). */
struct ctl_challenge {
	char nonce[CTL_NONCE_TEXT];
};

struct ctl_welcome {
	uint32_t run_id;
	enum ctl_role role;                 /* of the listener */
	uint32_t id;
};

struct ctl_error {
	char code[CTL_MAX_NAME];            /* e.g. "wrong_run", "duplicate_id" */
	char reason[CTL_MAX_TEXT];          /* sentence a person can act on */
};

struct ctl_credit {
	uint64_t limit;                     /* forward event IDs below this */
	uint64_t sequence;
};

struct ctl_ping {
	uint64_t sequence;
	uint64_t t1_ns;                     /* builder clock at send */
};

struct ctl_pong {
	uint64_t sequence;
	uint64_t t1_ns;                     /* echoed */
	uint64_t t2_ns;                     /* peer clock at receipt */
	uint64_t t3_ns;                     /* peer clock at send */
};

struct ctl_counter {
	char name[CTL_MAX_NAME];
	uint64_t value;
};

/* A named set of counters: "" for the daemon's totals, "source.3" for a
 * reader's counters of source 3, "process" for CPU and memory. */
struct ctl_group {
	char name[CTL_MAX_NAME];
	uint32_t count;
	struct ctl_counter counters[CTL_MAX_COUNTERS];
};

/* END and STATS share this body. */
struct ctl_report {
	uint32_t group_count;
	struct ctl_group groups[CTL_MAX_GROUPS];
	int32_t status;                     /* END: 0 clean, else the daemon's error count */
};

/* Sources pace event i at start + i / rate: a common start keeps an event's
 * fragments together as a common trigger would. The start is an absolute
 * time on the builder host's clock (without any injected offset): on one host
 * every source then starts at the same nanosecond whenever START reached it,
 * across hosts within chrony's agreement. delay_ns is the fallback for a
 * source whose clock is far from the builder's. */
struct ctl_start {
	uint64_t delay_ns;                  /* start this long after receipt */
	uint64_t at_realtime_ns;            /* or at this CLOCK_REALTIME, 0 = unset */
};

/* Sent when a peer died or stalled: a source whose reader is gone stops and
 * reports; a reader drops the connection of a source that is gone. The
 * operator's drained stop (docs/RUNCONTROL.md) is a STOP to a source with a
 * last_event: the source generates every event up to and including it, then
 * sends END and its END report, the events it will not generate counted as
 * cut off by the stop. A STOP that asks to confirm is the stop's proposal:
 * the source answers with a STOP of its own giving the last event it will
 * have generated (the proposal, or where it is if already past it) and
 * holds there for the final STOP, so that no source ends past the others.
 * CTL_STOP_NOW, every other STOP: stop at once. */
#define CTL_STOP_ALL UINT32_MAX
#define CTL_STOP_NOW UINT64_MAX
struct ctl_stop {
	uint32_t source;                    /* reader: the source to drop; CTL_STOP_ALL: stop */
	uint64_t last_event;                /* a source: the last event to generate; CTL_STOP_NOW */
	bool confirm;                       /* a proposal: answer, hold for the final STOP */
	char reason[CTL_MAX_TEXT];
};

struct ctl_bye {
	int32_t status;                     /* the run's exit status */
};

/* The plan every reader and builder makes its table from (core/evm's
 * struct evm_plan and mode); the codec bounds each field, the receiver
 * checks the plan as a whole against its own options. */
struct ctl_routing {
	enum ctl_routing_mode mode;
	uint32_t builders;                  /* 1 .. CTL_MAX_BUILDERS */
	uint64_t first_event;
	uint64_t events;                    /* >= 1 */
	uint32_t batch;                     /* 1 .. CTL_MAX_BATCH */
	uint32_t window_batches;            /* 1 .. CTL_MAX_WINDOW_BATCHES */
};

/* A builder's running totals (evm_join on the first, evm_tokens after). */
struct ctl_token {
	uint32_t slots;
	uint64_t decided;                   /* IDs of its own decided, in all */
	uint64_t decided_below;             /* every ID of its own below is decided */
	uint64_t sequence;
};

/* One record of the manager (struct evm_assignment), with the hub's
 * retired_below at the time. */
struct ctl_assign {
	uint64_t first;
	uint32_t count;                     /* 1 .. CTL_MAX_BATCH */
	uint32_t builder;                   /* 0 .. CTL_MAX_BUILDERS - 1 */
	uint64_t retired_below;
	uint64_t sequence;
};

struct ctl_lost {
	uint32_t builder;                   /* 0 .. CTL_MAX_BUILDERS - 1 */
	char reason[CTL_MAX_TEXT];
};

/* A source's clock as a builder applies it to that source's timestamps
 * (--role hub; the hub measures every peer's offset against its own): the
 * hub's estimates of the source and of the builder combined. */
#define CTL_CLOCK_UNBOUNDED (-1)
struct ctl_clock {
	uint32_t source;                    /* 0 .. 65535 */
	int64_t offset_ns;                  /* off(source) − off(builder): the source's clock
					     * minus the builder's, subtracted from its timestamps */
	int64_t bound_ns;                   /* |true − offset_ns| at at_ns: the sum of both
					     * bounds; CTL_CLOCK_UNBOUNDED when either is unknown */
	uint64_t at_ns;                     /* the builder's CLOCK_REALTIME at which bound_ns holds */
	uint32_t drift_ppb;                 /* bound_ns grows by drift_ppb × |now − at_ns| / 10^9 */
};

/* The session link's messages (docs/RUNCONTROL.md). */
struct ctl_configure {
	uint32_t run;                       /* 1 .. 2^32-1 */
	char args[CTL_MAX_ARGS_TEXT];       /* printable, '\n' between arguments */
};

struct ctl_state {
	uint32_t run;                       /* the run object's; 0 with none */
	enum ctl_session_state state;
	bool accepted;                      /* the last transition asked of it */
	char reason[CTL_MAX_TEXT];
	int32_t status;                     /* the last run's exit status; 0 before any */
};

/* RESET and SHUTDOWN share this body. */
struct ctl_order {
	char reason[CTL_MAX_TEXT];
};

struct ctl_msg {
	enum ctl_type type;
	union {
		struct ctl_hello hello;
		struct ctl_welcome welcome;
		struct ctl_error error;
		struct ctl_credit credit;
		struct ctl_ping ping;
		struct ctl_pong pong;
		struct ctl_report report;   /* STATS and END */
		struct ctl_bye bye;
		struct ctl_start start;
		struct ctl_challenge challenge;
		struct ctl_stop stop;
		struct ctl_routing routing;
		struct ctl_token token;
		struct ctl_assign assign;
		struct ctl_lost lost;
		struct ctl_clock clock;
		struct ctl_configure configure;
		struct ctl_state state;
		struct ctl_order order;     /* RESET and SHUTDOWN */
	} u;
};

/* Encodes msg with its length prefix into dst (capacity cap), without
 * allocating. Returns the bytes written, or 0 when it does not fit in cap or
 * its body would exceed CTL_MAX_MESSAGE_BYTES (a report of 40 groups of 48
 * counters with 31-byte names does not), or when the decoder would refuse it:
 * a type, role, channel or routing mode outside its enum, an integer outside
 * its field's range, a string not terminated inside
 * its buffer or with a byte outside its field's set (a host name, group,
 * counter or error code name: docs/PROTOCOL.md, Strings), a count above its
 * maximum, or two groups (two counters of a group) with the same name. */
size_t ctl_encode(const struct ctl_msg *msg, uint8_t *dst, size_t cap);

/* Looks at the avail bytes at buf. Returns 0 when a whole message is not yet
 * there (*need set to its full length once the prefix is known, else to
 * CTL_LENGTH_BYTES), the number of bytes consumed when one was decoded into
 * *msg (*need set to the same), or -1 with a reason in err (capacity errlen)
 * when the bytes are not a valid message (body length 0 or oversized, judged
 * from the prefix alone; not msgpack, not a map, trailing bytes, unknown
 * type, missing, duplicate or mistyped field, an integer outside its
 * field's range, string or list too long, a
 * name or host name with a byte outside its set, naming the field). The
 * caller then closes the connection. *msg is unspecified after -1. need may
 * be NULL; err may be NULL. Allocates only inside msgpack, bounded by the
 * body size, and frees it before returning. */
long ctl_decode(const uint8_t *buf, size_t avail, struct ctl_msg *msg, size_t *need, char *err,
		size_t errlen);

/* Helpers for building and reading reports; start from a zeroed report.
 * ctl_report_group() returns the group of that name, adding it when absent
 * (NULL when full or when the name does not fit CTL_MAX_NAME or has a byte
 * outside the name set); ctl_group_set() sets or adds a counter (false when
 * full, when the name does not fit or is not a name, or when g is NULL, so
 * the result of a refused
 * ctl_report_group() can be passed straight on). ctl_report_find() returns
 * NULL when absent (or r is NULL); ctl_group_get() returns false when absent
 * (or g is NULL). */
struct ctl_group *ctl_report_group(struct ctl_report *r, const char *name);
const struct ctl_group *ctl_report_find(const struct ctl_report *r, const char *name);
bool ctl_group_set(struct ctl_group *g, const char *name, uint64_t value);
bool ctl_group_get(const struct ctl_group *g, const char *name, uint64_t *value);

/* The codec's field tables described for documents: docs/PROTOCOL.md's
 * tables are written from these (make docs) and a test fails when the
 * committed file differs. ctl_field_count() is the number of keys of a type
 * besides "type" (0 outside the enum); ctl_field_describe() fills d for the
 * i-th in encoding order, false when there is none. */
struct ctl_field_doc {
	const char *key;
	const char *type;                   /* msgpack type: "uint", "int", "str", "map", ... */
	char range[96];                     /* e.g. "0 .. 2^32−1", "≤ 255 bytes" */
	const char *doc;                    /* what the field means */
};
size_t ctl_field_count(enum ctl_type type);
bool ctl_field_describe(enum ctl_type type, size_t i, struct ctl_field_doc *d);

#endif
