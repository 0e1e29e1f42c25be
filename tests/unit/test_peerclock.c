/* Unit tests of builderd/clock/peerclock.c, one peer's clock against the
 * builder's, with the times passed in: exchanges into the in-band estimate
 * and their stamps, the injected offsets as the truth each estimate is
 * checked against, chrony's interval of both hosts (drift bound, widening
 * since the read, intersected with the in-band one or their union when
 * disjoint), the verdicts, the phases' snapshots and the bounded history. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/clock/peerclock.h"
#include "core/chrony.h"
#include "sys/clock.h"
#include "wire/control.h"

#define T INT64_C(1700000000000000000)   /* a builder realtime, ns */
#define SECOND INT64_C(1000000000)

/* chronyc 4.3's tracking line of a client synchronised over loopback
 * (tests/unit/test_clockoffset.c has where it came from). */
static const char line_client[] =
	"7F000001,127.0.0.1,9,1795980992.461039091,-0.000000552,0.000000006,0.000000047,"
	"-0.003,0.001,0.090,0.000004005,0.000001060,0.1,Normal\n";
static const char line_unsync[] =
	"00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,"
	"1.000000000,1.000000000,0.0,Not synchronised\n";

/* An exchange sent at t1 with a symmetric path of delay ns (even) to a
 * peer whose clock is offset ns ahead, answered at once. */
static struct prb_exchange xch(uint64_t seq, int64_t t1, int64_t offset, int64_t delay,
			       enum prb_stamp stamp)
{
	int64_t at_peer = t1 + delay / 2 + offset;
	return (struct prb_exchange){ .sequence = seq, .t1_ns = t1, .t2_ns = at_peer,
				      .t3_ns = at_peer, .t4_ns = t1 + delay,
				      .stamp = { stamp, stamp, stamp, stamp } };
}

/* A report with a peer's "clock" group saying its --clock-offset-ns. */
static struct ctl_report *clock_report(int64_t injected)
{
	struct ctl_report *r = calloc(1, sizeof *r);
	ck_assert_ptr_nonnull(r);
	struct ctl_group *g = ctl_report_group(r, "clock");
	ck_assert(ctl_group_set(g, "injected_offset_ns", peerclock_abs(injected)));
	ck_assert(ctl_group_set(g, "injected_offset_negative", injected < 0));
	return r;
}

/* A report with a chrony group, as a peer sends its host's state. */
static struct ctl_report *chrony_report(const char *line)
{
	struct ctl_report *r = calloc(1, sizeof *r);
	ck_assert_ptr_nonnull(r);
	struct cks_chrony c;
	ck_assert(cks_chrony_parse(&c, line));
	ck_assert(cks_chrony_encode(&c, clk_monotonic_ns(), ctl_report_group(r, CKS_CHRONY_GROUP)));
	return r;
}

/* The builder host with nothing injected and chrony read at start. */
static struct peerclock_host host_with_chrony(void)
{
	struct peerclock_host h = { 0 };
	ck_assert(cks_chrony_parse(&h.chrony[PEERCLOCK_START], line_client));
	cks_chrony_parse(&h.chrony[PEERCLOCK_END], NULL);
	h.chrony_at_ns[PEERCLOCK_START] = T;
	return h;
}

static struct peerclock_host host_without_chrony(void)
{
	struct peerclock_host h = { 0 };
	cks_chrony_parse(&h.chrony[PEERCLOCK_START], NULL);
	cks_chrony_parse(&h.chrony[PEERCLOCK_END], NULL);
	return h;
}

/* A peer whose host is synchronised like the builder's and that declared
 * no injected offset. */
static struct peerclock *peer_with_chrony(void)
{
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	struct ctl_report *c = clock_report(0), *ch = chrony_report(line_client);
	peerclock_take_clock(p, c);
	peerclock_take_chrony(p, ch, PEERCLOCK_START, T);
	free(c);
	free(ch);
	return p;
}

