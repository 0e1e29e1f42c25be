/* Control message codec: round trips of every message with edge values,
 * incremental arrival, every refusal with its exact reason, the report
 * helpers, and a seeded mutation loop (ES_TEST_SEED repeats a run,
 * ES_TEST_ITERATIONS sizes it) that must neither crash nor leak. */
#include "wire/control.h"
#include "wire/text.h"

#include <check.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (CTL_LENGTH_BYTES + CTL_MAX_MESSAGE_BYTES + 64)

static uint64_t test_seed;

/* ck_assert records its location on every pass (a write per call without
 * fork), which dominates loops of millions; this one costs only on failure. */
#define CHECK(expr, ...) do { if (!(expr)) ck_abort_msg(__VA_ARGS__); } while (0)

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: one state word, good enough to pick mutations */
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n == 0 ? 0 : rng_next(s) % n;
}

/* Edges more often than uniform values would reach them. */
static uint64_t rng_u64(uint64_t *s)
{
	switch (rng_below(s, 6)) {
	case 0:
		return 0;
	case 1:
		return UINT64_MAX - rng_below(s, 2);
	case 2:
		return rng_below(s, 256);
	case 3:
		return (uint64_t)UINT32_MAX + rng_below(s, 3) - 1;
	default:
		return rng_next(s) >> rng_below(s, 64);
	}
}

static uint32_t load_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static bool msg_equal(const struct ctl_msg *a, const struct ctl_msg *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case CTL_HELLO: {
		const struct ctl_hello *x = &a->u.hello, *y = &b->u.hello;
		return x->role == y->role && x->id == y->id && x->channel == y->channel &&
		       x->run_id == y->run_id && x->protocol == y->protocol && x->pid == y->pid &&
		       strcmp(x->host, y->host) == 0 && strcmp(x->proof, y->proof) == 0 &&
		       strcmp(x->nonce, y->nonce) == 0 &&
		       x->source_count == y->source_count &&
		       x->source_count <= CTL_MAX_SOURCE_LIST &&
		       memcmp(x->sources, y->sources, x->source_count * sizeof x->sources[0]) == 0;
	}
	case CTL_WELCOME:
		return a->u.welcome.run_id == b->u.welcome.run_id &&
		       a->u.welcome.role == b->u.welcome.role && a->u.welcome.id == b->u.welcome.id;
	case CTL_ERROR:
		return strcmp(a->u.error.code, b->u.error.code) == 0 &&
		       strcmp(a->u.error.reason, b->u.error.reason) == 0;
	case CTL_CREDIT:
		return a->u.credit.limit == b->u.credit.limit &&
		       a->u.credit.sequence == b->u.credit.sequence;
	case CTL_PING:
		return a->u.ping.sequence == b->u.ping.sequence &&
		       a->u.ping.t1_ns == b->u.ping.t1_ns;
	case CTL_PONG:
		return a->u.pong.sequence == b->u.pong.sequence &&
		       a->u.pong.t1_ns == b->u.pong.t1_ns &&
		       a->u.pong.t2_ns == b->u.pong.t2_ns && a->u.pong.t3_ns == b->u.pong.t3_ns;
	case CTL_STATS:
	case CTL_END: {
		const struct ctl_report *x = &a->u.report, *y = &b->u.report;
		if (x->status != y->status || x->group_count != y->group_count ||
		    x->group_count > CTL_MAX_GROUPS)
			return false;
		for (uint32_t i = 0; i < x->group_count; i++) {
			const struct ctl_group *g = &x->groups[i], *h = &y->groups[i];
			if (strcmp(g->name, h->name) != 0 || g->count != h->count ||
			    g->count > CTL_MAX_COUNTERS)
				return false;
			for (uint32_t j = 0; j < g->count; j++) {
				if (strcmp(g->counters[j].name, h->counters[j].name) != 0 ||
				    g->counters[j].value != h->counters[j].value)
					return false;
			}
		}
		return true;
	}
	case CTL_BYE:
		return a->u.bye.status == b->u.bye.status;
	case CTL_START:
		return a->u.start.delay_ns == b->u.start.delay_ns &&
		       a->u.start.at_realtime_ns == b->u.start.at_realtime_ns;
	case CTL_CHALLENGE:
		return strcmp(a->u.challenge.nonce, b->u.challenge.nonce) == 0;
	case CTL_STOP:
		return a->u.stop.source == b->u.stop.source &&
		       a->u.stop.last_event == b->u.stop.last_event &&
		       strcmp(a->u.stop.reason, b->u.stop.reason) == 0;
	case CTL_ROUTING: {
		const struct ctl_routing *x = &a->u.routing, *y = &b->u.routing;
		return x->mode == y->mode && x->builders == y->builders &&
		       x->first_event == y->first_event && x->events == y->events &&
		       x->batch == y->batch && x->window_batches == y->window_batches;
	}
	case CTL_TOKEN: {
		const struct ctl_token *x = &a->u.token, *y = &b->u.token;
		return x->slots == y->slots && x->decided == y->decided &&
		       x->decided_below == y->decided_below && x->sequence == y->sequence;
	}
	case CTL_ASSIGN: {
		const struct ctl_assign *x = &a->u.assign, *y = &b->u.assign;
		return x->first == y->first && x->count == y->count && x->builder == y->builder &&
		       x->retired_below == y->retired_below && x->sequence == y->sequence;
	}
	case CTL_LOST:
		return a->u.lost.builder == b->u.lost.builder &&
		       strcmp(a->u.lost.reason, b->u.lost.reason) == 0;
	case CTL_CLOCK: {
		const struct ctl_clock *x = &a->u.clock, *y = &b->u.clock;
		return x->source == y->source && x->offset_ns == y->offset_ns &&
		       x->bound_ns == y->bound_ns && x->at_ns == y->at_ns &&
		       x->drift_ppb == y->drift_ppb;
	}
	case CTL_CONFIGURE:
		return a->u.configure.run == b->u.configure.run &&
		       strcmp(a->u.configure.args, b->u.configure.args) == 0;
	case CTL_STATE: {
		const struct ctl_state *x = &a->u.state, *y = &b->u.state;
		return x->run == y->run && x->state == y->state && x->accepted == y->accepted &&
		       strcmp(x->reason, y->reason) == 0 && x->status == y->status;
	}
	case CTL_RESET:
	case CTL_SHUTDOWN:
		return strcmp(a->u.order.reason, b->u.order.reason) == 0;
	}
	return false;
}

