/* Unit tests of readoutd's intake (readoutd/intake_source.c, intake_route.c): frames written into
 * one end of a real socketpair, the other end adopted as a source's data
 * connection, and a real libevent loop; what the intake verified, held,
 * refused and counted is read through its views and its feed. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "readoutd/intake.h"
#include "sys/log.h"
#include "wire/frame.h"

#define RUN 7u
#define PAYLOAD 100u
#define FRAME (FRM_HEADER_BYTES + PAYLOAD)

static struct event_base *base;
static struct rdr_options opt;
static struct intake *in;
static int progress;
static uint16_t given_up;

static void on_progress(void *arg)
{
	(void)arg;
	progress++;
}

static void on_given_up(void *arg, uint16_t source, uint64_t idle_ms)
{
	(void)arg;
	(void)idle_ms;
	given_up = source;
}

static const struct intake_events events = { on_progress, on_given_up };

static void setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR);
	base = event_base_new();
	memset(&opt, 0, sizeof opt);
	opt.id = 1;
	opt.run_id = RUN;
	snprintf(opt.listen_host, sizeof opt.listen_host, "127.0.0.1");
	opt.sources[0] = 3;
	opt.sources[1] = 5;
	opt.source_count = 2;
	opt.max_fragment_bytes = 4096;
	opt.batch_bytes = 65536;
	opt.handshake_timeout_ms = 1000;
	opt.quiet = true;
	progress = 0;
	given_up = 0;
	in = intake_create(base, &opt, &events, NULL);
	ck_assert_ptr_nonnull(in);
}

static void teardown(void)
{
	intake_destroy(in);
	event_base_free(base);
}

/* A frame of source src for event ev: flags END when end (no payload). */
static size_t frame(uint8_t *dst, uint16_t src, uint64_t ev, bool end)
{
	uint8_t payload[PAYLOAD];
	memset(payload, (int)(ev & 0xff), sizeof payload);
	struct frm_header h = { .flags = end ? FRM_FLAG_END : 0, .source_id = src, .run_id = RUN,
				.event_id = ev, .sequence = ev, .payload_len = end ? 0 : PAYLOAD };
	return frm_encode(dst, &h, payload);
}

/* A source's connection adopted by the intake: returns the writing end. */
static int connect_source(uint16_t id)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(intake_adopt(in, id, sv[0], "test"), 0);
	return sv[1];
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
	ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
}

/* Runs the loop until nothing happened for a few rounds. */
static void settle(void)
{
	for (int idle = 0, seen = progress; idle < 5; ) {
		struct timeval tv = { 0, 2000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		if (progress == seen)
			idle++;
		else
			idle = 0, seen = progress;
	}
}

static void view(size_t i, struct intake_view *v)
{
	intake_view(in, i, v);
}

/* The bytes the builder's link (destination 0) has yet to write, from
 * every source; *first (may be NULL) the first run. */
static size_t pending(struct fwd_feed *f, struct iovec *first)
{
	struct iovec iov[16];
	int n = f->gather(f->arg, 0, iov, 16);
	size_t bytes = 0;
	for (int k = 0; k < n; k++)
		bytes += iov[k].iov_len;
	if (first != NULL && n > 0)
		*first = iov[0];
	return bytes;
}

START_TEST(test_verify_and_hold)
{
	uint8_t buf[8 * FRAME];
	size_t n = 0;
	for (uint64_t ev = 0; ev < 5; ev++)
		n += frame(buf + n, 3, ev, false);
	int fd = connect_source(3);
	send_all(fd, buf, n);
	settle();
	struct intake_view v;
	struct fwd_feed feed = intake_feed(in);
	/* Nothing admitted yet: the first frame is verified and held. */
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_STREAMING);
	ck_assert(v.held);
	ck_assert_uint_eq(v.c.frames_verified, 1);
	ck_assert_uint_eq(v.c.held_count, 1);
	ck_assert_uint_eq(pending(&feed, NULL), 0);
	/* Events below 3 pass; the fourth frame is held. */
	intake_admit(in, 3);
	settle();
	view(0, &v);
	ck_assert(v.held);
	ck_assert_uint_eq(v.c.frames_verified, 4);
	ck_assert_uint_eq(v.c.held_count, 2);
	struct iovec run;
	ck_assert_uint_eq(pending(&feed, &run), 3 * FRAME);
	ck_assert_uint_eq(run.iov_len, 3 * FRAME);
	ck_assert_mem_eq(run.iov_base, buf, 3 * FRAME);
	feed.consumed(feed.arg, 0, 3 * FRAME);
	feed.moved(feed.arg);
	ck_assert(intake_unsent(in) == false);
	/* A lower limit is no news; a higher one passes the rest, then END. */
	intake_admit(in, 2);
	ck_assert_uint_eq(intake_limit(in), 3);
	intake_admit(in, 100);
	n = frame(buf, 3, 5, true);
	send_all(fd, buf, n);
	settle();
	view(0, &v);
	ck_assert(!v.held);
	ck_assert_int_eq(v.state, INTAKE_ENDED);
	ck_assert_uint_eq(v.c.frames_verified, 5);
	ck_assert_uint_eq(v.c.end_frames, 1);
	ck_assert_uint_eq(v.c.frames_rejected, 0);
	ck_assert_uint_eq(pending(&feed, NULL), 2 * FRAME + FRM_HEADER_BYTES);
	ck_assert(!intake_over(in));   /* source 5 never came */
	ck_assert(!intake_failed(in));
	intake_close_books(in);
	view(0, &v);
	ck_assert_uint_eq(v.c.frames_held_at_end, 2);
	ck_assert_uint_eq(v.c.frames_forwarded, 3);
	close(fd);
}
END_TEST

