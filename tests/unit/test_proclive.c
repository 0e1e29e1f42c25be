/* Unit tests of common/sys/proclive: this process is alive with its own
 * start time and not with another; a child is alive while it runs, not as
 * a zombie and not once reaped; no pid is alive as 0 or below. */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/proclive.h"

START_TEST(test_self)
{
	uint64_t start = proclive_self_start();
	ck_assert_uint_gt(start, 0);
	ck_assert(proclive_alive(getpid(), start));
	ck_assert(proclive_alive(getpid(), 0));
	/* The same pid with another start time is a reused pid. */
	ck_assert(!proclive_alive(getpid(), start + 1));
	ck_assert(!proclive_alive(0, 0));
	ck_assert(!proclive_alive(-1, start));
}
END_TEST

START_TEST(test_child)
{
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char b;
		/* Runs until the parent closes its end. */
		close(go[1]);
		(void)!read(go[0], &b, 1);
		_exit(0);
	}
	close(go[0]);
	ck_assert(proclive_alive(pid, 0));
	/* Exited but not reaped: a zombie touches nothing any more. */
	close(go[1]);
	bool alive = true;
	for (int i = 0; i < 2000 && alive; i++) {
		alive = proclive_alive(pid, 0);
		if (alive)
			usleep(1000);
	}
	ck_assert(!alive);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(!proclive_alive(pid, 0));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proclive");
	TCase *tc = tcase_create("liveness");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_self);
	tcase_add_test(tc, test_child);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
