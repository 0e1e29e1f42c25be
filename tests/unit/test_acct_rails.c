/* Unit tests of common/core/acct_rails.c: the books of links of several
 * rails (docs/BUILDERS.md, "Rails"): per (reader, builder, rail) forwarded
 * = received, the rails' sums = the link's on both sides, no frame on the
 * wrong rail; a link of one rail adds nothing; a rail one side does not
 * report fails by name. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/acct.h"
#include "wire/counters.h"

/* One source, one reader, two builders of a batch of 64 each, two rails. */
enum { EVENTS = 128, BATCH = 64, M = 2, RAILS = 2 };

static struct ctl_report source_report, reader_report, builder_reports[M];
static const struct ctl_report *source_ptrs[1];
static uint16_t reader_sources[1] = { 0 };
static struct acct_reader reader;
static struct acct_builder builders[M];
static struct bld_counters core;
static struct acct_run run;

static void set(struct ctl_report *r, const char *group, const char *name, uint64_t v)
{
	ck_assert(ctl_group_set(ctl_report_group(r, group), name, v));
}

static const char *rail_group(char buf[CNT_GROUP_BYTES], const char *role, unsigned id, unsigned k)
{
	char link[CNT_GROUP_BYTES];
	snprintf(link, sizeof link, "%s.%u", role, id);
	return cnt_group_rail(buf, link, k);
}

static void clean_setup(void)
{
	memset(&source_report, 0, sizeof source_report);
	memset(&reader_report, 0, sizeof reader_report);
	memset(builder_reports, 0, sizeof builder_reports);
	memset(&core, 0, sizeof core);
	set(&source_report, "", "events", EVENTS);
	set(&source_report, "", "frags_omitted", 0);
	set(&source_report, "", "frags_sent", EVENTS);
	set(&source_report, "", "frags_abandoned", 0);
	set(&source_report, "", "frames_wire", EVENTS);
	source_ptrs[0] = &source_report;
	set(&reader_report, "source.0", "frames_received", EVENTS);
	set(&reader_report, "source.0", "frames_forwarded", EVENTS);
	set(&reader_report, "source.0", "frames_rejected", 0);
	set(&reader_report, "source.0", "frames_held_at_end", 0);
	set(&reader_report, "source.0", "frames_late", 0);
	set(&reader_report, "source.0", "frames_lost_builder", 0);
	set(&reader_report, "", "frames_forwarded", EVENTS);
	reader = (struct acct_reader){ .id = 0, .report = &reader_report,
				       .frames_received_by_builder = EVENTS, .source_count = 1,
				       .sources = reader_sources };
	char g[CNT_GROUP_BYTES];
	for (unsigned b = 0; b < M; b++) {
		snprintf(g, sizeof g, "builder.%u", b);
		set(&reader_report, g, "frames_forwarded", BATCH);
		struct ctl_report *r = &builder_reports[b];
		set(r, "", "events_complete", BATCH);
		set(r, "", "events_accepted", BATCH);
		set(r, "", "events_expired", 0);
		set(r, "", "events_unobserved", 0);
		set(r, "", "frags_received", BATCH);
		set(r, "", "frags_unique", BATCH);
		set(r, "", "events_assigned", BATCH);
		set(r, "", "frags_misrouted", 0);
		set(r, "reader.0", "frames_received", BATCH);
		for (unsigned k = 0; k < RAILS; k++) {
			set(&reader_report, rail_group(g, "builder", b, k), "frames_forwarded",
			    BATCH / RAILS);
			set(r, rail_group(g, "reader", 0, k), "frames_received", BATCH / RAILS);
			set(r, rail_group(g, "reader", 0, k), "frames_wrong_rail", 0);
		}
		builders[b] = (struct acct_builder){ .id = b, .report = r, .assigned = BATCH,
						     .decided = BATCH };
	}
	core.frags_received = core.frags_unique = EVENTS;
	core.events_complete = core.events_accepted = EVENTS;
	run = (struct acct_run){
		.sources = 1, .source_reports = source_ptrs, .reader_count = 1, .readers = &reader,
		.builder = &core, .builder_frames_received = EVENTS,
		.builder_count = M, .builders = builders,
	};
}

static const struct acct_equation *find(const struct acct *a, const char *name)
{
	for (size_t i = 0; i < a->count; i++)
		if (strcmp(a->equations[i].name, name) == 0)
			return &a->equations[i];
	return NULL;
}

static size_t of_kind(const struct acct *a, enum acct_kind kind)
{
	size_t n = 0;
	for (size_t i = 0; i < a->count; i++)
		n += a->equations[i].kind == kind;
	return n;
}