START_TEST(test_inband_estimate)
{
	struct peerclock_host h = host_without_chrony();
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(peerclock_best_delay(p), -1);
	ck_assert_int_eq(peerclock_latest_delay(p), -1);
	int64_t offset, bound;
	ck_assert(!peerclock_inband(p, T, &offset, &bound));
	/* Nothing known: no estimate, nothing recorded. */
	struct ivl_estimate e = peerclock_estimate(p, &h, T);
	ck_assert_int_eq(e.basis, IVL_BASIS_NONE);

	struct prb_exchange x = xch(1, T, 1000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	ck_assert_int_eq(peerclock_best_delay(p), 200);
	ck_assert_int_eq(peerclock_latest_delay(p), 200);
	ck_assert(peerclock_inband(p, T, &offset, &bound));
	ck_assert_int_eq(offset, 1000);
	ck_assert_int_eq(bound, 100);
	e = peerclock_estimate(p, &h, T);
	ck_assert_int_eq(e.basis, IVL_BASIS_INBAND);
	ck_assert_int_eq(e.offset_ns, 1000);
	ck_assert_int_eq(e.bound_ns, 100);

	struct peerclock_view v;
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.accepted, 1);
	ck_assert_uint_eq(v.estimates, 1);
	ck_assert_uint_eq(v.recorded, 1);
	ck_assert_int_eq(v.history[0].at_ns, T);
	ck_assert_int_eq(v.history[0].offset_ns, 1000);
	ck_assert_int_eq(v.history[0].bound_ns, 100);
	ck_assert_uint_eq(v.history[0].basis, IVL_BASIS_INBAND);
	ck_assert_uint_eq(v.by_basis[IVL_BASIS_INBAND], 1);
	ck_assert(v.last_valid);
	ck_assert_int_eq(v.last.offset_ns, 1000);
	ck_assert_str_eq(v.stamps_summary, "kernel");
	ck_assert_uint_eq(v.stamps[3][PRB_STAMP_SOFTWARE], 1);
	ck_assert(!v.clock_seen);
	ck_assert(!v.drift_from_chrony);
	ck_assert(v.drift_ppm == CKS_DEFAULT_DRIFT_PPM);

	/* A slower exchange stamped in user space: the best delay stays. */
	x = xch(2, T + SECOND / 1000, 1000, 400, PRB_STAMP_USER);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	ck_assert_int_eq(peerclock_best_delay(p), 200);
	ck_assert_int_eq(peerclock_latest_delay(p), 400);
	/* An impossible one (answered before it was sent) is refused and
	 * its stamps are not counted. */
	x = xch(3, T, 1000, 200, PRB_STAMP_USER);
	x.t4_ns = x.t1_ns - 1;
	ck_assert_int_eq(peerclock_add_exchange(p, &x), -EINVAL);
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.accepted, 2);
	ck_assert_uint_eq(v.rejected, 1);
	ck_assert_uint_eq(v.stamps[0][PRB_STAMP_USER], 1);
	ck_assert_str_eq(v.stamps_summary, "mixed");
	peerclock_destroy(p);
}
END_TEST

/* Each estimate against the truth the injected offsets give: inside or
 * out, and the worst margin. */
START_TEST(test_against_injected)
{
	struct peerclock_host h = host_without_chrony();
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	int64_t injected = 0;
	ck_assert(!peerclock_injected(p, &injected));
	struct ctl_report *r = clock_report(-5000);
	peerclock_take_clock(p, r);
	free(r);
	ck_assert(peerclock_injected(p, &injected));
	ck_assert_int_eq(injected, -5000);

	struct prb_exchange x = xch(1, T, -5000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	peerclock_estimate(p, &h, T);
	struct peerclock_view v;
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.inside_injected, 1);
	ck_assert_int_eq(v.worst_margin_ns, 100);
	/* The builder injected 300 ns of its own: the truth is -5300, 200 ns
	 * beyond the bound of 100. */
	h.injected_ns = 300;
	peerclock_estimate(p, &h, T);
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.estimates, 2);
	ck_assert_uint_eq(v.inside_injected, 1);
	ck_assert_int_eq(v.worst_margin_ns, -200);
	peerclock_destroy(p);
}
END_TEST

START_TEST(test_chrony_drift)
{
	struct peerclock_host h = host_with_chrony();
	struct peerclock *p = peer_with_chrony();
	struct peerclock_view v;
	peerclock_view(p, &v);
	ck_assert(!v.drift_from_chrony);
	peerclock_update_drift(p, &h);
	peerclock_view(p, &v);
	ck_assert(v.drift_from_chrony);
	ck_assert(v.chrony[PEERCLOCK_START].synchronised);
	double expected = cks_drift_ppm_from_chrony(&v.chrony[PEERCLOCK_START], &h.chrony[PEERCLOCK_START]);
	ck_assert(v.drift_ppm == expected);
	ck_assert(peerclock_drift_ppm(p) == expected);
	/* The builder's chrony gone: the default again. */
	cks_chrony_parse(&h.chrony[PEERCLOCK_START], NULL);
	peerclock_update_drift(p, &h);
	peerclock_view(p, &v);
	ck_assert(!v.drift_from_chrony);
	ck_assert(v.drift_ppm == CKS_DEFAULT_DRIFT_PPM);
	/* Only the first chrony group of a phase counts. */
	struct ctl_report *r = chrony_report(line_unsync);
	peerclock_take_chrony(p, r, PEERCLOCK_START, T + SECOND);
	peerclock_take_chrony(p, r, PEERCLOCK_END, T + SECOND);
	free(r);
	peerclock_view(p, &v);
	ck_assert(v.chrony[PEERCLOCK_START].synchronised);
	ck_assert(v.chrony[PEERCLOCK_END].available && !v.chrony[PEERCLOCK_END].synchronised);
	peerclock_destroy(p);
}
END_TEST