static void make_hello(struct ctl_msg *m)
{
	memset(m, 0, sizeof *m);
	m->type = CTL_HELLO;
	m->u.hello.role = CTL_ROLE_READER;
	m->u.hello.id = 3;
	m->u.hello.channel = CTL_CHANNEL_DATA;
	m->u.hello.run_id = 42;
	m->u.hello.protocol = CTL_PROTOCOL_VERSION;
	m->u.hello.pid = 1234;
	strcpy(m->u.hello.host, "daq-ro-03");
	m->u.hello.source_count = 3;
	m->u.hello.sources[0] = 0;
	m->u.hello.sources[1] = 1;
	m->u.hello.sources[2] = 7;
	m->u.hello.rail = 1;
	m->u.hello.rails = 2;
	strcpy(m->u.hello.nonce, "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8");
	strcpy(m->u.hello.proof, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

/* A report of every group and counter, with names of name_bytes (at most
 * 31) and values near the top of the range. */
static void make_full_report(struct ctl_msg *m, enum ctl_type type, size_t name_bytes)
{
	char name[CTL_MAX_NAME];

	memset(m, 0, sizeof *m);
	m->type = type;
	m->u.report.status = INT32_MIN;
	for (unsigned i = 0; i < CTL_MAX_GROUPS; i++) {
		memset(name, 'g', sizeof name);
		snprintf(name, sizeof name, "%02u", i);
		name[2] = 'g';
		name[name_bytes] = '\0';
		struct ctl_group *g = ctl_report_group(&m->u.report, name);
		CHECK(g != NULL, "group %u refused", i);
		for (unsigned j = 0; j < CTL_MAX_COUNTERS; j++) {
			memset(name, 'c', sizeof name);
			snprintf(name, sizeof name, "%02u", j);
			name[2] = 'c';
			name[name_bytes] = '\0';
			CHECK(ctl_group_set(g, name, UINT64_MAX - j), "counter %u refused", j);
		}
	}
}

static uint8_t enc_buf[2 * BUF_BYTES];
static struct ctl_msg dec_msg;

/* Encodes, checks the prefix and the exact capacity, decodes, compares. */
static size_t roundtrip(const struct ctl_msg *in)
{
	char err[256] = "";
	size_t need = 0;

	size_t n = ctl_encode(in, enc_buf, sizeof enc_buf);
	ck_assert_msg(n > CTL_LENGTH_BYTES, "cannot encode %s", ctl_type_name(in->type));
	ck_assert_uint_eq(load_be32(enc_buf), n - CTL_LENGTH_BYTES);
	ck_assert_uint_eq(enc_buf[CTL_LENGTH_BYTES] & 0xf0, 0x80);   /* fixmap */

	memset(&dec_msg, 0xa5, sizeof dec_msg);
	long r = ctl_decode(enc_buf, n, &dec_msg, &need, err, sizeof err);
	ck_assert_msg(r == (long)n, "decoding %s returned %ld: %s", ctl_type_name(in->type), r,
		      err);
	ck_assert_uint_eq(need, n);
	ck_assert_str_eq(err, "");
	ck_assert_msg(msg_equal(in, &dec_msg), "%s differs after a round trip",
		      ctl_type_name(in->type));

	ck_assert_uint_eq(ctl_encode(in, enc_buf, n), n);
	ck_assert_uint_eq(ctl_encode(in, enc_buf, n - 1), 0);
	return n;
}

/* A hand-made body, for what our encoder would never produce. */
struct body {
	uint8_t buf[BUF_BYTES];
	size_t len;             /* of the body, after the prefix */
	msgpack_packer pk;
};

static int body_write(void *data, const char *p, size_t n)
{
	struct body *b = data;
	CHECK(n <= sizeof b->buf - CTL_LENGTH_BYTES - b->len, "test body overflows");
	memcpy(b->buf + CTL_LENGTH_BYTES + b->len, p, n);
	b->len += n;
	return 0;
}

static msgpack_packer *body_init(struct body *b)
{
	b->len = 0;
	msgpack_packer_init(&b->pk, b, body_write);
	return &b->pk;
}

static size_t body_finish(struct body *b)
{
	store_be32(b->buf, (uint32_t)b->len);
	return CTL_LENGTH_BYTES + b->len;
}

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pk_kv(msgpack_packer *pk, const char *key, const char *value)
{
	pk_str(pk, key);
	pk_str(pk, value);
}

static void pk_kv_uint(msgpack_packer *pk, const char *key, uint64_t value)
{
	pk_str(pk, key);
	msgpack_pack_uint64(pk, value);
}

static const char *const hello_keys[] = {
	"role", "id", "channel", "run_id", "protocol", "pid", "host", "sources", "nonce",
};

/* The hello of make_hello(), less the key omit (NULL for none), announcing
 * extra more entries that the caller packs next. */
static void pack_hello(msgpack_packer *pk, const char *omit, unsigned extra)
{
	const char *o = omit != NULL ? omit : "";

	msgpack_pack_map(pk, 13 + extra - (omit != NULL));
	pk_kv(pk, "type", "hello");
	if (strcmp(o, "role") != 0)
		pk_kv(pk, "role", "reader");
	if (strcmp(o, "id") != 0)
		pk_kv_uint(pk, "id", 3);
	if (strcmp(o, "channel") != 0)
		pk_kv(pk, "channel", "data");
	if (strcmp(o, "run_id") != 0)
		pk_kv_uint(pk, "run_id", 42);
	if (strcmp(o, "protocol") != 0)
		pk_kv_uint(pk, "protocol", CTL_PROTOCOL_VERSION);
	if (strcmp(o, "pid") != 0)
		pk_kv_uint(pk, "pid", 1234);
	if (strcmp(o, "host") != 0)
		pk_kv(pk, "host", "daq-ro-03");
	if (strcmp(o, "nonce") != 0)
		pk_kv(pk, "nonce", "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8");
	if (strcmp(o, "rail") != 0)
		pk_kv_uint(pk, "rail", 0);
	if (strcmp(o, "rails") != 0)
		pk_kv_uint(pk, "rails", 1);
	if (strcmp(o, "sources") != 0) {
		pk_str(pk, "sources");
		msgpack_pack_array(pk, 3);
		msgpack_pack_uint16(pk, 0);
		msgpack_pack_uint16(pk, 1);
		msgpack_pack_uint16(pk, 7);
	}
	if (strcmp(o, "proof") != 0)
		pk_kv(pk, "proof", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

/* {"type": type, "status": 0, "groups": {"g": {"c": 1}}} less omit. */
static void pack_report(msgpack_packer *pk, const char *type, const char *omit, unsigned extra)
{
	const char *o = omit != NULL ? omit : "";

	msgpack_pack_map(pk, 3 + extra - (omit != NULL));
	pk_kv(pk, "type", type);
	if (strcmp(o, "status") != 0) {
		pk_str(pk, "status");
		msgpack_pack_int32(pk, 0);
	}
	if (strcmp(o, "groups") != 0) {
		pk_str(pk, "groups");
		msgpack_pack_map(pk, 1);
		pk_str(pk, "g");
		msgpack_pack_map(pk, 1);
		pk_kv_uint(pk, "c", 1);
	}
}

static void expect_error_at(int line, const uint8_t *buf, size_t n, const char *want)
{
	static struct ctl_msg m;
	char err[256] = "";
	size_t need = 0;

	long r = ctl_decode(buf, n, &m, &need, err, sizeof err);
	ck_assert_msg(r == -1, "line %d: expected '%s', got %ld", line, want, r);
	ck_assert_msg(strcmp(err, want) == 0, "line %d: expected '%s', got '%s'", line, want, err);
}

#define EXPECT_ERROR(b, want) expect_error_at(__LINE__, (b)->buf, body_finish(b), (want))

/* ---- names ------------------------------------------------------------- */

/* Spelled out here rather than taken from ctl_type_name(), to check it. */
static const char *const type_names[] = {
	"hello", "welcome", "error", "credit", "ping", "pong", "stats", "end", "bye", "start", "challenge", "stop",
	"routing", "token", "assign", "lost", "clock", "configure", "state", "reset", "shutdown",
};

START_TEST(test_names)
{
	ck_assert_uint_eq(sizeof type_names / sizeof type_names[0], CTL_SHUTDOWN + 1);
	for (unsigned t = CTL_HELLO; t <= CTL_SHUTDOWN; t++)
		ck_assert_str_eq(ctl_type_name((enum ctl_type)t), type_names[t]);
	ck_assert_str_eq(ctl_type_name((enum ctl_type)(CTL_SHUTDOWN + 1)), "unknown");

	enum ctl_routing_mode mode = CTL_ROUTING_STATIC;
	ck_assert_str_eq(ctl_routing_mode_name(CTL_ROUTING_MANAGER), "manager");
	ck_assert_str_eq(ctl_routing_mode_name(CTL_ROUTING_STATIC), "static");
	ck_assert_str_eq(ctl_routing_mode_name((enum ctl_routing_mode)2), "unknown");
	ck_assert(ctl_routing_mode_parse("manager", &mode));
	ck_assert_int_eq(mode, CTL_ROUTING_MANAGER);
	ck_assert(ctl_routing_mode_parse("static", &mode));
	ck_assert_int_eq(mode, CTL_ROUTING_STATIC);
	ck_assert(!ctl_routing_mode_parse("Static", &mode));
	ck_assert(!ctl_routing_mode_parse("", &mode));
	ck_assert_int_eq(mode, CTL_ROUTING_STATIC);

	enum ctl_role role = CTL_ROLE_SOURCE;
	ck_assert_str_eq(ctl_role_name(CTL_ROLE_SOURCE), "source");
	ck_assert_str_eq(ctl_role_name(CTL_ROLE_READER), "reader");
	ck_assert_str_eq(ctl_role_name(CTL_ROLE_BUILDER), "builder");
	ck_assert_str_eq(ctl_role_name((enum ctl_role)3), "unknown");
	ck_assert(ctl_role_parse("builder", &role));
	ck_assert_int_eq(role, CTL_ROLE_BUILDER);
	ck_assert(ctl_role_parse("reader", &role));
	ck_assert_int_eq(role, CTL_ROLE_READER);
	ck_assert(!ctl_role_parse("Reader", &role));
	ck_assert(!ctl_role_parse("", &role));
	ck_assert(!ctl_role_parse("sourcex", &role));
	ck_assert_int_eq(role, CTL_ROLE_READER);

	enum ctl_channel channel = CTL_CHANNEL_CONTROL;
	ck_assert_str_eq(ctl_channel_name(CTL_CHANNEL_CONTROL), "control");
	ck_assert_str_eq(ctl_channel_name(CTL_CHANNEL_DATA), "data");
	ck_assert_str_eq(ctl_channel_name(CTL_CHANNEL_SESSION), "session");
	ck_assert_str_eq(ctl_channel_name((enum ctl_channel)3), "unknown");
	ck_assert(ctl_channel_parse("data", &channel));
	ck_assert_int_eq(channel, CTL_CHANNEL_DATA);
	ck_assert(!ctl_channel_parse("ctrl", &channel));
}
END_TEST

/* ---- round trips ------------------------------------------------------- */

START_TEST(test_roundtrip_hello)
{
	static struct ctl_msg m;

	make_hello(&m);
	roundtrip(&m);

	for (unsigned role = CTL_ROLE_SOURCE; role <= CTL_ROLE_BUILDER; role++) {
		for (unsigned ch = CTL_CHANNEL_CONTROL; ch <= CTL_CHANNEL_DATA; ch++) {
			make_hello(&m);
			m.u.hello.role = (enum ctl_role)role;
			m.u.hello.channel = (enum ctl_channel)ch;
			m.u.hello.source_count = 0;
			m.u.hello.host[0] = '\0';
			roundtrip(&m);
		}
	}

	/* Every number at its maximum, the longest host, the longest list. */
	make_hello(&m);
	m.u.hello.id = UINT32_MAX;
	m.u.hello.run_id = UINT32_MAX;
	m.u.hello.protocol = UINT32_MAX;
	m.u.hello.pid = UINT32_MAX;
	memset(m.u.hello.host, 'h', TEXT_HOST_MAX);
	m.u.hello.host[TEXT_HOST_MAX] = '\0';
	memcpy(m.u.hello.host, "aZ09-._:", 8);      /* every kind of byte of the set */
	m.u.hello.source_count = CTL_MAX_SOURCE_LIST;
	for (unsigned i = 0; i < CTL_MAX_SOURCE_LIST; i++)
		m.u.hello.sources[i] = (uint16_t)(i == 1 ? UINT16_MAX : i * 257);
	roundtrip(&m);

	/* Zeroes everywhere but rails, at least 1; then rails at its ends. */
	memset(&m, 0, sizeof m);
	m.type = CTL_HELLO;
	m.u.hello.rails = 1;
	roundtrip(&m);
	m.u.hello.rails = CTL_MAX_RAILS;
	m.u.hello.rail = CTL_MAX_RAILS - 1;
	roundtrip(&m);

	/* No link has 0 rails or more than CTL_MAX_RAILS, nor a rail past them. */
	m.u.hello.rails = 0;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.hello.rails = CTL_MAX_RAILS + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.hello.rails = CTL_MAX_RAILS;
	m.u.hello.rail = CTL_MAX_RAILS;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
}
END_TEST

START_TEST(test_roundtrip_small)
{
	static struct ctl_msg m;

	memset(&m, 0, sizeof m);
	m.type = CTL_WELCOME;
	m.u.welcome.run_id = 42;
	m.u.welcome.role = CTL_ROLE_BUILDER;
	roundtrip(&m);
	m.u.welcome.run_id = UINT32_MAX;
	m.u.welcome.id = UINT32_MAX;
	m.u.welcome.role = CTL_ROLE_SOURCE;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_ERROR;
	roundtrip(&m);      /* empty code and reason */
	strcpy(m.u.error.code, "wrong_run");
	strcpy(m.u.error.reason, "Run 7 expected, hello names run 8: restart the reader");
	roundtrip(&m);
	memset(m.u.error.code, 'c', CTL_MAX_NAME - 1);
	m.u.error.code[CTL_MAX_NAME - 1] = '\0';
	memset(m.u.error.reason, 'r', CTL_MAX_TEXT - 1);
	m.u.error.reason[CTL_MAX_TEXT - 1] = '\0';
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_CREDIT;
	roundtrip(&m);
	m.u.credit.limit = UINT64_MAX;
	m.u.credit.sequence = UINT64_MAX - 1;
	roundtrip(&m);
	m.u.credit.limit = (uint64_t)UINT32_MAX + 1;
	m.u.credit.sequence = 128;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_PING;
	m.u.ping.sequence = 17;
	m.u.ping.t1_ns = 1732900000123456789u;
	roundtrip(&m);
	m.u.ping.sequence = UINT64_MAX;
	m.u.ping.t1_ns = UINT64_MAX;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_PONG;
	roundtrip(&m);
	m.u.pong.sequence = 17;
	m.u.pong.t1_ns = 1732900000123456789u;
	m.u.pong.t2_ns = 1732900000123500000u;
	m.u.pong.t3_ns = 1732900000123510000u;
	roundtrip(&m);
	m.u.pong.sequence = UINT64_MAX;
	m.u.pong.t1_ns = UINT64_MAX;
	m.u.pong.t2_ns = UINT64_MAX;
	m.u.pong.t3_ns = UINT64_MAX;
	roundtrip(&m);

	static const int32_t statuses[] = { 0, 1, -1, 127, -32, -33, 128, INT32_MAX, INT32_MIN };
	memset(&m, 0, sizeof m);
	m.type = CTL_BYE;
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
		m.u.bye.status = statuses[i];
		roundtrip(&m);
	}

	memset(&m, 0, sizeof m);
	m.type = CTL_START;
	roundtrip(&m);
	m.u.start.delay_ns = UINT64_MAX;
	m.u.start.at_realtime_ns = 1795984000123456789u;
	roundtrip(&m);
}
END_TEST

START_TEST(test_roundtrip_report)
{
	static struct ctl_msg m;
	static const enum ctl_type types[] = { CTL_STATS, CTL_END };

	for (size_t t = 0; t < 2; t++) {
		/* No groups at all. */
		memset(&m, 0, sizeof m);
		m.type = types[t];
		roundtrip(&m);

		/* The usual shape: totals under "", a source's, rusage. */
		m.u.report.status = 3;
		struct ctl_group *g = ctl_report_group(&m.u.report, "");
		ck_assert(ctl_group_set(g, "fragments_received", 1000000));
		ck_assert(ctl_group_set(g, "events_complete", 0));
		ck_assert(ctl_group_set(g, "late_drops", UINT64_MAX));
		g = ctl_report_group(&m.u.report, "source.3");
		ck_assert(ctl_group_set(g, "frames", 12));
		ck_assert(ctl_group_set(g, "", 1));     /* an empty name is still a name */
		g = ctl_report_group(&m.u.report, "rusage");
		ck_assert(ctl_group_set(g, "maxrss_kb", 20480));
		ck_assert_ptr_nonnull(ctl_report_group(&m.u.report, "empty"));
		roundtrip(&m);

		/* Every group and counter, short names, huge values. */
		make_full_report(&m, types[t], 3);
		size_t n = roundtrip(&m);
		ck_assert_uint_lt(n, CTL_MAX_MESSAGE_BYTES);

		/* Every group name at its longest. */
		make_full_report(&m, types[t], 3);
		for (unsigned i = 0; i < CTL_MAX_GROUPS; i++) {
			memset(m.u.report.groups[i].name + 3, 'n', CTL_MAX_NAME - 4);
			m.u.report.groups[i].name[CTL_MAX_NAME - 1] = '\0';
		}
		/* and one group's counter names too */
		for (unsigned j = 0; j < CTL_MAX_COUNTERS; j++) {
			char *name = m.u.report.groups[5].counters[j].name;
			memset(name + 3, 'x', CTL_MAX_NAME - 4);
			name[CTL_MAX_NAME - 1] = '\0';
		}
		m.u.report.status = INT32_MAX;
		roundtrip(&m);
	}
}
END_TEST

/* ---- encoder limits ---------------------------------------------------- */

START_TEST(test_encode_small_buffers)
{
	static struct ctl_msg m;
	static uint8_t buf[4096];

	make_hello(&m);
	size_t n = ctl_encode(&m, buf, sizeof buf);
	ck_assert_uint_gt(n, 0);
	for (size_t cap = 0; cap < n; cap++) {
		memset(buf, 0xee, sizeof buf);
		ck_assert_uint_eq(ctl_encode(&m, buf, cap), 0);
		/* nothing written past the capacity */
		for (size_t i = cap; i < sizeof buf; i++)
			CHECK(buf[i] == 0xee, "cap %zu: byte %zu written", cap, i);
	}
	ck_assert_uint_eq(ctl_encode(&m, buf, n), n);
	ck_assert_uint_eq(ctl_encode(NULL, buf, sizeof buf), 0);
	ck_assert_uint_eq(ctl_encode(&m, NULL, sizeof buf), 0);
}
END_TEST

START_TEST(test_encode_refuses)
{
	static struct ctl_msg m;

	/* 40 x 48 counters with 31-byte names and 9-byte values need ~80 kB:
	 * more than a body may hold, however large the buffer. */
	make_full_report(&m, CTL_END, CTL_MAX_NAME - 1);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_hello(&m);
	m.type = (enum ctl_type)(CTL_SHUTDOWN + 1);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_hello(&m);
	m.u.hello.role = (enum ctl_role)3;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_hello(&m);
	m.u.hello.channel = (enum ctl_channel)3;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_hello(&m);
	m.u.hello.source_count = CTL_MAX_SOURCE_LIST + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_hello(&m);
	memset(m.u.hello.host, 'h', sizeof m.u.hello.host);    /* unterminated */
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	memset(&m, 0, sizeof m);
	m.type = CTL_WELCOME;
	m.u.welcome.role = (enum ctl_role)-1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	memset(&m, 0, sizeof m);
	m.type = CTL_ERROR;
	memset(m.u.error.code, 'c', sizeof m.u.error.code);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_full_report(&m, CTL_STATS, 3);
	m.u.report.group_count = CTL_MAX_GROUPS + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_full_report(&m, CTL_STATS, 3);
	m.u.report.groups[2].count = CTL_MAX_COUNTERS + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_full_report(&m, CTL_STATS, 3);
	memset(m.u.report.groups[2].name, 'g', CTL_MAX_NAME);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_full_report(&m, CTL_STATS, 3);
	memset(m.u.report.groups[2].counters[4].name, 'c', CTL_MAX_NAME);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	/* Duplicate names would be refused by the decoder. */
	make_full_report(&m, CTL_STATS, 3);
	strcpy(m.u.report.groups[7].name, m.u.report.groups[3].name);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	make_full_report(&m, CTL_STATS, 3);
	strcpy(m.u.report.groups[7].counters[9].name, m.u.report.groups[7].counters[1].name);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
}
END_TEST

/* ---- incremental arrival ----------------------------------------------- */

/* Offers the first k bytes in a buffer of exactly k bytes, so that reading
 * past avail is caught by ASan or valgrind. */
static long decode_exact(const uint8_t *src, size_t k, struct ctl_msg *m, size_t *need)
{
	char err[256] = "";
	uint8_t *copy = malloc(k > 0 ? k : 1);
	CHECK(copy != NULL, "out of memory");
	memcpy(copy, src, k);
	long r = ctl_decode(k > 0 ? copy : NULL, k, m, need, err, sizeof err);
	free(copy);
	CHECK(r >= 0, "decode of %zu bytes failed: %s", k, err);
	return r;
}

static void check_byte_at_a_time(const struct ctl_msg *in)
{
	static uint8_t buf[BUF_BYTES];
	static struct ctl_msg out;

	size_t n = ctl_encode(in, buf, sizeof buf);
	ck_assert_uint_gt(n, 0);
	/* Every byte for short messages; a sample of lengths for long ones. */
	size_t step = n > 2048 ? 97 : 1;
	for (size_t k = 0; k < n; k += (k < 16 || k + step >= n) ? 1 : step) {
		size_t need = 12345;
		long r = decode_exact(buf, k, &out, &need);
		CHECK(r == 0, "%zu of %zu bytes: returned %ld", k, n, r);
		CHECK(need == (k < CTL_LENGTH_BYTES ? CTL_LENGTH_BYTES : n),
		      "%zu of %zu bytes: need %zu", k, n, need);
	}
	size_t need = 0;
	ck_assert_int_eq(decode_exact(buf, n, &out, &need), (long)n);
	ck_assert_uint_eq(need, n);
	ck_assert(msg_equal(in, &out));
}

START_TEST(test_byte_at_a_time)
{
	static struct ctl_msg m;

	make_hello(&m);
	check_byte_at_a_time(&m);
	memset(&m, 0, sizeof m);
	m.type = CTL_PING;
	m.u.ping.sequence = 5;
	check_byte_at_a_time(&m);
	m.type = CTL_BYE;
	check_byte_at_a_time(&m);
	make_full_report(&m, CTL_END, 3);
	check_byte_at_a_time(&m);
	ck_assert_int_eq(decode_exact(enc_buf, 0, &m, NULL), 0);   /* need may be NULL */
}
END_TEST

START_TEST(test_back_to_back)
{
	static struct ctl_msg a, b, c, out;
	static uint8_t buf[3 * BUF_BYTES];
	char err[256];
	size_t need;

	make_hello(&a);
	memset(&b, 0, sizeof b);
	b.type = CTL_CREDIT;
	b.u.credit.limit = 1000;
	b.u.credit.sequence = 2;
	make_full_report(&c, CTL_STATS, 3);

	size_t na = ctl_encode(&a, buf, sizeof buf);
	size_t nb = ctl_encode(&b, buf + na, sizeof buf - na);
	size_t nc = ctl_encode(&c, buf + na + nb, sizeof buf - na - nb);
	ck_assert(na > 0 && nb > 0 && nc > 0);
	size_t total = na + nb + nc;

	ck_assert_int_eq(ctl_decode(buf, total, &out, &need, err, sizeof err), (long)na);
	ck_assert(msg_equal(&a, &out));
	ck_assert_int_eq(ctl_decode(buf + na, total - na, &out, &need, err, sizeof err), (long)nb);
	ck_assert(msg_equal(&b, &out));
	ck_assert_int_eq(ctl_decode(buf + na + nb, nc, &out, &need, err, sizeof err), (long)nc);
	ck_assert(msg_equal(&c, &out));

	/* A complete message followed by part of the next: only the first. */
	ck_assert_int_eq(ctl_decode(buf, na + 2, &out, &need, err, sizeof err), (long)na);
	ck_assert_int_eq(ctl_decode(buf + na, 2, &out, &need, err, sizeof err), 0);
	ck_assert_uint_eq(need, CTL_LENGTH_BYTES);
	ck_assert_int_eq(ctl_decode(buf + na, nb - 1, &out, &need, err, sizeof err), 0);
	ck_assert_uint_eq(need, nb);
}
END_TEST

/* ---- refusals ---------------------------------------------------------- */

START_TEST(test_bad_length)
{
	static struct ctl_msg m;
	uint8_t p[CTL_LENGTH_BYTES];
	char err[64];
	size_t need = 0;

	/* Judged from the prefix alone, before any body byte arrives. */
	store_be32(p, 0);
	expect_error_at(__LINE__, p, sizeof p, "body length 0");
	store_be32(p, 70000);
	expect_error_at(__LINE__, p, sizeof p, "body length 70000 exceeds 65536");
	store_be32(p, CTL_MAX_MESSAGE_BYTES + 1);
	expect_error_at(__LINE__, p, sizeof p, "body length 65537 exceeds 65536");
	store_be32(p, UINT32_MAX);
	expect_error_at(__LINE__, p, sizeof p, "body length 4294967295 exceeds 65536");

	/* The largest body is waited for. */
	store_be32(p, CTL_MAX_MESSAGE_BYTES);
	ck_assert_int_eq(ctl_decode(p, sizeof p, &m, &need, err, sizeof err), 0);
	ck_assert_uint_eq(need, CTL_LENGTH_BYTES + CTL_MAX_MESSAGE_BYTES);

	/* No room, or a small room, for the reason is not a crash. */
	store_be32(p, 70000);
	ck_assert_int_eq(ctl_decode(p, sizeof p, &m, &need, NULL, 0), -1);
	ck_assert_int_eq(ctl_decode(p, sizeof p, &m, NULL, err, 0), -1);
	ck_assert_int_eq(ctl_decode(p, sizeof p, &m, &need, err, 5), -1);
	ck_assert_str_eq(err, "body");
}
END_TEST

START_TEST(test_bad_body)
{
	static struct body b;
	msgpack_packer *pk;
	size_t at;

	pk = body_init(&b);
	msgpack_pack_array(pk, 2);
	msgpack_pack_int(pk, 1);
	msgpack_pack_int(pk, 2);
	EXPECT_ERROR(&b, "body is an array, not a map");

	pk = body_init(&b);
	pk_str(pk, "hello");
	EXPECT_ERROR(&b, "body is a str, not a map");

	pk = body_init(&b);
	msgpack_pack_int(pk, 5);
	EXPECT_ERROR(&b, "body is a uint, not a map");

	pk = body_init(&b);
	msgpack_pack_int(pk, -100);
	EXPECT_ERROR(&b, "body is an int, not a map");

	pk = body_init(&b);
	msgpack_pack_nil(pk);
	EXPECT_ERROR(&b, "body is a nil, not a map");

	pk = body_init(&b);
	msgpack_pack_double(pk, 1.5);
	EXPECT_ERROR(&b, "body is a float, not a map");

	/* Not msgpack at all. */
	body_init(&b);
	b.buf[CTL_LENGTH_BYTES] = 0xc1;
	b.len = 1;
	EXPECT_ERROR(&b, "invalid msgpack byte 0xc1 at body offset 0");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_str(pk, "type");
	b.buf[CTL_LENGTH_BYTES + b.len++] = 0xc1;
	EXPECT_ERROR(&b, "invalid msgpack byte 0xc1 at body offset 6");

	/* The prefix says less than the map needs (sources last). */
	pk = body_init(&b);
	pack_hello(pk, "proof", 0);
	b.len -= 1;
	EXPECT_ERROR(&b, "array at body offset 174 declares 3 elements but only 2 byte(s) follow");
	pk = body_init(&b);
	pack_hello(pk, "proof", 0);
	b.len -= 33;
	EXPECT_ERROR(&b, "msgpack data truncated: a str at body offset 87 runs past the end of the 145-byte body");
	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "ping");
	EXPECT_ERROR(&b, "msgpack data truncated: body of 11 bytes ends before a container is complete");
	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_str(pk, "type");
	msgpack_pack_str(pk, 20);
	msgpack_pack_str_body(pk, "hel", 3);
	EXPECT_ERROR(&b, "msgpack data truncated: a str at body offset 6 runs past the end of the 10-byte body");
	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_str(pk, "type");
	b.buf[CTL_LENGTH_BYTES + b.len++] = 0xda;       /* str 16 without its length */
	b.buf[CTL_LENGTH_BYTES + b.len++] = 0x00;
	EXPECT_ERROR(&b, "msgpack data truncated: a str at body offset 6 runs past the end of the 8-byte body");

	/* More than the prefix says: trailing garbage inside the body. */
	pk = body_init(&b);
	pack_hello(pk, NULL, 0);
	msgpack_pack_nil(pk);
	EXPECT_ERROR(&b, "1 trailing byte(s) after the map in a body of 251 bytes");
	pk = body_init(&b);
	msgpack_pack_map(pk, 0);
	msgpack_pack_map(pk, 0);
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "2 trailing byte(s) after the map in a body of 3 bytes");

	/* Counts that the bytes cannot hold are refused before msgpack
	 * allocates for them. */
	pk = body_init(&b);
	pack_hello(pk, NULL, 1);
	pk_str(pk, "x");
	at = b.len;
	msgpack_pack_array(pk, UINT32_MAX);
	msgpack_pack_nil(pk);
	EXPECT_ERROR(&b, "array at body offset 252 declares 4294967295 elements but only 1 byte(s) follow");
	ck_assert_uint_eq(at, 252);
	pk = body_init(&b);
	msgpack_pack_map(pk, UINT32_MAX);
	pk_kv(pk, "type", "ping");
	EXPECT_ERROR(&b, "map at body offset 0 declares 4294967295 entries but only 10 byte(s) follow");
	pk = body_init(&b);
	msgpack_pack_map(pk, 6);
	pk_kv(pk, "type", "ping");
	EXPECT_ERROR(&b, "map at body offset 0 declares 6 entries but only 10 byte(s) follow");

	/* Unknown fields may nest, within reason. */
	for (unsigned depth = 15; depth <= 17; depth++) {
		pk = body_init(&b);
		msgpack_pack_map(pk, 4);
		pk_kv(pk, "type", "ping");
		pk_kv_uint(pk, "sequence", 1);
		pk_kv_uint(pk, "t1_ns", 2);
		pk_str(pk, "deep");
		for (unsigned i = 0; i < depth; i++)
			msgpack_pack_array(pk, i + 1 < depth ? 1 : 0);
		if (depth < 16) {
			static struct ctl_msg m;
			char err[256];
			size_t n = body_finish(&b);
			ck_assert_int_eq(ctl_decode(b.buf, n, &m, NULL, err, sizeof err), (long)n);
			ck_assert_int_eq(m.type, CTL_PING);
		} else {
			/* 16 arrays inside the top map are 17 levels */
			EXPECT_ERROR(&b, "msgpack containers nested deeper than 16 at body offset 48");
		}
	}
}
END_TEST

START_TEST(test_bad_type)
{
	static struct body b;
	msgpack_packer *pk;

	pk = body_init(&b);
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "missing key 'type'");

	pk = body_init(&b);
	pack_hello(pk, NULL, 0);
	b.buf[CTL_LENGTH_BYTES + 2] = 'T';      /* "Type" */
	EXPECT_ERROR(&b, "missing key 'type'");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_kv_uint(pk, "type", 1);
	EXPECT_ERROR(&b, "key 'type' is a uint, expected str");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_kv(pk, "type", "hullo");
	EXPECT_ERROR(&b, "unknown type 'hullo'");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_kv(pk, "type", "");
	EXPECT_ERROR(&b, "unknown type ''");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_str(pk, "type");
	msgpack_pack_str_with_body(pk, "bad\x01'\\\xff", 7);
	EXPECT_ERROR(&b, "unknown type 'bad\\x01\\x27\\x5c\\xff'");

	/* A long peer string is cut short in the reason. */
	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_kv(pk, "type", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	EXPECT_ERROR(&b, "unknown type 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'");

	pk = body_init(&b);
	pack_hello(pk, NULL, 1);
	pk_kv(pk, "type", "hello");
	EXPECT_ERROR(&b, "duplicate key 'type'");
}
END_TEST

START_TEST(test_bad_hello)
{
	static struct body b;
	char want[128];
	msgpack_packer *pk;

	for (size_t i = 0; i < sizeof hello_keys / sizeof hello_keys[0]; i++) {
		pk = body_init(&b);
		pack_hello(pk, hello_keys[i], 0);
		snprintf(want, sizeof want, "missing key '%s' in hello", hello_keys[i]);
		EXPECT_ERROR(&b, want);
	}

	pk = body_init(&b);
	pack_hello(pk, "run_id", 1);
	pk_kv(pk, "run_id", "abc");
	EXPECT_ERROR(&b, "key 'run_id' in hello is a str, expected uint");

	pk = body_init(&b);
	pack_hello(pk, "run_id", 1);
	pk_str(pk, "run_id");
	msgpack_pack_int(pk, -1);
	EXPECT_ERROR(&b, "key 'run_id' in hello is negative (-1)");

	pk = body_init(&b);
	pack_hello(pk, "run_id", 1);
	pk_kv_uint(pk, "run_id", (uint64_t)UINT32_MAX + 1);
	EXPECT_ERROR(&b, "key 'run_id' in hello is 4294967296, more than 4294967295");

	pk = body_init(&b);
	pack_hello(pk, "pid", 1);
	pk_str(pk, "pid");
	msgpack_pack_double(pk, 1.0);
	EXPECT_ERROR(&b, "key 'pid' in hello is a float, expected uint");

	pk = body_init(&b);
	pack_hello(pk, "id", 1);
	pk_str(pk, "id");
	msgpack_pack_true(pk);
	EXPECT_ERROR(&b, "key 'id' in hello is a bool, expected uint");

	pk = body_init(&b);
	pack_hello(pk, "protocol", 1);
	pk_str(pk, "protocol");
	msgpack_pack_nil(pk);
	EXPECT_ERROR(&b, "key 'protocol' in hello is a nil, expected uint");

	pk = body_init(&b);
	pack_hello(pk, "role", 1);
	pk_kv(pk, "role", "sink");
	EXPECT_ERROR(&b, "key 'role' in hello is 'sink', not a known value");

	pk = body_init(&b);
	pack_hello(pk, "role", 1);
	pk_kv_uint(pk, "role", 1);
	EXPECT_ERROR(&b, "key 'role' in hello is a uint, expected str");

	pk = body_init(&b);
	pack_hello(pk, "channel", 1);
	pk_kv(pk, "channel", "ctrl");
	EXPECT_ERROR(&b, "key 'channel' in hello is 'ctrl', not a known value");

	char host[CTL_MAX_TEXT + 1];
	memset(host, 'h', CTL_MAX_TEXT);
	host[CTL_MAX_TEXT] = '\0';
	pk = body_init(&b);
	pack_hello(pk, "host", 1);
	pk_kv(pk, "host", host);
	EXPECT_ERROR(&b, "key 'host' in hello is 256 bytes, longer than 255");

	pk = body_init(&b);
	pack_hello(pk, "host", 1);
	pk_str(pk, "host");
	msgpack_pack_str_with_body(pk, "a\0b", 3);
	EXPECT_ERROR(&b, "key 'host' in hello contains a NUL byte ('a\\x00b')");

	pk = body_init(&b);
	pack_hello(pk, "host", 1);
	pk_str(pk, "host");
	msgpack_pack_bin_with_body(pk, "ab", 2);
	EXPECT_ERROR(&b, "key 'host' in hello is a bin, expected str");

	pk = body_init(&b);
	pack_hello(pk, "sources", 1);
	pk_str(pk, "sources");
	msgpack_pack_array(pk, CTL_MAX_SOURCE_LIST + 1);
	for (unsigned i = 0; i <= CTL_MAX_SOURCE_LIST; i++)
		msgpack_pack_uint16(pk, (uint16_t)i);
	EXPECT_ERROR(&b, "key 'sources' in hello has 257 entries, more than 256");

	pk = body_init(&b);
	pack_hello(pk, "sources", 1);
	pk_str(pk, "sources");
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint16(pk, 1);
	msgpack_pack_uint32(pk, 70000);
	EXPECT_ERROR(&b, "element 1 of 'sources' in hello is 70000, more than 65535");

	pk = body_init(&b);
	pack_hello(pk, "sources", 1);
	pk_str(pk, "sources");
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint16(pk, 1);
	pk_str(pk, "x");
	EXPECT_ERROR(&b, "element 1 of 'sources' in hello is a str, expected uint");

	pk = body_init(&b);
	pack_hello(pk, "sources", 1);
	pk_str(pk, "sources");
	msgpack_pack_array(pk, 1);
	msgpack_pack_int(pk, -3);
	EXPECT_ERROR(&b, "element 0 of 'sources' in hello is negative (-3)");

	pk = body_init(&b);
	pack_hello(pk, "sources", 1);
	pk_str(pk, "sources");
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "key 'sources' in hello is a map, expected array");

	pk = body_init(&b);
	pack_hello(pk, NULL, 1);
	pk_kv_uint(pk, "run_id", 42);
	EXPECT_ERROR(&b, "duplicate key 'run_id' in hello");
}
END_TEST

