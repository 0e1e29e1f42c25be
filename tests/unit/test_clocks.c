/* Unit tests of builderd/clock/clocks.c, the clock exchanges, over real loopback
 * connections (tests/unit/clockpeers.h): the first burst and readiness for
 * START, the period after it, a peer that never answers, PONGs that answer
 * no PING, the UDP probe socket a STATS announces, the final burst and its
 * time limit, and what finishing stops. */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clockpeers.h"

#include "builderd/clock/clocks.h"
#include "builderd/peer.h"
#include "sys/clock.h"

#define MS 1000000u
#define OFFSET_NS INT64_C(5000000)   /* the source's clock, 5 ms ahead */

static struct event_base *base;
static struct peer_table peers;
static struct clocks *clocks;
static struct fake_peer fsrc, frdr;  /* source 0, reader 0 */
static unsigned ready_calls;
static unsigned done_calls;

static void on_ready(void *arg)
{
	(void)arg;
	ready_calls++;
}

static void on_done(void *arg)
{
	(void)arg;
	done_calls++;
}

static bool is_ready(void *arg)
{
	(void)arg;
	return ready_calls > 0;
}

static bool is_done(void *arg)
{
	(void)arg;
	return done_calls > 0;
}

static void setup(void)
{
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(peer_table_init(&peers, 1, 1), 0);
	struct clocks_config cc = { .base = base, .peers = &peers, .run_id = 9, .correction = true,
				 .quiet = true, .ready = on_ready };
	clocks = clocks_create(&cc);
	ck_assert_ptr_nonnull(clocks);
	memset(&fsrc, 0, sizeof fsrc);
	memset(&frdr, 0, sizeof frdr);
	ready_calls = done_calls = 0;
}

static void teardown(void)
{
	clockpeers_free(&fsrc);
	clockpeers_free(&frdr);
	clocks_destroy(clocks);
	peer_table_free(&peers);
	event_base_free(base);
}

static void view(uint32_t i, struct clocks_peer_view *v)
{
	clocks_peer_view(clocks, i, v);
}

/* Both peers join: each gets a burst of CLOCKS_BURST PINGs on its control
 * connection, and START may go once the source has answered them. */
START_TEST(test_first_burst)
{
	ck_assert(clocks_ready(clocks));   /* nobody connected: nothing to wait for */
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", OFFSET_NS);
	ck_assert(!clocks_ready(clocks));
	clockpeers_join(&frdr, base, clocks, peer_reader(&peers, 0), "localhost", 0);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	ck_assert_uint_eq(ready_calls, 1);
	ck_assert(clocks_ready(clocks));
	struct clocks_peer_view v;
	view(0, &v);
	ck_assert_uint_ge(v.pongs, CLOCKS_BURST);
	ck_assert_uint_ge(v.pings, v.pongs);
	ck_assert(!v.udp);
	ck_assert_uint_eq(v.pongs_unmatched, 0);
	ck_assert_str_eq(v.clock.stamps_summary, "user space");
	ck_assert(v.clock.snap[PEERCLOCK_START].valid);

	int64_t offset, bound;
	ck_assert(clocks_peer_estimate(clocks, peer_source(&peers, 0), &offset, &bound));
	int64_t error = offset - OFFSET_NS;
	ck_assert_msg(peerclock_abs(error) <= (uint64_t)bound, "offset %lld +/- %lld, true %lld",
		      (long long)offset, (long long)bound, (long long)OFFSET_NS);
	ck_assert_int_lt(bound, OFFSET_NS);

	/* After the burst, one exchange each period. */
	uint64_t pings = fsrc.pings, t0 = clk_monotonic_ns();
	clockpeers_run(base, NULL, NULL, 2 * CLOCKS_PERIOD_NS / MS + 50);
	uint64_t periods = (clk_monotonic_ns() - t0) / CLOCKS_PERIOD_NS;
	ck_assert_uint_ge(fsrc.pings, pings + 1);
	ck_assert_uint_le(fsrc.pings, pings + periods + 1);
	ck_assert_uint_eq(ready_calls, 1);
}
END_TEST

/* A source that never answers cannot hold the run: ready after
 * CLOCKS_READY_TIMEOUT_NS with no estimate. */
START_TEST(test_ready_timeout)
{
	fsrc.mute = true;
	uint64_t t0 = clk_monotonic_ns();
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", 0);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	ck_assert_uint_ge(clk_monotonic_ns() - t0, CLOCKS_READY_TIMEOUT_NS);
	ck_assert_uint_ge(fsrc.pings, CLOCKS_BURST);
	int64_t offset, bound;
	ck_assert(!clocks_peer_estimate(clocks, peer_source(&peers, 0), &offset, &bound));
	struct clocks_peer_view v;
	view(0, &v);
	ck_assert_uint_eq(v.pongs, 0);
	ck_assert(peerclock_view_best(&v.clock) == NULL);
}
END_TEST

