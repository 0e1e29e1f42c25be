/* Unit tests of builderd/hub/progress.c with the time passed in: the progress
 * line's text from a snapshot, the completion rate over the last second,
 * when a line is due on a terminal and in a log, and how it is rewritten
 * in place and ended. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/options.h"
#include "builderd/peer.h"
#include "builderd/hub/progress.h"
#include "builderd/snapshot.h"
#include "core/hist.h"

#define SECOND UINT64_C(1000000000)
#define T0 (10 * SECOND)

static struct options opt;
static struct peer_table peers;
static struct snapshot snap;

static void setup(void)
{
	opt = (struct options){ .run_id = 7, .sources = 2, .readers = 2, .events = 120 };
	ck_assert_int_eq(peer_table_init(&peers, 2, 2), 0);
	peer_reader(&peers, 0)->held_ns = 1500000;
	peer_reader(&peers, 1)->held_ns = 500000;
	snap = (struct snapshot){
		.opt = &opt, .peers = &peers, .pending = 5, .oldest_pending = 33,
		.admission_limit = 97,
		.builder = { .events_complete = 30, .events_accepted = 29, .events_expired = 2 },
	};
}

static void teardown(void)
{
	peer_table_free(&peers);
}

START_TEST(test_line)
{
	char line[360];
	progress_line(line, sizeof line, &snap, 10.0);
	ck_assert_str_eq(line, "Run 7: 30 built (10/s), 29 accepted, 2 expired, 25.0% complete, 5 pending (oldest 33), limit 97, readers held 2.0 ms, p99 n/a, ETA 9 s");
	opt.events = 0;
	opt.no_admission = true;
	snap.oldest_pending = UINT64_MAX;
	progress_line(line, sizeof line, &snap, 0.0);
	ck_assert_str_eq(line, "Run 7: 30 built (0/s), 29 accepted, 2 expired, 5 pending, limit off, readers held 2.0 ms, p99 n/a");
	/* With latencies: their p99 (the histogram's upper edge). */
	struct hist h;
	hist_reset(&h);
	for (int i = 0; i < 100; i++)
		hist_add(&h, 2000000);
	snap.latency = &h;
	progress_line(line, sizeof line, &snap, 0.0);
	char want[64];
	snprintf(want, sizeof want, "p99 %.3f ms", (double)hist_quantile(&h, 0.99) / 1e6);
	ck_assert_msg(strstr(line, want) != NULL, "%s", line);
}
END_TEST

START_TEST(test_rate)
{
	struct progress *p = progress_create(T0, NULL);
	ck_assert_ptr_nonnull(p);
	ck_assert(progress_rate(p) == 0.0);
	progress_sample(p, T0, 0);
	progress_sample(p, T0 + SECOND, 500);
	ck_assert(progress_rate(p) == 500.0);
	/* Within the second: unchanged. */
	progress_sample(p, T0 + SECOND + SECOND / 2, 900);
	ck_assert(progress_rate(p) == 500.0);
	progress_sample(p, T0 + 2 * SECOND, 1500);
	ck_assert(progress_rate(p) == 1000.0);
	/* Over a longer gap, per second of it. */
	progress_sample(p, T0 + 6 * SECOND, 3500);
	ck_assert(progress_rate(p) == 500.0);
	progress_destroy(p);
}
END_TEST

/* On a terminal: every second, rewritten in place, its rate since the line
 * before; ended with one newline at the end of the run. */
START_TEST(test_terminal)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	struct progress *p = progress_create(T0, f);
	ck_assert_ptr_nonnull(p);
	ck_assert(!progress_due(p, T0 + SECOND - 1));
	ck_assert(progress_due(p, T0 + SECOND));
	progress_show(p, T0 + 2 * SECOND, &snap);
	fflush(f);
	ck_assert_msg(strncmp(buf, "\rRun 7: 30 built (15/s), ", 25) == 0, "%s", buf);
	ck_assert_str_eq(buf + len - 3, "\033[K");
	ck_assert(!progress_due(p, T0 + 2 * SECOND + SECOND / 2));
	snap.builder.events_complete = 40;
	progress_show(p, T0 + 3 * SECOND, &snap);
	fflush(f);
	ck_assert_msg(strstr(buf, "\rRun 7: 40 built (10/s), ") != NULL, "%s", buf);
	ck_assert(strchr(buf, '\n') == NULL);
	progress_end(p);
	progress_end(p);
	fclose(f);
	ck_assert_uint_eq(buf[len - 1], '\n');
	ck_assert_ptr_eq(strchr(buf, '\n'), buf + len - 1);
	progress_destroy(p);
	free(buf);
}
END_TEST

/* Logged (no terminal): every five seconds, and nothing to end. */
START_TEST(test_logged)
{
	struct progress *p = progress_create(T0, NULL);
	ck_assert_ptr_nonnull(p);
	ck_assert(!progress_due(p, T0 + 5 * SECOND - 1));
	ck_assert(progress_due(p, T0 + 5 * SECOND));
	progress_show(p, T0 + 5 * SECOND, &snap);
	ck_assert(!progress_due(p, T0 + 9 * SECOND));
	ck_assert(progress_due(p, T0 + 10 * SECOND));
	progress_end(p);
	progress_destroy(p);
}
END_TEST

static Suite *progress_suite(void)
{
	Suite *s = suite_create("progress");
	TCase *tc = tcase_create("progress");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_line);
	tcase_add_test(tc, test_rate);
	tcase_add_test(tc, test_terminal);
	tcase_add_test(tc, test_logged);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(progress_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
