/* Unit tests of common/io/msgseal.c, the seal of a control connection's
 * messages, and of its use by common/io/msgstream.c: a good message in each
 * direction, then a bad tag (a flipped bit, another key, a message reflected
 * back to its sender), a gap, a replay and two messages swapped, each refused
 * by name; over a real socket pair, the stream that receives such a message
 * closes with the named reason and counts it. Also the seal's cost per
 * message, printed (control traffic is at most hundreds of messages a second
 * per peer). */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/msgseal.h"
#include "io/msgstream.h"
#include "sys/log.h"
#include "wire/control.h"

#include "loop.h"
#include "seals.h"

/* One encoded TOKEN-sized message (length and body) to seal. */
static size_t encode(const struct ctl_msg *m, uint8_t *buf, size_t cap)
{
	size_t n = ctl_encode(m, buf, cap);
	ck_assert_uint_gt(n, 0);
	return n;
}

static struct ctl_msg lost_builder(uint32_t b)
{
	struct ctl_msg m = { .type = CTL_LOST };
	m.u.lost.builder = b;
	snprintf(m.u.lost.reason, sizeof m.u.lost.reason, "builder %u is gone", b);
	return m;
}

START_TEST(test_good_messages_both_ways)
{
	struct msgseal dialer, listener;
	test_seal_pair(&dialer, &listener);
	uint8_t msg[256], header[MSGSEAL_HEADER_BYTES];
	struct ctl_msg m = lost_builder(0);
	size_t n = encode(&m, msg, sizeof msg);
	uint64_t seq;
	for (uint64_t i = 0; i < 3; i++) {
		msgseal_seal(&dialer, msg, n, header);
		ck_assert_int_eq(msgseal_open(&listener, header, msg, n, &seq), MSGSEAL_OK);
		ck_assert_uint_eq(seq, i);
		msgseal_seal(&listener, msg, n, header);
		ck_assert_int_eq(msgseal_open(&dialer, header, msg, n, &seq), MSGSEAL_OK);
	}
	ck_assert_uint_eq(listener.received, 3);
	ck_assert_uint_eq(dialer.received, 3);
}
END_TEST

START_TEST(test_bad_tag)
{
	struct msgseal dialer, listener;
	test_seal_pair(&dialer, &listener);
	uint8_t msg[256], header[MSGSEAL_HEADER_BYTES];
	struct ctl_msg m = lost_builder(0);
	size_t n = encode(&m, msg, sizeof msg);
	uint64_t seq;
	msgseal_seal(&dialer, msg, n, header);
	/* A bit flipped in the body, in the tag, in the sequence. */
	for (size_t at = 0; at < n; at++) {
		msg[at] ^= 0x10;
		ck_assert_int_eq(msgseal_open(&listener, header, msg, n, &seq), MSGSEAL_BAD_TAG);
		msg[at] ^= 0x10;
	}
	for (size_t at = 0; at < MSGSEAL_HEADER_BYTES; at++) {
		header[at] ^= 0x01;
		ck_assert_int_eq(msgseal_open(&listener, header, msg, n, &seq), MSGSEAL_BAD_TAG);
		header[at] ^= 0x01;
	}
	/* A message reflected back to its sender: the direction differs. */
	ck_assert_int_eq(msgseal_open(&dialer, header, msg, n, &seq), MSGSEAL_BAD_TAG);
	/* Sealed under another connection's key. */
	unsigned char other[AUTH_SESSION_KEY_BYTES] = { 1 };
	struct msgseal stranger;
	msgseal_init(&stranger, other, true);
	uint8_t forged[MSGSEAL_HEADER_BYTES];
	msgseal_seal(&stranger, msg, n, forged);
	ck_assert_int_eq(msgseal_open(&listener, forged, msg, n, &seq), MSGSEAL_BAD_TAG);
	/* Nothing refused moved the sequence: the genuine one still opens. */
	ck_assert_uint_eq(listener.received, 0);
	ck_assert_int_eq(msgseal_open(&listener, header, msg, n, &seq), MSGSEAL_OK);
	ck_assert_str_eq(msgseal_verdict_text(MSGSEAL_BAD_TAG), "control message failed authentication");
}
END_TEST