START_TEST(test_bad_others)
{
	static struct body b;
	msgpack_packer *pk;
	char name[CTL_MAX_TEXT + 1];

	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "error");
	memset(name, 'c', CTL_MAX_NAME);
	name[CTL_MAX_NAME] = '\0';
	pk_kv(pk, "code", name);
	pk_kv(pk, "reason", "");
	EXPECT_ERROR(&b, "key 'code' in error is 32 bytes, longer than 31");

	pk = body_init(&b);
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "type", "error");
	pk_kv(pk, "code", "x");
	EXPECT_ERROR(&b, "missing key 'reason' in error");

	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "welcome");
	pk_kv_uint(pk, "run_id", 1);
	pk_kv(pk, "role", "builder");
	EXPECT_ERROR(&b, "missing key 'id' in welcome");

	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "credit");
	pk_str(pk, "limit");
	msgpack_pack_int(pk, -5);
	pk_kv_uint(pk, "sequence", 1);
	EXPECT_ERROR(&b, "key 'limit' in credit is negative (-5)");

	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "ping");
	pk_kv_uint(pk, "sequence", 1);
	pk_kv(pk, "t1_ns", "now");
	EXPECT_ERROR(&b, "key 't1_ns' in ping is a str, expected uint");

	pk = body_init(&b);
	msgpack_pack_map(pk, 4);
	pk_kv(pk, "type", "pong");
	pk_kv_uint(pk, "sequence", 1);
	pk_kv_uint(pk, "t1_ns", 1);
	pk_kv_uint(pk, "t2_ns", 1);
	EXPECT_ERROR(&b, "missing key 't3_ns' in pong");

	pk = body_init(&b);
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "type", "bye");
	pk_kv_uint(pk, "status", (uint64_t)INT32_MAX + 1);
	EXPECT_ERROR(&b, "key 'status' in bye is 2147483648, more than 2147483647");

	pk = body_init(&b);
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "type", "bye");
	pk_str(pk, "status");
	msgpack_pack_int64(pk, (int64_t)INT32_MIN - 1);
	EXPECT_ERROR(&b, "key 'status' in bye is -2147483649, less than -2147483648");

	pk = body_init(&b);
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "type", "bye");
	pk_kv(pk, "status", "ok");
	EXPECT_ERROR(&b, "key 'status' in bye is a str, expected int");

	pk = body_init(&b);
	msgpack_pack_map(pk, 1);
	pk_kv(pk, "type", "bye");
	EXPECT_ERROR(&b, "missing key 'status' in bye");
}
END_TEST

