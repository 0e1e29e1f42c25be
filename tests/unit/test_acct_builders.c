/* Unit tests of common/core/acct_builders.c: the books of a run of several
 * builders (docs/BUILDERS.md, "The books"): each (reader, builder) hop,
 * each builder's assigned = complete + expired + never observed + lost,
 * misrouted = 0, the run's IDs assigned once, the reader's late and lost
 * frames, and a builder gone without a report counted in its bucket. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acct.h"
#include "wire/counters.h"

/* Two sources, one reader of both, two builders of a batch of 64 each. */
enum { S = 2, M = 2, EVENTS = 128, BATCH = 64 };

static struct ctl_report source_reports[S];
static const struct ctl_report *source_ptrs[S];
static struct ctl_report reader_report;
static uint16_t reader_sources[S] = { 0, 1 };
static struct acct_reader reader;
static struct ctl_report builder_reports[M];
static struct acct_builder builders[M];
static struct bld_counters core;
static struct acct_run run;

static void set(struct ctl_report *r, const char *group, const char *name, uint64_t v)
{
	ck_assert(ctl_group_set(ctl_report_group(r, group), name, v));
}

static void clean_setup(void)
{
	memset(source_reports, 0, sizeof source_reports);
	memset(&reader_report, 0, sizeof reader_report);
	memset(builder_reports, 0, sizeof builder_reports);
	memset(&core, 0, sizeof core);
	for (int s = 0; s < S; s++) {
		set(&source_reports[s], "", "events", EVENTS);
		set(&source_reports[s], "", "frags_omitted", 0);
		set(&source_reports[s], "", "frags_sent", EVENTS);
		set(&source_reports[s], "", "frags_abandoned", 0);
		set(&source_reports[s], "", "frames_wire", EVENTS);
		source_ptrs[s] = &source_reports[s];
		char g[CNT_GROUP_BYTES];
		snprintf(g, sizeof g, "source.%d", s);
		set(&reader_report, g, "frames_received", EVENTS);
		set(&reader_report, g, "frames_forwarded", EVENTS);
		set(&reader_report, g, "frames_rejected", 0);
		set(&reader_report, g, "frames_held_at_end", 0);
		set(&reader_report, g, "frames_late", 0);
		set(&reader_report, g, "frames_lost_builder", 0);
	}
	set(&reader_report, "", "frames_forwarded", S * EVENTS);
	reader = (struct acct_reader){ .id = 0, .report = &reader_report,
				       .frames_received_by_builder = S * EVENTS, .source_count = S,
				       .sources = reader_sources };
	for (int b = 0; b < M; b++) {
		char g[CNT_GROUP_BYTES];
		snprintf(g, sizeof g, "builder.%d", b);
		set(&reader_report, g, "frames_forwarded", S * BATCH);
		struct ctl_report *r = &builder_reports[b];
		set(r, "", "events_complete", BATCH);
		set(r, "", "events_accepted", BATCH);
		set(r, "", "events_expired", 0);
		set(r, "", "events_unobserved", 0);
		set(r, "", "frags_received", S * BATCH);
		set(r, "", "frags_unique", S * BATCH);
		set(r, "", "events_assigned", BATCH);
		set(r, "", "frags_misrouted", 0);
		set(r, "reader.0", "frames_received", S * BATCH);
		builders[b] = (struct acct_builder){ .id = (uint32_t)b, .report = r,
						     .assigned = BATCH, .decided = BATCH };
	}
	core.frags_received = core.frags_unique = S * EVENTS;
	core.events_complete = core.events_accepted = EVENTS;
	run = (struct acct_run){
		.sources = S, .source_reports = source_ptrs, .reader_count = 1, .readers = &reader,
		.builder = &core, .builder_frames_received = S * EVENTS,
		.builder_count = M, .builders = builders,
	};
}

static const struct acct_equation *find(const struct acct *a, const char *prefix)
{
	for (size_t i = 0; i < a->count; i++)
		if (strncmp(a->equations[i].name, prefix, strlen(prefix)) == 0)
			return &a->equations[i];
	ck_abort_msg("no equation named '%s...'", prefix);
	return NULL;
}

static bool has_violation(const struct acct *a, const char *part)
{
	for (size_t i = 0; i < a->violation_count; i++)
		if (strstr(a->violations[i].text, part) != NULL)
			return true;
	return false;
}

static size_t failing(const struct acct *a)
{
	size_t n = 0;
	for (size_t i = 0; i < a->count; i++)
		n += !a->equations[i].ok;
	return n;
}

/* The operator's drained stop after event 39: the sources generated 40
 * events and cut the rest; the manager assigned batch 0 alone (builder 0:
 * 40 complete, 24 never observed) and left 64 IDs unassigned. The run's
 * assigned and event equations count those, and the books balance. */
