/* Unit tests of common/core/chrony: tracking lines as chronyc 4.3 prints
 * them (real, variants, malformed), the bound, and the state carried in a
 * report group through the control codec. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/chrony.h"
#include "core/clockoffset.h"   /* the drift bound survives the trip too */
#include "wire/control.h"

#include "chrony_lines.h"

START_TEST(test_chrony_parse_real)
{
	struct cks_chrony c;

	ck_assert(cks_chrony_parse(&c, line_client));
	ck_assert(c.available);
	ck_assert(c.synchronised);
	ck_assert_str_eq(c.reason, "");
	ck_assert_uint_eq(c.ref_id, 0x7F000001);
	ck_assert_str_eq(c.reference, "127.0.0.1");
	ck_assert_int_eq(c.stratum, 9);
	ck_assert_double_eq_tol(c.ref_time_s, 1795980992.461039091, 1e-6);
	ck_assert_double_eq_tol(c.offset_s, -552e-9, 1e-15);
	ck_assert_double_eq_tol(c.last_offset_s, 6e-9, 1e-15);
	ck_assert_double_eq_tol(c.rms_offset_s, 47e-9, 1e-15);
	ck_assert_double_eq_tol(c.frequency_ppm, -0.003, 1e-12);
	ck_assert_double_eq_tol(c.residual_freq_ppm, 0.001, 1e-12);
	ck_assert_double_eq_tol(c.skew_ppm, 0.090, 1e-12);
	ck_assert_double_eq_tol(c.root_delay_s, 4005e-9, 1e-15);
	ck_assert_double_eq_tol(c.root_dispersion_s, 1060e-9, 1e-15);
	ck_assert_double_eq_tol(c.update_interval_s, 0.1, 1e-12);
	ck_assert_str_eq(c.leap, "Normal");
	/* 552 + 1060 + 4005/2 rounded up. */
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 552 + 1060 + 2003);

	/* The local reference: empty name, its own clock, bound 0. */
	ck_assert(cks_chrony_parse(&c, line_local));
	ck_assert(c.available && c.synchronised);
	ck_assert_uint_eq(c.ref_id, 0x7F7F0101);
	ck_assert_str_eq(c.reference, "");
	ck_assert_int_eq(c.stratum, 8);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 0);

	/* Unsynchronised: parsed, but its 1 s placeholders are no bound. */
	ck_assert(cks_chrony_parse(&c, line_unsync));
	ck_assert(c.available);
	ck_assert(!c.synchronised);
	ck_assert_str_eq(c.leap, "Not synchronised");
	ck_assert_double_eq(c.root_delay_s, 1.0);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);

	ck_assert(cks_chrony_parse(&c, line_manpage));
	ck_assert_uint_eq(c.ref_id, 0xCB00710F);
	ck_assert_double_eq_tol(c.offset_s, 6523e-9, 1e-15);
	ck_assert_double_eq_tol(c.frequency_ppm, -3.225, 1e-12);
	ck_assert(c.residual_freq_ppm == 0.0);
	ck_assert_double_eq_tol(c.update_interval_s, 64.2, 1e-12);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 6523 + 1100737 + 6819511);
}
END_TEST