START_TEST(test_bad_report)
{
	static struct body b;
	msgpack_packer *pk;
	char name[CTL_MAX_NAME + 1];

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 0);
	EXPECT_ERROR(&b, "missing key 'groups' in end");

	pk = body_init(&b);
	pack_report(pk, "stats", "status", 0);
	EXPECT_ERROR(&b, "missing key 'status' in stats");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_array(pk, 0);
	EXPECT_ERROR(&b, "key 'groups' in end is an array, expected map");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, CTL_MAX_GROUPS + 1);
	for (unsigned i = 0; i <= CTL_MAX_GROUPS; i++) {
		snprintf(name, sizeof name, "g%u", i);
		pk_str(pk, name);
		msgpack_pack_map(pk, 0);
	}
	EXPECT_ERROR(&b, "key 'groups' in end has 41 groups, more than 40");

	pk = body_init(&b);
	pack_report(pk, "stats", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g");
	msgpack_pack_map(pk, CTL_MAX_COUNTERS + 1);
	for (unsigned i = 0; i <= CTL_MAX_COUNTERS; i++) {
		snprintf(name, sizeof name, "c%u", i);
		pk_kv_uint(pk, name, i);
	}
	EXPECT_ERROR(&b, "group 'g' in stats has 49 counters, more than 48");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	msgpack_pack_int(pk, 5);
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "group name 0 in end is a uint, expected str");

	memset(name, 'n', CTL_MAX_NAME);
	name[CTL_MAX_NAME] = '\0';
	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 2);
	pk_str(pk, "ok");
	msgpack_pack_map(pk, 0);
	pk_str(pk, name);
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "group name 1 in end is 32 bytes, longer than 31");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 1);
	pk_kv_uint(pk, name, 1);
	EXPECT_ERROR(&b, "counter name 0 of group 'g' in end is 32 bytes, longer than 31");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 2);
	pk_kv_uint(pk, "a", 1);
	pk_str(pk, "c");
	msgpack_pack_int(pk, -1);
	EXPECT_ERROR(&b, "counter 'c' of group 'g' in end is negative (-1)");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 1);
	pk_kv(pk, "c", "12");
	EXPECT_ERROR(&b, "counter 'c' of group 'g' in end is a str, expected uint");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_kv_uint(pk, "g", 3);
	EXPECT_ERROR(&b, "group 'g' in end is a uint, expected map");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "c");
	msgpack_pack_array(pk, 1);
	msgpack_pack_uint8(pk, 1);
	EXPECT_ERROR(&b, "counter 'c' of group 'g' in end is an array, expected uint");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 3);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 0);
	pk_str(pk, "h");
	msgpack_pack_map(pk, 0);
	pk_str(pk, "g");
	msgpack_pack_map(pk, 0);
	EXPECT_ERROR(&b, "duplicate group 'g' in end");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "");
	msgpack_pack_map(pk, 2);
	pk_kv_uint(pk, "c", 1);
	pk_kv_uint(pk, "c", 2);
	EXPECT_ERROR(&b, "duplicate counter 'c' in group '' of end");

	pk = body_init(&b);
	pack_report(pk, "end", "groups", 1);
	pk_str(pk, "groups");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "g.1");
	msgpack_pack_map(pk, 1);
	pk_str(pk, "c");
	msgpack_pack_nil(pk);
	EXPECT_ERROR(&b, "counter 'c' of group 'g.1' in end is a nil, expected uint");

	pk = body_init(&b);
	pack_report(pk, "end", NULL, 1);
	pk_str(pk, "status");
	msgpack_pack_int(pk, 1);
	EXPECT_ERROR(&b, "duplicate key 'status' in end");
}
END_TEST

