/* Unit tests of common/core/acct_equations.c: every equation of a run computed from
 * reports as the daemons send them; a missing report fails its equations by
 * name; a lost frame anywhere unbalances the right one. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acct.h"
#include "wire/counters.h"

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


static bool has_violation(const struct acct *a, const char *text)
{
	for (size_t i = 0; i < a->violation_count; i++)
		if (strstr(a->violations[i].text, text) != NULL)
			return true;
	return false;
}

/* Computes the run and expects it refused with exactly one impossible
 * counter, named by text. */
static void expect_impossible(const char *text)
{
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert_msg(has_violation(&a, text), "no violation '%s' among %zu: %s", text,
		      a.violation_count, a.violation_count ? a.violations[0].text : "");
	ck_assert_uint_eq(a.violation_count, 1);
	acct_free(&a);
}

START_TEST(test_wrapped_sum_does_not_balance)
{
	/* omitted = 2^64 - 1 and sent = events + 1 wrap to events modulo 2^64:
	 * equation 1 would hold. It must fail, and both the overflow and the
	 * impossible counter be named. */
	set(&source_reports[1], "", "frags_omitted", UINT64_MAX);
	set(&source_reports[1], "", "frags_sent", EVENTS + 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	const struct acct_equation *e = find(&a, "1 source 1:");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "a side's sum overflows 2^64: impossible counters");
	ck_assert(has_violation(&a, "source 1's frags_omitted + frags_sent + frags_abandoned + frags_cut_by_stop overflows 2^64"));
	ck_assert(has_violation(&a, "source 1's frags_omitted = 18446744073709551615 exceeds source 1's events = 1000"));
	ck_assert(has_violation(&a, "source 1's frags_sent = 1001 exceeds source 1's events = 1000"));
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_totals_do_not_balance)
{
	/* Two sources' wire counts that wrap in the all-sources total. */
	set(&source_reports[0], "", "frames_wire", UINT64_MAX);
	set(&reader_reports[0], "source.0", "frames_received", UINT64_MAX);
	set(&source_reports[1], "", "frames_wire", 2);
	set(&reader_reports[0], "source.1", "frames_received", 2);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(!find(&a, "2 all sources")->ok);
	ck_assert(has_violation(&a, "overflow 2^64 in total"));
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_builder_sums_do_not_balance)
{
	core.frags_duplicate = UINT64_MAX;
	core.frags_late = 1;   /* unique + 2^64 - 1 + 1 wraps to unique */
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "3 builder")->ok);
	acct_free(&a);
	clean_run_setup();
	core.events_complete = UINT64_MAX / 2;   /* S x complete wraps */
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "4 builder")->ok);
	ck_assert_str_eq(find(&a, "4 builder")->note, "a side's sum overflows 2^64: impossible counters");
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_hop_does_not_balance)
{
	set(&reader_reports[1], "source.2", "frames_rejected", UINT64_MAX);
	set(&reader_reports[1], "source.2", "frames_held_at_end", 1);
	set(&reader_reports[1], "source.2", "frames_forwarded", EVENTS);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(!find(&a, "hop reader 1, source 2")->ok);
	ck_assert(has_violation(&a, "reader 1's source.2 frames_forwarded + frames_rejected + frames_held_at_end overflows 2^64"));
	ck_assert(has_violation(&a, "reader 1's source.2 frames_rejected = 18446744073709551615 exceeds reader 1's source.2 frames_received = 1000"));
	acct_free(&a);
}
END_TEST

/* Each relation alone, with every equation still balanced: the counter is
 * refused for what it is, not through an equation. */
START_TEST(test_source_delayed_beyond_generated)
{
	set(&source_reports[2], "", "frags_delayed", EVENTS + 1);
	expect_impossible("source 2's frags_delayed = 1001 exceeds source 2's events = 1000");
}
END_TEST

START_TEST(test_source_duplicates_beyond_sent)
{
	set(&source_reports[0], "", "frags_duplicated", EVENTS + 1);
	expect_impossible("source 0's frags_duplicated = 1001 exceeds source 0's frags_sent = 1000");
}
END_TEST