START_TEST(test_chrony_parse_variants)
{
	struct cks_chrony c;

	/* CRLF, IPv6 and refclock names, leap announcements, lower-case hex. */
	ck_assert(cks_chrony_parse(&c, "0A000001,2001:db8::1,2,1.5,+0.000000100,0.0,0.0,1.0,"
				   "0.0,0.5,0.000000002,0.000000003,16.0,Insert second\r\n"));
	ck_assert_str_eq(c.reference, "2001:db8::1");
	ck_assert_str_eq(c.leap, "Insert second");
	ck_assert(c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 100 + 3 + 1);

	ck_assert(cks_chrony_parse(&c, "50505300,PPS,1,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
				   "1.0,Delete second"));
	ck_assert_uint_eq(c.ref_id, 0x50505300);
	ck_assert_str_eq(c.reference, "PPS");
	ck_assert(c.synchronised);

	ck_assert(cks_chrony_parse(&c, "deadbeef,x,16,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
				   "Invalid"));
	ck_assert_uint_eq(c.ref_id, 0xDEADBEEF);
	ck_assert(c.available && !c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
}
END_TEST

START_TEST(test_chrony_parse_malformed)
{
	static const char *const bad[] = {
		"",
		"\n",
		"506 Cannot talk to daemon",
		"Reference ID    : 7F000001 (127.0.0.1)",
		/* 13 and 15 fields */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal,x",
		/* reference ID */
		"7F00001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F0000011,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7G000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* stratum */
		"7F000001,127.0.0.1,,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,17,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,-1,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* numbers: text, exponent, nan, empty, bare dot, spaces */
		"7F000001,127.0.0.1,9,1.0,abc,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,1e-6,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,nan,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,.5,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,1.,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0, 0.1,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1 ,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* negative where chrony never prints one: delay, dispersion,
		 * skew, RMS */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,-0.001,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,-0.001,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,-0.1,0.0,0.0,0.1,Normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,-0.1,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* leap status */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,normal",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal ",
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,",
		/* a name with a space, or too long */
		"7F000001,foo bar,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		"7F000001,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,9,1.0,"
		"0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* two lines glued */
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal\n"
		"7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,Normal",
		/* 19 integer digits */
		"7F000001,127.0.0.1,9,1234567890123456789.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.1,"
		"Normal",
	};
	struct cks_chrony c, zero;
	char longline[1024];

	memset(&zero, 0, sizeof(zero));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* The one line above that is well-formed is a control. */
		bool good = strcmp(bad[i], "7F000001,127.0.0.1,9,1.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,"
					   "0.0,0.1,Normal") == 0;

		memset(&c, 0xA5, sizeof(c));
		ck_assert_msg(cks_chrony_parse(&c, bad[i]) == good, "line %zu: %s", i, bad[i]);
		if (good)
			continue;
		ck_assert(!c.available && !c.synchronised);
		ck_assert_msg(c.reason[0] != '\0', "line %zu has no reason", i);
		/* Never a half-filled struct: everything but the reason is 0. */
		memcpy(zero.reason, c.reason, sizeof(zero.reason));
		ck_assert_msg(memcmp(&c, &zero, sizeof(c)) == 0, "line %zu left data behind", i);
		ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
	}

	ck_assert(!cks_chrony_parse(&c, NULL));
	ck_assert(!c.available);

	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	ck_assert(!cks_chrony_parse(&c, longline));
	ck_assert_ptr_nonnull(strstr(c.reason, "too long"));

	ck_assert(!cks_chrony_parse(&c, "506 Cannot talk to daemon"));
	ck_assert_ptr_nonnull(strstr(c.reason, "fields"));
}
END_TEST

START_TEST(test_chrony_bound_formula)
{
	struct cks_chrony c;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
	ck_assert_int_eq(cks_chrony_bound_ns(NULL), CKS_NO_BOUND);

	c.available = c.synchronised = true;
	c.offset_s = -0.001;
	c.root_dispersion_s = 0.0002;
	c.root_delay_s = 0.0003;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 1000000 + 200000 + 150000);
	/* The sign of the offset does not matter. */
	c.offset_s = 0.001;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 1000000 + 200000 + 150000);
	/* Half a ns of root delay rounds up. */
	c.offset_s = 0.0;
	c.root_dispersion_s = 0.0;
	c.root_delay_s = 0.000000003;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 2);
	/* Absurd values saturate rather than wrap. */
	c.root_delay_s = 1e12;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), INT64_MAX);

	c.root_delay_s = 0.0003;
	c.synchronised = false;
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
}
END_TEST

/* Every field the builder uses comes back exactly, signs included, and
 * survives the control message codec. */