/* Host names and names (groups, counters, error codes) are refused at the
 * codec when a byte is outside their set (docs/PROTOCOL.md, Strings): a
 * byte >= 0x80, a quote, a newline, a space. The error names the field and
 * quotes the bytes escaped; the encoder refuses what the decoder would. */
START_TEST(test_bad_strings)
{
	static struct body b;
	static struct ctl_msg m;
	static const struct {
		const char *bytes;
		size_t len;
		const char *want;
	} hosts[] = {
		{ "daq\xff", 4, "key 'host' in hello has byte 0xff at offset 3 ('daq\\xff'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "h\xc3\xa9te", 5, "key 'host' in hello has byte 0xc3 at offset 1 ('h\\xc3\\xa9te'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "a\"b", 3, "key 'host' in hello has byte 0x22 at offset 1 ('a\"b'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "ok\n12:00:00.000 builderd INFO forged", 36, "key 'host' in hello has byte 0x0a at offset 2 ('ok\\x0a12:00:00.000 builderd INFO forged'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "two words", 9, "key 'host' in hello has byte 0x20 at offset 3 ('two words'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "<b>", 3, "key 'host' in hello has byte 0x3c at offset 0 ('<b>'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
		{ "a\\b", 3, "key 'host' in hello has byte 0x5c at offset 1 ('a\\x5cb'): a host name is ASCII letters, digits, '-', '.', '_' and ':'" },
	};
	for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
		msgpack_packer *pk = body_init(&b);
		pack_hello(pk, "host", 1);
		pk_str(pk, "host");
		msgpack_pack_str_with_body(pk, hosts[i].bytes, hosts[i].len);
		EXPECT_ERROR(&b, hosts[i].want);

		make_hello(&m);
		memcpy(m.u.hello.host, hosts[i].bytes, hosts[i].len);
		m.u.hello.host[hosts[i].len] = '\0';
		ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	}

	/* Longer than a DNS name may be, though it fits the buffer. */
	char host[TEXT_HOST_MAX + 2];
	memset(host, 'h', sizeof host - 1);
	host[sizeof host - 1] = '\0';
	msgpack_packer *pk = body_init(&b);
	pack_hello(pk, "host", 1);
	pk_kv(pk, "host", host);
	EXPECT_ERROR(&b, "key 'host' in hello is 254 bytes, longer than 253 ('hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh...')");
	make_hello(&m);
	strcpy(m.u.hello.host, host);
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	/* What host names look like pass: names, IPv4 and IPv6 literals, none. */
	static const char *const good_hosts[] = {
		"daq-ro-03", "daq-ro-03.example.org", "198.18.0.2", "fe80::1", "build_01", "",
	};
	for (size_t i = 0; i < sizeof good_hosts / sizeof good_hosts[0]; i++) {
		make_hello(&m);
		strcpy(m.u.hello.host, good_hosts[i]);
		roundtrip(&m);
	}

	/* Group and counter names of a report, error codes. */
	static const struct {
		const char *group, *counter;
		const char *want;
	} names[] = {
		{ "source.\xff", "c", "group name 0 in end has byte 0xff at offset 7 ('source.\\xff'): a name is ASCII letters, digits, '_', '.' and '-'" },
		{ "g\"", "c", "group name 0 in end has byte 0x22 at offset 1 ('g\"'): a name is ASCII letters, digits, '_', '.' and '-'" },
		{ "g\n", "c", "group name 0 in end has byte 0x0a at offset 1 ('g\\x0a'): a name is ASCII letters, digits, '_', '.' and '-'" },
		{ "g", "frags sent", "counter name 0 of group 'g' in end has byte 0x20 at offset 5 ('frags sent'): a name is ASCII letters, digits, '_', '.' and '-'" },
		{ "g", "c\x80", "counter name 0 of group 'g' in end has byte 0x80 at offset 1 ('c\\x80'): a name is ASCII letters, digits, '_', '.' and '-'" },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		pk = body_init(&b);
		pack_report(pk, "end", "groups", 1);
		pk_str(pk, "groups");
		msgpack_pack_map(pk, 1);
		pk_str(pk, names[i].group);
		msgpack_pack_map(pk, 1);
		pk_kv_uint(pk, names[i].counter, 1);
		EXPECT_ERROR(&b, names[i].want);

		/* The helpers will not add such a name, and the encoder will
		 * not send one written in by hand. */
		memset(&m, 0, sizeof m);
		m.type = CTL_END;
		bool good_group = strcmp(names[i].group, "g") == 0;
		ck_assert(good_group == (ctl_report_group(&m.u.report, names[i].group) != NULL));
		struct ctl_group *g = ctl_report_group(&m.u.report, "g");
		ck_assert_ptr_nonnull(g);
		bool good_counter = strcmp(names[i].counter, "c") == 0;
		ck_assert(good_counter == ctl_group_set(g, names[i].counter, 1));
		ck_assert(ctl_group_set(g, "c", 1) || !good_counter);
		strcpy(g->name, names[i].group);
		if (g->count == 0)
			ctl_group_set(g, "x", 1);
		strcpy(g->counters[0].name, names[i].counter);
		ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	}

	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "error");
	pk_kv(pk, "code", "bad\ncode");
	pk_kv(pk, "reason", "why");
	EXPECT_ERROR(&b, "key 'code' in error has byte 0x0a at offset 3 ('bad\\x0acode'): a name is ASCII letters, digits, '_', '.' and '-'");
}
END_TEST

START_TEST(test_unknown_keys_ignored)
{
	static struct body b;
	static struct ctl_msg want, got;
	msgpack_packer *pk;
	char err[256] = "";

	/* A newer peer's fields, of any shape, next to ours. */
	pk = body_init(&b);
	pack_hello(pk, NULL, 5);
	pk_str(pk, "auth");
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "token", "0123456789abcdef");
	pk_str(pk, "n");
	msgpack_pack_array(pk, 3);
	msgpack_pack_int(pk, -1);
	msgpack_pack_double(pk, 2.5);
	msgpack_pack_map(pk, 0);
	msgpack_pack_int(pk, 7);        /* a key that is not a string */
	msgpack_pack_nil(pk);
	pk_str(pk, "ping");             /* another message's key */
	msgpack_pack_bin_with_body(pk, "\0\1", 2);
	pk_str(pk, "t1_ns");
	msgpack_pack_ext_with_body(pk, "abcd", 4, -1);
	pk_str(pk, "");
	pk_str(pk, "");
	size_t n = body_finish(&b);

	make_hello(&want);
	ck_assert_int_eq(ctl_decode(b.buf, n, &got, NULL, err, sizeof err), (long)n);
	ck_assert_str_eq(err, "");
	ck_assert(msg_equal(&want, &got));

	/* Keys in any order; integers in any width. */
	pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_str(pk, "t1_ns");
	msgpack_pack_fix_uint64(pk, 9);
	pk_str(pk, "sequence");
	msgpack_pack_fix_int32(pk, 8);
	pk_kv(pk, "type", "ping");
	n = body_finish(&b);
	ck_assert_int_eq(ctl_decode(b.buf, n, &got, NULL, err, sizeof err), (long)n);
	ck_assert_int_eq(got.type, CTL_PING);
	ck_assert_uint_eq(got.u.ping.sequence, 8);
	ck_assert_uint_eq(got.u.ping.t1_ns, 9);

	/* A status written as a 64-bit negative integer is still an int32. */
	pk = body_init(&b);
	msgpack_pack_map(pk, 2);
	pk_kv(pk, "type", "bye");
	pk_str(pk, "status");
	msgpack_pack_fix_int64(pk, INT32_MIN);
	n = body_finish(&b);
	ck_assert_int_eq(ctl_decode(b.buf, n, &got, NULL, err, sizeof err), (long)n);
	ck_assert_int_eq(got.u.bye.status, INT32_MIN);
}
END_TEST

/* ---- several builders (docs/BUILDERS.md) -------------------------------- */

static void make_routing(struct ctl_msg *m)
{
	memset(m, 0, sizeof *m);
	m->type = CTL_ROUTING;
	m->u.routing.mode = CTL_ROUTING_MANAGER;
	m->u.routing.builders = 2;
	m->u.routing.first_event = 0;
	m->u.routing.events = 100000;
	m->u.routing.batch = 64;
	m->u.routing.window_batches = 4096;
}

START_TEST(test_roundtrip_builders)
{
	static struct ctl_msg m;

	/* A builder greets the hub on its control port like any peer. */
	make_hello(&m);
	m.u.hello.role = CTL_ROLE_BUILDER;
	m.u.hello.channel = CTL_CHANNEL_CONTROL;
	m.u.hello.id = CTL_MAX_BUILDERS - 1;
	m.u.hello.source_count = 0;
	roundtrip(&m);

	make_routing(&m);
	roundtrip(&m);
	m.u.routing.mode = CTL_ROUTING_STATIC;
	roundtrip(&m);
	/* Each bound at its lowest, then at its highest. */
	m.u.routing.builders = 1;
	m.u.routing.events = 1;
	m.u.routing.batch = 1;
	m.u.routing.window_batches = 1;
	roundtrip(&m);
	m.u.routing.builders = CTL_MAX_BUILDERS;
	m.u.routing.first_event = UINT64_MAX;
	m.u.routing.events = UINT64_MAX;
	m.u.routing.batch = CTL_MAX_BATCH;
	m.u.routing.window_batches = CTL_MAX_WINDOW_BATCHES;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_TOKEN;
	roundtrip(&m);          /* every field may be 0 */
	m.u.token.slots = UINT32_MAX;
	m.u.token.decided = UINT64_MAX;
	m.u.token.decided_below = UINT64_MAX - 1;
	m.u.token.sequence = UINT64_MAX;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_ASSIGN;
	m.u.assign.count = 1;
	roundtrip(&m);
	m.u.assign.first = UINT64_MAX;
	m.u.assign.count = CTL_MAX_BATCH;
	m.u.assign.builder = CTL_MAX_BUILDERS - 1;
	m.u.assign.retired_below = UINT64_MAX;
	m.u.assign.sequence = UINT64_MAX;
	roundtrip(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_LOST;
	roundtrip(&m);          /* builder 0, an empty reason */
	m.u.lost.builder = CTL_MAX_BUILDERS - 1;
	memset(m.u.lost.reason, 'r', CTL_MAX_TEXT - 1);
	m.u.lost.reason[CTL_MAX_TEXT - 1] = '\0';
	roundtrip(&m);
	strcpy(m.u.lost.reason, "builder 1 answered no clock probe for 2000 ms \xff\n");
	roundtrip(&m);          /* free text: any byte but NUL */
	check_byte_at_a_time(&m);

	memset(&m, 0, sizeof m);
	m.type = CTL_CLOCK;
	roundtrip(&m);          /* the same clock: offset 0, bound 0 */
	m.u.clock.source = UINT16_MAX;
	m.u.clock.offset_ns = INT64_MIN;
	m.u.clock.bound_ns = CTL_CLOCK_UNBOUNDED;
	m.u.clock.at_ns = UINT64_MAX;
	m.u.clock.drift_ppb = UINT32_MAX;
	roundtrip(&m);
	m.u.clock.offset_ns = INT64_MAX;
	m.u.clock.bound_ns = INT64_MAX;
	roundtrip(&m);
	m.u.clock.offset_ns = -1500000;
	m.u.clock.bound_ns = 25000;
	check_byte_at_a_time(&m);
}
END_TEST

/* The encoder will not write what the decoder refuses. */
START_TEST(test_encode_refuses_builders)
{
	static struct ctl_msg m;

	make_routing(&m);
	m.u.routing.mode = (enum ctl_routing_mode)2;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	make_routing(&m);
	m.u.routing.builders = 0;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.routing.builders = CTL_MAX_BUILDERS + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	make_routing(&m);
	m.u.routing.events = 0;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	make_routing(&m);
	m.u.routing.batch = 0;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.routing.batch = CTL_MAX_BATCH + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	make_routing(&m);
	m.u.routing.window_batches = 0;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.routing.window_batches = CTL_MAX_WINDOW_BATCHES + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	memset(&m, 0, sizeof m);
	m.type = CTL_ASSIGN;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);     /* count 0 */
	m.u.assign.count = CTL_MAX_BATCH + 1;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.assign.count = 1;
	m.u.assign.builder = CTL_MAX_BUILDERS;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	memset(&m, 0, sizeof m);
	m.type = CTL_LOST;
	m.u.lost.builder = CTL_MAX_BUILDERS;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.lost.builder = 0;
	memset(m.u.lost.reason, 'r', sizeof m.u.lost.reason);      /* unterminated */
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);

	memset(&m, 0, sizeof m);
	m.type = CTL_CLOCK;
	m.u.clock.source = UINT16_MAX + 1u;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.clock.source = 0;
	m.u.clock.bound_ns = -2;        /* below "unknown" */
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
	m.u.clock.bound_ns = INT64_MIN;
	ck_assert_uint_eq(ctl_encode(&m, enc_buf, sizeof enc_buf), 0);
}
END_TEST