START_TEST(test_source_wire_beyond_sent)
{
	set(&source_reports[3], "", "frags_duplicated", 0);
	set(&source_reports[3], "", "frames_bad_injected", 0);
	set(&source_reports[3], "", "frames_wire", EVENTS + 5);
	set(&reader_reports[1], "source.3", "frames_received", EVENTS + 5);
	set(&reader_reports[1], "source.3", "frames_rejected", 5);
	expect_impossible("source 3's frames_wire = 1005 exceeds its frags_sent + frags_duplicated + frames_bad_injected = 1000");
}
END_TEST

START_TEST(test_source_bad_frames_beyond_wire)
{
	set(&source_reports[1], "", "frames_bad_injected", EVENTS + 1);
	expect_impossible("source 1's frames_bad_injected = 1001 exceeds source 1's frames_wire = 1000");
}
END_TEST

START_TEST(test_omitted_or_abandoned_beyond_generated)
{
	/* omitted and abandoned that balance 1 with a sent count that wrapped
	 * the other way are refused each. */
	set(&source_reports[0], "", "frags_omitted", EVENTS + 1);
	set(&source_reports[0], "", "frags_sent", 0);
	set(&source_reports[0], "", "frags_abandoned", UINT64_MAX);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(has_violation(&a, "source 0's frags_omitted = 1001 exceeds source 0's events = 1000"));
	ck_assert(has_violation(&a, "source 0's frags_abandoned = 18446744073709551615 exceeds source 0's events = 1000"));
	ck_assert(!find(&a, "1 source 0:")->ok);
	acct_free(&a);
}
END_TEST

/* The operator's drained stop: each source generated the events up to
 * the stop and counts the rest cut by it; equation 1 holds with the new
 * bucket, the builder never observed the cut IDs, the bucket is summed. */
static void drained_stop_setup(uint64_t generated)
{
	uint64_t cut = EVENTS - generated;
	for (int s = 0; s < S; s++) {
		set(&source_reports[s], "", "frags_sent", generated);
		set(&source_reports[s], "", "frags_cut_by_stop", cut);
		set(&source_reports[s], "", "frames_wire", generated);
	}
	for (int r = 0; r < N; r++) {
		for (int i = 0; i < 2; i++) {
			char g[16];
			snprintf(g, sizeof g, "source.%u", reader_sources[r][i]);
			set(&reader_reports[r], g, "frames_received", generated);
			set(&reader_reports[r], g, "frames_forwarded", generated);
		}
		set(&reader_reports[r], "", "frames_forwarded", 2 * generated);
		readers[r].frames_received_by_builder = 2 * generated;
	}
	core.frags_received = core.frags_unique = S * generated;
	core.events_complete = core.events_accepted = generated;
	core.events_unobserved = cut;
	run.builder_frames_received = S * generated;
}

START_TEST(test_cut_by_stop_balances)
{
	drained_stop_setup(600);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	const struct acct_equation *e = find(&a, "1 source 2:");
	ck_assert_str_eq(e->name, "1 source 2: generated = omitted + sent + abandoned + cut by stop");
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert_uint_eq(e->rhs, EVENTS);
	ck_assert_uint_eq(a.cut_by_stop, S * 400u);
	ck_assert_uint_eq(a.lost_with_sources, 0);
	acct_free(&a);
	/* Everything cut: a stop before the first event. */
	drained_stop_setup(0);
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	ck_assert_uint_eq(a.cut_by_stop, S * (uint64_t)EVENTS);
	acct_free(&a);
}
END_TEST

/* A cut-off that does not add up: counted on top of every fragment sent
 * (equation 1 fails for that source alone), or beyond what it generated. */
START_TEST(test_cut_by_stop_unbalanced)
{
	set(&source_reports[1], "", "frags_cut_by_stop", 5);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(!find(&a, "1 source 1:")->ok);
	ck_assert_uint_eq(find(&a, "1 source 1:")->rhs, EVENTS + 5);
	ck_assert(find(&a, "1 source 0:")->ok);
	ck_assert_uint_eq(failing(&a), 1);
	acct_free(&a);
	set(&source_reports[1], "", "frags_cut_by_stop", EVENTS + 1);
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "source 1's frags_cut_by_stop = 1001 exceeds source 1's events = 1000"));
	acct_free(&a);
}
END_TEST

