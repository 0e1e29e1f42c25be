/* Unit tests of common/io/chronyc: a stand-in for chronyc (a shell script)
 * that prints a tracking line, an error, nothing, too much or nothing in
 * time; a missing command; SIGCHLD ignored; and the real chronyc, whatever
 * this machine has. Every child is reaped. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "io/chronyc.h"

#include "chrony_lines.h"

static int run_sh(struct cks_chrony *c, const char *script, int timeout_ms)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };

	return cks_chrony_run(c, argv, timeout_ms);
}

static bool no_children_left(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

START_TEST(test_chrony_run_fake)
{
	char script[512];
	struct cks_chrony c;

	snprintf(script, sizeof(script), "printf '%%s' '%s'", line_client);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert(c.available && c.synchronised);
	ck_assert_int_eq(cks_chrony_bound_ns(&c), 3615);

	/* A warning on stderr before the line does not hide it. */
	snprintf(script, sizeof(script), "echo 'Warning: something' >&2; printf '%%s' '%s'",
		 line_local);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert_int_eq(c.stratum, 8);

	ck_assert_int_eq(run_sh(&c, "echo '506 Cannot talk to daemon'; exit 1", 5000),
			 -ECONNREFUSED);
	ck_assert(!c.available);
	ck_assert_str_eq(c.reason, "506 Cannot talk to daemon");

	ck_assert_int_eq(run_sh(&c, "echo 'Could not open connection to daemon' >&2; exit 1",
				5000), -ECONNREFUSED);
	ck_assert_str_eq(c.reason, "Could not open connection to daemon");

	ck_assert_int_eq(run_sh(&c, "echo hello; exit 0", 5000), -EBADMSG);
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "hello"));

	ck_assert_int_eq(run_sh(&c, "echo '7F000001,x,9,1.0'", 5000), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(c.reason, "fields"));

	ck_assert_int_eq(run_sh(&c, "exit 3", 5000), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(c.reason, "status 3"));

	/* More output than the buffer: drained, refused, no hang. */
	ck_assert_int_eq(run_sh(&c, "head -c 200000 /dev/zero | tr '\\0' x", 5000), -EBADMSG);
	ck_assert(!c.available);

	ck_assert(no_children_left());
}
END_TEST

START_TEST(test_chrony_run_missing_and_slow)
{
	char *missing[] = { "es-no-such-chronyc", "-c", "tracking", NULL };
	char *missing_path[] = { "/nonexistent/chronyc", "-c", "tracking", NULL };
	char *slow[] = { "sleep", "10", NULL };
	struct cks_chrony c;
	struct timespec a, b;
	double took;

	ck_assert_int_eq(cks_chrony_run(&c, missing, 1000), -ENOENT);
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "not found"));
	ck_assert_int_eq(cks_chrony_run(&c, missing_path, 1000), -ENOENT);

	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(cks_chrony_run(&c, slow, 200), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	ck_assert(!c.available);
	ck_assert_ptr_nonnull(strstr(c.reason, "200 ms"));
	ck_assert_msg(took >= 0.19 && took < 3.0, "timeout took %.3f s", took);
	/* Killed and reaped, not left behind. */
	ck_assert(no_children_left());
}
END_TEST

START_TEST(test_chrony_run_sigchld_ignored)
{
	char script[512];
	struct cks_chrony c;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;

	/* A daemon that ignores SIGCHLD has its children reaped by the
	 * kernel; the output must still count. */
	sigemptyset(&ign.sa_mask);
	ck_assert_int_eq(sigaction(SIGCHLD, &ign, &old), 0);
	snprintf(script, sizeof(script), "printf '%%s' '%s'", line_client);
	ck_assert_int_eq(run_sh(&c, script, 5000), 0);
	ck_assert(c.available);
	ck_assert_int_eq(sigaction(SIGCHLD, &old, NULL), 0);
}
END_TEST

START_TEST(test_chrony_read_real)
{
	struct cks_chrony c;
	int ret;

	/* No chronyd listens there: chronyc says so (or is not installed). */
	ret = cks_chrony_read(&c, "/nonexistent-es-dir/chronyd.sock");
	ck_assert_msg(ret == -ECONNREFUSED || ret == -ENOENT, "ret %d: %s", ret, c.reason);
	ck_assert(!c.available);
	ck_assert(c.reason[0] != '\0');
	ck_assert_int_eq(cks_chrony_bound_ns(&c), CKS_NO_BOUND);

	/* The default socket: whatever this machine has, the result is
	 * either a parsed line or a reason, never a guess. */
	ret = cks_chrony_read(&c, NULL);
	fprintf(stderr, "test_chronyc: chronyc -c tracking: %s\n",
		ret == 0 ? "parsed" : c.reason);
	ck_assert_int_eq(ret == 0, c.available);
	if (ret) {
		ck_assert(c.reason[0] != '\0');
		ck_assert(ret == -ENOENT || ret == -ECONNREFUSED || ret == -ETIMEDOUT ||
			  ret == -EBADMSG);
	}
	ck_assert(no_children_left());
}
END_TEST

int main(void)
{
	Suite *s = suite_create("chronyc");
	TCase *tc = tcase_create("run");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_chrony_run_fake);
	tcase_add_test(tc, test_chrony_run_missing_and_slow);
	tcase_add_test(tc, test_chrony_run_sigchld_ignored);
	tcase_add_test(tc, test_chrony_read_real);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
