/* Unit tests of builderd/report/live.c: /status and /metrics from a snapshot
 * built by hand (a peer table, two readers' data paths, builder counters),
 * while the run goes on and after: /status is strict JSON with the
 * figures, /metrics has each family with its samples and leaves out the
 * ones that have nothing to say. */
#include <check.h>
#include <event2/buffer.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/report/live.h"
#include "builderd/options.h"
#include "builderd/peer.h"
#include "builderd/snapshot.h"
#include "core/hist.h"

static struct options opt;
static struct peer_table peers;
static struct snapshot_link links[2];
static struct hist latency;
static struct snapshot snap;
static const char *const errors[] = { "one", "two" };

static void setup(void)
{
	opt = (struct options){ .run_id = 7, .sources = 2, .readers = 2, .events = 120,
				   .max_inflight = 64 };
	ck_assert_int_eq(peer_table_init(&peers, 2, 2), 0);
	peer_reader(&peers, 0)->held_ns = 1500000000;
	links[0] = (struct snapshot_link){ .transport = "tcp", .frames_received = 100 };
	links[1] = (struct snapshot_link){ .transport = "shm", .frames_received = 30 };
	hist_reset(&latency);
	hist_add(&latency, 2000000);
	snap = (struct snapshot){
		.opt = &opt, .running = true, .peers = &peers, .errors = errors, .error_count = 2,
		.refused_connections = 4, .greetings_busy = 5, .greetings_evicted = 1,
		.greetings_timed_out = 6, .credits_sent = 9, .recent_events_per_s = 12.5,
		.links = links, .frames_read = 130, .pending = 5, .admission_limit = 97,
		.oldest_pending = 33, .latency = &latency,
		.builder = { .events_complete = 30, .events_accepted = 29, .events_expired = 2 },
	};
}

static void teardown(void)
{
	peer_table_free(&peers);
}

/* The view as a string (the caller frees it). */
static char *fill(bool json)
{
	struct evbuffer *b = evbuffer_new();
	ck_assert_ptr_nonnull(b);
	live_fill(b, json, &snap);
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	ck_assert_ptr_nonnull(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = strstr(text, line); p != NULL; p = strstr(p + 1, line))
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

START_TEST(test_status)
{
	char *s = fill(true);
	json_error_t err;
	json_t *o = json_loads(s, 0, &err);
	ck_assert_msg(o != NULL, "%s: %s", err.text, s);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "run")), 7);
	ck_assert_str_eq(json_string_value(json_object_get(o, "phase")), "running");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "events_complete")), 30);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "events_accepted")), 29);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "events_expired")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "events_pending")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "events_expected")), 120);
	ck_assert(json_real_value(json_object_get(o, "completeness")) == 0.25);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "admission_limit")), 97);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "oldest_pending")), 33);
	ck_assert(json_real_value(json_object_get(o, "events_per_s")) == 12.5);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "latency_p99_ns")),
			 (json_int_t)hist_quantile(&latency, 0.99));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "frames_read")), 130);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "errors")), 2);
	json_decref(o);
	free(s);

	/* Over, nothing pending, the record files closed. */
	snap.running = false;
	snap.oldest_pending = UINT64_MAX;
	snap.latency = NULL;
	s = fill(true);
	o = json_loads(s, 0, &err);
	ck_assert_msg(o != NULL, "%s: %s", err.text, s);
	ck_assert_str_eq(json_string_value(json_object_get(o, "phase")), "finished");
	ck_assert(json_is_null(json_object_get(o, "oldest_pending")));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "latency_p99_ns")), 0);
	json_decref(o);
	free(s);
}
END_TEST

START_TEST(test_metrics)
{
	char *s = fill(false);
	ck_assert_msg(has_line(s, "es_builder_events_complete_total 30"), "%s", s);
	ck_assert(has_line(s, "# TYPE es_builder_events_complete_total counter"));
	ck_assert(has_line(s, "es_builder_frames_read_total 130"));
	ck_assert(has_line(s, "es_builder_reader_frames_total{reader=\"0\"} 100"));
	ck_assert(has_line(s, "es_builder_reader_frames_total{reader=\"1\"} 30"));
	ck_assert(strstr(s, "es_builder_reader_held_seconds{reader=\"0\"} 1.5") != NULL);
	ck_assert(has_line(s, "es_builder_refused_connections_total 4"));
	ck_assert(has_line(s, "es_builder_greetings_busy_total 5"));
	ck_assert(has_line(s, "es_builder_greetings_evicted_total 1"));
	ck_assert(has_line(s, "es_builder_greetings_timed_out_total 6"));
	ck_assert(has_line(s, "es_builder_credits_sent_total 9"));
	ck_assert(has_line(s, "es_builder_errors 2"));
	ck_assert(has_line(s, "es_builder_pending_events 5"));
	ck_assert(has_line(s, "es_builder_window_events 64"));
	ck_assert(has_line(s, "es_builder_admission_limit 97"));
	ck_assert(has_line(s, "es_builder_oldest_pending_event 33"));
	ck_assert(has_line(s, "es_builder_completeness_ratio 0.25"));
	ck_assert(has_line(s, "es_builder_latency_seconds_count 1"));
	/* No clock module: the families, no peer in them. */
	ck_assert(has_line(s, "# TYPE es_builder_peer_clock_offset_seconds gauge"));
	ck_assert(strstr(s, "es_builder_peer_clock_offset_seconds{") == NULL);
	free(s);

	/* What has nothing to say is left out. */
	opt.events = 0;
	snap.oldest_pending = UINT64_MAX;
	snap.latency = NULL;
	s = fill(false);
	ck_assert(strstr(s, "es_builder_oldest_pending_event") == NULL);
	ck_assert(strstr(s, "es_builder_completeness_ratio") == NULL);
	ck_assert(strstr(s, "es_builder_latency_seconds") == NULL);
	ck_assert(has_line(s, "es_builder_events_complete_total 30"));
	free(s);
}
END_TEST

