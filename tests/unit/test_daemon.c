/* Unit tests of common/io/daemon's start-up announcement: the "listening"
 * lines every daemon prints and the port file it writes, in the format
 * deploy/daqrun and the e2e tests read (docs/DEPLOY.md). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/daemon.h"

/* What daemon_announce printed on stdout, caught in a temporary file. */
struct caught {
	int saved_stdout;
	FILE *tmp;
};

static struct caught catch_stdout(void)
{
	struct caught c = { .tmp = tmpfile() };
	ck_assert_ptr_nonnull(c.tmp);
	fflush(stdout);
	c.saved_stdout = dup(STDOUT_FILENO);
	ck_assert_int_ge(c.saved_stdout, 0);
	ck_assert_int_ge(dup2(fileno(c.tmp), STDOUT_FILENO), 0);
	return c;
}

static void release_stdout(struct caught *c, char *text, size_t len)
{
	fflush(stdout);
	dup2(c->saved_stdout, STDOUT_FILENO);
	close(c->saved_stdout);
	rewind(c->tmp);
	size_t n = fread(text, 1, len - 1, c->tmp);
	text[n] = '\0';
	fclose(c->tmp);
}

static void read_text(const char *path, char *text, size_t len)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, len - 1, f);
	text[n] = '\0';
	fclose(f);
}

static void port_file_path(char *path, size_t len)
{
	snprintf(path, len, "%s/es-announce-%d.ports", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
}

START_TEST(test_builder_both_roles_lines_and_file)
{
	char path[256], out[512], file[512];
	port_file_path(path, sizeof path);
	const struct daemon_port ports[] = {
		{ "data", "127.0.0.1", 4100, false },
		{ "control", "127.0.0.2", 4200, false },
		{ "metrics", "127.0.0.3", 9100, true },
	};
	struct caught c = catch_stdout();
	int rc = daemon_announce(ports, 3, path);
	release_stdout(&c, out, sizeof out);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(out, "listening data 127.0.0.1:4100 control 127.0.0.2:4200\n"
			      "listening metrics 127.0.0.3:9100\n");
	read_text(path, file, sizeof file);
	ck_assert_str_eq(file, "data 4100\ncontrol 4200\nmetrics 9100\n");
	unlink(path);
}
END_TEST

START_TEST(test_unbound_and_unprinted_ports)
{
	/* A hub has no data port; a serving daemon's start writes the ports its
	 * runs print themselves, so they are in the file only. */
	char path[256], out[512], file[512];
	port_file_path(path, sizeof path);
	const struct daemon_port ports[] = {
		{ "data", "127.0.0.1", 0, false },
		{ "control", NULL, 4200, false },
		{ "metrics", NULL, 0, false },
		{ "session", "127.0.0.1", 4300, false },
		{ "http", "127.0.0.1", 8080, false },
	};
	struct caught c = catch_stdout();
	int rc = daemon_announce(ports, 5, path);
	release_stdout(&c, out, sizeof out);
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(out, "listening session 127.0.0.1:4300 http 127.0.0.1:8080\n");
	read_text(path, file, sizeof file);
	ck_assert_str_eq(file, "control 4200\nsession 4300\nhttp 8080\n");
	unlink(path);
}
END_TEST

START_TEST(test_no_port_file_and_metrics_alone)
{
	const struct daemon_port metrics = { "metrics", "127.0.0.1", 9300, true };
	char out[512];
	struct caught c = catch_stdout();
	int rc = daemon_announce(&metrics, 1, NULL);
	int rc_empty = daemon_announce(&metrics, 1, "");
	release_stdout(&c, out, sizeof out);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(rc_empty, 0);
	ck_assert_str_eq(out, "listening metrics 127.0.0.1:9300\nlistening metrics 127.0.0.1:9300\n");
}
END_TEST

START_TEST(test_unwritable_port_file_fails)
{
	const struct daemon_port data = { "data", "127.0.0.1", 4100, false };
	char out[512];
	struct caught c = catch_stdout();
	int rc = daemon_announce(&data, 1, "/nonexistent-dir/es.ports");
	release_stdout(&c, out, sizeof out);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_str_eq(out, "listening data 127.0.0.1:4100\n");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("announce");
	tcase_add_test(tc, test_builder_both_roles_lines_and_file);
	tcase_add_test(tc, test_unbound_and_unprinted_ports);
	tcase_add_test(tc, test_no_port_file_and_metrics_alone);
	tcase_add_test(tc, test_unwritable_port_file_fails);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