/* One entry of a hand-made message: a uint, a str, or another shape. */
enum pk_what { PK_UINT, PK_STR, PK_NEG, PK_NIL };
struct pk_entry {
	const char *key;
	enum pk_what what;
	uint64_t u;
	const char *str;
};

static const struct pk_entry routing_entries[] = {
	{ "mode", PK_STR, 0, "static" }, { "builders", PK_UINT, 2, NULL },
	{ "first_event", PK_UINT, 0, NULL }, { "events", PK_UINT, 1000, NULL },
	{ "batch", PK_UINT, 64, NULL }, { "window_batches", PK_UINT, 4096, NULL },
};
static const struct pk_entry token_entries[] = {
	{ "slots", PK_UINT, 1024, NULL }, { "decided", PK_UINT, 64, NULL },
	{ "decided_below", PK_UINT, 64, NULL }, { "sequence", PK_UINT, 2, NULL },
};
static const struct pk_entry assign_entries[] = {
	{ "first", PK_UINT, 128, NULL }, { "count", PK_UINT, 64, NULL },
	{ "builder", PK_UINT, 1, NULL }, { "retired_below", PK_UINT, 0, NULL },
	{ "sequence", PK_UINT, 3, NULL },
};
static const struct pk_entry lost_entries[] = {
	{ "builder", PK_UINT, 1, NULL }, { "reason", PK_STR, 0, "stalled" },
};
static const struct pk_entry clock_entries[] = {
	{ "source", PK_UINT, 3, NULL }, { "offset_ns", PK_NEG, 1500000, NULL },
	{ "bound_ns", PK_UINT, 25000, NULL }, { "at_ns", PK_UINT, 1700000000000000000u, NULL },
	{ "drift_ppb", PK_UINT, 100000, NULL },
};

static void pk_entry(msgpack_packer *pk, const struct pk_entry *e)
{
	pk_str(pk, e->key);
	switch (e->what) {
	case PK_UINT:
		msgpack_pack_uint64(pk, e->u);
		break;
	case PK_STR:
		pk_str(pk, e->str);
		break;
	case PK_NEG:
		msgpack_pack_int64(pk, -(int64_t)e->u);
		break;
	case PK_NIL:
		msgpack_pack_nil(pk);
		break;
	}
}

/* type's valid entries with key omit left out (NULL: none) or replaced by
 * *with (NULL: none), and extra unknown keys after them. */
static void pack_entries(struct body *b, const char *type, const struct pk_entry *entries,
			 size_t n, const char *omit, const struct pk_entry *with, unsigned extra)
{
	msgpack_packer *pk = body_init(b);
	msgpack_pack_map(pk, 1 + n - (omit != NULL) + extra);
	pk_kv(pk, "type", type);
	for (size_t i = 0; i < n; i++) {
		if (omit != NULL && strcmp(entries[i].key, omit) == 0)
			continue;
		pk_entry(pk, with != NULL && strcmp(entries[i].key, with->key) == 0 ? with
										     : &entries[i]);
	}
	for (unsigned i = 0; i < extra; i++) {
		char key[24];
		snprintf(key, sizeof key, "newer_%u", i);
		pk_kv(pk, key, "x");
	}
}

#define ENTRIES(t) t##_entries, sizeof t##_entries / sizeof t##_entries[0]

static void expect_with(int line, const char *type, const struct pk_entry *entries, size_t n,
			struct pk_entry with, const char *want)
{
	static struct body b;
	pack_entries(&b, type, entries, n, NULL, &with, 0);
	expect_error_at(line, b.buf, body_finish(&b), want);
}

#define EXPECT_WITH(t, with, want) expect_with(__LINE__, #t, ENTRIES(t), with, want)

START_TEST(test_bad_builders)
{
	static struct body b;
	static struct ctl_msg got;
	char err[256] = "";
	struct {
		const char *type;
		const struct pk_entry *entries;
		size_t n;
	} types[] = {
		{ "routing", ENTRIES(routing) }, { "token", ENTRIES(token) },
		{ "assign", ENTRIES(assign) }, { "lost", ENTRIES(lost) },
		{ "clock", ENTRIES(clock) },
	};
	char want[128];

	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		/* Valid as given, and with a newer peer's keys besides. */
		for (unsigned extra = 0; extra < 3; extra += 2) {
			pack_entries(&b, types[t].type, types[t].entries, types[t].n, NULL, NULL,
				     extra);
			size_t n = body_finish(&b);
			ck_assert_msg(ctl_decode(b.buf, n, &got, NULL, err, sizeof err) == (long)n,
				      "%s refused: %s", types[t].type, err);
			ck_assert_str_eq(ctl_type_name(got.type), types[t].type);
		}
		/* Every key is required, and none may come twice. */
		for (size_t k = 0; k < types[t].n; k++) {
			const struct pk_entry *e = &types[t].entries[k];
			pack_entries(&b, types[t].type, types[t].entries, types[t].n, e->key, NULL,
				     0);
			snprintf(want, sizeof want, "missing key '%s' in %s", e->key, types[t].type);
			EXPECT_ERROR(&b, want);

			msgpack_packer *pk = body_init(&b);
			msgpack_pack_map(pk, 2 + types[t].n);
			pk_kv(pk, "type", types[t].type);
			for (size_t i = 0; i < types[t].n; i++)
				pk_entry(pk, &types[t].entries[i]);
			pk_entry(pk, e);
			snprintf(want, sizeof want, "duplicate key '%s' in %s", e->key, types[t].type);
			EXPECT_ERROR(&b, want);
		}
	}
	pack_entries(&b, "routing", ENTRIES(routing), NULL, NULL, 0);
	size_t n = body_finish(&b);
	ck_assert_int_eq(ctl_decode(b.buf, n, &got, NULL, err, sizeof err), (long)n);
	ck_assert_int_eq(got.u.routing.mode, CTL_ROUTING_STATIC);
	ck_assert_uint_eq(got.u.routing.builders, 2);
	ck_assert_uint_eq(got.u.routing.events, 1000);
	ck_assert_uint_eq(got.u.routing.batch, 64);
	ck_assert_uint_eq(got.u.routing.window_batches, 4096);

	/* Wrong types. */
	EXPECT_WITH(routing, ((struct pk_entry){ "mode", PK_UINT, 1, NULL }),
		    "key 'mode' in routing is a uint, expected str");
	EXPECT_WITH(routing, ((struct pk_entry){ "builders", PK_STR, 0, "2" }),
		    "key 'builders' in routing is a str, expected uint");
	EXPECT_WITH(token, ((struct pk_entry){ "decided", PK_NIL, 0, NULL }),
		    "key 'decided' in token is a nil, expected uint");
	EXPECT_WITH(token, ((struct pk_entry){ "slots", PK_NEG, 1, NULL }),
		    "key 'slots' in token is negative (-1)");
	EXPECT_WITH(assign, ((struct pk_entry){ "first", PK_STR, 0, "128" }),
		    "key 'first' in assign is a str, expected uint");
	EXPECT_WITH(assign, ((struct pk_entry){ "sequence", PK_NEG, 3, NULL }),
		    "key 'sequence' in assign is negative (-3)");
	EXPECT_WITH(lost, ((struct pk_entry){ "reason", PK_UINT, 7, NULL }),
		    "key 'reason' in lost is a uint, expected str");
	EXPECT_WITH(lost, ((struct pk_entry){ "builder", PK_STR, 0, "b1" }),
		    "key 'builder' in lost is a str, expected uint");

	/* Out of range: each bound, one past it. */
	EXPECT_WITH(routing, ((struct pk_entry){ "mode", PK_STR, 0, "random" }),
		    "key 'mode' in routing is 'random', not a known value");
	EXPECT_WITH(routing, ((struct pk_entry){ "builders", PK_UINT, 0, NULL }),
		    "key 'builders' in routing is 0, less than 1");
	EXPECT_WITH(routing, ((struct pk_entry){ "builders", PK_UINT, 257, NULL }),
		    "key 'builders' in routing is 257, more than 256");
	EXPECT_WITH(routing, ((struct pk_entry){ "events", PK_UINT, 0, NULL }),
		    "key 'events' in routing is 0, less than 1");
	EXPECT_WITH(routing, ((struct pk_entry){ "batch", PK_UINT, 0, NULL }),
		    "key 'batch' in routing is 0, less than 1");
	EXPECT_WITH(routing, ((struct pk_entry){ "batch", PK_UINT, CTL_MAX_BATCH + 1, NULL }),
		    "key 'batch' in routing is 1048577, more than 1048576");
	EXPECT_WITH(routing, ((struct pk_entry){ "window_batches", PK_UINT, 0, NULL }),
		    "key 'window_batches' in routing is 0, less than 1");
	EXPECT_WITH(routing, ((struct pk_entry){ "window_batches", PK_UINT,
						 CTL_MAX_WINDOW_BATCHES + 1, NULL }),
		    "key 'window_batches' in routing is 1048577, more than 1048576");
	EXPECT_WITH(token, ((struct pk_entry){ "slots", PK_UINT, (uint64_t)UINT32_MAX + 1, NULL }),
		    "key 'slots' in token is 4294967296, more than 4294967295");
	EXPECT_WITH(assign, ((struct pk_entry){ "count", PK_UINT, 0, NULL }),
		    "key 'count' in assign is 0, less than 1");
	EXPECT_WITH(assign, ((struct pk_entry){ "count", PK_UINT, CTL_MAX_BATCH + 1, NULL }),
		    "key 'count' in assign is 1048577, more than 1048576");
	EXPECT_WITH(assign, ((struct pk_entry){ "builder", PK_UINT, CTL_MAX_BUILDERS, NULL }),
		    "key 'builder' in assign is 256, more than 255");
	EXPECT_WITH(lost, ((struct pk_entry){ "builder", PK_UINT, CTL_MAX_BUILDERS, NULL }),
		    "key 'builder' in lost is 256, more than 255");
	EXPECT_WITH(clock, ((struct pk_entry){ "source", PK_UINT, UINT16_MAX + 1u, NULL }),
		    "key 'source' in clock is 65536, more than 65535");
	EXPECT_WITH(clock, ((struct pk_entry){ "bound_ns", PK_NEG, 2, NULL }),
		    "key 'bound_ns' in clock is -2, less than -1");
	EXPECT_WITH(clock, ((struct pk_entry){ "bound_ns", PK_UINT, (uint64_t)INT64_MAX + 1, NULL }),
		    "key 'bound_ns' in clock is 9223372036854775808, more than 9223372036854775807");
	EXPECT_WITH(clock, ((struct pk_entry){ "offset_ns", PK_STR, 0, "-1" }),
		    "key 'offset_ns' in clock is a str, expected int");
	EXPECT_WITH(clock, ((struct pk_entry){ "at_ns", PK_NEG, 1, NULL }),
		    "key 'at_ns' in clock is negative (-1)");

	/* The reason, as every reason: at most 255 bytes, no NUL. */
	char reason[CTL_MAX_TEXT + 1];
	memset(reason, 'r', CTL_MAX_TEXT);
	reason[CTL_MAX_TEXT] = '\0';
	EXPECT_WITH(lost, ((struct pk_entry){ "reason", PK_STR, 0, reason }),
		    "key 'reason' in lost is 256 bytes, longer than 255");
	reason[CTL_MAX_TEXT - 1] = '\0';
	pack_entries(&b, "lost", ENTRIES(lost), NULL, &(struct pk_entry){ "reason", PK_STR, 0,
									reason }, 0);
	n = body_finish(&b);
	ck_assert_int_eq(ctl_decode(b.buf, n, &got, NULL, err, sizeof err), (long)n);
	ck_assert_uint_eq(strlen(got.u.lost.reason), CTL_MAX_TEXT - 1);
	msgpack_packer *pk = body_init(&b);
	msgpack_pack_map(pk, 3);
	pk_kv(pk, "type", "lost");
	pk_kv_uint(pk, "builder", 1);
	pk_str(pk, "reason");
	msgpack_pack_str_with_body(pk, "a\0b", 3);
	EXPECT_ERROR(&b, "key 'reason' in lost contains a NUL byte ('a\\x00b')");
}
END_TEST