/* The serving hub's /state "live": each peer's part of the run. */
START_TEST(test_live_json)
{
	struct peer *s0 = peer_source(&peers, 0), *r0 = peer_reader(&peers, 0);
	s0->sent.seen = true;
	s0->sent.run_second = 2;
	s0->sent.send_positions = 41;
	s0->sent.last_event_sent = 40;
	r0->credit_sent = 97;
	r0->credits = 12;
	r0->held_count = 3;
	r0->verified = 88;
	snap.decided_below = 33;
	snap.data_format = "raw";
	snap.data_files = 2;
	snap.data_bytes_written = 5000000;
	snap.data_write_ns = 250000000;
	snap.data_free_bytes = 1u << 30;
	json_t *o = live_json(&snap);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "window_events")), 64);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "decided_below")), 33);
	ck_assert_str_eq(json_string_value(json_object_get(o, "last_error")), "two");
	json_t *rec = json_object_get(o, "recording");
	ck_assert_str_eq(json_string_value(json_object_get(rec, "format")), "raw");
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_files")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_bytes_written")), 5000000);
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_write_ns")), 250000000);
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_free_bytes")), 1 << 30);
	json_t *ps = json_object_get(o, "peers");
	ck_assert_uint_eq(json_array_size(ps), 4);
	json_t *src = json_array_get(ps, 0), *quiet = json_array_get(ps, 1);
	ck_assert_str_eq(json_string_value(json_object_get(src, "role")), "source");
	ck_assert_int_eq(json_integer_value(json_object_get(src, "run_second")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(src, "send_positions")), 41);
	ck_assert_int_eq(json_integer_value(json_object_get(src, "last_event_sent")), 40);
	/* No STATS yet: nothing said of where it is. */
	ck_assert_ptr_null(json_object_get(quiet, "run_second"));
	ck_assert_ptr_null(json_object_get(quiet, "send_positions"));
	ck_assert_ptr_null(json_object_get(quiet, "last_event_sent"));
	json_t *rd = json_array_get(ps, 2);
	ck_assert_str_eq(json_string_value(json_object_get(rd, "role")), "reader");
	ck_assert_int_eq(json_integer_value(json_object_get(rd, "frames_received")), 100);
	ck_assert(json_real_value(json_object_get(rd, "held_s")) == 1.5);
	ck_assert_int_eq(json_integer_value(json_object_get(rd, "held_count")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(rd, "frames_verified")), 88);
	ck_assert_int_eq(json_integer_value(json_object_get(rd, "credit_limit")), 97);
	ck_assert_int_eq(json_integer_value(json_object_get(rd, "credits_sent")), 12);
	json_decref(o);

	/* Several builders: their own files, tokens and window; the hub none. */
	struct peer_table fleet;
	ck_assert_int_eq(peer_table_init_builders(&fleet, 2, 2, 2), 0);
	struct peer *b1 = peer_builder(&fleet, 1);
	b1->live.seen = b1->live.recording = true;
	b1->live.events_per_s = 900;
	b1->live.tokens_sent = 77;
	b1->live.data_files = 1;
	b1->live.data_bytes_written = 4096;
	b1->live.data_free_bytes = 123456;
	opt.batch = 16;
	opt.window_batches = 4;
	snap.peers = &fleet;
	snap.hub = true;
	snap.builder_views[1].tokens = 5;
	o = live_json(&snap);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "window_events")), 64);
	ck_assert(json_is_null(json_object_get(o, "recording")));
	ps = json_object_get(o, "peers");
	ck_assert_uint_eq(json_array_size(ps), 6);
	json_t *b = json_array_get(ps, 5), *idle = json_array_get(ps, 4);
	ck_assert_str_eq(json_string_value(json_object_get(b, "role")), "builder");
	ck_assert_int_eq(json_integer_value(json_object_get(b, "events_per_s")), 900);
	ck_assert_int_eq(json_integer_value(json_object_get(b, "tokens_sent")), 77);
	ck_assert_int_eq(json_integer_value(json_object_get(b, "tokens")), 5);
	rec = json_object_get(b, "recording");
	ck_assert(json_is_null(json_object_get(rec, "format")));
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_bytes_written")), 4096);
	ck_assert_int_eq(json_integer_value(json_object_get(rec, "data_free_bytes")), 123456);
	ck_assert_ptr_null(json_object_get(idle, "recording"));
	ck_assert_ptr_null(json_object_get(idle, "tokens_sent"));
	/* Readers of a hub get assignments, not credits. */
	ck_assert_ptr_null(json_object_get(json_array_get(ps, 2), "credit_limit"));
	json_decref(o);
	peer_table_free(&fleet);
}
END_TEST

static Suite *live_suite(void)
{
	Suite *s = suite_create("live");
	TCase *tc = tcase_create("live");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_live_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(live_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
