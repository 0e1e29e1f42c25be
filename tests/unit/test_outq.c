/* Unit tests of readoutd's destination queues (readoutd/outq.c): frames of
 * several sources for several destinations, written in pieces and in any
 * order between destinations; each source's oldest unwritten frame, the
 * runs a gather gives, END frames for every open destination, a closed
 * destination's frames; each destination's limits, counts and peaks, and a
 * frame's path that allocates nothing. Randomised tests log their seed;
 * ES_TEST_SEED repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "readoutd/outq.h"

#include "seeded.h"

struct done_log {
	int frames, ends;
	uint32_t bytes;
	uint16_t last_source;
};

static void on_done(void *arg, uint32_t d, uint16_t s, uint32_t len, bool end)
{
	(void)d;
	struct done_log *l = arg;
	if (end)
		l->ends++;
	else
		l->frames++;
	l->bytes += len;
	l->last_source = s;
}

START_TEST(test_runs_and_partial_writes)
{
	struct outq *q = outq_create(2, 2, 8, 16);
	ck_assert_ptr_nonnull(q);
	/* Source 0: frames at 0, 100, 200 (the middle one for destination 1);
	 * source 1: frames at 0 and 50 for destination 0. */
	ck_assert_int_eq(outq_push(q, 0, 0, 0, 100), 0);
	ck_assert_int_eq(outq_push(q, 0, 1, 100, 100), 0);
	ck_assert_int_eq(outq_push(q, 0, 0, 200, 100), 0);
	ck_assert_int_eq(outq_push(q, 1, 0, 0, 50), 0);
	ck_assert_int_eq(outq_push(q, 1, 0, 50, 50), 0);
	struct outq_span sp[8];
	/* Destination 0: 0..100 and 200..300 of source 0 are not adjacent;
	 * source 1's two frames are one run. */
	ck_assert_uint_eq(outq_gather(q, 0, sp, 8, SIZE_MAX), 3);
	ck_assert_uint_eq(sp[0].source, 0);
	ck_assert_uint_eq(sp[0].pos, 0);
	ck_assert_uint_eq(sp[0].len, 100);
	ck_assert_uint_eq(sp[1].pos, 200);
	ck_assert_uint_eq(sp[2].source, 1);
	ck_assert_uint_eq(sp[2].len, 100);
	ck_assert_uint_eq(outq_gather(q, 0, sp, 2, SIZE_MAX), 2);
	/* Bounded by bytes: whole frames until the bound is reached. */
	ck_assert_uint_eq(outq_gather(q, 0, sp, 8, 150), 2);
	ck_assert_uint_eq(sp[1].len, 100);
	ck_assert_uint_eq(outq_gather(q, 0, sp, 8, 100), 1);
	ck_assert_uint_eq(outq_bytes(q, 0), 300);
	/* 130 bytes: the first frame whole, 30 of the second. */
	struct done_log l = { 0 };
	outq_written(q, 0, 130, on_done, &l);
	ck_assert_int_eq(l.frames, 1);
	ck_assert_uint_eq(outq_bytes(q, 0), 170);
	ck_assert_uint_eq(outq_gather(q, 0, sp, 8, SIZE_MAX), 2);
	ck_assert_uint_eq(sp[0].pos, 230);
	ck_assert_uint_eq(sp[0].len, 70);
	/* Source 0's oldest unwritten frame is the one for destination 1. */
	uint64_t pos;
	ck_assert(outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(pos, 100);
	ck_assert_uint_eq(outq_source_unwritten(q, 0), 2);
	outq_written(q, 1, 100, on_done, &l);
	ck_assert(outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(pos, 200);
	outq_written(q, 0, 170, on_done, &l);
	ck_assert_int_eq(l.frames, 5);
	ck_assert(!outq_oldest(q, 0, &pos));
	ck_assert(!outq_oldest(q, 1, &pos));
	ck_assert_uint_eq(outq_frames(q, 0), 0);
	outq_destroy(q);
}
END_TEST

START_TEST(test_end_frames_and_a_closed_destination)
{
	struct outq *q = outq_create(1, 3, 4, 8);
	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(outq_push(q, 0, 2, 0, 10), 0);
	ck_assert_int_eq(outq_push(q, 0, 2, 10, 10), 0);
	struct done_log lost = { 0 };
	outq_close(q, 2, on_done, &lost);
	ck_assert_int_eq(lost.frames, 2);
	ck_assert(outq_closed(q, 2));
	ck_assert_int_eq(outq_push(q, 0, 2, 20, 10), -EPIPE);
	/* END goes to the two open ones and is written once both wrote it. */
	ck_assert_int_eq(outq_push_end(q, 0, 20, 42), 0);
	ck_assert_uint_eq(outq_frames(q, 0), 1);
	ck_assert_uint_eq(outq_frames(q, 1), 1);
	ck_assert_uint_eq(outq_frames(q, 2), 0);
	ck_assert_uint_eq(outq_source_unwritten(q, 0), 0);
	uint64_t pos;
	struct done_log l = { 0 };
	outq_written(q, 0, 42, on_done, &l);
	ck_assert(outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(pos, 20);
	outq_written(q, 1, 42, on_done, &l);
	ck_assert_int_eq(l.ends, 2);
	ck_assert(!outq_oldest(q, 0, &pos));
	outq_destroy(q);
}
END_TEST

START_TEST(test_full_queues_refuse)
{
	struct outq *q = outq_create(2, 1, 2, 3);
	ck_assert_ptr_nonnull(q);
	ck_assert_int_eq(outq_push(q, 0, 0, 0, 1), 0);
	ck_assert_int_eq(outq_push(q, 1, 0, 0, 1), 0);
	ck_assert_int_eq(outq_push(q, 0, 0, 1, 1), -ENOSPC);     /* destination full */
	ck_assert_int_eq(outq_push_end(q, 0, 1, 1), -ENOSPC);
	struct done_log l = { 0 };
	outq_written(q, 0, 2, on_done, &l);
	ck_assert_int_eq(l.frames, 2);
	/* Around the rings several times: indexes keep counting. */
	for (uint64_t i = 1; i < 50; i++) {
		ck_assert_int_eq(outq_push(q, 0, 0, i, 1), 0);
		outq_written(q, 0, 1, on_done, &l);
		uint64_t pos;
		ck_assert(!outq_oldest(q, 0, &pos));
	}
	ck_assert_int_eq(l.frames, 51);
	ck_assert_ptr_null(outq_create(0, 1, 1, 1));
	ck_assert_uint_gt(outq_memory_bytes(q), 2 * 3 * 16);
	outq_destroy(q);
}
END_TEST

/* Destinations as the connections of two links of two rails (0, 1 of one
 * builder, 2, 3 of the other): one source's frames dealt over all four in
 * spans of 2, each connection writing at its own pace. The source's
 * oldest unwritten frame is the oldest any connection still has; its END
 * goes on all four; closing one link's two connections drops only theirs. */
START_TEST(test_lanes_of_two_links)
{
	struct outq *q = outq_create(1, 4, 16, 32);
	ck_assert_ptr_nonnull(q);
	for (uint32_t i = 0; i < 16; i++)
		ck_assert_int_eq(outq_push(q, 0, (i / 2) % 4, 10u * i, 10), 0);
	ck_assert_int_eq(outq_push_end(q, 0, 160, 42), 0);
	for (uint32_t d = 0; d < 4; d++) {
		ck_assert_uint_eq(outq_frames(q, d), 5);
		ck_assert_uint_eq(outq_bytes(q, d), 4 * 10 + 42);
	}
	/* Connection 1 (frames 2, 3, 10, 11): two runs, then END. */
	struct outq_span sp[8];
	ck_assert_uint_eq(outq_gather(q, 1, sp, 8, SIZE_MAX), 3);
	ck_assert_uint_eq(sp[0].pos, 20);
	ck_assert_uint_eq(sp[0].len, 20);
	ck_assert_uint_eq(sp[1].pos, 100);
	ck_assert_uint_eq(sp[1].len, 20);
	ck_assert_uint_eq(sp[2].pos, 160);
	struct done_log l = { 0 };
	uint64_t pos;
	/* The later lanes write first: the oldest stays frame 0's. */
	outq_written(q, 1, 82, on_done, &l);
	outq_written(q, 3, 82, on_done, &l);
	ck_assert(outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(pos, 0);
	ck_assert_uint_eq(outq_source_unwritten(q, 0), 8);
	/* Connection 0 writes its first frame: frame 1 is the oldest. */
	outq_written(q, 0, 10, on_done, &l);
	ck_assert(outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(pos, 10);
	/* The second link goes: connection 2's frames dropped, 3 had written. */
	struct done_log lost = { 0 };
	outq_close(q, 2, on_done, &lost);
	outq_close(q, 3, on_done, &lost);
	ck_assert_int_eq(lost.frames, 4);
	ck_assert_int_eq(lost.ends, 1);
	outq_written(q, 0, 30 + 42, on_done, &l);
	ck_assert_int_eq(l.ends, 3);
	ck_assert(!outq_oldest(q, 0, &pos));
	ck_assert_uint_eq(outq_source_unwritten(q, 0), 0);
	outq_destroy(q);
}
END_TEST

static struct outq_view qview(const struct outq *q, uint32_t d)
{
	struct outq_view v;
	outq_view(q, d, &v);
	return v;
}

/* Each destination at its limits: refused and counted, the other one not
 * held up, room again once a frame's last byte is written; an empty queue
 * takes a frame larger than the byte limit, alone; END frames beside. */
START_TEST(test_pending_limits)
{
	struct outq *q = outq_create(2, 2, 3 + 2, 64);
	ck_assert_int_eq(outq_set_limits(q, 0, 100), -EINVAL);
	ck_assert_int_eq(outq_set_limits(q, 3, 0), -EINVAL);
	ck_assert_int_eq(outq_set_limits(q, 3, 100), 0);
	ck_assert_int_eq(outq_push(q, 0, 0, 0, 40), 0);
	ck_assert_int_eq(outq_push(q, 0, 0, 40, 40), 0);
	/* 120 bytes would pass the byte limit: refused and counted. */
	ck_assert(!outq_room(q, 0, 40));
	ck_assert_int_eq(outq_push(q, 0, 0, 80, 40), -ENOBUFS);
	ck_assert_int_eq(outq_push(q, 0, 0, 80, 20), 0);
	/* Three frames: the frame limit. */
	ck_assert_int_eq(outq_push(q, 1, 0, 0, 0), -ENOBUFS);
	struct outq_view v = qview(q, 0);
	ck_assert_uint_eq(v.frames, 3);
	ck_assert_uint_eq(v.bytes, 100);
	ck_assert_uint_eq(v.pushed, 3);
	ck_assert_uint_eq(v.refused, 2);
	/* The other destination is not held up by it. */
	ck_assert_int_eq(outq_push(q, 1, 1, 0, 100), 0);
	ck_assert_uint_eq(qview(q, 1).refused, 0);
	/* END frames are beside the limits. */
	ck_assert_int_eq(outq_push_end(q, 1, 100, 42), 0);
	ck_assert_uint_eq(qview(q, 1).frames, 1);
	ck_assert_uint_eq(outq_frames(q, 1), 2);
	/* A frame counts until its last byte is written; then room for one. */
	struct done_log l = { 0 };
	outq_written(q, 0, 39, on_done, &l);
	ck_assert_uint_eq(qview(q, 0).bytes, 100);
	ck_assert_int_eq(outq_push(q, 0, 0, 100, 40), -ENOBUFS);
	outq_written(q, 0, 1, on_done, &l);
	ck_assert(outq_room(q, 0, 40));
	ck_assert_int_eq(outq_push(q, 0, 0, 100, 40), 0);
	v = qview(q, 0);
	ck_assert_uint_eq(v.bytes, 100);
	ck_assert_uint_eq(v.peak_frames, 3);
	ck_assert_uint_eq(v.peak_bytes, 100);
	ck_assert_uint_eq(v.refused, 3);
	/* An empty queue takes a frame larger than its byte limit, alone. */
	outq_written(q, 1, 100 + 42, on_done, &l);
	ck_assert_uint_eq(qview(q, 1).frames, 0);
	ck_assert_int_eq(outq_push(q, 1, 1, 142, 500), 0);
	ck_assert_int_eq(outq_push(q, 1, 1, 642, 1), -ENOBUFS);
	ck_assert_uint_eq(qview(q, 1).peak_bytes, 500);
	/* A closed destination's frames leave its counts; its peaks stay. */
	outq_close(q, 1, on_done, &l);
	v = qview(q, 1);
	ck_assert_uint_eq(v.frames, 0);
	ck_assert_uint_eq(v.bytes, 0);
	ck_assert_uint_eq(v.peak_bytes, 500);
	outq_destroy(q);
}
END_TEST

/* Random pushes and writes against a FIFO per destination: refused exactly
 * when the limits say so, never past them (but for one oversized frame). */
START_TEST(test_pending_random)
{
	enum { D = 4, CAP = 64 };
	uint64_t rng = test_seed ^ 0x0E0E;
	uint32_t limit_frames = 1 + (uint32_t)rng_below(&rng, CAP);
	uint64_t limit_bytes = 1 + rng_below(&rng, 4000);
	/* The source's ring holds frames from the oldest unwritten one on:
	 * room for far more than any FIFO here leaves behind it. */
	struct outq *q = outq_create(1, D, CAP, 1u << 16);
	ck_assert_int_eq(outq_set_limits(q, limit_frames, limit_bytes), 0);
	uint32_t fifo[D][CAP], head[D] = { 0 }, len[D] = { 0 };
	uint64_t bytes[D] = { 0 }, refused[D] = { 0 }, pos = 0;
	struct done_log l = { 0 };
	for (int step = 0; step < 200000; step++) {
		uint32_t d = (uint32_t)rng_below(&rng, D);
		if (rng_below(&rng, 2)) {
			uint32_t n = 1 + (uint32_t)rng_below(&rng, 300);
			bool fits = len[d] == 0 || (len[d] < limit_frames && bytes[d] + n <= limit_bytes);
			REQUIRE(outq_room(q, d, n) == fits);
			int rc = outq_push(q, 0, d, pos, n);
			REQUIRE(rc == (fits ? 0 : -ENOBUFS));
			if (!fits) {
				refused[d]++;
				continue;
			}
			pos += n;
			fifo[d][(head[d] + len[d]++) % CAP] = n;
			bytes[d] += n;
		} else if (len[d] > 0) {
			uint32_t n = fifo[d][head[d]];
			outq_written(q, d, n, on_done, &l);
			head[d] = (head[d] + 1) % CAP;
			len[d]--;
			bytes[d] -= n;
		}
		struct outq_view v = qview(q, d);
		REQUIRE(v.frames == len[d] && v.bytes == bytes[d] && v.refused == refused[d]);
		REQUIRE(v.frames <= limit_frames && (v.bytes <= limit_bytes || v.frames == 1));
		uint64_t oldest;
		outq_oldest(q, 0, &oldest);
	}
	outq_destroy(q);
}
END_TEST

/* A frame's path (push, gather, written, oldest) allocates nothing. */
START_TEST(test_allocates_nothing)
{
	struct outq *q = outq_create(4, 8, 128, 1024);
	ck_assert_int_eq(outq_set_limits(q, 100, 1u << 20), 0);
	struct outq_span spans[16];
	struct done_log l = { 0 };
	uint64_t pos[4] = { 0 };
	struct mallinfo2 before = mallinfo2();
	for (uint32_t k = 0; k < 100000; k++) {
		uint16_t s = (uint16_t)(k % 4);
		uint32_t d = (k / 4) % 8;
		if (outq_push(q, s, d, pos[s], 64) == 0)
			pos[s] += 64;
		if (k % 3 == 0) {
			outq_gather(q, d, spans, 16, 4096);
			outq_written(q, d, 64 * 2, on_done, &l);
			uint64_t oldest;
			outq_oldest(q, s, &oldest);
		}
	}
	struct mallinfo2 after = mallinfo2();
	ck_assert_uint_eq(after.uordblks, before.uordblks);
	ck_assert_uint_eq(after.hblkhd, before.hblkhd);
	ck_assert_int_gt(l.frames, 1000);
	outq_destroy(q);
}
END_TEST

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_outq: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);
	Suite *s = suite_create("outq");
	TCase *tc = tcase_create("outq");
	tcase_add_test(tc, test_runs_and_partial_writes);
	tcase_add_test(tc, test_end_frames_and_a_closed_destination);
	tcase_add_test(tc, test_full_queues_refuse);
	tcase_add_test(tc, test_lanes_of_two_links);
	tcase_add_test(tc, test_pending_limits);
	tcase_add_test(tc, test_pending_random);
	tcase_add_test(tc, test_allocates_nothing);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
