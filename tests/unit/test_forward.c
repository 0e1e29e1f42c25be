/* Unit tests of readoutd's forwarder interface (readoutd/forward.c) with
 * the TCP transport (readoutd/fwd_tcp.c) on one end of a real socketpair,
 * fed from plain buffers, and of the intake and the forwarder together: a
 * source's frames in, the builder's bytes out. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "readoutd/forward.h"
#include "readoutd/intake.h"
#include "sys/log.h"
#include "wire/frame.h"

#define RUN 7u
#define SOURCES 3u
#define PAYLOAD 1000u
#define FRAME (FRM_HEADER_BYTES + PAYLOAD)
#define FRAMES 200u

static struct event_base *base;
static struct rdr_options opt;

/* A feed of whole frames from plain buffers, one per source. */
struct tfeed {
	uint8_t *buf[SOURCES];
	size_t len[SOURCES], start[SOURCES];
	int moved;
};

/* Every source with bytes left, in source order: consumed() takes them in
 * the same order, so a half-written frame is always first again. */
static int tf_gather(void *arg, uint32_t d, struct iovec *iov, int max)
{
	struct tfeed *t = arg;
	ck_assert_uint_eq(d, 0);
	int n = 0;
	for (size_t i = 0; i < SOURCES && n < max; i++)
		if (t->len[i] > t->start[i])
			iov[n++] = (struct iovec){ t->buf[i] + t->start[i], t->len[i] - t->start[i] };
	return n;
}

static void tf_consumed(void *arg, uint32_t d, size_t bytes)
{
	struct tfeed *t = arg;
	ck_assert_uint_eq(d, 0);
	for (size_t i = 0; i < SOURCES && bytes > 0; i++) {
		size_t left = t->len[i] - t->start[i];
		size_t take = bytes < left ? bytes : left;
		t->start[i] += take;
		bytes -= take;
	}
	ck_assert_uint_eq(bytes, 0);
}

static void tf_moved(void *arg)
{
	((struct tfeed *)arg)->moved++;
}

/* What the forwarder told us. */
struct told {
	struct fwd *f;
	int progress;
	int failed;
	enum fwd_failure why;
	char refused[256];           /* why a builder refused, or a crossed link */
};

static void on_progress(void *arg)
{
	struct told *t = arg;
	t->progress++;
	fwd_flush(t->f);
}

static void on_failed(void *arg, enum fwd_failure why)
{
	struct told *t = arg;
	t->failed++;
	t->why = why;
}

static void on_refused(void *arg, const char *why)
{
	struct told *t = arg;
	t->failed++;
	snprintf(t->refused, sizeof t->refused, "%s", why);
}

static const struct fwd_events events = { on_progress, on_failed, on_refused };

static void setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR);
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	memset(&opt, 0, sizeof opt);
	opt.id = 1;
	opt.run_id = RUN;
	snprintf(opt.listen_host, sizeof opt.listen_host, "127.0.0.1");
	snprintf(opt.links[0].rail[0].host, sizeof opt.links[0].rail[0].host, "test");
	opt.link_count = 1;
	opt.sources[0] = 3;
	opt.source_count = 1;
	opt.max_fragment_bytes = 4096;
	opt.batch_bytes = 65536;
	opt.handshake_timeout_ms = 1000;
	opt.quiet = true;
}

static void teardown(void)
{
	event_base_free(base);
}

static size_t frame(uint8_t *dst, uint16_t src, uint64_t ev)
{
	uint8_t payload[PAYLOAD];
	memset(payload, (int)((ev + src) & 0xff), sizeof payload);
	struct frm_header h = { .source_id = src, .run_id = RUN, .event_id = ev, .sequence = ev,
				.payload_len = PAYLOAD };
	return frm_encode(dst, &h, payload);
}