START_TEST(test_reader_received_beyond_wire)
{
	/* The reader claims a frame more than the source sent, and its hop
	 * balances with it rejected: equation 2 fails, and the relation is
	 * named. */
	set(&reader_reports[0], "source.1", "frames_received", EVENTS + 1);
	set(&reader_reports[0], "source.1", "frames_rejected", 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "2 source 1:")->ok);
	ck_assert(has_violation(&a, "reader 0's source.1 frames_received = 1001 exceeds source 1's frames_wire = 1000"));
	ck_assert_uint_eq(a.violation_count, 1);
	acct_free(&a);
}
END_TEST

START_TEST(test_reader_parts_beyond_received)
{
	set(&reader_reports[1], "source.2", "frames_verified", EVENTS + 1);
	expect_impossible("reader 1's source.2 frames_verified = 1001 exceeds reader 1's source.2 frames_received = 1000");
	clean_run_setup();
	set(&reader_reports[1], "source.2", "frames_verified", EVENTS - 1);
	expect_impossible("reader 1's source.2 frames_forwarded = 1000 exceeds reader 1's source.2 frames_verified = 999");
	clean_run_setup();
	set(&reader_reports[1], "source.2", "frames_verified", 2);
	set(&reader_reports[1], "source.2", "frames_held_at_end", 3);
	set(&reader_reports[1], "source.2", "frames_forwarded", 0);
	set(&reader_reports[1], "source.2", "frames_rejected", EVENTS - 3);
	set(&reader_reports[1], "", "frames_forwarded", EVENTS);
	readers[1].frames_received_by_builder = EVENTS;
	core.frags_unique = core.frags_received = 3 * EVENTS;
	core.events_complete = core.events_accepted = 0;
	core.frags_in_expired = 3 * EVENTS;
	core.events_expired = core.events_expired_end_of_run = EVENTS;
	run.builder_frames_received = 3 * EVENTS;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "reader 1's source.2 frames_held_at_end = 3 exceeds reader 1's source.2 frames_verified = 2"));
	acct_free(&a);
}
END_TEST

START_TEST(test_reader_two_end_frames)
{
	set(&reader_reports[0], "source.0", "end_frames", 2);
	expect_impossible("reader 0's source.0 end_frames = 2 exceeds one per stream = 1");
}
END_TEST

START_TEST(test_reader_total_not_its_sum)
{
	set(&reader_reports[1], "", "frames_forwarded", 2 * EVENTS + 1);
	readers[1].frames_received_by_builder = 2 * EVENTS + 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "reader 1's frames_forwarded = 2001 is not the sum of its sources' frames_forwarded = 2000"));
	acct_free(&a);
}
END_TEST

START_TEST(test_builder_beyond_forwarded)
{
	/* The builder counts more from a reader than it forwarded, or more of
	 * a source's fragments than its reader forwarded of it. */
	readers[0].frames_received_by_builder = 2 * EVENTS + 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "the builder's frames received from reader 0 = 2001 exceeds reader 0's frames_forwarded = 2000"));
	acct_free(&a);
	clean_run_setup();
	uint64_t unique[S] = { EVENTS, EVENTS, EVENTS + 1, EVENTS };
	run.unique_from = unique;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "the builder's unique fragments of source 2 = 1001 exceeds reader 1's source.2 frames_forwarded = 1000"));
	ck_assert_uint_eq(a.violation_count, 1);
	acct_free(&a);
}
END_TEST

START_TEST(test_possible_counters_pass)
{
	/* Faults that are possible: duplicates, delays, omissions, a bad frame. */
	for (int s = 0; s < S; s++) {
		set(&source_reports[s], "", "frags_omitted", 10);
		set(&source_reports[s], "", "frags_sent", EVENTS - 10);
		set(&source_reports[s], "", "frags_duplicated", 3);
		set(&source_reports[s], "", "frags_delayed", 7);
		set(&source_reports[s], "", "frames_bad_injected", 7);
		set(&source_reports[s], "", "frames_wire", EVENTS);
	}
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert_uint_eq(a.violation_count, 0);
	acct_free(&a);
}
END_TEST

