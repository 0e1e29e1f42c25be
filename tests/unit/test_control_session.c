/* The session link's messages (docs/RUNCONTROL.md): configure, state,
 * reset, shutdown and the session channel round-trip; every bad field is
 * refused with its key named, and the encoder will not write what the
 * decoder refuses. */
#include "wire/control.h"

#include <check.h>
#include <msgpack.h>
#include <string.h>

static uint8_t buf[CTL_MAX_MESSAGE_BYTES + 64];
static struct ctl_msg in, out;

static void roundtrip(const struct ctl_msg *m)
{
	char err[256] = "";
	size_t n = ctl_encode(m, buf, sizeof buf);
	ck_assert_msg(n > CTL_LENGTH_BYTES, "cannot encode %s", ctl_type_name(m->type));
	memset(&out, 0xa5, sizeof out);
	ck_assert_msg(ctl_decode(buf, n, &out, NULL, err, sizeof err) == (long)n, "%s: %s",
		      ctl_type_name(m->type), err);
	ck_assert_int_eq(out.type, m->type);
}

START_TEST(test_roundtrip)
{
	memset(&in, 0, sizeof in);
	in.type = CTL_CONFIGURE;
	in.u.configure.run = 7;
	strcpy(in.u.configure.args, "--run\n7\n--events=1000\n--out\n/data/run-7 ü");
	roundtrip(&in);
	ck_assert_uint_eq(out.u.configure.run, 7);
	ck_assert_str_eq(out.u.configure.args, in.u.configure.args);
	/* The longest command line that fits. */
	memset(in.u.configure.args, 'a', CTL_MAX_ARGS_TEXT - 1);
	in.u.configure.args[CTL_MAX_ARGS_TEXT - 1] = '\0';
	roundtrip(&in);
	ck_assert_uint_eq(strlen(out.u.configure.args), CTL_MAX_ARGS_TEXT - 1);

	memset(&in, 0, sizeof in);
	in.type = CTL_STATE;
	in.u.state.run = 7;
	in.u.state.state = CTL_SESSION_CONFIGURED;
	in.u.state.accepted = true;
	in.u.state.status = -3;
	strcpy(in.u.state.reason, "reader 1 is in run 7; stop it first");
	roundtrip(&in);
	ck_assert_uint_eq(out.u.state.run, 7);
	ck_assert_int_eq(out.u.state.state, CTL_SESSION_CONFIGURED);
	ck_assert(out.u.state.accepted);
	ck_assert_int_eq(out.u.state.status, -3);
	ck_assert_str_eq(out.u.state.reason, in.u.state.reason);
	in.u.state.accepted = false;
	in.u.state.state = CTL_SESSION_ERROR;
	roundtrip(&in);
	ck_assert(!out.u.state.accepted);
	ck_assert_int_eq(out.u.state.state, CTL_SESSION_ERROR);

	for (enum ctl_type t = CTL_RESET; t <= CTL_SHUTDOWN; t++) {
		memset(&in, 0, sizeof in);
		in.type = t;
		strcpy(in.u.order.reason, "operator");
		roundtrip(&in);
		ck_assert_str_eq(out.u.order.reason, "operator");
	}

	memset(&in, 0, sizeof in);
	in.type = CTL_HELLO;
	in.u.hello.role = CTL_ROLE_READER;
	in.u.hello.channel = CTL_CHANNEL_SESSION;
	in.u.hello.run_id = 0;
	in.u.hello.protocol = CTL_PROTOCOL_VERSION;
	in.u.hello.rails = 1;
	strcpy(in.u.hello.host, "ro-1");
	roundtrip(&in);
	ck_assert_int_eq(out.u.hello.channel, CTL_CHANNEL_SESSION);
}
END_TEST