static void fill(struct tfeed *t)
{
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < SOURCES; i++) {
		t->buf[i] = malloc(FRAMES * FRAME);
		ck_assert_ptr_nonnull(t->buf[i]);
		for (uint64_t ev = 0; ev < FRAMES; ev++)
			t->len[i] += frame(t->buf[i] + t->len[i], (uint16_t)i, ev);
	}
}

static void unfill(struct tfeed *t)
{
	for (size_t i = 0; i < SOURCES; i++)
		free(t->buf[i]);
}

static struct fwd *open_on(int fd, struct tfeed *t, struct told *told)
{
	struct fwd_feed feed = { tf_gather, tf_consumed, tf_moved, t };
	memset(told, 0, sizeof *told);
	told->f = fwd_tcp_open(base, &opt, 0, fd, &feed, &events, told);
	ck_assert_ptr_nonnull(told->f);
	return told->f;
}

/* What the builder's end received. */
static uint8_t stream[SOURCES * FRAMES * FRAME + 1];
static size_t stream_bytes;

/* Runs the loop and reads the builder's end for up to timeout_ms, or until
 * EOF; returns the bytes received so far. */
static size_t drain(int fd, int timeout_ms)
{
	for (int i = 0; i < timeout_ms; i++) {
		struct timeval tv = { 0, 1000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
		ssize_t r;
		while ((r = read(fd, stream + stream_bytes, sizeof stream - stream_bytes)) > 0)
			stream_bytes += (size_t)r;
		if (r == 0)
			break;
	}
	return stream_bytes;
}

/* Decodes what arrived: every frame whole, each source's in order. */
static void check_stream(uint64_t next[SOURCES])
{
	size_t pos = 0;
	struct frm_decoder d;
	frm_decoder_init(&d, RUN, 4096);
	for (;;) {
		struct frm_header h;
		size_t bytes, need;
		enum frm_status st = frm_decoder_next(&d, stream + pos, stream_bytes - pos, &h,
						      &bytes, &need);
		if (st == FRM_NEED_MORE)
			break;
		ck_assert_int_eq(st, FRM_OK);
		ck_assert_uint_lt(h.source_id, SOURCES);
		ck_assert_uint_eq(h.event_id, next[h.source_id]);
		next[h.source_id]++;
		pos += bytes;
	}
	ck_assert_uint_eq(pos, stream_bytes);   /* no frame cut, none interleaved */
}

START_TEST(test_tcp_forwards_everything_whole)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	/* A small send buffer: writes come short and the socket fills. */
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	struct tfeed t;
	fill(&t);
	struct told told;
	struct fwd *f = open_on(sv[0], &t, &told);
	fwd_flush(f);
	ck_assert(!fwd_closed(f));
	struct fwd_stats st;
	fwd_stats(f, &st);
	ck_assert(!st.shm);
	ck_assert_uint_ge(st.writev_calls, 1);
	ck_assert_uint_lt(st.bytes_forwarded, SOURCES * FRAMES * FRAME);
	uint64_t next[SOURCES] = { 0 };
	stream_bytes = 0;
	for (int round = 0; round < 1000 && drain(sv[1], 2) < SOURCES * FRAMES * FRAME; round++)
		;
	check_stream(next);
	for (size_t i = 0; i < SOURCES; i++) {
		ck_assert_uint_eq(next[i], FRAMES);
		ck_assert_uint_eq(t.start[i], t.len[i]);
	}
	fwd_stats(f, &st);
	ck_assert_uint_eq(st.bytes_forwarded, SOURCES * FRAMES * FRAME);
	ck_assert_int_gt(told.progress, 0);      /* it waited for room */
	ck_assert_int_gt(t.moved, 0);
	ck_assert_int_eq(told.failed, 0);
	fwd_finish(f);
	char c;
	ck_assert_int_eq(read(sv[1], &c, 1), 0);  /* the builder sees the end */
	fwd_destroy(f);
	close(sv[1]);
	unfill(&t);
}
END_TEST