/* The four ways an in-band interval meets chrony's: inside it, around it,
 * across one end, beside it. Both hosts are within B of the reference, so
 * chrony's interval is [-2B, 2B] at the moment of the reads. */
START_TEST(test_chrony_combined)
{
	struct peerclock_host h = host_with_chrony();
	int64_t b = cks_chrony_bound_ns(&h.chrony[PEERCLOCK_START]);
	ck_assert_int_gt(b, 0);
	static const struct {
		int64_t offset, delay;
		enum ivl_basis basis;
	} cases[] = {
		{ 1000, 200, IVL_BASIS_INBAND },
		{ 0, 8 * 4096, IVL_BASIS_CHRONY },
		{ 7000, 2000, IVL_BASIS_BOTH },
		{ 50000, 200, IVL_BASIS_UNION },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct peerclock *p = peer_with_chrony();
		peerclock_update_drift(p, &h);
		struct prb_exchange x = xch(1, T, cases[i].offset, cases[i].delay, PRB_STAMP_SOFTWARE);
		ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
		struct ivl_estimate e = peerclock_estimate(p, &h, T);
		ck_assert_msg(e.basis == cases[i].basis, "case %zu: basis %s", i, ivl_basis_name(e.basis));
		struct ivl inband = ivl_around(cases[i].offset, cases[i].delay / 2);
		struct ivl chrony = ivl_around(0, 2 * b);
		struct ivl want;
		if (ivl_intersect(inband, chrony, &want))
			ck_assert(e.basis != IVL_BASIS_UNION);
		else
			want = ivl_hull(inband, chrony);
		ck_assert_int_eq(e.range.lo, want.lo);
		ck_assert_int_eq(e.range.hi, want.hi);
		ck_assert_int_eq(e.offset_ns, ivl_mid(want));
		ck_assert_int_eq(e.bound_ns, ivl_half(want));

		peerclock_snapshot(p, &h, PEERCLOCK_START, T);
		struct peerclock_snapshot s = peerclock_snapshot_at(p, PEERCLOCK_START);
		ck_assert(s.valid && s.chrony_valid);
		ck_assert_int_eq(s.chrony.lo, -2 * b);
		ck_assert_int_eq(s.chrony.hi, 2 * b);
		ck_assert_int_eq(s.applied.basis, cases[i].basis);
		enum cks_verdict want_verdict = cases[i].basis == IVL_BASIS_UNION ? CKS_INCONSISTENT
										  : CKS_CONSISTENT;
		ck_assert_int_eq(peerclock_verdict(p, &h, PEERCLOCK_START), want_verdict);
		ck_assert_int_eq(peerclock_verdict(p, &h, PEERCLOCK_END), CKS_UNKNOWN);
		ck_assert_int_eq(peerclock_overall(p, &h), want_verdict);
		peerclock_destroy(p);
	}
}
END_TEST

/* chrony's bounds held when each host read them and widen by the drift
 * bound since; chrony alone is never applied. */
START_TEST(test_chrony_widens)
{
	struct peerclock_host h = host_with_chrony();
	int64_t b = cks_chrony_bound_ns(&h.chrony[PEERCLOCK_START]);
	struct peerclock *p = peer_with_chrony();
	peerclock_update_drift(p, &h);
	ck_assert_int_eq(peerclock_estimate(p, &h, T).basis, IVL_BASIS_NONE);
	struct peerclock_view v;
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.estimates, 0);

	struct prb_exchange x = xch(1, T, 0, 8 * 4096, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	peerclock_snapshot(p, &h, PEERCLOCK_END, T + SECOND);
	struct peerclock_snapshot s = peerclock_snapshot_at(p, PEERCLOCK_END);
	int64_t widen = (int64_t)ceil(peerclock_drift_ppm(p) * 1e9 / 1e6);
	ck_assert_int_gt(widen, 0);
	ck_assert(s.chrony_valid);
	ck_assert_int_eq(s.at_ns, T + SECOND);
	ck_assert_int_eq(s.chrony.hi, 2 * b + 2 * widen);
	ck_assert_int_eq(s.chrony.lo, -(2 * b + 2 * widen));
	peerclock_destroy(p);
}
END_TEST