START_TEST(test_two_rails_to_two_builders_balance)
{
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	ck_assert_uint_eq(of_kind(&a, ACCT_HOP_RAIL), M * RAILS);
	ck_assert_uint_eq(of_kind(&a, ACCT_RAILS_READER), M);
	ck_assert_uint_eq(of_kind(&a, ACCT_RAILS_BUILDER), M);
	ck_assert_uint_eq(of_kind(&a, ACCT_WRONG_RAIL), M);
	const struct acct_equation *e =
		find(&a, "hop reader 0 to builder 1, rail 1: forwarded = received by builder");
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->lhs, BATCH / RAILS);
	ck_assert_ptr_nonnull(find(&a, "reader 0 to builder 0: the rails' frames forwarded = the link's"));
	ck_assert_ptr_nonnull(find(&a, "builder 1 from reader 0: the rails' frames received = the link's"));
	ck_assert_ptr_nonnull(find(&a, "builder 0 from reader 0: frames on the wrong rail = 0"));
	acct_free(&a);
}
END_TEST

START_TEST(test_one_rail_adds_nothing)
{
	memset(&reader_report, 0, sizeof reader_report);
	memset(builder_reports, 0, sizeof builder_reports);
	run.builder_count = 0;
	run.builders = NULL;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	for (int k = ACCT_HOP_RAIL; k <= ACCT_WRONG_RAIL; k++)
		ck_assert_uint_eq(of_kind(&a, (enum acct_kind)k), 0);
	acct_free(&a);
}
END_TEST

/* A frame lost between the rail's ends, counted on the wrong rail, or a
 * rail the builder does not report: each fails its own equation. */
START_TEST(test_a_rail_that_does_not_balance_fails_by_name)
{
	char g[CNT_GROUP_BYTES];
	set(&builder_reports[1], rail_group(g, "reader", 0, 0), "frames_received", BATCH / RAILS - 1);
	set(&builder_reports[0], rail_group(g, "reader", 0, 1), "frames_wrong_rail", 3);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(!find(&a, "hop reader 0 to builder 1, rail 0: forwarded = received by builder")->ok);
	ck_assert(find(&a, "hop reader 0 to builder 1, rail 1: forwarded = received by builder")->ok);
	ck_assert(!find(&a, "builder 1 from reader 0: the rails' frames received = the link's")->ok);
	const struct acct_equation *e = find(&a, "builder 0 from reader 0: frames on the wrong rail = 0");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->lhs, 3);
	acct_free(&a);

	clean_setup();
	set(&reader_report, rail_group(g, "builder", 0, 2), "frames_forwarded", 0);
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	e = find(&a, "hop reader 0 to builder 0, rail 2: forwarded = received by builder");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "rail 2 of the link is in the reader's report only");
	acct_free(&a);
}
END_TEST

/* One builder (--role both): its side is what it read itself. */
START_TEST(test_one_builder_reads_its_own_rails)
{
	memset(&reader_report, 0, sizeof reader_report);
	set(&reader_report, "source.0", "frames_received", EVENTS);
	set(&reader_report, "source.0", "frames_forwarded", EVENTS);
	set(&reader_report, "source.0", "frames_rejected", 0);
	set(&reader_report, "source.0", "frames_held_at_end", 0);
	set(&reader_report, "", "frames_forwarded", EVENTS);
	char g[CNT_GROUP_BYTES];
	set(&reader_report, rail_group(g, "builder", 0, 0), "frames_forwarded", 64);
	set(&reader_report, rail_group(g, "builder", 0, 1), "frames_forwarded", 64);
	run.builder_count = 0;
	run.builders = NULL;
	reader.rails = 2;
	reader.rail_frames_received[0] = reader.rail_frames_received[1] = 64;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	ck_assert_uint_eq(of_kind(&a, ACCT_HOP_RAIL), 2);
	acct_free(&a);
	reader.rail_frames_received[1] = 63;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "hop reader 0 to builder 0, rail 1: forwarded = received by builder")->ok);
	acct_free(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("acct_rails");
	TCase *tc = tcase_create("equations");
	tcase_add_checked_fixture(tc, clean_setup, NULL);
	tcase_add_test(tc, test_two_rails_to_two_builders_balance);
	tcase_add_test(tc, test_one_rail_adds_nothing);
	tcase_add_test(tc, test_a_rail_that_does_not_balance_fails_by_name);
	tcase_add_test(tc, test_one_builder_reads_its_own_rails);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
