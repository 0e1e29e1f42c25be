/* Unit tests of builderd/report/metrics.c: metrics.json's tree from a snapshot
 * built by hand (a peer table with reports, data paths, builder counters,
 * a real output and clock module): the fields docs/METRICS.md promises,
 * the losses of a reader that died, peers gone by name and how, strings of
 * any bytes as valid UTF-8, and the status. */
#include <check.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builderd/clock/clocks.h"
#include "builderd/report/metrics.h"
#include "builderd/data/output.h"
#include "builderd/peer.h"
#include "builderd/snapshot.h"
#include "core/acct.h"

struct fixture {
	struct event_base *base;
	char dir[64];
	struct options opt;
	struct peer_table peers;
	struct output *out;
	struct clocks *clocks;
	struct snapshot_link links[2];
	uint16_t sources_of[2][1];
	struct ctl_report self;
	struct snapshot snap;
	struct acct acct;
};

static struct fixture fx;

static void add_counter(struct ctl_report *r, const char *group, const char *name, uint64_t v)
{
	struct ctl_group *g = NULL;
	for (uint32_t i = 0; i < r->group_count; i++)
		if (strcmp(r->groups[i].name, group) == 0)
			g = &r->groups[i];
	if (g == NULL) {
		g = &r->groups[r->group_count++];
		snprintf(g->name, sizeof g->name, "%s", group);
	}
	struct ctl_counter *c = &g->counters[g->count++];
	snprintf(c->name, sizeof c->name, "%s", name);
	c->value = v;
}

static struct ctl_report *report(void)
{
	return calloc(1, sizeof(struct ctl_report));
}

/* Two sources, two readers; reader 1 died through its ring after 30 of its
 * source's 100 frames, source 1 stalled. */
static void setup(void)
{
	memset(&fx, 0, sizeof fx);
	fx.base = event_base_new();
	ck_assert_ptr_nonnull(fx.base);
	snprintf(fx.dir, sizeof fx.dir, "/tmp/test_metrics.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx.dir));
	fx.opt = (struct options){ .run_id = 7, .sources = 2, .readers = 2, .max_inflight = 64,
				      .timeout_ms = 1000, .filter_modulo = 1, .flush_every = 8 };
	snprintf(fx.opt.out_dir, sizeof fx.opt.out_dir, "%s", fx.dir);
	ck_assert_int_eq(peer_table_init(&fx.peers, 2, 2), 0);
	fx.out = output_open(fx.dir, 8, 2, NULL, NULL);
	ck_assert_ptr_nonnull(fx.out);
	struct clocks_config cc = { .base = fx.base, .peers = &fx.peers, .out = fx.out, .run_id = 7,
				 .correction = true, .quiet = true };
	fx.clocks = clocks_create(&cc);
	ck_assert_ptr_nonnull(fx.clocks);

	for (uint32_t i = 0; i < peer_count(&fx.peers); i++) {
		struct peer *p = peer_at(&fx.peers, i);
		p->connected = true;
		p->pid = 100 + i;
		snprintf(p->host, sizeof p->host, "host%u", i);
	}
	/* A peer's host of bytes that are not UTF-8. */
	snprintf(peer_source(&fx.peers, 0)->host, CTL_MAX_TEXT, "bad\xff" "host");
	struct peer *s0 = peer_source(&fx.peers, 0), *s1 = peer_source(&fx.peers, 1);
	struct peer *r0 = peer_reader(&fx.peers, 0), *r1 = peer_reader(&fx.peers, 1);
	s0->report = report();
	add_counter(s0->report, "", "events", 100);
	add_counter(s0->report, "", "frames_wire", 100);
	add_counter(s0->report, "process", "cpu_user_us", 1000);
	add_counter(s0->report, "process", "cpu_sys_us", 500);
	s0->reported = true;
	s1->report = report();
	add_counter(s1->report, "", "frames_wire", 100);
	s1->lost = s1->stalled = true;
	r0->report = report();
	add_counter(r0->report, "source.0", "frames_forwarded", 100);
	r0->reported = true;
	r1->lost = true;

	fx.sources_of[0][0] = 0;
	fx.sources_of[1][0] = 1;
	fx.links[0] = (struct snapshot_link){ .transport = "tcp", .address = "127.0.0.1:5",
						 .frames_received = 100, .end_frames = 1,
						 .bytes_received = 4200, .read_calls = 3,
						 .sources = fx.sources_of[0], .source_count = 1 };
	fx.links[1] = (struct snapshot_link){ .transport = "shm", .segment = "/es-t-r1",
						 .ring_capacity_bytes = 4096, .attached = true,
						 .peer_died = true, .frames_received = 30,
						 .sources = fx.sources_of[1], .source_count = 1 };
	add_counter(&fx.self, "process", "cpu_user_us", 2000);
	/* Books with one balanced equation and one that is not. */
	fx.acct.equations = calloc(2, sizeof *fx.acct.equations);
	ck_assert_ptr_nonnull(fx.acct.equations);
	fx.acct.count = fx.acct.cap = 2;
	fx.acct.equations[0] = (struct acct_equation){ .name = "frames in", .lhs = 130, .rhs = 130,
						       .ok = true };
	fx.acct.equations[1] = (struct acct_equation){ .name = "events", .lhs = 1, .rhs = 2,
						       .note = "why" };
	fx.acct.lost_with_readers = 70;
	static const char *const errors[] = { "Reader 1 died", "quote \" and bad \xfe byte" };
	fx.snap = (struct snapshot){
		.opt = &fx.opt, .status = 0, .peers = &fx.peers,
		.errors = errors, .error_count = 2, .errors_dropped = 3,
		.refused_connections = 4, .greetings_busy = 5, .greetings_timed_out = 6,
		.credits_sent = 9, .links = fx.links, .frames_read = 130,
		.builder = { .frags_received = 130, .events_complete = 30 },
		.latency = output_latency(fx.out), .clocks = fx.clocks, .shm_capacity_bytes = 4096,
		.self = &fx.self, .self_host = "builderhost", .self_pid = 1,
	};
}

static void teardown(void)
{
	acct_free(&fx.acct);
	clocks_destroy(fx.clocks);
	output_close(fx.out);
	peer_table_free(&fx.peers);
	event_base_free(fx.base);
	char path[128];
	const char *files[] = { "events.jsonl", "expired.jsonl", "metrics.json" };
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", fx.dir, files[i]);
		unlink(path);
	}
	rmdir(fx.dir);
}

