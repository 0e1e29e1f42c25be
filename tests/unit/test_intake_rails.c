/* Unit tests of readoutd's lanes (readoutd/intake_route.c over
 * readoutd/outq.c): links of several rails, one destination per
 * connection. Frames are written into one end of a real socketpair adopted
 * as a source's connection, with a real libevent loop; what each
 * connection is to write is read back from the feed, frame by frame. Each
 * frame must be on its lane's connection (core/rails.h), in ID order, the
 * source's END on every connection, a source's buffer reclaimed only up to
 * its oldest frame not yet written to any connection, and a lost builder's
 * frames dropped from all of its connections. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/rails.h"
#include "readoutd/intake.h"
#include "sys/log.h"
#include "wire/frame.h"

#define RUN 7u
#define PAYLOAD 60u
#define FRAME (FRM_HEADER_BYTES + PAYLOAD)
#define EVENTS 300u

static struct event_base *base;
static struct rdr_options opt;
static struct intake *in;
static int progress;

static void on_progress(void *arg)
{
	(void)arg;
	progress++;
}

static void on_given_up(void *arg, uint16_t source, uint64_t idle_ms)
{
	(void)arg;
	(void)source;
	(void)idle_ms;
}

static const struct intake_events events = { on_progress, on_given_up };

static void setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR);
	base = event_base_new();
	memset(&opt, 0, sizeof opt);
	opt.id = 1;
	opt.run_id = RUN;
	opt.sources[0] = 3;
	opt.source_count = 1;
	opt.max_fragment_bytes = 4096;
	opt.batch_bytes = 65536;
	opt.quiet = true;
	progress = 0;
	in = NULL;
}

static void teardown(void)
{
	intake_destroy(in);
	event_base_free(base);
}

static size_t frame(uint8_t *dst, uint64_t ev, bool end)
{
	uint8_t payload[PAYLOAD];
	memset(payload, (int)(ev & 0xff), sizeof payload);
	struct frm_header h = { .flags = end ? FRM_FLAG_END : 0, .source_id = 3, .run_id = RUN,
				.event_id = ev, .sequence = ev, .payload_len = end ? 0 : PAYLOAD };
	return frm_encode(dst, &h, payload);
}

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

/* Source 3 streams events 0 .. EVENTS-1 and its END; the writing end. */
static int stream_source(void)
{
	static uint8_t buf[(EVENTS + 1) * FRAME];
	size_t n = 0;
	for (uint64_t ev = 0; ev < EVENTS; ev++)
		n += frame(buf + n, ev, false);
	n += frame(buf + n, EVENTS, true);
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(intake_adopt(in, 3, sv[0], "test"), 0);
	ck_assert_int_eq(write(sv[1], buf, n), (ssize_t)n);
	return sv[1];
}

/* What destination d is to write, as event IDs (UINT64_MAX for an END);
 * the count. The frames stay queued. */
static size_t queued(uint32_t d, uint64_t *ids, size_t max)
{
	struct fwd_feed f = intake_feed(in);
	struct iovec iov[64];
	int n = f.gather(f.arg, d, iov, 64);
	size_t count = 0;
	for (int k = 0; k < n; k++) {
		for (size_t off = 0; off < iov[k].iov_len; ) {
			struct frm_header h;
			frm_parse_header((const uint8_t *)iov[k].iov_base + off, &h);
			ck_assert_uint_lt(count, max);
			ids[count++] = (h.flags & FRM_FLAG_END) ? UINT64_MAX : h.event_id;
			off += FRM_HEADER_BYTES + h.payload_len;
		}
	}
	return count;
}

/* Writes all of d's queue. */
static void drain(uint32_t d)
{
	struct fwd_feed f = intake_feed(in);
	struct iovec iov[64];
	int n = f.gather(f.arg, d, iov, 64);
	size_t bytes = 0;
	for (int k = 0; k < n; k++)
		bytes += iov[k].iov_len;
	f.consumed(f.arg, d, bytes);
	f.moved(f.arg);
}

/* Each of link b's connections holds exactly its lane's events (lane():
 * b * 16 + rail), in order, then the END. */
static void check_lanes(uint32_t b, uint32_t (*lane)(uint64_t ev), uint32_t rails)
{
	static uint64_t ids[EVENTS + 2];
	ck_assert_uint_eq(intake_link_rails(in, b), rails);
	for (uint32_t k = 0; k < rails; k++) {
		size_t n = queued(intake_connection(in, b, k), ids, EVENTS + 2);
		ck_assert_uint_gt(n, 1);
		size_t i = 0;
		for (uint64_t ev = 0; ev < EVENTS; ev++)
			if (lane(ev) == b * 16 + k) {
				ck_assert_uint_lt(i, n);
				ck_assert_uint_eq(ids[i], ev);
				i++;
			}
		ck_assert_uint_eq(i + 1, n);
		ck_assert_uint_eq(ids[i], UINT64_MAX);
	}
}

static uint32_t credit_lane(uint64_t ev)
{
	return rails_lane(ev / RAILS_SPAN_EVENTS, 3);
}

/* The one builder over three rails: event e on rail (e / 64) mod 3. The
 * rails write in any order; the buffer is reclaimed up to the oldest frame
 * any of them still has to write. */