/* ---- report helpers ---------------------------------------------------- */

START_TEST(test_report_helpers)
{
	static struct ctl_report r;
	char name[CTL_MAX_NAME + 1];
	uint64_t v = 0;

	memset(&r, 0, sizeof r);
	ck_assert_ptr_null(ctl_report_find(&r, ""));
	struct ctl_group *total = ctl_report_group(&r, "");
	ck_assert_ptr_nonnull(total);
	ck_assert_uint_eq(r.group_count, 1);
	ck_assert_uint_eq(total->count, 0);
	ck_assert_ptr_eq(ctl_report_group(&r, ""), total);
	ck_assert_uint_eq(r.group_count, 1);
	struct ctl_group *src = ctl_report_group(&r, "source.3");
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_ne(src, total);
	ck_assert_ptr_eq(ctl_report_find(&r, "source.3"), src);
	ck_assert_ptr_eq(ctl_report_find(&r, ""), total);
	ck_assert_ptr_null(ctl_report_find(&r, "source.4"));

	ck_assert(!ctl_group_get(total, "frames", &v));
	ck_assert(ctl_group_set(total, "frames", 1));
	ck_assert(ctl_group_set(total, "frames", 5));
	ck_assert_uint_eq(total->count, 1);
	ck_assert(ctl_group_get(total, "frames", &v));
	ck_assert_uint_eq(v, 5);
	ck_assert(!ctl_group_get(src, "frames", &v));

	/* Names that fit and names that do not. */
	memset(name, 'n', sizeof name);
	name[CTL_MAX_NAME - 1] = '\0';
	ck_assert(ctl_group_set(total, name, 7));
	ck_assert(ctl_group_get(total, name, &v));
	ck_assert_uint_eq(v, 7);
	ck_assert_ptr_nonnull(ctl_report_group(&r, name));
	name[CTL_MAX_NAME - 1] = 'n';
	name[CTL_MAX_NAME] = '\0';
	ck_assert(!ctl_group_set(total, name, 7));
	ck_assert_ptr_null(ctl_report_group(&r, name));
	ck_assert_uint_eq(r.group_count, 3);

	/* Full counters: existing ones still change, new ones are refused. */
	for (unsigned i = total->count; i < CTL_MAX_COUNTERS; i++) {
		snprintf(name, sizeof name, "c%u", i);
		ck_assert(ctl_group_set(total, name, i));
	}
	ck_assert_uint_eq(total->count, CTL_MAX_COUNTERS);
	ck_assert(!ctl_group_set(total, "one_more", 1));
	ck_assert(ctl_group_set(total, "frames", UINT64_MAX));
	ck_assert(ctl_group_get(total, "frames", &v));
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert(ctl_group_get(total, "c47", &v));
	ck_assert_uint_eq(v, 47);

	/* Full groups: existing ones are still found. */
	for (unsigned i = r.group_count; i < CTL_MAX_GROUPS; i++) {
		snprintf(name, sizeof name, "g%u", i);
		ck_assert_ptr_nonnull(ctl_report_group(&r, name));
	}
	ck_assert_uint_eq(r.group_count, CTL_MAX_GROUPS);
	ck_assert_ptr_null(ctl_report_group(&r, "one_more"));
	ck_assert_ptr_eq(ctl_report_group(&r, "source.3"), src);
	/* A refused group can be handed on unchecked. */
	ck_assert(!ctl_group_set(ctl_report_group(&r, "one_more"), "frames", 1));
	ck_assert(!ctl_group_get(ctl_report_find(&r, "one_more"), "frames", &v));
	ck_assert_ptr_null(ctl_report_find(NULL, "source.3"));
	ck_assert_ptr_eq(ctl_report_find(&r, "g39"), &r.groups[39]);
}
END_TEST

/* ---- randomized -------------------------------------------------------- */

static void random_text(uint64_t *s, char *dst, size_t cap)
{
	size_t n;
	switch (rng_below(s, 4)) {
	case 0:
		n = 0;
		break;
	case 1:
		n = cap - 1;
		break;
	default:
		n = (size_t)rng_below(s, cap);
	}
	for (size_t i = 0; i < n; i++)
		dst[i] = (char)(1 + rng_below(s, 255));
	dst[n] = '\0';
}

/* As random_text(), from the bytes of set only, at most max bytes. */
static void random_of(uint64_t *s, char *dst, size_t cap, size_t max, const char *set)
{
	size_t n = (size_t)rng_below(s, (max < cap - 1 ? max : cap - 1) + 1);
	size_t k = strlen(set);
	for (size_t i = 0; i < n; i++)
		dst[i] = set[rng_below(s, k)];
	dst[n] = '\0';
}

#define HOST_SET "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:"
#define NAME_SET "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

static void random_msg(uint64_t *s, struct ctl_msg *m)
{
	memset(m, 0, sizeof *m);
	m->type = (enum ctl_type)rng_below(s, CTL_SHUTDOWN + 1);
	switch (m->type) {
	case CTL_HELLO:
		m->u.hello.role = (enum ctl_role)rng_below(s, 3);
		m->u.hello.id = (uint32_t)rng_u64(s);
		m->u.hello.channel = (enum ctl_channel)rng_below(s, 2);
		m->u.hello.run_id = (uint32_t)rng_u64(s);
		m->u.hello.protocol = (uint32_t)rng_u64(s);
		m->u.hello.pid = (uint32_t)rng_u64(s);
		m->u.hello.rails = 1 + (uint32_t)rng_below(s, CTL_MAX_RAILS);
		m->u.hello.rail = (uint32_t)rng_below(s, m->u.hello.rails);
		random_of(s, m->u.hello.host, sizeof m->u.hello.host, TEXT_HOST_MAX, HOST_SET);
		random_text(s, m->u.hello.proof, sizeof m->u.hello.proof);
		random_text(s, m->u.hello.nonce, sizeof m->u.hello.nonce);
		m->u.hello.source_count = (uint32_t)rng_below(s, CTL_MAX_SOURCE_LIST + 1);
		for (uint32_t i = 0; i < m->u.hello.source_count; i++)
			m->u.hello.sources[i] = (uint16_t)rng_u64(s);
		break;
	case CTL_WELCOME:
		m->u.welcome.run_id = (uint32_t)rng_u64(s);
		m->u.welcome.role = (enum ctl_role)rng_below(s, 3);
		m->u.welcome.id = (uint32_t)rng_u64(s);
		break;
	case CTL_ERROR:
		random_of(s, m->u.error.code, sizeof m->u.error.code, CTL_MAX_NAME, NAME_SET);
		random_text(s, m->u.error.reason, sizeof m->u.error.reason);
		break;
	case CTL_CREDIT:
		m->u.credit.limit = rng_u64(s);
		m->u.credit.sequence = rng_u64(s);
		break;
	case CTL_PING:
		m->u.ping.sequence = rng_u64(s);
		m->u.ping.t1_ns = rng_u64(s);
		break;
	case CTL_PONG:
		m->u.pong.sequence = rng_u64(s);
		m->u.pong.t1_ns = rng_u64(s);
		m->u.pong.t2_ns = rng_u64(s);
		m->u.pong.t3_ns = rng_u64(s);
		break;
	case CTL_STATS:
	case CTL_END: {
		m->u.report.status = (int32_t)rng_u64(s);
		if (rng_below(s, 40) == 0) {
			make_full_report(m, m->type, 3 + (size_t)rng_below(s, 3));
			break;
		}
		unsigned groups = (unsigned)rng_below(s, 6);
		char name[CTL_MAX_NAME];
		for (unsigned i = 0; i < groups; i++) {
			random_of(s, name, sizeof name, CTL_MAX_NAME, NAME_SET);
			struct ctl_group *g = ctl_report_group(&m->u.report, name);
			unsigned counters = (unsigned)rng_below(s, 10);
			for (unsigned j = 0; g != NULL && j < counters; j++) {
				random_of(s, name, sizeof name, CTL_MAX_NAME, NAME_SET);
				ctl_group_set(g, name, rng_u64(s));
			}
		}
		break;
	}
	case CTL_BYE:
		m->u.bye.status = (int32_t)rng_u64(s);
		break;
	case CTL_START:
		m->u.start.delay_ns = rng_u64(s);
		m->u.start.at_realtime_ns = rng_u64(s);
		break;
	case CTL_CHALLENGE:
		random_text(s, m->u.challenge.nonce, sizeof m->u.challenge.nonce);
		break;
	case CTL_STOP:
		m->u.stop.source = (uint32_t)rng_u64(s);
		m->u.stop.last_event = rng_below(s, 2) ? CTL_STOP_NOW : rng_u64(s);
		random_text(s, m->u.stop.reason, sizeof m->u.stop.reason);
		break;
	case CTL_ROUTING:
		m->u.routing.mode = (enum ctl_routing_mode)rng_below(s, 2);
		m->u.routing.builders = 1 + (uint32_t)rng_below(s, CTL_MAX_BUILDERS);
		m->u.routing.first_event = rng_u64(s);
		m->u.routing.events = 1 + rng_below(s, UINT64_MAX);
		m->u.routing.batch = 1 + (uint32_t)rng_below(s, CTL_MAX_BATCH);
		m->u.routing.window_batches = 1 + (uint32_t)rng_below(s, CTL_MAX_WINDOW_BATCHES);
		break;
	case CTL_TOKEN:
		m->u.token.slots = (uint32_t)rng_u64(s);
		m->u.token.decided = rng_u64(s);
		m->u.token.decided_below = rng_u64(s);
		m->u.token.sequence = rng_u64(s);
		break;
	case CTL_ASSIGN:
		m->u.assign.first = rng_u64(s);
		m->u.assign.count = 1 + (uint32_t)rng_below(s, CTL_MAX_BATCH);
		m->u.assign.builder = (uint32_t)rng_below(s, CTL_MAX_BUILDERS);
		m->u.assign.retired_below = rng_u64(s);
		m->u.assign.sequence = rng_u64(s);
		break;
	case CTL_LOST:
		m->u.lost.builder = (uint32_t)rng_below(s, CTL_MAX_BUILDERS);
		random_text(s, m->u.lost.reason, sizeof m->u.lost.reason);
		break;
	case CTL_CLOCK:
		m->u.clock.source = (uint32_t)rng_below(s, UINT16_MAX + 1u);
		m->u.clock.offset_ns = (int64_t)rng_u64(s);
		m->u.clock.bound_ns = (int64_t)rng_below(s, (uint64_t)INT64_MAX + 1) - 1;
		m->u.clock.at_ns = rng_u64(s);
		m->u.clock.drift_ppb = (uint32_t)rng_u64(s);
		break;
	case CTL_CONFIGURE:
		m->u.configure.run = 1 + (uint32_t)rng_below(s, UINT32_MAX);
		random_of(s, m->u.configure.args, sizeof m->u.configure.args, CTL_MAX_ARGS_TEXT - 1,
			  "--run=7\nabcxyz 0123456789:./");
		break;
	case CTL_STATE:
		m->u.state.run = (uint32_t)rng_u64(s);
		m->u.state.state = (enum ctl_session_state)rng_below(s, 3);
		m->u.state.accepted = rng_below(s, 2) == 1;
		random_text(s, m->u.state.reason, sizeof m->u.state.reason);
		m->u.state.status = (int32_t)rng_u64(s);
		break;
	case CTL_RESET:
	case CTL_SHUTDOWN:
		random_text(s, m->u.order.reason, sizeof m->u.order.reason);
		break;
	}
}