START_TEST(test_tcp_broken_and_stalled)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	struct tfeed t;
	fill(&t);
	/* --forward-stall: nothing more once this much went. */
	opt.forward_stall_bytes = 1;
	struct told told;
	struct fwd *f = open_on(sv[0], &t, &told);
	t.len[1] = t.len[2] = 0;
	t.len[0] = FRAME;
	fwd_flush(f);
	t.len[0] = 2 * FRAME;
	fwd_flush(f);
	struct fwd_stats st;
	fwd_stats(f, &st);
	ck_assert_uint_eq(st.bytes_forwarded, FRAME);
	ck_assert_uint_eq(t.start[0], FRAME);
	fwd_destroy(f);
	close(sv[1]);
	/* The builder's end closed: the path is broken, not the run stopped. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	opt.forward_stall_bytes = 0;
	close(sv[1]);
	f = open_on(sv[0], &t, &told);
	fwd_flush(f);
	ck_assert_int_eq(told.failed, 1);
	ck_assert_int_eq(told.why, FWD_BROKEN);
	ck_assert(fwd_closed(f));
	fwd_flush(f);                  /* no second failure */
	ck_assert_int_eq(told.failed, 1);
	fwd_destroy(f);
	unfill(&t);
}
END_TEST

static int intake_progress;
static struct fwd *intake_fwd;

static void on_intake_progress(void *arg)
{
	(void)arg;
	intake_progress++;
	fwd_flush(intake_fwd);
}

static void on_given_up(void *arg, uint16_t source, uint64_t idle_ms)
{
	(void)arg;
	(void)source;
	(void)idle_ms;
}

START_TEST(test_intake_to_builder)
{
	static const struct intake_events iev = { on_intake_progress, on_given_up };
	opt.sources[0] = 0;
	opt.sources[1] = 1;
	opt.sources[2] = 2;
	opt.source_count = SOURCES;
	opt.batch_bytes = 4096;  /* several reads per source */
	struct intake *in = intake_create(base, &opt, &iev, NULL);
	ck_assert_ptr_nonnull(in);
	int src[SOURCES][2], out[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, out), 0);
	struct fwd_feed feed = intake_feed(in);
	struct told told;
	memset(&told, 0, sizeof told);
	intake_fwd = told.f = fwd_tcp_open(base, &opt, 0, out[0], &feed, &events, &told);
	ck_assert_ptr_nonnull(intake_fwd);
	/* Events below 50 are admitted: the rest stays held at the reader. */
	intake_admit(in, 50);
	static uint8_t buf[FRAMES * FRAME];
	for (size_t i = 0; i < SOURCES; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, src[i]), 0);
		ck_assert_int_eq(intake_adopt(in, (uint16_t)i, src[i][0], "test"), 0);
		size_t n = 0;
		for (uint64_t ev = 0; ev < 80; ev++)
			n += frame(buf + n, (uint16_t)i, ev);
		ck_assert_int_eq(write(src[i][1], buf, n), (ssize_t)n);
	}
	uint64_t next[SOURCES] = { 0 };
	stream_bytes = 0;
	ck_assert_uint_eq(drain(out[1], 100), SOURCES * 50 * FRAME);
	check_stream(next);
	for (size_t i = 0; i < SOURCES; i++) {
		ck_assert_uint_eq(next[i], 50);
		struct intake_view v;
		intake_view(in, i, &v);
		ck_assert(v.held);
		ck_assert_uint_eq(v.c.frames_verified, 51);
	}
	ck_assert(!intake_unsent(in));
	fwd_destroy(intake_fwd);
	intake_destroy(in);
	for (size_t i = 0; i < SOURCES; i++)
		close(src[i][1]);
	close(out[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("forward");
	TCase *tc = tcase_create("socketpair");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tcp_forwards_everything_whole);
	tcase_add_test(tc, test_tcp_broken_and_stalled);
	tcase_add_test(tc, test_intake_to_builder);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
