/* Unit tests of the small process-level modules: common/sys/clock.c (injected
 * clock offsets, the filter's CPU burn), common/sys/procstat.c (peak memory of
 * this image, the report group) and common/sys/log.c (level filtering). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sys/clock.h"
#include "sys/log.h"
#include "sys/procstat.h"

START_TEST(test_clock_offset_injection)
{
	clk_set_offset_ns(0);
	uint64_t a = clk_realtime_ns();
	clk_set_offset_ns(5000000);
	uint64_t b = clk_realtime_ns();
	clk_set_offset_ns(-5000000);
	uint64_t c = clk_realtime_ns();
	clk_set_offset_ns(0);
	ck_assert_int_eq(clk_offset_ns(), 0);
	/* Each read is within a millisecond of the last, offsets aside. */
	ck_assert_uint_ge(b - a, 5000000);
	ck_assert_uint_lt(b - a, 6000000);
	ck_assert_uint_gt(a, c);
	ck_assert_uint_lt(a - c, 6000000);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t sys = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	ck_assert_uint_lt(sys - clk_realtime_ns() + 1000000, 2000000);
}
END_TEST

START_TEST(test_burn_spends_cpu)
{
	struct rusage before, after;
	getrusage(RUSAGE_SELF, &before);
	uint64_t t0 = clk_monotonic_ns();
	clk_burn_us(20000);
	uint64_t spent = clk_monotonic_ns() - t0;
	getrusage(RUSAGE_SELF, &after);
	ck_assert_uint_ge(spent, 20000000);
	/* It spins rather than sleeps: a sleep gives the CPU up, a voluntary
	 * context switch, while a spin is only ever preempted (involuntary).
	 * Counting switches holds on a busy machine, where the CPU time a
	 * 20 ms spin gets (tested before) can fall below any fixed share. */
	ck_assert_int_eq(after.ru_nvcsw - before.ru_nvcsw, 0);
	long cpu_us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000L +
		      (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
		      (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000L +
		      (after.ru_stime.tv_usec - before.ru_stime.tv_usec);
	ck_assert_int_gt(cpu_us, 0);
	t0 = clk_monotonic_ns();
	clk_burn_us(0);
	ck_assert_uint_lt(clk_monotonic_ns() - t0, 1000000);
}
END_TEST

START_TEST(test_peak_rss_follows_touched_memory)
{
	uint64_t before = procstat_peak_rss_kib();
	ck_assert_uint_gt(before, 0);
	size_t bytes = 32u << 20;
	char *p = malloc(bytes);
	ck_assert_ptr_nonnull(p);
	/* Through a volatile pointer, so the compiler cannot drop the fill of a
	 * buffer it sees freed right after. */
	volatile char *touch = p;
	for (size_t i = 0; i < bytes; i += 4096)
		touch[i] = 1;
	uint64_t after = procstat_peak_rss_kib();
	free(p);
	ck_assert_uint_ge(after, before + 30 * 1024);

	static struct ctl_report r;
	memset(&r, 0, sizeof r);
	procstat_report(&r);
	const struct ctl_group *g = ctl_report_find(&r, "process");
	ck_assert_ptr_nonnull(g);
	uint64_t rss, user;
	ck_assert(ctl_group_get(g, "max_rss_kib", &rss));
	ck_assert(ctl_group_get(g, "cpu_user_us", &user));
	/* The kernel's RSS counters are per-CPU and read approximately. */
	ck_assert_uint_ge(rss + 1024, after);
}
END_TEST

START_TEST(test_log_levels)
{
	log_init("test", 1, LOG_LEVEL_WARN);
	ck_assert(!log_enabled(LOG_LEVEL_DEBUG));
	ck_assert(!log_enabled(LOG_LEVEL_INFO));
	ck_assert(!log_enabled(LOG_LEVEL_NOTE));
	ck_assert(log_enabled(LOG_LEVEL_WARN));
	ck_assert(log_enabled(LOG_LEVEL_ERROR));
	/* A quiet daemon's level: notes (where it runs) but no chatter. */
	log_init("test", 1, LOG_LEVEL_NOTE);
	ck_assert(!log_enabled(LOG_LEVEL_INFO));
	ck_assert(log_enabled(LOG_LEVEL_NOTE));
	ck_assert(log_enabled(LOG_LEVEL_WARN));
	log_init("test", -1, LOG_LEVEL_DEBUG);
	ck_assert(log_enabled(LOG_LEVEL_DEBUG));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("process");
	TCase *tc = tcase_create("process");
	tcase_add_test(tc, test_clock_offset_injection);
	tcase_add_test(tc, test_burn_spends_cpu);
	tcase_add_test(tc, test_peak_rss_follows_touched_memory);
	tcase_add_test(tc, test_log_levels);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
