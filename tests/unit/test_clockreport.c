/* Unit tests of builderd/report/clockreport.c, the clocks' part of the report,
 * from a real clock module whose peers answered over loopback
 * (tests/unit/clockpeers.h) and a real output that wrote an event: a source
 * 5 ms ahead that says so and a reader on our clock. metrics.json's
 * "clocks" and latency fields, the summary's lines with and without
 * correction, and a peer's host name of any bytes. */
#include <check.h>
#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clockpeers.h"

#include "builderd/report/clockreport.h"
#include "builderd/clock/clocks.h"
#include "builderd/data/output.h"
#include "builderd/peer.h"
#include "sys/clock.h"

#define OFFSET_NS INT64_C(5000000)   /* the source's clock, 5 ms ahead */

static struct event_base *base;
static char dir[64];
static struct peer_table peers;
static struct output *out;
static struct clocks *clocks;
static struct fake_peer fsrc, frdr;
static bool ready;

static void on_ready(void *arg)
{
	(void)arg;
	ready = true;
}

static bool is_ready(void *arg)
{
	(void)arg;
	return ready;
}

/* The run up to its end: both peers joined and reported, the source's
 * first burst answered, one event from it written, the clocks finished. */
static void run(bool correction, int64_t source_offset_ns, const char *source_host)
{
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	snprintf(dir, sizeof dir, "/tmp/test_clockreport.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(peer_table_init(&peers, 1, 1), 0);
	out = output_open(dir, 8, 1, NULL, NULL);
	ck_assert_ptr_nonnull(out);
	struct clocks_config cc = { .base = base, .peers = &peers, .out = out, .run_id = 4,
				 .correction = correction, .quiet = true, .ready = on_ready };
	clocks = clocks_create(&cc);
	ck_assert_ptr_nonnull(clocks);
	memset(&fsrc, 0, sizeof fsrc);
	memset(&frdr, 0, sizeof frdr);
	ready = false;
	clockpeers_join(&fsrc, base, clocks, peer_source(&peers, 0), source_host, source_offset_ns);
	clockpeers_join(&frdr, base, clocks, peer_reader(&peers, 0), "localhost", 0);
	clockpeers_report(&fsrc, base, false, source_offset_ns, false);
	clockpeers_report(&frdr, base, false, 0, false);
	ck_assert(clockpeers_run(base, is_ready, NULL, 5000));
	/* An event whose earliest fragment the source stamped 1 ms ago on its
	 * clock. */
	struct bld_event e = { .run_id = 4, .event_id = 0, .accepted = true, .earliest_source = 0,
			       .earliest_timestamp_ns = clk_realtime_ns() + (uint64_t)source_offset_ns -
						       1000000u };
	output_add_event(out, &e);
	ck_assert_int_eq(output_flush(out), 0);
	clocks_finish(clocks);
}

static void teardown(void)
{
	clockpeers_free(&fsrc);
	clockpeers_free(&frdr);
	clocks_destroy(clocks);
	ck_assert(output_close(out));
	char path[128];
	snprintf(path, sizeof path, "%s/events.jsonl", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/expired.jsonl", dir);
	unlink(path);
	rmdir(dir);
	peer_table_free(&peers);
	event_base_free(base);
}

static json_t *get(json_t *o, const char *path)
{
	char key[64];
	const char *p = path;
	while (o != NULL && *p != '\0') {
		size_t n = strcspn(p, ".");
		snprintf(key, sizeof key, "%.*s", (int)n, p);
		o = json_object_get(o, key);
		p += n + (p[n] == '.');
	}
	ck_assert_msg(o != NULL, "no %s", path);
	return o;
}

static json_int_t integer(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

static const char *text(json_t *o, const char *path)
{
	json_t *v = get(o, path);
	ck_assert_msg(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static char *summary(void (*print)(const struct clocks *, FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	print(clocks, f);
	fclose(f);
	return buf;
}

/* Role both: the output's own uncertainty, nothing merged. */
static void own_latency_uncertainty(const struct clocks *c, FILE *f)
{
	clockreport_print_latency_uncertainty(c, NULL, f);
}

START_TEST(test_clocks_json)
{
	run(true, OFFSET_NS, "localhost");
	json_t *c = clockreport_json(clocks);
	ck_assert(json_is_true(get(c, "correction")));
	ck_assert_int_eq(integer(c, "default_drift_ppm"), (json_int_t)CKS_DEFAULT_DRIFT_PPM);
	ck_assert_str_eq(text(c, "same_clock_rule"), CLOCKS_SAME_CLOCK_RULE);
	ck_assert_int_eq(integer(c, "builder.injected_offset_ns"), 0);
	ck_assert(json_is_boolean(get(c, "builder.chrony_start.available")));
	ck_assert(json_is_boolean(get(c, "builder.chrony_end.available")));
	json_t *list = get(c, "peers");
	ck_assert_uint_eq(json_array_size(list), 2);
	ck_assert_uint_eq(json_array_size(get(c, "inconsistent_peers")), 0);

	/* The source: on our host, not on our clock, its offset found. */
	json_t *s = json_array_get(list, 0);
	ck_assert_str_eq(text(s, "peer"), "source.0");
	ck_assert_str_eq(text(s, "host"), "localhost");
	ck_assert(json_is_true(get(s, "same_host")));
	ck_assert(json_is_false(get(s, "same_clock")));
	ck_assert_int_eq(integer(s, "injected_offset_ns"), OFFSET_NS);
	ck_assert_int_eq(integer(s, "expected_offset_ns"), OFFSET_NS);
	json_int_t offset = integer(s, "inband.offset_ns"), bound = integer(s, "inband.bound_ns");
	ck_assert_int_eq(integer(s, "error_ns"), offset - OFFSET_NS);
	ck_assert(json_is_true(get(s, "within_bound")));
	ck_assert_int_lt(bound, OFFSET_NS);
	ck_assert_int_ge(integer(s, "inband.accepted"), CLOCKS_BURST);
	ck_assert_int_eq(integer(s, "inband.stamps.t1.user space"), integer(s, "inband.accepted"));
	ck_assert_str_eq(text(s, "inband.stamps.transport"), "control connection");
	ck_assert_str_eq(text(s, "inband.stamps.summary"), "user space");
	ck_assert_str_eq(text(s, "inband.drift_from"), "default");
	ck_assert_str_eq(text(s, "applied.basis"), "in band");
	ck_assert_str_eq(text(s, "applied.at"), "end");
	ck_assert(json_is_null(get(s, "applied.chrony")));
	json_int_t count = integer(s, "estimates.count");
	ck_assert_int_ge(count, CLOCKS_BURST);
	ck_assert_int_eq(integer(s, "estimates.against_injected.inside"), count);
	ck_assert_int_eq(integer(s, "estimates.against_injected.outside"), 0);
	ck_assert_int_eq(integer(s, "estimates.recorded"), count);
	ck_assert_uint_eq(json_array_size(get(s, "estimates.history")), (size_t)count);
	ck_assert_uint_eq(json_array_size(get(s, "estimates.history_fields")), 4);
	ck_assert_str_eq(text(s, "agreement.start"), "unknown");
	ck_assert(json_is_null(get(s, "consistent")));
	ck_assert_str_eq(text(s, "latency.correction"), "estimated offset subtracted");
	json_int_t applied = integer(s, "latency.applied_offset_ns");
	ck_assert_int_eq(applied, integer(s, "latency.would_correct_ns"));
	ck_assert_int_le(llabs(applied - OFFSET_NS), bound);
	ck_assert_int_eq(integer(s, "latency.earliest_in_events"), 1);
	ck_assert_int_gt(integer(s, "latency.max_uncertainty_ns"), 0);
	ck_assert_int_eq(integer(s, "latency.unbounded_events"), 0);

	/* The reader: on our clock; a reader's timestamps are not latencies. */
	json_t *r = json_array_get(list, 1);
	ck_assert_str_eq(text(r, "peer"), "reader.0");
	ck_assert(json_is_true(get(r, "same_clock")));
	ck_assert_int_eq(integer(r, "expected_offset_ns"), 0);
	ck_assert(json_object_get(r, "latency") == NULL);
	json_decref(c);
}
END_TEST

START_TEST(test_latency_json)
{
	run(true, OFFSET_NS, "localhost");
	json_t *lat = json_object();
	clockreport_latency_json(clocks, output_latency(out), NULL, lat);
	json_int_t unc = integer(lat, "uncertainty_ns");
	ck_assert_int_gt(unc, 0);
	ck_assert_int_eq(unc, integer(lat, "with_uncertainty.p99.uncertainty_ns"));
	ck_assert_int_eq(unc, integer(lat, "with_uncertainty.max.uncertainty_ns"));
	ck_assert_int_eq(integer(lat, "uncertainty_distribution.records"), 1);
	ck_assert_str_eq(text(lat, "uncertainty_basis"),
			 "clock offsets applied (in band, intersected with chrony's bound where both are known)");
	ck_assert(json_is_true(get(lat, "clock_corrected")));
	ck_assert_int_eq(integer(lat, "unbounded_samples"), 0);
	/* About the 1 ms the event waited, within the uncertainty and the
	 * time the test took. */
	ck_assert_int_ge(integer(lat, "with_uncertainty.max.value_ns") + unc, 1000000);
	json_decref(lat);

	char *line = summary(own_latency_uncertainty);
	ck_assert_msg(starts_with(line, " (+/- ") && strstr(line, ", clock-corrected)") != NULL,
		      "%s", line);
	free(line);
}
END_TEST

START_TEST(test_summary)
{
	run(true, OFFSET_NS, "localhost");
	char *s = summary(clockreport_print_summary);
	ck_assert_msg(starts_with(s, "clocks: 1 of 2 peers on the builder's clock; "), "%s", s);
	char *nl = strchr(s, '\n');
	ck_assert_ptr_nonnull(nl);
	static const char tail[] = "; 0 of 2 peers report a chrony bound";
	ck_assert(nl - s >= (ptrdiff_t)strlen(tail));
	ck_assert(strncmp(nl - strlen(tail), tail, strlen(tail)) == 0);
	/* One line for the source, none for the reader on our clock. */
	const char *src = nl + 1;
	ck_assert_msg(starts_with(src, "  source 0 on localhost: offset +"), "%s", src);
	ck_assert(strstr(src, " exchanges, user space stamps), no chrony bound; applied +") != NULL);
	ck_assert(strstr(src, " (in band)\n") != NULL);
	ck_assert(strstr(src, "not corrected") == NULL);
	ck_assert(strchr(src, '\n')[1] == '\0');
	free(s);
}
END_TEST

/* Without correction the offsets are still measured, and the summary says
 * what was left in. */
START_TEST(test_summary_not_corrected)
{
	run(false, OFFSET_NS, "localhost");
	char *s = summary(clockreport_print_summary);
	ck_assert_msg(strstr(s, "; not corrected: its latencies are off by -") != NULL, "%s", s);
	free(s);
	s = summary(own_latency_uncertainty);
	ck_assert_msg(strstr(s, ", NOT clock-corrected)") != NULL, "%s", s);
	free(s);
	json_t *c = clockreport_json(clocks);
	json_t *src = json_array_get(get(c, "peers"), 0);
	ck_assert_str_eq(text(src, "latency.correction"), "not corrected (--no-clock-correction)");
	ck_assert_int_eq(integer(src, "latency.applied_offset_ns"), 0);
	ck_assert_int_ne(integer(src, "latency.would_correct_ns"), 0);
	json_decref(c);
}
END_TEST

/* Every peer on our clock: no per-peer lines, uncertainty 0. */
START_TEST(test_same_clock)
{
	run(true, 0, "localhost");
	char *s = summary(clockreport_print_summary);
	ck_assert_msg(starts_with(s, "clocks: 2 of 2 peers on the builder's clock; "), "%s", s);
	ck_assert(strchr(s, '\n')[1] == '\0');
	free(s);
	s = summary(own_latency_uncertainty);
	ck_assert_str_eq(s, " (+/- 0 ns, same clock)");
	free(s);
	json_t *lat = json_object();
	clockreport_latency_json(clocks, output_latency(out), NULL, lat);
	ck_assert_str_eq(text(lat, "uncertainty_basis"), "same clock");
	ck_assert_int_eq(integer(lat, "uncertainty_ns"), 0);
	json_decref(lat);
}
END_TEST

/* A host name is the peer's say: any bytes become valid UTF-8 in the JSON
 * and an escaped, one-line mention in the summary. */
START_TEST(test_host_of_any_bytes)
{
	run(true, OFFSET_NS, "h\xff\n\"x");
	json_t *c = clockreport_json(clocks);
	char *dump = json_dumps(c, 0);
	ck_assert_ptr_nonnull(dump);
	json_error_t err;
	json_t *back = json_loads(dump, 0, &err);
	ck_assert_msg(back != NULL, "%s", err.text);
	const char *host = text(json_array_get(get(back, "peers"), 0), "host");
	ck_assert(strchr(host, '\n') != NULL);   /* kept, as an escape in the file */
	json_decref(back);
	free(dump);
	json_decref(c);
	char *s = summary(clockreport_print_summary);
	const char *line = strchr(s, '\n') + 1;
	ck_assert_msg(starts_with(line, "  source 0 on "), "%s", s);
	const char *end = strchr(line, '\n');
	ck_assert(strstr(line, ": offset ") < end);   /* the host's newline did not break it */
	ck_assert(end[1] == '\0');
	free(s);
}
END_TEST

static Suite *clockreport_suite(void)
{
	Suite *s = suite_create("clockreport");
	TCase *tc = tcase_create("report");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_clocks_json);
	tcase_add_test(tc, test_latency_json);
	tcase_add_test(tc, test_summary);
	tcase_add_test(tc, test_summary_not_corrected);
	tcase_add_test(tc, test_same_clock);
	tcase_add_test(tc, test_host_of_any_bytes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(clockreport_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