/* Three messages sealed in order, opened as a gap, a replay and a swap. */
START_TEST(test_gap_replay_reorder)
{
	struct msgseal dialer, listener;
	test_seal_pair(&dialer, &listener);
	uint8_t msg[3][256], header[3][MSGSEAL_HEADER_BYTES];
	size_t n[3];
	for (int i = 0; i < 3; i++) {
		struct ctl_msg m = lost_builder((uint32_t)i);
		n[i] = encode(&m, msg[i], sizeof msg[i]);
		msgseal_seal(&dialer, msg[i], n[i], header[i]);
	}
	uint64_t seq;
	struct msgseal l = listener;
	/* A gap: the second before the first. */
	ck_assert_int_eq(msgseal_open(&l, header[1], msg[1], n[1], &seq), MSGSEAL_OUT_OF_SEQUENCE);
	ck_assert_uint_eq(seq, 1);
	/* A replay: the first twice. */
	ck_assert_int_eq(msgseal_open(&l, header[0], msg[0], n[0], &seq), MSGSEAL_OK);
	ck_assert_int_eq(msgseal_open(&l, header[0], msg[0], n[0], &seq), MSGSEAL_OUT_OF_SEQUENCE);
	ck_assert_uint_eq(seq, 0);
	/* A swap: the third before the second. */
	ck_assert_int_eq(msgseal_open(&l, header[2], msg[2], n[2], &seq), MSGSEAL_OUT_OF_SEQUENCE);
	ck_assert_int_eq(msgseal_open(&l, header[1], msg[1], n[1], &seq), MSGSEAL_OK);
	ck_assert_int_eq(msgseal_open(&l, header[2], msg[2], n[2], &seq), MSGSEAL_OK);
	/* Another sequence number on a genuine body: the tag covers it. */
	uint8_t moved[MSGSEAL_HEADER_BYTES];
	memcpy(moved, header[0], sizeof moved);
	moved[MSGSEAL_SEQUENCE_BYTES - 1] = 3;
	ck_assert_int_eq(msgseal_open(&l, moved, msg[0], n[0], &seq), MSGSEAL_BAD_TAG);
	ck_assert_str_eq(msgseal_verdict_text(MSGSEAL_OUT_OF_SEQUENCE), "control message out of sequence");
}
END_TEST

/* ---- the stream ---------------------------------------------------------- */

static struct event_base *base;

struct receiver {
	struct msgconn *conn;
	int messages;
	bool closed;
	char reason[256];
};

static void rx_message(struct msgconn *c, const struct ctl_msg *m, uint64_t rx, void *arg)
{
	(void)c;
	(void)m;
	(void)rx;
	((struct receiver *)arg)->messages++;
}

static void rx_close(struct msgconn *c, const char *reason, void *arg)
{
	struct receiver *r = arg;
	msgconn_free(c);
	r->conn = NULL;
	r->closed = true;
	snprintf(r->reason, sizeof r->reason, "%s", reason);
}

static const struct msgconn_ops rx_ops = { .on_message = rx_message, .on_close = rx_close };

/* The hub's end of a stream on a socket pair; the far end's seal and fd,
 * for writing by hand as an on-path attacker would. */
static void stream_pair(struct receiver *r, struct msgseal *far, int *far_fd)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct msgseal near;
	test_seal_pair(far, &near);
	memset(r, 0, sizeof *r);
	r->conn = msgconn_new(base, sv[0], &near, "the far end", &rx_ops, r);
	ck_assert_ptr_nonnull(r->conn);
	*far_fd = sv[1];
}

/* Writes one message sealed with s (NULL: its bytes unsealed, a header of
 * zeros), the header's byte flip flipped when flip >= 0. */