START_TEST(test_reader_forwarded_or_held_beyond_received)
{
	set(&reader_reports[0], "source.1", "frames_forwarded", EVENTS + 1);
	set(&reader_reports[0], "source.1", "frames_verified", EVENTS + 1);
	set(&reader_reports[0], "", "frames_forwarded", 2 * EVENTS + 1);
	readers[0].frames_received_by_builder = 2 * EVENTS + 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "reader 0's source.1 frames_forwarded = 1001 exceeds reader 0's source.1 frames_received = 1000"));
	acct_free(&a);
	clean_run_setup();
	set(&reader_reports[0], "source.0", "frames_held_at_end", EVENTS + 1);
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "reader 0's source.0 frames_held_at_end = 1001 exceeds reader 0's source.0 frames_received = 1000"));
	ck_assert(!find(&a, "hop reader 0, source 0")->ok);
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_wire_parts)
{
	/* sent + duplicated + bad wraps to below frames_wire's true bound. */
	set(&source_reports[2], "", "frags_duplicated", 0);
	set(&source_reports[2], "", "frames_bad_injected", UINT64_MAX);
	set(&source_reports[2], "", "frames_wire", UINT64_MAX);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "source 2's frags_sent + frags_duplicated + frames_bad_injected overflows 2^64"));
	ck_assert(!acct_balanced(&a));
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_reader_sum)
{
	set(&reader_reports[1], "source.2", "frames_forwarded", UINT64_MAX);
	set(&reader_reports[1], "source.3", "frames_forwarded", EVENTS + 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(has_violation(&a, "reader 1's sources' frames_forwarded overflow 2^64 in total"));
	acct_free(&a);
}
END_TEST

START_TEST(test_wrapped_gone_reader)
{
	/* A dead reader's sources claim wire counts that wrap to what the
	 * builder received: its loss would be 0 and its equation balance. */
	readers[0].report = NULL;
	readers[0].gone = true;
	set(&source_reports[0], "", "frames_wire", UINT64_MAX);
	set(&source_reports[1], "", "frames_wire", 2 * EVENTS + 1);
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "2+hop reader 0 (gone)");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "reader 0 is gone and its sources' counts overflow 2^64");
	ck_assert(has_violation(&a, "the frames_wire of reader 0's sources overflow 2^64 in total"));
	ck_assert_uint_eq(a.lost_with_readers, 0);
	acct_free(&a);
}
END_TEST

/* The kinds README's table is written from: a clean run, a run with a
 * gone source and one with a gone reader produce every kind between them,
 * and every name is its kind's format of ids. */
static void note_kinds(const struct acct *a, bool seen[ACCT_KIND_COUNT])
{
	for (size_t i = 0; i < a->count; i++) {
		const struct acct_equation *e = &a->equations[i];
		ck_assert_int_lt(e->kind, ACCT_KIND_COUNT);
		const char *fmt = acct_kind_describe(e->kind)->format;
		unsigned x = 0, y = 0;
		char again[128];
		/* Read the ids back out of the name by the format itself. */
		int n = sscanf(e->name, fmt, &x, &y);
		ck_assert_int_ge(n, 0);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(again, sizeof again, fmt, x, y);
#pragma GCC diagnostic pop
		ck_assert_str_eq(again, e->name);
		seen[e->kind] = true;
	}
}

START_TEST(test_every_kind_named_by_its_format)
{
	bool seen[ACCT_KIND_COUNT] = { false };
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	note_kinds(&a, seen);
	acct_free(&a);

	bool gone[S] = { false };
	uint64_t unique[S] = { EVENTS, EVENTS, EVENTS, EVENTS };
	gone[3] = true;
	source_ptrs[3] = NULL;
	run.source_gone = gone;
	run.unique_from = unique;
	readers[0].report = NULL;
	readers[0].gone = true;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	note_kinds(&a, seen);
	acct_free(&a);
	/* Those of several builders: tests/unit/test_acct_builders.c. */
	for (int k = 0; k < ACCT_HOP_READER_BUILDER; k++)
		ck_assert_msg(seen[k], "no run produced the kind '%s'", acct_kind_describe(k)->format);
	ck_assert_ptr_null(acct_kind_describe(ACCT_KIND_COUNT));
}
END_TEST

/* A recording builder (docs/RECORDING.md): accepted events are written or
 * in a named bucket, and the closed files hold exactly the written ones;
 * each difference fails its own equation by name and nothing else. */