/* The drained stop: a STOP's last_event, any ID or CTL_STOP_NOW. */
START_TEST(test_stop_last_event)
{
	static const uint64_t ids[] = { 0, 1, 41999, UINT64_MAX - 1, CTL_STOP_NOW };
	for (unsigned i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		memset(&in, 0, sizeof in);
		in.type = CTL_STOP;
		in.u.stop.source = CTL_STOP_ALL;
		in.u.stop.last_event = ids[i];
		strcpy(in.u.stop.reason, "operator stop (SIGUSR2)");
		roundtrip(&in);
		ck_assert_uint_eq(out.u.stop.source, CTL_STOP_ALL);
		ck_assert_uint_eq(out.u.stop.last_event, ids[i]);
		ck_assert_str_eq(out.u.stop.reason, in.u.stop.reason);
	}
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(ctl_type_name(CTL_CONFIGURE), "configure");
	ck_assert_str_eq(ctl_type_name(CTL_STATE), "state");
	ck_assert_str_eq(ctl_type_name(CTL_RESET), "reset");
	ck_assert_str_eq(ctl_type_name(CTL_SHUTDOWN), "shutdown");
	ck_assert_str_eq(ctl_channel_name(CTL_CHANNEL_SESSION), "session");
	static const char *const states[] = { "idle", "configured", "error" };
	for (unsigned i = 0; i < 3; i++) {
		enum ctl_session_state s;
		ck_assert_str_eq(ctl_session_state_name((enum ctl_session_state)i), states[i]);
		ck_assert(ctl_session_state_parse(states[i], &s));
		ck_assert_uint_eq(s, i);
	}
	enum ctl_session_state s;
	ck_assert(!ctl_session_state_parse("running", &s));
	ck_assert_str_eq(ctl_session_state_name((enum ctl_session_state)3), "unknown");
}
END_TEST

/* The encoder refuses a run of 0, a state outside the enum and a command
 * line with a control byte, as the decoder would. */
START_TEST(test_encode_refuses)
{
	memset(&in, 0, sizeof in);
	in.type = CTL_CONFIGURE;
	in.u.configure.run = 0;
	strcpy(in.u.configure.args, "--run=1");
	ck_assert_uint_eq(ctl_encode(&in, buf, sizeof buf), 0);
	in.u.configure.run = 1;
	strcpy(in.u.configure.args, "--out\t/tmp");
	ck_assert_uint_eq(ctl_encode(&in, buf, sizeof buf), 0);
	strcpy(in.u.configure.args, "--out\x1b[2J");
	ck_assert_uint_eq(ctl_encode(&in, buf, sizeof buf), 0);
	memset(in.u.configure.args, 'a', sizeof in.u.configure.args);     /* no NUL */
	ck_assert_uint_eq(ctl_encode(&in, buf, sizeof buf), 0);

	memset(&in, 0, sizeof in);
	in.type = CTL_STATE;
	in.u.state.state = (enum ctl_session_state)3;
	ck_assert_uint_eq(ctl_encode(&in, buf, sizeof buf), 0);
}
END_TEST

/* ---- hand-made bodies ----------------------------------------------------- */

struct body {
	uint8_t bytes[CTL_MAX_MESSAGE_BYTES + 64];
	size_t n;
};
static struct body body;

static int body_write(void *data, const char *p, size_t n)
{
	struct body *b = data;
	if (b->n + n > sizeof b->bytes)
		return -1;
	memcpy(b->bytes + b->n, p, n);
	b->n += n;
	return 0;
}

static msgpack_packer pk;

static msgpack_packer *body_start(unsigned keys, const char *type)
{
	body.n = CTL_LENGTH_BYTES;
	msgpack_packer_init(&pk, &body, body_write);
	msgpack_pack_map(&pk, keys + 1);
	msgpack_pack_str_with_body(&pk, "type", 4);
	msgpack_pack_str_with_body(&pk, type, strlen(type));
	return &pk;
}

static void key(const char *k)
{
	msgpack_pack_str_with_body(&pk, k, strlen(k));
}

static void expect_error(int line, const char *want)
{
	size_t len = body.n - CTL_LENGTH_BYTES;
	body.bytes[0] = (uint8_t)(len >> 24);
	body.bytes[1] = (uint8_t)(len >> 16);
	body.bytes[2] = (uint8_t)(len >> 8);
	body.bytes[3] = (uint8_t)len;
	char err[256] = "";
	long r = ctl_decode(body.bytes, body.n, &out, NULL, err, sizeof err);
	ck_assert_msg(r == -1, "line %d: accepted, expected '%s'", line, want);
	ck_assert_msg(strstr(err, want) != NULL, "line %d: '%s' does not say '%s'", line, err,
		      want);
}
#define EXPECT_ERROR(want) expect_error(__LINE__, want)

/* A state with one field replaced: kind 0 a uint for "accepted", 1 an
 * unknown state, 2 a state of the wrong type, 3 "accepted" missing. */