static json_t *tree(void)
{
	json_t *root = metrics_json(&fx.snap, &fx.acct);
	ck_assert_ptr_nonnull(root);
	return root;
}

START_TEST(test_top_level_fields)
{
	json_t *root = tree();
	static const char *const keys[] = { "run", "status", "exit_status", "balanced", "equations",
					    "impossible_counters", "losses", "start_to_first_event_ms",
					    "stop_to_books_ms", "stop_last_event", "stop_proposed_event",
					    "fault_to_books_ms",
					    "errors", "counters",
					    "latency", "clocks", "rates", "processes", "cpu",
					    "reader_links", "memory_bounds" };
	ck_assert_uint_eq(json_object_size(root), sizeof keys / sizeof keys[0]);
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		ck_assert_msg(json_object_get(root, keys[i]) != NULL, "no %s", keys[i]);
	/* No START and no drained stop in the fixture: the spans are null. */
	ck_assert(json_is_null(json_object_get(root, "start_to_first_event_ms")));
	ck_assert(json_is_null(json_object_get(root, "stop_to_books_ms")));
	ck_assert(json_is_null(json_object_get(root, "stop_last_event")));
	ck_assert(json_is_null(json_object_get(root, "stop_proposed_event")));
	ck_assert(json_is_integer(json_object_get(json_object_get(root, "losses"),
						  "fragments_cut_by_stop")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(root, "run"), "run")), 7);
	/* One equation not balanced: failed, though nothing else went wrong. */
	ck_assert_str_eq(json_string_value(json_object_get(root, "status")), "failed");
	ck_assert(json_is_false(json_object_get(root, "balanced")));
	json_t *eqs = json_object_get(root, "equations");
	ck_assert_uint_eq(json_array_size(eqs), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(eqs, 1), "note")), "why");
	ck_assert_ptr_null(json_object_get(json_array_get(eqs, 0), "note"));
	json_decref(root);
	fx.acct.equations[1].ok = true;
	root = tree();
	ck_assert_str_eq(json_string_value(json_object_get(root, "status")), "ok");
	ck_assert_int_eq(json_integer_value(json_object_get(root, "exit_status")), 0);
	json_decref(root);
	fx.snap.status = 1;
	root = tree();
	ck_assert_str_eq(json_string_value(json_object_get(root, "status")), "failed");
	ck_assert_int_eq(json_integer_value(json_object_get(root, "exit_status")), 1);
	json_decref(root);
}
END_TEST

START_TEST(test_counters)
{
	json_t *root = tree(), *c = json_object_get(root, "counters");
	json_t *bld = json_object_get(c, "builder");
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "frames_read")), 130);
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "greetings_busy")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "greetings_timed_out")), 6);
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "refused_connections")), 4);
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "credits_sent")), 9);
	ck_assert_int_eq(json_integer_value(json_object_get(bld, "frags_received")), 130);
	json_t *from1 = json_object_get(c, "builder.from_reader.1");
	ck_assert_int_eq(json_integer_value(json_object_get(from1, "frames_received")), 30);
	json_t *r0 = json_object_get(c, "reader.0.source.0");
	ck_assert_int_eq(json_integer_value(json_object_get(r0, "frames_forwarded")), 100);
	/* CPU and memory go under "processes", not the counters. */
	ck_assert_ptr_null(json_object_get(c, "source.0.process"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(c, "source.0"), "events")),
			 100);
	json_decref(root);
}
END_TEST