static void pack_random_value(msgpack_packer *pk, uint64_t *s, unsigned depth)
{
	static const char *const words[] = {
		"type", "hello", "end", "stats", "role", "reader", "sources", "groups", "status",
		"host", "", "g", "c", "run_id", "limit", "t1_ns", "data", "control",
		"routing", "token", "assign", "lost", "builders", "batch", "count", "builder",
		"manager", "static",
	};
	char text[40];

	switch (rng_below(s, depth < 4 ? 10 : 7)) {
	case 0:
		msgpack_pack_nil(pk);
		break;
	case 1:
		msgpack_pack_int64(pk, (int64_t)rng_u64(s));
		break;
	case 2:
		msgpack_pack_uint64(pk, rng_u64(s));
		break;
	case 3:
		msgpack_pack_double(pk, (double)rng_u64(s));
		break;
	case 4:
		pk_str(pk, words[rng_below(s, sizeof words / sizeof words[0])]);
		break;
	case 5:
		random_text(s, text, 1 + (size_t)rng_below(s, sizeof text));
		pk_str(pk, text);
		break;
	case 6:
		msgpack_pack_bin_with_body(pk, "xyz", (size_t)rng_below(s, 4));
		break;
	case 7:
	case 8: {
		unsigned n = (unsigned)rng_below(s, 5);
		msgpack_pack_map(pk, n);
		for (unsigned i = 0; i < n; i++) {
			pack_random_value(pk, s, 4);    /* keys: scalars */
			pack_random_value(pk, s, depth + 1);
		}
		break;
	}
	default: {
		unsigned n = (unsigned)rng_below(s, 5);
		msgpack_pack_array(pk, n);
		for (unsigned i = 0; i < n; i++)
			pack_random_value(pk, s, depth + 1);
		break;
	}
	}
}

/* Outcomes of check_any(), printed so that a run shows the loop reached
 * all three answers rather than one. */
static uint64_t fuzz_accepted, fuzz_incomplete, fuzz_refused;

/* Whatever the bytes, the answer is one of the three, and a message it
 * accepts is one our encoder can send again unchanged. */
static void check_any(const uint8_t *buf, size_t n, uint64_t iter)
{
	static struct ctl_msg m, again;
	static uint8_t re[BUF_BYTES];
	char err[256] = "";
	size_t need = 0;

	long r = ctl_decode(buf, n, &m, &need, err, sizeof err);
	CHECK(r >= -1 && r <= (long)n, "seed %" PRIu64 " iteration %" PRIu64 ": returned %ld",
		      test_seed, iter, r);
	fuzz_accepted += r > 0;
	fuzz_incomplete += r == 0;
	fuzz_refused += r < 0;
	if (r < 0) {
		CHECK(err[0] != '\0', "seed %" PRIu64 " iteration %" PRIu64 ": no reason",
			      test_seed, iter);
	} else if (r == 0) {
		CHECK(need > n && need <= CTL_LENGTH_BYTES + CTL_MAX_MESSAGE_BYTES,
			      "seed %" PRIu64 " iteration %" PRIu64 ": need %zu with %zu bytes",
			      test_seed, iter, need, n);
	} else {
		CHECK(need == (size_t)r, "seed %" PRIu64 " iteration %" PRIu64 ": need %zu, used %ld",
		      test_seed, iter, need, r);
		size_t k = ctl_encode(&m, re, sizeof re);
		CHECK(k > 0, "seed %" PRIu64 " iteration %" PRIu64 ": accepted %s not re-encodable",
			      test_seed, iter, ctl_type_name(m.type));
		CHECK(ctl_decode(re, k, &again, NULL, err, sizeof err) == (long)k,
		      "seed %" PRIu64 " iteration %" PRIu64 ": re-encoded %s refused: %s", test_seed,
		      iter, ctl_type_name(m.type), err);
		CHECK(msg_equal(&m, &again), "seed %" PRIu64 " iteration %" PRIu64 ": unstable",
			      test_seed, iter);
	}
}

static uint64_t test_iterations(void)
{
	const char *e = getenv("ES_TEST_ITERATIONS");
	uint64_t n = e != NULL ? strtoull(e, NULL, 0) : 0;
	return n > 0 ? n : 3000;
}

START_TEST(test_fuzz)
{
	static struct ctl_msg m;
	static uint8_t buf[BUF_BYTES], mut[BUF_BYTES];
	static struct body b;
	uint64_t s = test_seed;
	uint64_t iterations = test_iterations();

	for (uint64_t it = 0; it < iterations; it++) {
		random_msg(&s, &m);
		size_t n = ctl_encode(&m, buf, sizeof buf);
		CHECK(n > 0, "seed %" PRIu64 " iteration %" PRIu64 ": cannot encode %s",
			      test_seed, it, ctl_type_name(m.type));
		static struct ctl_msg out;
		char err[256];
		CHECK(ctl_decode(buf, n, &out, NULL, err, sizeof err) == (long)n,
		      "seed %" PRIu64 " iteration %" PRIu64 ": %s refused: %s", test_seed, it,
		      ctl_type_name(m.type), err);
		CHECK(msg_equal(&m, &out), "seed %" PRIu64 " iteration %" PRIu64
			      ": %s differs", test_seed, it, ctl_type_name(m.type));

		/* Flipped bytes, mostly in the body, sometimes in the prefix. */
		for (unsigned j = 0; j < 8; j++) {
			memcpy(mut, buf, n);
			unsigned flips = 1 + (unsigned)rng_below(&s, 4);
			for (unsigned f = 0; f < flips; f++) {
				size_t at = rng_below(&s, 16) == 0 ?
					    (size_t)rng_below(&s, CTL_LENGTH_BYTES) :
					    (size_t)rng_below(&s, n);
				mut[at] ^= (uint8_t)(1 + rng_below(&s, 255));
			}
			check_any(mut, n, it);
		}

		/* Cut short: never complete. */
		size_t cut = (size_t)rng_below(&s, n);
		check_any(buf, cut, it);

		/* A body cut short but with a prefix claiming what is left. */
		if (n > CTL_LENGTH_BYTES + 1) {
			memcpy(mut, buf, n);
			size_t body = 1 + (size_t)rng_below(&s, n - CTL_LENGTH_BYTES - 1);
			store_be32(mut, (uint32_t)body);
			check_any(mut, CTL_LENGTH_BYTES + body, it);
		}

		/* Garbage, with a truthful prefix half of the time. */
		size_t len = (size_t)rng_below(&s, 300);
		for (size_t i = 0; i < len; i++)
			mut[i] = (uint8_t)rng_next(&s);
		if (len > CTL_LENGTH_BYTES && rng_below(&s, 2) == 0)
			store_be32(mut, (uint32_t)(len - CTL_LENGTH_BYTES));
		check_any(mut, len, it);

		/* Well-formed msgpack of the wrong shapes. */
		msgpack_packer *pk = body_init(&b);
		if (rng_below(&s, 8) == 0) {
			pack_random_value(pk, &s, 0);
		} else {
			unsigned entries = (unsigned)rng_below(&s, 8);
			msgpack_pack_map(pk, entries + 1);
			pk_str(pk, "type");
			if (rng_below(&s, 8) == 0)
				pack_random_value(pk, &s, 1);
			else
				pk_str(pk, type_names[rng_below(&s, CTL_CLOCK + 1)]);
			for (unsigned i = 0; i < entries; i++) {
				pack_random_value(pk, &s, 4);
				pack_random_value(pk, &s, 1);
			}
		}
		if (b.len <= CTL_MAX_MESSAGE_BYTES)
			check_any(b.buf, body_finish(&b), it);
	}
	fprintf(stderr, "test_control: %" PRIu64 " iterations: %" PRIu64 " accepted, %" PRIu64
		" incomplete, %" PRIu64 " refused\n", iterations, fuzz_accepted, fuzz_incomplete,
		fuzz_refused);
}
END_TEST

/* ---- runner ------------------------------------------------------------ */

/* Names and titles of the roles, and the field tables as documents see
 * them (docs/PROTOCOL.md is written from ctl_field_describe). */
START_TEST(test_role_titles_and_field_docs)
{
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_SOURCE), "Source");
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_READER), "Reader");
	ck_assert_str_eq(ctl_role_title(CTL_ROLE_BUILDER), "Builder");
	ck_assert_str_eq(ctl_role_title((enum ctl_role)7), "Unknown");
	struct ctl_field_doc d;
	size_t n = ctl_field_count(CTL_HELLO);
	ck_assert(ctl_field_describe(CTL_HELLO, n - 1, &d));
	ck_assert_str_eq(d.key, "proof");
	ck_assert_str_eq(d.range, "≤ 64 bytes");
	ck_assert(!ctl_field_describe(CTL_HELLO, n, &d));
	ck_assert(ctl_field_describe(CTL_HELLO, 0, &d));
	ck_assert_str_eq(d.range, "`\"source\"`, `\"reader\"`, `\"builder\"`");
	ck_assert_uint_eq(ctl_field_count((enum ctl_type)99), 0);
	/* A field's own range, where it is narrower than its kind's. */
	ck_assert(ctl_field_describe(CTL_ROUTING, 0, &d));
	ck_assert_str_eq(d.key, "mode");
	ck_assert_str_eq(d.range, "`\"manager\"`, `\"static\"`");
	ck_assert(ctl_field_describe(CTL_ROUTING, 1, &d));
	ck_assert_str_eq(d.key, "builders");
	ck_assert_str_eq(d.range, "1 .. 256");
	ck_assert(ctl_field_describe(CTL_ROUTING, 3, &d));
	ck_assert_str_eq(d.range, "1 .. 2^64−1");
	ck_assert(ctl_field_describe(CTL_TOKEN, 0, &d));
	ck_assert_str_eq(d.range, "0 .. 2^32−1");
	ck_assert(ctl_field_describe(CTL_ASSIGN, 1, &d));
	ck_assert_str_eq(d.key, "count");
	ck_assert_str_eq(d.range, "1 .. 1048576");
	ck_assert(ctl_field_describe(CTL_LOST, 0, &d));
	ck_assert_str_eq(d.range, "0 .. 255");
	ck_assert(ctl_field_describe(CTL_LOST, 1, &d));
	ck_assert_str_eq(d.range, "≤ 255 bytes");
	ck_assert(ctl_field_describe(CTL_CLOCK, 0, &d));
	ck_assert_str_eq(d.range, "0 .. 65535");
	ck_assert(ctl_field_describe(CTL_CLOCK, 1, &d));
	ck_assert_str_eq(d.type, "int");
	ck_assert_str_eq(d.range, "int64");
	ck_assert(ctl_field_describe(CTL_CLOCK, 2, &d));
	ck_assert_str_eq(d.range, "-1 .. 2^63−1");
	for (int t = CTL_HELLO; t <= CTL_CLOCK; t++) {
		/* Every type has a field table (a type left out of the table
		 * would encode as a bare "type" and decode into nothing). */
		ck_assert_msg(ctl_field_count((enum ctl_type)t) > 0, "%s has no fields",
			      ctl_type_name((enum ctl_type)t));
		for (size_t i = 0; ctl_field_describe((enum ctl_type)t, i, &d); i++)
			ck_assert_msg(d.doc != NULL && d.doc[0] != '\0', "%s.%s has no doc",
				      ctl_type_name((enum ctl_type)t), d.key);
	}
}
END_TEST

static Suite *ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc;

	tc = tcase_create("codec");
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_roundtrip_hello);
	tcase_add_test(tc, test_roundtrip_small);
	tcase_add_test(tc, test_roundtrip_report);
	tcase_add_test(tc, test_encode_small_buffers);
	tcase_add_test(tc, test_encode_refuses);
	tcase_add_test(tc, test_byte_at_a_time);
	tcase_add_test(tc, test_back_to_back);
	tcase_add_test(tc, test_roundtrip_builders);
	tcase_add_test(tc, test_encode_refuses_builders);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_test(tc, test_bad_length);
	tcase_add_test(tc, test_bad_body);
	tcase_add_test(tc, test_bad_type);
	tcase_add_test(tc, test_bad_hello);
	tcase_add_test(tc, test_bad_others);
	tcase_add_test(tc, test_bad_report);
	tcase_add_test(tc, test_bad_strings);
	tcase_add_test(tc, test_unknown_keys_ignored);
	tcase_add_test(tc, test_bad_builders);
	suite_add_tcase(s, tc);

	tc = tcase_create("report");
	tcase_add_test(tc, test_report_helpers);
	tcase_add_test(tc, test_role_titles_and_field_docs);
	suite_add_tcase(s, tc);

	tc = tcase_create("fuzz");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_fuzz);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *e = getenv("ES_TEST_SEED");
	test_seed = e != NULL && *e != '\0' ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
	fprintf(stderr, "test_control: seed %" PRIu64 " (ES_TEST_SEED=%" PRIu64 " repeats this run)\n",
		test_seed, test_seed);

	SRunner *sr = srunner_create(ctl_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