START_TEST(test_recording_books)
{
	struct acct_recording rec = { .builder = 0, .accepted = EVENTS, .written = EVENTS - 7,
				      .unwritten = 5, .unrecorded = 2, .in_files = EVENTS - 7 };
	run.recordings = &rec;
	run.recording_count = 1;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(acct_balanced(&a));
	const struct acct_equation *e =
		find(&a, "builder 0: accepted = data written + not written + not recorded");
	ck_assert_int_eq(e->kind, ACCT_RECORD_ACCEPTED);
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert_uint_eq(e->rhs, EVENTS);
	e = find(&a, "builder 0: events in the closed files = data written");
	ck_assert_int_eq(e->kind, ACCT_RECORD_FILES);
	ck_assert(e->ok);
	bool seen[ACCT_KIND_COUNT] = { false };
	note_kinds(&a, seen);
	ck_assert(seen[ACCT_RECORD_ACCEPTED] && seen[ACCT_RECORD_FILES]);
	acct_free(&a);

	/* An accepted event whose data went nowhere. */
	rec.written--;
	rec.in_files--;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!acct_balanced(&a));
	ck_assert(!find(&a, "builder 0: accepted = data written")->ok);
	ck_assert(find(&a, "builder 0: events in the closed files")->ok);
	ck_assert_uint_eq(failing(&a), 1);
	acct_free(&a);

	/* A file whose manifest counts one event fewer than were written. */
	rec.written++;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	e = find(&a, "builder 0: events in the closed files");
	ck_assert(!e->ok);
	ck_assert_uint_eq(e->lhs, EVENTS - 8);
	ck_assert_uint_eq(e->rhs, EVENTS - 7);
	ck_assert_uint_eq(failing(&a), 1);
	acct_free(&a);

	/* Buckets that wrap never balance. */
	rec.in_files = rec.written;
	rec.unwritten = UINT64_MAX;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	e = find(&a, "builder 0: accepted = data written");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "a side's sum overflows 2^64: impossible counters");
	acct_free(&a);
}
END_TEST

/* A source gone without a report: the fragments the builder did not get of
 * it are the named bucket, its equation balances with it, and its hop at
 * the reader that did report still counts. */
START_TEST(test_gone_source_counts_lost)
{
	bool gone[S] = { false };
	uint64_t unique[S] = { EVENTS, EVENTS, EVENTS - 10, EVENTS };
	gone[2] = true;
	source_ptrs[2] = NULL;
	run.source_gone = gone;
	run.unique_from = unique;
	core.frags_unique = core.frags_received = S * EVENTS - 10;
	core.events_complete = core.events_accepted = EVENTS - 10;
	core.frags_in_expired = 3 * 10;
	core.events_expired = core.events_expired_end_of_run = 10;
	run.builder_frames_received = core.frags_received;
	set(&reader_reports[1], "source.2", "frames_received", EVENTS - 10);
	set(&reader_reports[1], "source.2", "frames_forwarded", EVENTS - 10);
	set(&reader_reports[1], "", "frames_forwarded", 2 * EVENTS - 10);
	readers[1].frames_received_by_builder = 2 * EVENTS - 10;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "1+2 source 2 (gone)");
	ck_assert(e->ok);
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert_uint_eq(e->rhs, EVENTS);
	ck_assert_str_eq(e->note, "source 2 is gone: 10 fragments counted as lost with it");
	ck_assert_uint_eq(a.lost_with_sources, 10);
	ck_assert(find(&a, "hop reader 1, source 2")->ok);
	ck_assert(acct_balanced(&a));
	acct_free(&a);

	/* Without the other sources' counts nothing can be said of it. */
	for (int s = 0; s < S; s++)
		if (s != 2)
			source_ptrs[s] = NULL;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	e = find(&a, "1+2 source 2 (gone)");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "source 2 is gone and the other sources' counts are missing");
	ck_assert_uint_eq(a.lost_with_sources, 0);
	acct_free(&a);
}
END_TEST

/* A reader gone without a report: what its sources put on the wire less
 * what the builder read from it is lost with it. */