START_TEST(test_losses_and_links)
{
	json_t *root = tree();
	json_t *losses = json_object_get(root, "losses");
	ck_assert_int_eq(json_integer_value(json_object_get(losses, "frames_lost_with_readers")), 70);
	json_t *gone = json_object_get(losses, "peers_gone");
	ck_assert_uint_eq(json_array_size(gone), 2);
	json_t *g0 = json_array_get(gone, 0), *g1 = json_array_get(gone, 1);
	ck_assert_str_eq(json_string_value(json_object_get(g0, "role")), "source");
	ck_assert_str_eq(json_string_value(json_object_get(g0, "how")), "stalled");
	ck_assert_str_eq(json_string_value(json_object_get(g1, "role")), "reader");
	ck_assert_str_eq(json_string_value(json_object_get(g1, "how")), "died");
	ck_assert_int_eq(json_integer_value(json_object_get(g1, "pid")), 103);
	json_t *links = json_object_get(root, "reader_links");
	ck_assert_uint_eq(json_array_size(links), 2);
	json_t *l0 = json_array_get(links, 0), *l1 = json_array_get(links, 1);
	ck_assert_str_eq(json_string_value(json_object_get(l0, "transport")), "tcp");
	ck_assert_str_eq(json_string_value(json_object_get(l0, "address")), "127.0.0.1:5");
	ck_assert(!json_is_true(json_object_get(l0, "died")));
	ck_assert_ptr_null(json_object_get(l0, "frames_lost_with_reader"));
	ck_assert_str_eq(json_string_value(json_object_get(l1, "transport")), "shm");
	ck_assert_str_eq(json_string_value(json_object_get(l1, "segment")), "/es-t-r1");
	ck_assert(json_is_true(json_object_get(l1, "died")));
	/* No final counters from reader 1: what its source put on the wire
	 * beyond what the builder received is lost with it. */
	ck_assert_int_eq(json_integer_value(json_object_get(l1, "frames_on_wire_from_its_sources")),
			 100);
	ck_assert_int_eq(json_integer_value(json_object_get(l1, "frames_lost_with_reader")), 70);
	json_t *mem = json_object_get(root, "memory_bounds");
	ck_assert_int_eq(json_integer_value(json_object_get(mem, "shm_ring_capacity_bytes")), 4096);
	json_decref(root);
}
END_TEST

/* Every string a peer or an error carries comes out valid UTF-8, the bad
 * byte as U+FFFD, whatever module wrote it. */
START_TEST(test_strings_valid_utf8)
{
	json_t *root = tree();
	json_t *procs = json_object_get(root, "processes");
	ck_assert_uint_eq(json_array_size(procs), 5);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(procs, 0), "host")),
			 "builderhost");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(procs, 1), "host")),
			 "bad\xef\xbf\xbdhost");
	json_t *errors = json_object_get(root, "errors");
	ck_assert_uint_eq(json_array_size(errors), 3);
	ck_assert_str_eq(json_string_value(json_array_get(errors, 1)),
			 "quote \" and bad \xef\xbf\xbd byte");
	ck_assert_str_eq(json_string_value(json_array_get(errors, 2)),
			 "... and 3 more errors, see the log");
	char *text = json_dumps(root, 0);
	ck_assert_ptr_nonnull(text);
	json_error_t err;
	json_t *again = json_loads(text, 0, &err);
	ck_assert_msg(again != NULL, "%s", err.text);
	json_decref(again);
	free(text);
	json_decref(root);
}
END_TEST

/* metrics_write puts the same tree in OUT_DIR/metrics.json. */
START_TEST(test_write)
{
	ck_assert_int_eq(metrics_write(&fx.snap, &fx.acct), 0);
	char path[128];
	snprintf(path, sizeof path, "%s/metrics.json", fx.dir);
	json_error_t err;
	json_t *file = json_load_file(path, 0, &err);
	ck_assert_msg(file != NULL, "%s", err.text);
	json_t *root = tree();
	ck_assert(json_equal(json_object_get(file, "counters"), json_object_get(root, "counters")));
	ck_assert(json_equal(json_object_get(file, "losses"), json_object_get(root, "losses")));
	json_decref(root);
	json_decref(file);
}
END_TEST

START_TEST(test_u64_beyond_int64)
{
	json_t *v = metrics_json_u64(UINT64_MAX);
	ck_assert(json_is_real(v));
	json_decref(v);
	v = metrics_json_u64(INT64_MAX);
	ck_assert(json_is_integer(v));
	ck_assert(json_integer_value(v) == INT64_MAX);
	json_decref(v);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("json");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_top_level_fields);
	tcase_add_test(tc, test_counters);
	tcase_add_test(tc, test_losses_and_links);
	tcase_add_test(tc, test_strings_valid_utf8);
	tcase_add_test(tc, test_write);
	tcase_add_test(tc, test_u64_beyond_int64);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(metrics_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