/* Without the peer's "clock" group its injected offset, and so chrony's
 * interval and the verdict, are unknown. */
START_TEST(test_unknown_without_clock_group)
{
	struct peerclock_host h = host_with_chrony();
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	struct ctl_report *r = chrony_report(line_client);
	peerclock_take_chrony(p, r, PEERCLOCK_START, T);
	free(r);
	struct prb_exchange x = xch(1, T, 1000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	peerclock_snapshot(p, &h, PEERCLOCK_START, T);
	struct peerclock_snapshot s = peerclock_snapshot_at(p, PEERCLOCK_START);
	ck_assert(s.valid && !s.chrony_valid);
	ck_assert_int_eq(peerclock_verdict(p, &h, PEERCLOCK_START), CKS_UNKNOWN);
	ck_assert_int_eq(peerclock_overall(p, &h), CKS_UNKNOWN);
	peerclock_destroy(p);
}
END_TEST

/* The report's estimate is the end's, else the start's. */
START_TEST(test_best_snapshot)
{
	struct peerclock_host h = host_without_chrony();
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	struct peerclock_view v;
	peerclock_snapshot(p, &h, PEERCLOCK_START, T);
	peerclock_view(p, &v);
	ck_assert_ptr_null(peerclock_view_best(&v));
	struct prb_exchange x = xch(1, T, 1000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	peerclock_snapshot(p, &h, PEERCLOCK_START, T);
	peerclock_view(p, &v);
	ck_assert_ptr_eq(peerclock_view_best(&v), &v.snap[PEERCLOCK_START]);
	x = xch(2, T + SECOND, 2000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	peerclock_snapshot(p, &h, PEERCLOCK_END, T + SECOND);
	peerclock_view(p, &v);
	ck_assert_ptr_eq(peerclock_view_best(&v), &v.snap[PEERCLOCK_END]);
	ck_assert_int_eq(peerclock_view_best(&v)->offset_ns, 2000);
	ck_assert_int_eq(v.snap[PEERCLOCK_START].offset_ns, 1000);
	peerclock_destroy(p);
}
END_TEST

/* The first PEERCLOCK_HISTORY estimates are kept, the later ones counted. */
START_TEST(test_history_bounded)
{
	struct peerclock_host h = host_without_chrony();
	struct peerclock *p = peerclock_create();
	ck_assert_ptr_nonnull(p);
	struct prb_exchange x = xch(1, T, 1000, 200, PRB_STAMP_SOFTWARE);
	ck_assert_int_eq(peerclock_add_exchange(p, &x), 0);
	for (uint32_t i = 0; i < PEERCLOCK_HISTORY + 5; i++)
		peerclock_estimate(p, &h, T + i);
	struct peerclock_view v;
	peerclock_view(p, &v);
	ck_assert_uint_eq(v.estimates, PEERCLOCK_HISTORY + 5);
	ck_assert_uint_eq(v.recorded, PEERCLOCK_HISTORY);
	ck_assert_int_eq(v.history[PEERCLOCK_HISTORY - 1].at_ns, T + PEERCLOCK_HISTORY - 1);
	peerclock_destroy(p);
}
END_TEST

START_TEST(test_arithmetic)
{
	ck_assert_uint_eq(peerclock_abs(INT64_MIN), UINT64_C(1) << 63);
	ck_assert_uint_eq(peerclock_abs(-7), 7);
	ck_assert_int_eq(peerclock_sat_add(3, 4), 7);
	ck_assert_int_eq(peerclock_sat_add(INT64_MAX, 1), INT64_MAX);
	ck_assert_int_eq(peerclock_sat_add(UINT64_MAX, 2), INT64_MAX);
	ck_assert_str_eq(peerclock_phase_name(PEERCLOCK_START), "start");
	ck_assert_str_eq(peerclock_phase_name(PEERCLOCK_END), "end");
}
END_TEST

static Suite *peerclock_suite(void)
{
	Suite *s = suite_create("peerclock");
	TCase *tc = tcase_create("estimate");
	tcase_add_test(tc, test_inband_estimate);
	tcase_add_test(tc, test_against_injected);
	tcase_add_test(tc, test_chrony_drift);
	tcase_add_test(tc, test_chrony_combined);
	tcase_add_test(tc, test_chrony_widens);
	tcase_add_test(tc, test_unknown_without_clock_group);
	tcase_add_test(tc, test_best_snapshot);
	tcase_add_test(tc, test_history_bounded);
	tcase_add_test(tc, test_arithmetic);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peerclock_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