START_TEST(test_gone_reader_counts_lost)
{
	readers[1].report = NULL;
	readers[1].gone = true;
	readers[1].frames_received_by_builder = 2 * EVENTS - 7;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e = find(&a, "2+hop reader 1 (gone)");
	ck_assert(e->ok);
	ck_assert_uint_eq(e->lhs, 2 * EVENTS);
	ck_assert_uint_eq(e->rhs, 2 * EVENTS);
	ck_assert_str_eq(e->note, "reader 1 is gone: 7 frames counted as lost with it");
	ck_assert_uint_eq(a.lost_with_readers, 7);
	/* Its sources have no equation 2 or hop of their own. */
	for (size_t i = 0; i < a.count; i++) {
		ck_assert(strncmp(a.equations[i].name, "2 source 2:", 11) != 0);
		ck_assert(strncmp(a.equations[i].name, "hop reader 1", 12) != 0);
	}
	acct_free(&a);

	source_ptrs[3] = NULL;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	e = find(&a, "2+hop reader 1 (gone)");
	ck_assert(!e->ok);
	ck_assert_str_eq(e->note, "reader 1 is gone and a source's counts are missing");
	acct_free(&a);
}
END_TEST

/* Each builder equation's two sides, from core counters that all differ:
 * a part taken from the wrong counter shows. */
START_TEST(test_builder_sides)
{
	uint64_t next = 100;
#define DISTINCT(name) core.name = next += 7;
	CNT_LIST_BUILDER_CORE(DISTINCT)
#undef DISTINCT
	run.builder_frames_received = 5;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct {
		const char *name;
		uint64_t lhs, rhs;
	} want[] = {
		{ "builder: frames read", 5, core.frags_received },
		{ "3 builder", core.frags_received,
		  core.frags_unique + core.frags_duplicate + core.frags_late + core.frags_invalid },
		{ "4 builder", core.frags_unique, S * core.events_complete + core.frags_in_expired },
		{ "5 run", EVENTS, core.events_complete + core.events_expired + core.events_unobserved },
		{ "6 builder", core.events_complete, core.events_accepted + core.events_filtered },
		{ "builder: expired", core.events_expired,
		  core.events_expired_timeout + core.events_expired_window +
			  core.events_expired_end_of_run + core.events_expired_skipped },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const struct acct_equation *e = find(&a, want[i].name);
		ck_assert_msg(e->lhs == want[i].lhs && e->rhs == want[i].rhs, "%s: %llu = %llu",
			      e->name, (unsigned long long)e->lhs, (unsigned long long)e->rhs);
		ck_assert(!e->ok);
	}
	acct_free(&a);
}
END_TEST

/* A run a peer stopped for a fault: the readers closed their sources with
 * frames on their way, so equation 2 adds the frames unread at the stop,
 * which metrics.json's bucket sums; they cannot be more than the wire. The
 * same counters fail the plain equation 2. */
START_TEST(test_stopped_at_fault_counts_unread)
{
	for (int r = 0; r < N; r++)
		for (int i = 0; i < 2; i++) {
			char g[16];
			snprintf(g, sizeof g, "source.%u", reader_sources[r][i]);
			set(&reader_reports[r], g, "frames_received", EVENTS - 10 - i);
			set(&reader_reports[r], g, "frames_forwarded", EVENTS - 10 - i);
		}
	for (int r = 0; r < N; r++) {
		set(&reader_reports[r], "", "frames_forwarded", 2 * EVENTS - 21);
		readers[r].frames_received_by_builder = 2 * EVENTS - 21;
	}
	core.frags_received = core.frags_unique = S * (EVENTS - 10) - 2;
	struct acct a;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	ck_assert(!find(&a, "2 source 1: frames on wire = received by reader 0")->ok);
	ck_assert(!find(&a, "2 all sources")->ok);
	ck_assert_uint_eq(a.unread_at_stop, 0);
	acct_free(&a);
	run.stopped_at_fault = true;
	ck_assert_int_eq(acct_compute(&run, &a), 0);
	const struct acct_equation *e =
		find(&a, "2 source 1: frames on wire = received by reader 0 + unread at the stop for a fault");
	ck_assert(e->ok);
	ck_assert_int_eq(e->kind, ACCT_SOURCE_WIRE_STOPPED);
	ck_assert_uint_eq(e->lhs, EVENTS);
	ck_assert(find(&a, "2 all sources")->ok);
	ck_assert_uint_eq(a.unread_at_stop, S * 10 + 2);
	bool seen[ACCT_KIND_COUNT] = { false };
	note_kinds(&a, seen);
	ck_assert(seen[ACCT_SOURCE_WIRE_STOPPED] && !seen[ACCT_SOURCE_WIRE]);
	acct_free(&a);
}
END_TEST