START_TEST(test_bad_frames_close_the_source)
{
	intake_admit(in, 1000);
	uint8_t buf[4 * FRAME];
	size_t n = frame(buf, 3, 0, false);
	size_t bad = frame(buf + n, 3, 1, false);
	buf[n + bad - 1] ^= 0x5a;     /* payload byte: CRC mismatch */
	n += bad;
	n += frame(buf + n, 3, 2, false);
	int fd3 = connect_source(3);
	send_all(fd3, buf, n);
	/* Source 5 sends a frame that claims to be source 3's. */
	uint8_t other[FRAME];
	size_t m = frame(other, 3, 0, false);
	int fd5 = connect_source(5);
	send_all(fd5, other, m);
	settle();
	struct intake_view v;
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_FAILED);
	ck_assert_uint_eq(v.c.frames_verified, 1);
	ck_assert_uint_eq(v.c.frames_rejected, 1);
	ck_assert_uint_eq(v.c.err_crc, 1);
	view(1, &v);
	ck_assert_int_eq(v.state, INTAKE_FAILED);
	ck_assert_uint_eq(v.c.frames_rejected, 1);
	ck_assert_uint_eq(v.c.frames_verified, 0);
	ck_assert(intake_failed(in));
	ck_assert(intake_over(in));
	/* The good frame before the bad one is still there to forward. */
	struct fwd_feed feed = intake_feed(in);
	ck_assert_uint_eq(pending(&feed, NULL), FRAME);   /* all source 3's */
	close(fd3);
	close(fd5);
}
END_TEST

START_TEST(test_connection_ends)
{
	intake_admit(in, 1000);
	uint8_t buf[3 * FRAME];
	/* Source 3: a frame, then half of one, then the connection closes. */
	size_t n = frame(buf, 3, 0, false);
	n += frame(buf + n, 3, 1, false) / 2;
	int fd3 = connect_source(3);
	send_all(fd3, buf, n);
	close(fd3);
	/* Source 5: END, then bytes after it. */
	size_t m = frame(buf, 5, 0, true);
	m += frame(buf + m, 5, 1, false);
	int fd5 = connect_source(5);
	send_all(fd5, buf, m);
	settle();
	struct intake_view v;
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_FAILED);
	ck_assert_uint_eq(v.c.err_truncated, 1);
	ck_assert_uint_eq(v.c.frames_verified, 1);
	ck_assert_uint_eq(v.c.frames_received, 2);
	view(1, &v);
	ck_assert_int_eq(v.state, INTAKE_ENDED);
	ck_assert_uint_eq(v.c.err_after_end, 1);
	ck_assert_uint_eq(v.c.end_frames, 1);
	ck_assert(intake_failed(in));
	close(fd5);
}
END_TEST