static void pack_state(int kind)
{
	body_start(kind == 3 ? 4 : 5, "state");
	key("run");
	msgpack_pack_uint32(&pk, 7);
	key("state");
	if (kind == 1)
		msgpack_pack_str_with_body(&pk, "running", 7);
	else if (kind == 2)
		msgpack_pack_uint32(&pk, 1);
	else
		msgpack_pack_str_with_body(&pk, "idle", 4);
	if (kind != 3) {
		key("accepted");
		if (kind == 0)
			msgpack_pack_uint32(&pk, 1);
		else
			msgpack_pack_true(&pk);
	}
	key("reason");
	msgpack_pack_str_with_body(&pk, "", 0);
	key("status");
	msgpack_pack_int32(&pk, 0);
}

/* A STOP whose last_event is kind 0 negative, 1 a string, 2 a real, 3
 * missing (a STOP of before the drained stop). */
static void pack_stop(int kind)
{
	body_start(kind == 3 ? 2 : 3, "stop");
	key("source");
	msgpack_pack_uint32(&pk, CTL_STOP_ALL);
	if (kind != 3) {
		key("last_event");
		if (kind == 0)
			msgpack_pack_int64(&pk, -1);
		else if (kind == 1)
			msgpack_pack_str_with_body(&pk, "500", 3);
		else
			msgpack_pack_double(&pk, 500.0);
	}
	key("reason");
	msgpack_pack_str_with_body(&pk, "operator stop", 13);
}

START_TEST(test_bad_stop)
{
	pack_stop(0);
	EXPECT_ERROR("key 'last_event' in stop");
	pack_stop(1);
	EXPECT_ERROR("key 'last_event' in stop is a str, expected uint");
	pack_stop(2);
	EXPECT_ERROR("key 'last_event' in stop");
	pack_stop(3);
	EXPECT_ERROR("missing key 'last_event' in stop");
}
END_TEST

START_TEST(test_bad_fields)
{
	pack_state(0);
	EXPECT_ERROR("key 'accepted' in state is a uint, expected bool");
	pack_state(1);
	EXPECT_ERROR("key 'state' in state is 'running', not a known value");
	pack_state(2);
	EXPECT_ERROR("key 'state' in state is a uint, expected str");
	pack_state(3);
	EXPECT_ERROR("missing key 'accepted' in state");

	body_start(2, "configure");
	key("run");
	msgpack_pack_uint32(&pk, 0);
	key("args");
	msgpack_pack_str_with_body(&pk, "--run=1", 7);
	EXPECT_ERROR("key 'run' in configure is 0, less than 1");

	body_start(2, "configure");
	key("run");
	msgpack_pack_uint32(&pk, 3);
	key("args");
	msgpack_pack_str_with_body(&pk, "--out\t/tmp", 10);
	EXPECT_ERROR("key 'args' in configure has byte 0x09 at offset 5");

	static char longer[CTL_MAX_ARGS_TEXT + 1];
	memset(longer, 'a', sizeof longer);
	body_start(2, "configure");
	key("run");
	msgpack_pack_uint32(&pk, 3);
	key("args");
	msgpack_pack_str_with_body(&pk, longer, CTL_MAX_ARGS_TEXT);
	EXPECT_ERROR("key 'args' in configure");

	body_start(0, "shutdown");
	EXPECT_ERROR("missing key 'reason' in shutdown");

	body_start(9, "hello");
	const char *keys[] = { "role", "id", "channel", "run_id", "protocol", "pid", "host",
			       "rail", "rails" };
	for (unsigned i = 0; i < 9; i++) {
		key(keys[i]);
		if (i == 0)
			msgpack_pack_str_with_body(&pk, "reader", 6);
		else if (i == 2)
			msgpack_pack_str_with_body(&pk, "sessions", 8);
		else if (i == 6)
			msgpack_pack_str_with_body(&pk, "h", 1);
		else
			msgpack_pack_uint32(&pk, i == 4 ? CTL_PROTOCOL_VERSION : 1);
	}
	EXPECT_ERROR("key 'channel' in hello is 'sessions', not a known value");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("control_session");
	TCase *tc = tcase_create("session");
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_encode_refuses);
	tcase_add_test(tc, test_bad_fields);
	tcase_add_test(tc, test_stop_last_event);
	tcase_add_test(tc, test_bad_stop);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