/* The counters the kinds' descriptions name (README's table) are counters
 * of wire/counters.h, or the losses metrics.json adds (frames_unread_at_stop
 * among them, and the manager's
 * ids_cut_unassigned): a renamed counter
 * breaks this rather than leaving the documents behind. */
START_TEST(test_kind_docs_name_real_counters)
{
	for (int k = 0; k < ACCT_KIND_COUNT; k++) {
		const struct acct_kind_doc *d = acct_kind_describe(k);
		const char *sides[] = { d->lhs, d->rhs };
		for (size_t i = 0; i < 2; i++) {
			const char *p = sides[i];
			while ((p = strchr(p, '`')) != NULL) {
				const char *end = strchr(++p, '`');
				ck_assert_ptr_nonnull(end);
				for (const char *w = p; w < end;) {
					size_t n = strspn(w, "abcdefghijklmnopqrstuvwxyz_");
					char word[64] = "";
					if (n > 0 && n < sizeof word)
						memcpy(word, w, n);
					/* A word before a '.' is part of a group's name. */
					bool group = w[n] == '.';
					if (!group && (strchr(word, '_') != NULL || strcmp(word, "events") == 0))
						ck_assert_msg(cnt_known(word) ||
								      strcmp(word, "fragments_lost_with_sources") == 0 ||
								      strcmp(word, "frames_lost_with_readers") == 0 ||
								      strcmp(word, "frames_lost_with_builders") == 0 ||
								      strcmp(word, "frames_unread_at_stop") == 0 ||
								      strcmp(word, "ids_cut_unassigned") == 0,
							      "kind %d names %s, no counter", k, word);
					w += n ? n : 1;
				}
				p = end + 1;
			}
		}
	}
}
END_TEST

static Suite *acct_suite(void)
{
	Suite *s = suite_create("acct");
	TCase *tc = tcase_create("equations");
	tcase_add_checked_fixture(tc, clean_run_setup, NULL);
	tcase_add_test(tc, test_clean_run_balances);
	tcase_add_test(tc, test_recording_books);
	tcase_add_test(tc, test_frame_lost_between_source_and_reader);
	tcase_add_test(tc, test_frame_lost_between_reader_and_builder);
	tcase_add_test(tc, test_missing_report_fails_by_name);
	tcase_add_test(tc, test_builder_equations);
	tcase_add_test(tc, test_sources_disagree_on_events);
	tcase_add_test(tc, test_wrapped_sum_does_not_balance);
	tcase_add_test(tc, test_wrapped_totals_do_not_balance);
	tcase_add_test(tc, test_wrapped_builder_sums_do_not_balance);
	tcase_add_test(tc, test_wrapped_hop_does_not_balance);
	tcase_add_test(tc, test_source_delayed_beyond_generated);
	tcase_add_test(tc, test_source_duplicates_beyond_sent);
	tcase_add_test(tc, test_source_wire_beyond_sent);
	tcase_add_test(tc, test_source_bad_frames_beyond_wire);
	tcase_add_test(tc, test_omitted_or_abandoned_beyond_generated);
	tcase_add_test(tc, test_cut_by_stop_balances);
	tcase_add_test(tc, test_cut_by_stop_unbalanced);
	tcase_add_test(tc, test_reader_received_beyond_wire);
	tcase_add_test(tc, test_reader_parts_beyond_received);
	tcase_add_test(tc, test_reader_two_end_frames);
	tcase_add_test(tc, test_reader_total_not_its_sum);
	tcase_add_test(tc, test_builder_beyond_forwarded);
	tcase_add_test(tc, test_possible_counters_pass);
	tcase_add_test(tc, test_reader_forwarded_or_held_beyond_received);
	tcase_add_test(tc, test_wrapped_wire_parts);
	tcase_add_test(tc, test_wrapped_reader_sum);
	tcase_add_test(tc, test_wrapped_gone_reader);
	tcase_add_test(tc, test_every_kind_named_by_its_format);
	tcase_add_test(tc, test_gone_source_counts_lost);
	tcase_add_test(tc, test_gone_reader_counts_lost);
	tcase_add_test(tc, test_builder_sides);
	tcase_add_test(tc, test_kind_docs_name_real_counters);
	tcase_add_test(tc, test_stopped_at_fault_counts_unread);
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