START_TEST(test_slots)
{
	intake_admit(in, 1000);
	/* A connection that closes before a byte frees the slot again. */
	int fd = connect_source(3);
	close(fd);
	settle();
	struct intake_view v;
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_WAITING);
	ck_assert(!intake_failed(in));
	fd = connect_source(3);
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(intake_adopt(in, 3, sv[0], "again"), -EBUSY);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv + 0), 0);
	ck_assert_int_eq(intake_adopt(in, 9, sv[0], "stranger"), -ENOENT);
	close(sv[1]);
	/* A frame, then closed without END; source 5 dropped at the
	 * builder's request. */
	uint8_t buf[FRAME];
	send_all(fd, buf, frame(buf, 3, 0, false));
	close(fd);
	ck_assert(intake_drop(in, 5, "test"));
	ck_assert(!intake_drop(in, 5, "twice"));
	settle();
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_FAILED);
	ck_assert_uint_eq(v.c.err_no_end, 1);
	ck_assert_uint_eq(v.c.frames_verified, 1);
	view(1, &v);
	ck_assert_uint_eq(v.c.err_dropped, 1);
	ck_assert(intake_over(in));
}
END_TEST

START_TEST(test_idle_limit)
{
	intake_destroy(in);
	opt.source_idle_timeout_ms = 40;
	in = intake_create(base, &opt, &events, NULL);
	ck_assert_ptr_nonnull(in);
	intake_admit(in, 1000);
	uint8_t buf[2 * FRAME];
	size_t n = frame(buf, 3, 0, false);
	n += 10;                         /* and the start of a frame that never ends */
	frame(buf + FRAME, 3, 1, false);
	int fd = connect_source(3);
	send_all(fd, buf, n);
	for (int i = 0; i < 200 && given_up == 0; i++) {
		struct timeval tv = { 0, 2000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	ck_assert_uint_eq(given_up, 3);
	struct intake_view v;
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_FAILED);
	ck_assert_uint_eq(v.c.err_idle, 1);
	close(fd);
}
END_TEST

/* Routing over two builders (batches of 4 alternating): each frame goes to
 * its batch's destination, a frame not yet assigned holds the source, a
 * full queue (2 frames) blocks it until the destination drains, retired
 * IDs are late, IDs outside the run rejected, a lost builder's frames
 * counted lost, END to every open destination; the books balance. */
START_TEST(test_routing_over_two_builders)
{
	intake_destroy(in);
	opt.routing = true;
	opt.link_count = 2;
	opt.pending_frames = 2;
	in = intake_create(base, &opt, &events, NULL);
	ck_assert_ptr_nonnull(in);
	char why[256];
	struct evm_plan plan = { .builders = 3, .first_event = 0, .events = 20, .batch = 4,
				 .window_batches = 16 };
	ck_assert_int_eq(intake_plan(in, &plan, why, sizeof why), -EINVAL);
	ck_assert_str_eq(why, "the run has 3 builders but this reader has --builder links to 2 (0 .. 1)");
	struct evm_assignment a = { .first = 0, .count = 4, .builder = 0 };
	ck_assert_int_eq(intake_assign(in, &a, 0, why, sizeof why), -EPROTO);
	plan.builders = 2;
	ck_assert_int_eq(intake_plan(in, &plan, why, sizeof why), 0);
	ck_assert_int_eq(intake_plan(in, &plan, why, sizeof why), -EEXIST);
	uint8_t buf[32 * FRAME];
	size_t n = 0;
	for (uint64_t ev = 0; ev < 22; ev++)   /* 20 and 21 are outside the run */
		n += frame(buf + n, 3, ev, false);
	n += frame(buf + n, 3, 22, true);
	int fd = connect_source(3);
	send_all(fd, buf, n);
	settle();
	struct intake_view v;
	view(0, &v);
	ck_assert(v.held);                       /* nothing assigned yet */
	/* Batches 0 (IDs 0..3) to builder 0 and 1 (4..7) to builder 1: the
	 * queues take two frames each, so the third of batch 0 blocks. */
	ck_assert_int_eq(intake_assign(in, &a, 0, why, sizeof why), 0);
	a = (struct evm_assignment){ .first = 4, .count = 4, .builder = 1 };
	ck_assert_int_eq(intake_assign(in, &a, 0, why, sizeof why), 0);
	settle();
	struct fwd_feed feed = intake_feed(in);
	struct iovec iov[8];
	ck_assert_int_eq(feed.gather(feed.arg, 0, iov, 8), 1);
	ck_assert_uint_eq(iov[0].iov_len, 2 * FRAME);
	ck_assert_int_eq(feed.gather(feed.arg, 1, iov, 8), 0);
	struct intake_link_view lv;
	intake_link_view(in, 0, &lv);
	ck_assert_uint_eq(lv.q.refused, 1);
	/* Destination 0 drains: the source goes on to batch 1, for 1. */
	feed.consumed(feed.arg, 0, 2 * FRAME);
	feed.moved(feed.arg);
	settle();
	ck_assert_int_eq(feed.gather(feed.arg, 0, iov, 8), 1);
	ck_assert_uint_eq(iov[0].iov_len, 2 * FRAME);
	ck_assert_int_eq(feed.gather(feed.arg, 1, iov, 8), 1);
	ck_assert_uint_eq(iov[0].iov_len, 2 * FRAME);
	feed.consumed(feed.arg, 0, 2 * FRAME);
	feed.consumed(feed.arg, 1, 2 * FRAME);
	feed.moved(feed.arg);
	settle();
	/* Builder 1 is lost with IDs 6, 7 queued; batch 3 (12..15), its own,
	 * is lost as it comes. Batches 2 and 4 go to builder 0, which drains
	 * two frames at a time (its queue's limit); the last record retires
	 * the IDs below 16, long sent. */
	uint64_t lost;
	ck_assert_int_eq(intake_lose(in, 1, &lost), 0);
	ck_assert_uint_eq(lost, 2);
	for (uint64_t first = 8; first < 20; first += 4) {
		a = (struct evm_assignment){ .first = first, .count = 4,
					     .builder = (uint32_t)((first / 4) % 2) };
		ck_assert_int_eq(intake_assign(in, &a, first == 16 ? 16 : 0, why, sizeof why), 0);
		feed.consumed(feed.arg, 0, 4 * FRAME);
		feed.moved(feed.arg);
		settle();
	}
	a = (struct evm_assignment){ .first = 20, .count = 4, .builder = 0 };
	ck_assert_int_eq(intake_assign(in, &a, 16, why, sizeof why), -EINVAL);
	view(0, &v);
	ck_assert_int_eq(v.state, INTAKE_ENDED);
	ck_assert_uint_eq(v.c.frames_received, 22);
	ck_assert_uint_eq(v.c.err_event_id, 2);
	ck_assert_uint_eq(v.c.frames_rejected, 2);
	ck_assert_uint_eq(v.c.frames_lost_builder, 2 + 4);
	ck_assert(intake_failed(in));
	intake_close_books(in);
	view(0, &v);
	/* Builder 0 wrote 0..3, 8..11, 16, 17; builder 1 4, 5; 18, 19 and END
	 * are still queued for builder 0. */
	ck_assert_uint_eq(v.c.frames_forwarded, 12);
	ck_assert_uint_eq(v.c.frames_held_at_end, 2);
	ck_assert_uint_eq(v.c.frames_late, 0);
	ck_assert_uint_eq(v.c.frames_received,
			  v.c.frames_forwarded + v.c.frames_rejected + v.c.frames_held_at_end +
			  v.c.frames_late + v.c.frames_lost_builder);
	intake_link_view(in, 1, &lv);
	ck_assert(lv.closed);
	ck_assert_uint_eq(lv.frames_forwarded, 2);
	ck_assert_uint_eq(lv.end_frames, 0);
	intake_link_view(in, 0, &lv);
	ck_assert_uint_le(lv.q.peak_frames, 2);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("intake");
	TCase *tc = tcase_create("socketpair");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_verify_and_hold);
	tcase_add_test(tc, test_routing_over_two_builders);
	tcase_add_test(tc, test_bad_frames_close_the_source);
	tcase_add_test(tc, test_connection_ends);
	tcase_add_test(tc, test_slots);
	tcase_add_test(tc, test_idle_limit);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
