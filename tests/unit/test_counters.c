/* Unit tests of common/wire/counters.c: every list's names are names the
 * control codec carries, lists that share a group share no name, a
 * reader's totals group fits in a report, the group names are the wire's,
 * and cnt_known() knows every counter and nothing else. The wire names are
 * written out here on purpose: they are the contract with other processes
 * and analysis/, which a rename in counters.h must not break unnoticed. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "wire/control.h"
#include "wire/counters.h"

struct list {
	const char *what;
	const char *const *names;
	size_t count;
};

static const struct list lists[] = {
	{ "source", cnt_source_names, CNT_SOURCE_COUNT },
	{ "reader source", cnt_reader_source_names, CNT_READER_SOURCE_COUNT },
	{ "reader", cnt_reader_names, CNT_READER_COUNT },
	{ "process", cnt_process_names, CNT_PROCESS_COUNT },
	{ "clock", cnt_clock_names, CNT_CLOCK_COUNT },
	{ "probe", cnt_probe_names, CNT_PROBE_COUNT },
	{ "builder core", cnt_builder_core_names, CNT_BUILDER_CORE_COUNT },
	{ "builder", cnt_builder_names, CNT_BUILDER_COUNT },
	{ "builder link", cnt_builder_link_names, CNT_BUILDER_LINK_COUNT },
	{ "reader link", cnt_reader_link_names, CNT_READER_LINK_COUNT },
	{ "builder role", cnt_builder_role_names, CNT_BUILDER_ROLE_COUNT },
	{ "builder stats", cnt_builder_stats_names, CNT_BUILDER_STATS_COUNT },
	{ "manager", cnt_manager_names, CNT_MANAGER_COUNT },
	{ "latency", cnt_latency_names, CNT_LATENCY_COUNT },
	{ "source stats", cnt_source_stats_names, CNT_SOURCE_STATS_COUNT },
};
#define LISTS (sizeof lists / sizeof lists[0])

START_TEST(test_names_are_codec_names)
{
	for (size_t l = 0; l < LISTS; l++) {
		struct ctl_group g;
		memset(&g, 0, sizeof g);
		for (size_t i = 0; i < lists[l].count; i++) {
			const char *n = lists[l].names[i];
			ck_assert_msg(n != NULL && n[0] != '\0', "%s list: empty name %zu", lists[l].what, i);
			ck_assert_msg(ctl_group_set(&g, n, i), "%s list: %s refused", lists[l].what, n);
		}
		/* No name twice in a list: each set added a counter. */
		ck_assert_uint_eq(g.count, lists[l].count);
	}
}
END_TEST

/* Lists written into one group must not overwrite each other's counters. */
static void assert_disjoint(const struct list *a, const struct list *b)
{
	for (size_t i = 0; i < a->count; i++)
		for (size_t j = 0; j < b->count; j++)
			ck_assert_msg(strcmp(a->names[i], b->names[j]) != 0, "%s in both the %s and the %s list",
				      a->names[i], a->what, b->what);
}

START_TEST(test_shared_groups_disjoint)
{
	assert_disjoint(&lists[1], &lists[2]);   /* a reader's "" */
	assert_disjoint(&lists[6], &lists[7]);   /* metrics.json's "builder" */
	ck_assert_uint_le(CNT_READER_SOURCE_COUNT + CNT_READER_COUNT, CTL_MAX_COUNTERS);
	ck_assert_uint_le(CNT_SOURCE_COUNT, CTL_MAX_COUNTERS);
}
END_TEST

START_TEST(test_group_names)
{
	char buf[CNT_GROUP_BYTES];
	ck_assert_str_eq(cnt_group_peer(buf, CTL_ROLE_SOURCE, 3), "source.3");
	ck_assert_str_eq(buf, "source.3");
	ck_assert_str_eq(cnt_group_peer(buf, CTL_ROLE_READER, 4294967295u), "reader.4294967295");
	ck_assert_str_eq(cnt_group_builder_link(buf, 0), "builder.from_reader.0");
	ck_assert_str_eq(cnt_group_builder_link(buf, 4294967295u), "builder.from_reader.4294967295");
	ck_assert_str_eq(CNT_GROUP_TOTALS, "");
	ck_assert_str_eq(CNT_GROUP_PROCESS, "process");
	ck_assert_str_eq(CNT_GROUP_CLOCK, "clock");
	ck_assert_str_eq(CNT_GROUP_PROBE, "probe");
}
END_TEST

START_TEST(test_symbols_are_the_wire_names)
{
	ck_assert_str_eq(CNT_SOURCE(events), "events");
	ck_assert_str_eq(CNT_SOURCE(frames_wire), "frames_wire");
	ck_assert_str_eq(CNT_SOURCE(sending_ns), "sending_ns");
	ck_assert_str_eq(CNT_READER_SOURCE(frames_received), "frames_received");
	ck_assert_str_eq(CNT_READER_SOURCE(err_idle), "err_idle");
	ck_assert_str_eq(CNT_READER(buffer_bytes), "buffer_bytes");
	ck_assert_str_eq(CNT_PROCESS(max_rss_kib), "max_rss_kib");
	ck_assert_str_eq(CNT_CLOCK(injected_offset_negative), "injected_offset_negative");
	ck_assert_str_eq(CNT_PROBE(udp_port), "udp_port");
	ck_assert_str_eq(CNT_BUILDER_CORE(ids_given_up), "ids_given_up");
	ck_assert_str_eq(CNT_BUILDER(negative_latencies), "negative_latencies");
	ck_assert_str_eq(CNT_BUILDER_LINK(read_calls), "read_calls");
	ck_assert_uint_eq(CNT_SOURCE_COUNT, 14);
	ck_assert_str_eq(CNT_SOURCE(frags_cut_by_stop), "frags_cut_by_stop");
	ck_assert_uint_eq(CNT_READER_SOURCE_COUNT, 24);
	ck_assert_str_eq(CNT_READER_SOURCE(frames_lost_builder), "frames_lost_builder");
	ck_assert_str_eq(CNT_READER_LINK(pending_full), "pending_full");
	ck_assert_str_eq(CNT_BUILDER_ROLE(frags_misrouted), "frags_misrouted");
	ck_assert_str_eq(CNT_MANAGER(events_lost_with_builders), "events_lost_with_builders");
	ck_assert_uint_eq(CNT_BUILDER_CORE_COUNT, 18);
	ck_assert_str_eq(CNT_SOURCE_STATS(run_second), "run_second");
	ck_assert_str_eq(CNT_SOURCE_STATS(send_positions), "send_positions");
	ck_assert_str_eq(CNT_SOURCE_STATS(last_event_sent), "last_event_sent");
}
END_TEST

START_TEST(test_known)
{
	for (size_t l = 0; l < LISTS; l++)
		for (size_t i = 0; i < lists[l].count; i++)
			ck_assert_msg(cnt_known(lists[l].names[i]), "%s", lists[l].names[i]);
	ck_assert(!cnt_known(""));
	ck_assert(!cnt_known("frames"));
	ck_assert(!cnt_known("frames_wire "));
	ck_assert(!cnt_known("process"));
}
END_TEST

static Suite *counters_suite(void)
{
	Suite *s = suite_create("counters");
	TCase *tc = tcase_create("lists");
	tcase_add_test(tc, test_names_are_codec_names);
	tcase_add_test(tc, test_shared_groups_disjoint);
	tcase_add_test(tc, test_group_names);
	tcase_add_test(tc, test_symbols_are_the_wire_names);
	tcase_add_test(tc, test_known);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(counters_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