static void write_sealed(int fd, struct msgseal *s, const struct ctl_msg *m, int flip)
{
	uint8_t buf[MSGSEAL_HEADER_BYTES + 512] = { 0 };
	size_t n = encode(m, buf + MSGSEAL_HEADER_BYTES, sizeof buf - MSGSEAL_HEADER_BYTES);
	if (s != NULL)
		msgseal_seal(s, buf + MSGSEAL_HEADER_BYTES, n, buf);
	if (flip >= 0)
		buf[flip] ^= 0x20;
	ck_assert_int_eq(write(fd, buf, MSGSEAL_HEADER_BYTES + n), (ssize_t)(MSGSEAL_HEADER_BYTES + n));
}

static void expect_closed(struct receiver *r, int messages, const char *reason)
{
	test_run_until(base, &r->closed, 2000);
	ck_assert(r->closed);
	ck_assert_int_eq(r->messages, messages);
	ck_assert_msg(strstr(r->reason, reason) != NULL, "closed for '%s', not '%s'", r->reason, reason);
}

START_TEST(test_stream_refuses_by_name)
{
	static struct receiver r;
	struct msgseal far;
	int fd;
	struct ctl_msg lost = lost_builder(0);

	/* Injected: a message no end sealed. */
	uint64_t before = msgconn_refused_total();
	stream_pair(&r, &far, &fd);
	write_sealed(fd, NULL, &lost, -1);
	expect_closed(&r, 0, "control message failed authentication");
	ck_assert_uint_eq(msgconn_refused_total(), before + 1);
	close(fd);

	/* Altered on the way: one byte of the body flipped. */
	stream_pair(&r, &far, &fd);
	write_sealed(fd, &far, &lost, MSGSEAL_HEADER_BYTES + 10);
	expect_closed(&r, 0, "control message failed authentication");
	close(fd);

	/* Replayed: the first message once more after it. */
	stream_pair(&r, &far, &fd);
	struct msgseal again = far;
	write_sealed(fd, &far, &lost, -1);
	write_sealed(fd, &again, &lost, -1);
	expect_closed(&r, 1, "control message out of sequence (sequence 0, expected 1)");
	close(fd);

	/* Reordered: the second before the first. */
	stream_pair(&r, &far, &fd);
	far.sent++;
	write_sealed(fd, &far, &lost, -1);
	expect_closed(&r, 0, "control message out of sequence (sequence 1, expected 0)");
	ck_assert_uint_eq(msgconn_refused_total(), before + 4);
	close(fd);
}
END_TEST

/* What sealing costs: seal and open a TOKEN-sized message many times. */
START_TEST(test_seal_cost)
{
	struct msgseal dialer, listener;
	test_seal_pair(&dialer, &listener);
	struct ctl_msg m = { .type = CTL_TOKEN };
	uint8_t msg[256], header[MSGSEAL_HEADER_BYTES];
	size_t n = encode(&m, msg, sizeof msg);
	enum { ROUNDS = 100000 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	uint64_t seq;
	for (int i = 0; i < ROUNDS; i++) {
		msgseal_seal(&dialer, msg, n, header);
		if (msgseal_open(&listener, header, msg, n, &seq) != MSGSEAL_OK)
			ck_abort_msg("message %d refused", i);
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("test_msgseal: seal + open of a %zu-byte message: %.0f ns of CPU "
	       "(%.3f%% of a core at 1000 messages/s)\n", n, ns / ROUNDS, ns / ROUNDS * 1000 / 1e9 * 100);
	ck_assert_uint_eq(listener.received, ROUNDS);
}
END_TEST

static void stream_setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR + 1);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
}

static void stream_teardown(void)
{
	event_base_free(base);
}

int main(void)
{
	Suite *s = suite_create("msgseal");
	TCase *tc = tcase_create("seal");
	tcase_add_test(tc, test_good_messages_both_ways);
	tcase_add_test(tc, test_bad_tag);
	tcase_add_test(tc, test_gap_replay_reorder);
	tcase_add_test(tc, test_seal_cost);
	suite_add_tcase(s, tc);
	TCase *ts = tcase_create("stream");
	tcase_add_checked_fixture(ts, stream_setup, stream_teardown);
	tcase_add_test(ts, test_stream_refuses_by_name);
	suite_add_tcase(s, ts);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