START_TEST(test_drained_stop_unassigned)
{
	enum { GENERATED = 40 };
	for (int s = 0; s < S; s++) {
		set(&source_reports[s], "", "frags_sent", GENERATED);
		set(&source_reports[s], "", "frags_cut_by_stop", EVENTS - GENERATED);
		set(&source_reports[s], "", "frames_wire", GENERATED);
		char g[CNT_GROUP_BYTES];
		snprintf(g, sizeof g, "source.%d", s);
		set(&reader_report, g, "frames_received", GENERATED);
		set(&reader_report, g, "frames_forwarded", GENERATED);
	}
	set(&reader_report, "", "frames_forwarded", S * GENERATED);
	set(&reader_report, "builder.0", "frames_forwarded", S * GENERATED);
	set(&reader_report, "builder.1", "frames_forwarded", 0);
	reader.frames_received_by_builder = S * GENERATED;
	struct ctl_report *r = &builder_reports[0];
	set(r, "", "events_complete", GENERATED);
	set(r, "", "events_accepted", GENERATED);
	set(r, "", "events_unobserved", BATCH - GENERATED);
	set(r, "", "frags_received", S * GENERATED);
	set(r, "", "frags_unique", S * GENERATED);
	set(r, "reader.0", "frames_received", S * GENERATED);
	builders[0].decided = BATCH;
	r = &builder_reports[1];
	set(r, "", "events_complete", 0);
	set(r, "", "events_accepted", 0);
	set(r, "", "frags_received", 0);
	set(r, "", "frags_unique", 0);
	set(r, "", "events_assigned", 0);
	set(r, "reader.0", "frames_received", 0);
	builders[1].assigned = builders[1].decided = 0;
	core.frags_received = core.frags_unique = S * GENERATED;
	core.events_complete = core.events_accepted = GENERATED;
	core.events_unobserved = BATCH - GENERATED;
	run.builder_frames_received = S * GENERATED;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));   /* without the unassigned IDs */
	ck_assert(!find(&a, "run: event IDs assigned = event IDs generated")->ok);
	acct_free(&a);
	run.ids_cut_unassigned = EVENTS - BATCH;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert_msg(acct_balanced(&a), "%zu failing", failing(&a));
	const struct acct_equation *e = find(&a, "run: event IDs assigned = event IDs generated");
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert_uint_eq(a.cut_by_stop, S * (EVENTS - GENERATED));
	acct_free(&a);
}
END_TEST

START_TEST(test_two_builders_balance)
{
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert_msg(acct_balanced(&a), "%zu failing", failing(&a));
	const struct acct_equation *e = find(&a, "hop reader 0 to builder 1: forwarded = received by builder");
	ck_assert_uint_eq(e->lhs, S * BATCH);
	e = find(&a, "builder 0: assigned = complete + expired + never observed + lost");
	ck_assert_uint_eq(e->lhs, BATCH);
	ck_assert_uint_eq(e->rhs, BATCH);
	ck_assert(find(&a, "builder 1: misrouted = 0")->ok);
	e = find(&a, "run: event IDs assigned = event IDs generated");
	ck_assert_uint_eq(e->lhs, EVENTS);
	/* The kinds of several builders, each named by its format. */
	bool seen[ACCT_KIND_COUNT] = { false };
	for (size_t i = 0; i < a.count; i++) {
		const char *fmt = acct_kind_describe(a.equations[i].kind)->format;
		unsigned x = 0, y = 0;
		char again[128];
		ck_assert_int_ge(sscanf(a.equations[i].name, fmt, &x, &y), 0);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(again, sizeof again, fmt, x, y);
#pragma GCC diagnostic pop
		ck_assert_str_eq(again, a.equations[i].name);
		seen[a.equations[i].kind] = true;
	}
	for (int k = ACCT_HOP_READER_BUILDER; k <= ACCT_RUN_ASSIGNED; k++)
		ck_assert_msg(seen[k], "no equation of the kind '%s'", acct_kind_describe(k)->format);
	acct_free(&a);
}
END_TEST

START_TEST(test_one_builder_has_no_builder_equations)
{
	run.builder_count = 0;
	run.builders = NULL;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	for (size_t i = 0; i < a.count; i++)
		ck_assert_int_lt(a.equations[i].kind, ACCT_HOP_READER_BUILDER);
	acct_free(&a);
}
END_TEST

START_TEST(test_misrouted_fails_naming_the_builder)
{
	set(&builder_reports[1], "", "frags_misrouted", 3);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	const struct acct_equation *e = find(&a, "builder 1: misrouted = 0");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->lhs, 3);
	ck_assert_uint_eq(failing(&a), 1);
	acct_free(&a);
}
END_TEST

START_TEST(test_frame_lost_between_reader_and_one_builder)
{
	set(&builder_reports[1], "reader.0", "frames_received", S * BATCH - 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "hop reader 0 to builder 1");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->rhs, S * BATCH - 1);
	ck_assert(find(&a, "hop reader 0 to builder 0")->ok);
	acct_free(&a);
}
END_TEST

START_TEST(test_builder_missing_events)
{
	/* Builder 0 decided one event less than it was given, and no loss. */
	set(&builder_reports[0], "", "events_complete", BATCH - 1);
	builders[0].decided = BATCH - 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "builder 0: assigned");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->lhs, BATCH);
	ck_assert_uint_eq(e->rhs, BATCH - 1);
	acct_free(&a);
}
END_TEST