/* PONGs that answer no PING of ours are counted and change nothing. */
START_TEST(test_unmatched_pongs)
{
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", 0);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	struct clocks_peer_view before, after;
	view(0, &before);
	uint64_t now = clk_realtime_ns();
	struct ctl_pong bad[] = {
		{ .sequence = 0, .t1_ns = now, .t2_ns = now, .t3_ns = now },
		{ .sequence = before.pings + 1, .t1_ns = now, .t2_ns = now, .t3_ns = now },
		{ .sequence = 1, .t1_ns = now, .t2_ns = now, .t3_ns = now },   /* answered already */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		clocks_on_pong(clocks, peer_source(&peers, 0), &bad[i], now + 1000);
	view(0, &after);
	ck_assert_uint_eq(after.pongs_unmatched, 3);
	ck_assert_uint_eq(after.pongs, before.pongs);
	ck_assert_uint_eq(after.clock.accepted, before.clock.accepted);
}
END_TEST

/* A STATS that names the peer's probe socket moves the exchanges onto it,
 * starting with a burst there; readiness then waits for its answers. The
 * peer declares no offset, so it shares our clock. */
START_TEST(test_probe_socket)
{
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", 0);
	clockpeers_report(&fsrc, base, false, 0, true);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	struct clocks_peer_view v;
	view(0, &v);
	ck_assert(v.udp);
	ck_assert_uint_ge(prb_responder_answered(fsrc.responder), CLOCKS_BURST);
	ck_assert(v.same_host);
	ck_assert(v.same_clock);
	ck_assert(v.clock.clock_seen);
	ck_assert_str_ne(v.clock.stamps_summary, "none");
	struct clocks_view cv;
	clocks_view(clocks, &cv);
	ck_assert(cv.all_sources_same_clock);
	int64_t offset, bound;
	ck_assert(clocks_peer_estimate(clocks, peer_source(&peers, 0), &offset, &bound));
	ck_assert_uint_le(peerclock_abs(offset), (uint64_t)bound);
	/* Its exchanges are UDP from now on: PINGs on the control
	 * connection stop. */
	uint64_t pings = fsrc.pings;
	clockpeers_run(base, NULL, NULL, 2 * CLOCKS_PERIOD_NS / MS);
	ck_assert_uint_eq(fsrc.pings, pings);
	ck_assert_uint_gt(prb_responder_answered(fsrc.responder), CLOCKS_BURST);
}
END_TEST

/* A peer that declares an offset is not on our clock, though on our host. */
START_TEST(test_declared_offset)
{
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", OFFSET_NS);
	clockpeers_report(&fsrc, base, false, OFFSET_NS, false);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	struct clocks_peer_view v;
	view(0, &v);
	ck_assert(v.same_host);
	ck_assert(!v.same_clock);
	ck_assert_int_eq(v.clock.injected_ns, OFFSET_NS);
	ck_assert_uint_eq(v.clock.inside_injected, v.clock.estimates);
	struct clocks_view cv;
	clocks_view(clocks, &cv);
	ck_assert(!cv.all_sources_same_clock);
}
END_TEST

/* The final burst: done once every connected peer answered it. */
START_TEST(test_close)
{
	ck_assert(!clocks_close(clocks, on_done, NULL));   /* nobody connected */
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", 0);
	clockpeers_join(&frdr, base, clocks, peer_reader(&peers, 0), "localhost", 0);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	struct clocks_peer_view before, after;
	view(1, &before);
	ck_assert(clocks_close(clocks, on_done, NULL));
	ck_assert(clocks_close(clocks, on_done, NULL));   /* waiting: no change */
	ck_assert(clockpeers_run(base, is_done, NULL, 5000));
	ck_assert_uint_eq(done_calls, 1);
	view(1, &after);
	ck_assert_uint_ge(after.pongs, before.pongs + CLOCKS_BURST);

	clocks_finish(clocks);
	ck_assert(!clocks_close(clocks, on_done, NULL));
	view(1, &before);
	ck_assert(before.clock.snap[PEERCLOCK_END].valid);
	/* Finished: PONGs still arriving change nothing. */
	uint64_t now = clk_realtime_ns();
	struct ctl_pong late = { .sequence = before.pings, .t1_ns = now, .t2_ns = now, .t3_ns = now };
	clocks_on_pong(clocks, peer_reader(&peers, 0), &late, now);
	clockpeers_run(base, NULL, NULL, 50);
	view(1, &after);
	ck_assert_uint_eq(after.pongs, before.pongs);
	ck_assert_uint_eq(after.pongs_unmatched, before.pongs_unmatched);
	ck_assert_uint_eq(after.pings, before.pings);
}
END_TEST

/* A peer that stops answering cannot hold the end of the run: the final
 * burst is given up after CLOCKS_CLOSE_TIMEOUT_NS. */
START_TEST(test_close_timeout)
{
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), "localhost", 0);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	fsrc.mute = true;
	uint64_t t0 = clk_monotonic_ns();
	ck_assert(clocks_close(clocks, on_done, NULL));
	ck_assert(clockpeers_run(base, is_done, NULL, 5000));
	ck_assert_uint_ge(clk_monotonic_ns() - t0, CLOCKS_CLOSE_TIMEOUT_NS);
	ck_assert_uint_eq(done_calls, 1);
}
END_TEST

static Suite *clocks_suite(void)
{
	Suite *s = suite_create("clocks");
	TCase *tc = tcase_create("exchanges");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_first_burst);
	tcase_add_test(tc, test_ready_timeout);
	tcase_add_test(tc, test_unmatched_pongs);
	tcase_add_test(tc, test_probe_socket);
	tcase_add_test(tc, test_declared_offset);
	tcase_add_test(tc, test_close);
	tcase_add_test(tc, test_close_timeout);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(clocks_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
