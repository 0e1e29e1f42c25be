/* Unit tests of common/sys/afile: a document is replaced whole; a writer
 * killed in the middle leaves the old document as it was; a reader polling
 * the path while it is rewritten never sees it empty or cut; a failure
 * leaves no temporary. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/afile.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/es-afile-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/doc.json", dir);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)!system(cmd);
}

/* The file's content, NUL-terminated, in buf; its length, or -1. */
static long slurp(const char *p, char *buf, size_t size)
{
	FILE *f = fopen(p, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (long)n;
}

static int entries(void)
{
	char cmd[160], out[16];
	snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
	FILE *p = popen(cmd, "r");
	(void)!fgets(out, sizeof out, p);
	pclose(p);
	return atoi(out);
}

START_TEST(test_replace)
{
	char buf[256];
	ck_assert_int_eq(afile_write_all(path, "{\"a\": 1}\n", 9), 0);
	ck_assert_int_eq(slurp(path, buf, sizeof buf), 9);
	ck_assert_str_eq(buf, "{\"a\": 1}\n");
	ck_assert_int_eq(afile_write_all(path, "{}\n", 3), 0);
	ck_assert_str_eq((slurp(path, buf, sizeof buf), buf), "{}\n");
	ck_assert_int_eq(entries(), 1);   /* no temporary left */
	ck_assert_int_eq(afile_remove(path), 0);
	ck_assert_int_eq(afile_remove(path), 0);   /* absent already: fine */
	ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(test_failure_leaves_nothing)
{
	char missing[160];
	snprintf(missing, sizeof missing, "%s/no/such/doc.json", dir);
	ck_assert_int_eq(afile_write_all(missing, "x", 1), -ENOENT);
	/* A directory in the document's place: the rename fails, the
	 * temporary goes. */
	ck_assert_int_eq(mkdir(path, 0755), 0);
	char inside[200];
	snprintf(inside, sizeof inside, "%s/x", path);
	ck_assert_int_eq(afile_write_all(inside, "x", 1), 0);
	ck_assert_int_lt(afile_write_all(path, "x", 1), 0);
	ck_assert_int_eq(entries(), 1);
}
END_TEST

/* A writer killed after half its document: the old one is whole. */
START_TEST(test_killed_in_the_middle)
{
	static const char old_doc[] = "{\"run\": 1, \"balanced\": true}\n";
	ck_assert_int_eq(afile_write_all(path, old_doc, strlen(old_doc)), 0);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct afile f;
		if (afile_begin(&f, path) < 0 || afile_write(&f, "{\"run\": 2, \"bal", 15) < 0)
			_exit(2);
		(void)!write(ready[1], "x", 1);
		pause();   /* killed here, the document half written */
		_exit(3);
	}
	char b;
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &b, 1), 1);
	close(ready[0]);
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	char buf[256];
	slurp(path, buf, sizeof buf);
	ck_assert_str_eq(buf, old_doc);
}
END_TEST

/* A child rewrites the document as fast as it can with documents of
 * different lengths while this process reads it: every read is one of
 * them, whole. */
START_TEST(test_polled_while_rewritten)
{
	char big[8192];
	memset(big, 'x', sizeof big);
	big[0] = '{';
	big[sizeof big - 2] = '}';
	big[sizeof big - 1] = '\n';
	ck_assert_int_eq(afile_write_all(path, "{}\n", 3), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (int i = 0; i < 400; i++)
			if (afile_write_all(path, i % 2 ? "{}\n" : big, i % 2 ? 3 : sizeof big) < 0)
				_exit(1);
		_exit(0);
	}
	static char buf[16384];
	long reads = 0, bad = 0;
	int status = 0;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		long n = slurp(path, buf, sizeof buf);
		reads++;
		if (n != 3 && n != (long)sizeof big)
			bad++;
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(reads, 0);
	ck_assert_int_eq(bad, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("afile");
	TCase *tc = tcase_create("documents");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_replace);
	tcase_add_test(tc, test_failure_leaves_nothing);
	tcase_add_test(tc, test_killed_in_the_middle);
	tcase_add_test(tc, test_polled_while_rewritten);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