START_TEST(test_chrony_group_roundtrip)
{
	const char *const lines[] = { line_client, line_local, line_unsync, line_manpage };
	static struct ctl_msg msg, back;
	struct cks_chrony c, d;
	uint8_t buf[4096];

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		ck_assert(cks_chrony_parse(&c, lines[i]));
		memset(&msg, 0, sizeof(msg));
		msg.type = CTL_STATS;
		ck_assert(cks_chrony_encode(&c, 0, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
		size_t n = ctl_encode(&msg, buf, sizeof(buf));
		ck_assert_uint_gt(n, 0);
		ck_assert_int_eq(ctl_decode(buf, n, &back, NULL, NULL, 0), (long)n);
		ck_assert(cks_chrony_decode(&d, ctl_report_find(&back.u.report, CKS_CHRONY_GROUP)));
		ck_assert(d.available);
		ck_assert(d.synchronised == c.synchronised);
		ck_assert_int_eq(d.stratum, c.stratum);
		ck_assert_str_eq(d.leap, c.leap);
		ck_assert_uint_eq(d.ref_id, c.ref_id);
		ck_assert_double_eq_tol(d.offset_s, c.offset_s, 1e-12);
		ck_assert_double_eq_tol(d.frequency_ppm, c.frequency_ppm, 1e-9);
		ck_assert_double_eq_tol(d.residual_freq_ppm, c.residual_freq_ppm, 1e-9);
		ck_assert_double_eq_tol(d.skew_ppm, c.skew_ppm, 1e-9);
		ck_assert_double_eq_tol(d.update_interval_s, c.update_interval_s, 1e-9);
		ck_assert_int_eq(cks_chrony_bound_ns(&d), cks_chrony_bound_ns(&c));
		ck_assert(cks_drift_ppm_from_chrony(&d, &d) == cks_drift_ppm_from_chrony(&c, &c));
	}

	/* Unavailable: sent as such, read back without a bound. */
	ck_assert(!cks_chrony_parse(&c, "506 Cannot talk to daemon"));
	memset(&msg, 0, sizeof(msg));
	ck_assert(cks_chrony_encode(&c, 0, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(cks_chrony_decode(&d, ctl_report_find(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(!d.available);
	ck_assert(d.reason[0] != '\0');
	ck_assert_int_eq(cks_chrony_bound_ns(&d), CKS_NO_BOUND);

	/* Nothing received at all. */
	ck_assert(!cks_chrony_decode(&d, NULL));
	ck_assert(!d.available);
	ck_assert(!cks_chrony_encode(&c, 0, NULL));
}
END_TEST

/* The age of the read is what the caller's clock says at the encoding, so
 * the module itself reads no clock. */
START_TEST(test_chrony_read_age)
{
	static struct ctl_msg msg;
	struct cks_chrony c, d;
	uint64_t age = 0;

	ck_assert(cks_chrony_parse(&c, line_client));
	c.read_mono_ns = 7000000000u;
	ck_assert(cks_chrony_encode(&c, 7005000000u, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(cks_chrony_decode(&d, ctl_report_find(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert_uint_eq(d.read_age_ns, 5000000u);

	/* A now before the read (another clock, a caller's mistake): age 0. */
	memset(&msg, 0, sizeof(msg));
	ck_assert(cks_chrony_encode(&c, 1, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(ctl_group_get(ctl_report_find(&msg.u.report, CKS_CHRONY_GROUP), "read_age_ns",
				&age));
	ck_assert_uint_eq(age, 0);

	/* Not read by chronyc: no age sent. */
	memset(&msg, 0, sizeof(msg));
	c.read_mono_ns = 0;
	ck_assert(cks_chrony_encode(&c, 7005000000u, ctl_report_group(&msg.u.report, CKS_CHRONY_GROUP)));
	ck_assert(!ctl_group_get(ctl_report_find(&msg.u.report, CKS_CHRONY_GROUP), "read_age_ns",
				 &age));
}
END_TEST

START_TEST(test_chrony_set_reason)
{
	struct cks_chrony c;

	ck_assert(cks_chrony_parse(&c, line_client));
	cks_chrony_set_reason(&c, "chronyc said %d", 506);
	ck_assert(!c.available && !c.synchronised);
	ck_assert_str_eq(c.reason, "chronyc said 506");
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("chrony");
	TCase *tc = tcase_create("tracking");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_chrony_parse_real);
	tcase_add_test(tc, test_chrony_parse_variants);
	tcase_add_test(tc, test_chrony_parse_malformed);
	tcase_add_test(tc, test_chrony_bound_formula);
	tcase_add_test(tc, test_chrony_group_roundtrip);
	tcase_add_test(tc, test_chrony_read_age);
	tcase_add_test(tc, test_chrony_set_reason);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