START_TEST(test_token_beyond_decided_is_impossible)
{
	builders[1].decided = BATCH + 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "builder 1's last token's decided = 65 exceeds"));
	acct_free(&a);
}
END_TEST

START_TEST(test_builder_disagrees_with_the_manager)
{
	set(&builder_reports[0], "", "events_assigned", BATCH + 64);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "builder 0's events_assigned = 128 but the event manager assigned it 64"));
	ck_assert(!acct_balanced(&a));
	acct_free(&a);
}
END_TEST

START_TEST(test_late_and_lost_frames_close_the_reader_hop)
{
	/* Source 1: 2 frames late, 3 lost with builder 1, which the hub lost
	 * (30 of its events in flight), not forwarded. */
	builders[1].lost = 30;
	set(&reader_report, "source.1", "frames_forwarded", EVENTS - 5);
	set(&reader_report, "source.1", "frames_late", 2);
	set(&reader_report, "source.1", "frames_lost_builder", 3);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "hop reader 0, source 1");
	ck_assert(e->ok);
	ck_assert_uint_eq(e->rhs, EVENTS);
	ck_assert(!has_violation(&a, "but the hub lost no builder"));
	acct_free(&a);
}
END_TEST

/* A reader that dropped frames as lost with a builder the hub never lost
 * (told so by a forged LOST): its hop equation balances, since it counted
 * every frame, but the counter is impossible by name and the run is not
 * balanced; with one builder (no builder to lose) alike. */
START_TEST(test_lost_frames_without_a_lost_builder_are_impossible)
{
	set(&reader_report, "source.0", "frames_forwarded", EVENTS - 7);
	set(&reader_report, "source.0", "frames_lost_builder", 7);
	for (int one = 0; one < 2; one++) {
		if (one) {
			run.builder_count = 0;
			run.builders = NULL;
		}
		struct acct a;
		ck_assert_int_eq(acct_compute(&run, &a), 0);
		ck_assert(find(&a, "hop reader 0, source 0")->ok);
		ck_assert(has_violation(&a, "reader 0's source.0 frames_lost_builder = 7 but the hub lost no builder"));
		ck_assert(!acct_balanced(&a));
		acct_free(&a);
	}
}
END_TEST

/* Builder 1 died without a report, 30 of its 64 events in flight: the
 * frames forwarded to it and its events are its loss, the books balance. */
START_TEST(test_gone_builder_counts_lost)
{
	builders[1] = (struct acct_builder){ .id = 1, .report = NULL, .gone = true,
					     .assigned = BATCH, .decided = BATCH - 30, .lost = 30 };
	core.frags_received = core.frags_unique = S * BATCH;
	core.events_complete = core.events_accepted = BATCH;
	reader.frames_received_by_builder = S * BATCH;
	run.builder_frames_received = S * BATCH;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert_msg(acct_balanced(&a), "%zu failing", failing(&a));
	ck_assert_uint_eq(a.lost_with_builders, 30);
	ck_assert_uint_eq(a.frames_lost_with_builders, S * BATCH);
	const struct acct_equation *e = find(&a, "builder 1: assigned");
	ck_assert_str_eq(e->note, "builder 1 is gone: its last token's decided + lost");
	e = find(&a, "hop reader 0 to builder 1");
	ck_assert_str_eq(e->note, "builder 1 is gone: 128 frames counted as lost with it");
	acct_free(&a);
}
END_TEST

START_TEST(test_missing_builder_report_fails_by_name)
{
	builders[0].report = NULL;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert_str_eq(find(&a, "builder 0: assigned")->note, "no final counters from builder 0");
	ck_assert_str_eq(find(&a, "builder 0: misrouted")->note, "no final counters from builder 0");
	ck_assert(!find(&a, "hop reader 0 to builder 0")->ok);
	acct_free(&a);
}
END_TEST

static Suite *acct_builders_suite(void)
{
	Suite *s = suite_create("acct_builders");
	TCase *tc = tcase_create("equations");
	tcase_add_checked_fixture(tc, clean_setup, NULL);
	tcase_add_test(tc, test_two_builders_balance);
	tcase_add_test(tc, test_drained_stop_unassigned);
	tcase_add_test(tc, test_one_builder_has_no_builder_equations);
	tcase_add_test(tc, test_misrouted_fails_naming_the_builder);
	tcase_add_test(tc, test_frame_lost_between_reader_and_one_builder);
	tcase_add_test(tc, test_builder_missing_events);
	tcase_add_test(tc, test_token_beyond_decided_is_impossible);
	tcase_add_test(tc, test_builder_disagrees_with_the_manager);
	tcase_add_test(tc, test_late_and_lost_frames_close_the_reader_hop);
	tcase_add_test(tc, test_lost_frames_without_a_lost_builder_are_impossible);
	tcase_add_test(tc, test_gone_builder_counts_lost);
	tcase_add_test(tc, test_missing_builder_report_fails_by_name);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(acct_builders_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
