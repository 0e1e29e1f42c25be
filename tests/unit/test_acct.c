/* Unit tests of common/acct.c: every equation of a run computed from
 * reports as the daemons send them; a missing report fails its equations by
 * name; a lost frame anywhere unbalances the right one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct.h"

enum { S = 4, N = 2, EVENTS = 1000 };

static struct ctl_report source_reports[S];
static struct ctl_report reader_reports[N];
static const struct ctl_report *source_ptrs[S];
static uint16_t reader_sources[N][2] = { { 0, 1 }, { 2, 3 } };
static struct acct_reader readers[N];
static struct bld_counters core;
static struct acct_run run;

static void set(struct ctl_report *r, const char *group, const char *name, uint64_t v)
{
	ck_assert(ctl_group_set(ctl_report_group(r, group), name, v));
}

/* A clean run: every source sends every fragment, every event completes. */
static void clean_run_setup(void)
{
	memset(source_reports, 0, sizeof source_reports);
	memset(reader_reports, 0, sizeof reader_reports);
	memset(&core, 0, sizeof core);
	for (int s = 0; s < S; s++) {
		set(&source_reports[s], "", "events", EVENTS);
		set(&source_reports[s], "", "frags_omitted", 0);
		set(&source_reports[s], "", "frags_sent", EVENTS);
		set(&source_reports[s], "", "frags_abandoned", 0);
		set(&source_reports[s], "", "frames_wire", EVENTS);
		source_ptrs[s] = &source_reports[s];
	}
	for (int r = 0; r < N; r++) {
		for (int i = 0; i < 2; i++) {
			char g[16];
			snprintf(g, sizeof g, "source.%u", reader_sources[r][i]);
			set(&reader_reports[r], g, "frames_received", EVENTS);
			set(&reader_reports[r], g, "frames_forwarded", EVENTS);
			set(&reader_reports[r], g, "frames_rejected", 0);
			set(&reader_reports[r], g, "frames_held_at_end", 0);
		}
		set(&reader_reports[r], "", "frames_forwarded", 2 * EVENTS);
		readers[r] = (struct acct_reader){
			.id = (uint32_t)r,
			.report = &reader_reports[r],
			.frames_received_by_builder = 2 * EVENTS,
			.source_count = 2,
			.sources = reader_sources[r],
		};
	}
	core.frags_received = core.frags_unique = S * EVENTS;
	core.events_complete = core.events_accepted = EVENTS;
	run = (struct acct_run){
		.sources = S,
		.source_reports = source_ptrs,
		.reader_count = N,
		.readers = readers,
		.builder = &core,
		.builder_frames_received = S * EVENTS,
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

static size_t failing(const struct acct *a)
{
	size_t n = 0;
	for (size_t i = 0; i < a->count; i++)
		n += !a->equations[i].ok;
	return n;
}

START_TEST(test_clean_run_balances)
{
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	/* Per source 1, 2 and its hop; the total of 2; one per reader; six builder-side. */
	ck_assert_uint_eq(a.count, 3 * S + 1 + N + 6);
	bool agree;
	ck_assert_uint_eq(acct_events_generated(&run, &agree), EVENTS);
	ck_assert(agree);
	acct_free(&a);
}
END_TEST

START_TEST(test_frame_lost_between_source_and_reader)
{
	/* Reader 1 saw one frame fewer of source 3 than it sent. */
	set(&reader_reports[1], "source.3", "frames_received", EVENTS - 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	const struct acct_equation *e = find(&a, "2 source 3:");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert_uint_eq(e->rhs, EVENTS - 1);
	ck_assert(!find(&a, "hop reader 1, source 3")->ok);
	ck_assert(!find(&a, "2 all sources")->ok);
	ck_assert_uint_eq(failing(&a), 3);
	acct_free(&a);
}
END_TEST

START_TEST(test_frame_lost_between_reader_and_builder)
{
	readers[0].frames_received_by_builder--;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "hop reader 0 to builder")->ok);
	ck_assert_uint_eq(failing(&a), 1);
	acct_free(&a);
}
END_TEST

START_TEST(test_missing_report_fails_by_name)
{
	source_ptrs[2] = NULL;
	readers[1].report = NULL;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "1 source 2:");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "no final counters from source 2");
	e = find(&a, "hop reader 1 to builder");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "no final counters from reader 1");
	bool agree;
	acct_events_generated(&run, &agree);
	ck_assert(!agree);
	ck_assert(!find(&a, "5 run:")->ok);
	acct_free(&a);
}
END_TEST

START_TEST(test_builder_equations)
{
	/* Faults: some fragments duplicated, some events expired. */
	core.frags_received = S * EVENTS + 10;
	core.frags_duplicate = 10;
	core.events_complete = EVENTS - 5;
	core.events_accepted = EVENTS - 5;
	core.events_expired = core.events_expired_timeout = 5;
	core.frags_unique = S * (EVENTS - 5) + 15;
	core.frags_in_expired = 15;
	core.frags_late = S * 5 - 15;
	core.frags_received = core.frags_unique + core.frags_duplicate + core.frags_late;
	run.builder_frames_received = core.frags_received;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(find(&a, "3 builder")->ok);
	ck_assert(find(&a, "4 builder")->ok);
	ck_assert(find(&a, "5 run")->ok);
	/* One accepted event too many breaks 6 and nothing else builder-side. */
	acct_free(&a);
	core.events_accepted++;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "6 builder")->ok);
	acct_free(&a);
}
END_TEST

START_TEST(test_sources_disagree_on_events)
{
	set(&source_reports[1], "", "events", EVENTS + 1);
	bool agree;
	ck_assert_uint_eq(acct_events_generated(&run, &agree), EVENTS + 1);
	ck_assert(!agree);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "5 run")->ok);
	acct_free(&a);
}
END_TEST

static Suite *acct_suite(void)
{
	Suite *s = suite_create("acct");
	TCase *tc = tcase_create("equations");
	tcase_add_checked_fixture(tc, clean_run_setup, NULL);
	tcase_add_test(tc, test_clean_run_balances);
	tcase_add_test(tc, test_frame_lost_between_source_and_reader);
	tcase_add_test(tc, test_frame_lost_between_reader_and_builder);
	tcase_add_test(tc, test_missing_report_fails_by_name);
	tcase_add_test(tc, test_builder_equations);
	tcase_add_test(tc, test_sources_disagree_on_events);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(acct_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