START_TEST(test_credit_lanes)
{
	opt.link_count = 1;
	opt.links[0].rails = 3;
	in = intake_create(base, &opt, &events, NULL);
	ck_assert_ptr_nonnull(in);
	ck_assert_uint_eq(intake_connection_count(in), 3);
	intake_admit(in, EVENTS);
	int fd = stream_source();
	settle();
	check_lanes(0, credit_lane, 3);
	/* Rails 1 and 2 write everything; rail 0 still holds events 0 .. 63,
	 * so source 3's buffer keeps all from event 0. */
	drain(1);
	drain(2);
	struct intake_view v;
	intake_view(in, 0, &v);
	ck_assert_uint_eq(v.buffered_bytes, EVENTS * FRAME + FRM_HEADER_BYTES);
	ck_assert(intake_connection_unsent(in, 0));
	ck_assert(!intake_connection_unsent(in, 1));
	drain(0);
	intake_view(in, 0, &v);
	ck_assert_uint_eq(v.buffered_bytes, 0);
	ck_assert_uint_eq(v.c.frames_forwarded, EVENTS);
	struct intake_link_view lv, rv;
	intake_link_view(in, 0, &lv);
	ck_assert_uint_eq(lv.frames_forwarded, EVENTS);
	ck_assert_uint_eq(lv.end_frames, 3);
	uint64_t sum = 0;
	for (uint32_t k = 0; k < 3; k++) {
		intake_rail_view(in, 0, k, &rv);
		ck_assert_uint_eq(rv.end_frames, 1);
		sum += rv.frames_forwarded;
	}
	ck_assert_uint_eq(sum, EVENTS);
	close(fd);
}
END_TEST

/* Batches of 4 and their builders, in assignment order: builder 0's
 * ordinals 0, 1, 2, ... decide its rail whatever builder 1's batches
 * between them. */
static const uint32_t owner[EVENTS / 4] = {
	0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0,
	0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0,
	0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0,
};

/* b * 16 + rail: builder 0 has 2 rails, builder 1 one. */
static uint32_t routed_lane(uint64_t ev)
{
	uint32_t b = owner[ev / 4], ordinal = 0;
	for (uint64_t k = 0; k < ev / 4; k++)
		ordinal += owner[k] == b;
	return b * 16 + (b == 0 ? ordinal % 2 : 0);
}

/* Two builders, the first over two rails, the second over one: each frame
 * on its builder's lane, the source's END on all three connections; the
 * first builder lost: both of its connections close and what they held is
 * counted lost. */
START_TEST(test_routing_lanes_and_a_lost_builder)
{
	opt.routing = true;
	opt.link_count = 2;
	opt.links[0].rails = 2;
	opt.links[1].rails = 1;
	in = intake_create(base, &opt, &events, NULL);
	ck_assert_ptr_nonnull(in);
	ck_assert_uint_eq(intake_connection_count(in), 3);
	ck_assert_uint_eq(intake_connection(in, 1, 0), 2);
	char why[256];
	struct evm_plan plan = { .builders = 2, .first_event = 0, .events = EVENTS, .batch = 4,
				 .window_batches = EVENTS / 4 };
	ck_assert_int_eq(intake_plan(in, &plan, why, sizeof why), 0);
	for (uint64_t k = 0; k < EVENTS / 4; k++) {
		struct evm_assignment a = { .first = 4 * k, .count = 4, .builder = owner[k] };
		ck_assert_int_eq(intake_assign(in, &a, 0, why, sizeof why), 0);
	}
	int fd = stream_source();
	settle();
	check_lanes(0, routed_lane, 2);
	check_lanes(1, routed_lane, 1);
	drain(intake_connection(in, 1, 0));
	drain(intake_connection(in, 0, 1));
	uint64_t zero_rail0 = 0, lost;
	for (uint64_t ev = 0; ev < EVENTS; ev++)
		zero_rail0 += routed_lane(ev) == 0;
	ck_assert_int_eq(intake_lose(in, 0, &lost), 0);
	ck_assert_uint_eq(lost, zero_rail0);
	struct intake_link_view lv;
	intake_link_view(in, 0, &lv);
	ck_assert(lv.closed);
	ck_assert_uint_eq(lv.frames_lost, zero_rail0);
	ck_assert_uint_eq(lv.end_frames, 1);
	ck_assert(!intake_link_unsent(in, 0));
	struct intake_view v;
	intake_view(in, 0, &v);
	ck_assert_uint_eq(v.buffered_bytes, 0);
	ck_assert_uint_eq(v.c.frames_forwarded + v.c.frames_lost_builder, EVENTS);
	close(fd);
}
END_TEST

/* Each connection has its own --pending-frames: a source blocked on one
 * rail's full queue goes on once that rail drains. */
START_TEST(test_pending_limit_per_connection)
{
	opt.link_count = 1;
	opt.links[0].rails = 2;
	opt.pending_frames = 8;
	in = intake_create(base, &opt, &events, NULL);
	intake_admit(in, EVENTS);
	int fd = stream_source();
	settle();
	static uint64_t ids[EVENTS + 2];
	/* Rail 0 takes events 0 .. 7 and the source blocks on the ninth. */
	ck_assert_uint_eq(queued(0, ids, EVENTS + 2), 8);
	ck_assert_uint_eq(queued(1, ids, EVENTS + 2), 0);
	for (int round = 0; round < 200 && (intake_connection_unsent(in, 0) ||
					    intake_connection_unsent(in, 1)); round++) {
		drain(0);
		drain(1);
		settle();
	}
	struct intake_view v;
	intake_view(in, 0, &v);
	ck_assert_int_eq(v.state, INTAKE_ENDED);
	ck_assert_uint_eq(v.c.frames_forwarded, EVENTS);
	struct intake_link_view rv;
	for (uint32_t k = 0; k < 2; k++) {
		intake_rail_view(in, 0, k, &rv);
		ck_assert_uint_le(rv.q.peak_frames, 8);
		ck_assert_uint_gt(rv.q.refused, 0);
	}
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("intake_rails");
	TCase *tc = tcase_create("socketpair");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_credit_lanes);
	tcase_add_test(tc, test_routing_lanes_and_a_lost_builder);
	tcase_add_test(tc, test_pending_limit_per_connection);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
