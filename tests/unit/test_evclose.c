/* The closer of event files (common/sys/evclose.c) on a real file system,
 * with its real thread: a file handed over is fdatasynced, renamed from
 * NAME.writing to NAME and given its manifest while the caller goes on;
 * nothing to collect before one is handed over or, without waiting, before
 * it is finished; a failed step is named (a descriptor that is not a file's:
 * fdatasync; a NAME.writing that is gone: rename) and leaves no manifest;
 * and stopping with a file in flight finishes it first. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/evclose.h"

static char dir[64];
static int dir_fd = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/es-evclose-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dir_fd, 0);
}

static void teardown(void)
{
	char cmd[128];

	close(dir_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static bool exists(const char *name)
{
	struct stat st;
	return fstatat(dir_fd, name, &st, 0) == 0;
}

/* NAME.writing holding some bytes, open for the closer. */
static struct evclose_job job_for(const char *name, bool sync)
{
	char open_name[96];
	struct evclose_job job = { .sync = sync };

	snprintf(open_name, sizeof(open_name), "%s.writing", name);
	job.fd = openat(dir_fd, open_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_int_ge(job.fd, 0);
	ck_assert_int_eq(write(job.fd, "0123456789", 10), 10);
	snprintf(job.info.name, sizeof(job.info.name), "%s", name);
	job.info.bytes = 10;
	job.info.events = 3;
	job.info.first_event = 7;
	job.info.last_event = 9;
	return job;
}

START_TEST(test_files_closed_off_the_caller)
{
	struct evclose *c;
	struct evclose_result r;

	ck_assert_int_eq(evclose_start(&c, dir, dir_fd, 42, 1), 0);
	ck_assert(!evclose_collect(c, true, &r));    /* none handed over */
	for (int i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d.dat", i);
		struct evclose_job job = job_for(name, i != 1);
		evclose_submit(c, &job);
		ck_assert(evclose_collect(c, true, &r));
		ck_assert_int_eq(r.err, 0);
		ck_assert_str_eq(r.info.name, name);
		ck_assert_uint_eq(r.info.events, 3);
		ck_assert(exists(name));
		char manifest[48], writing[48];
		snprintf(manifest, sizeof(manifest), "%s.json", name);
		snprintf(writing, sizeof(writing), "%s.writing", name);
		ck_assert(exists(manifest));
		ck_assert(!exists(writing));
		ck_assert(!evclose_collect(c, false, &r));   /* collected once */
	}
	evclose_stop(c);
}
END_TEST

START_TEST(test_a_failed_step_is_named)
{
	struct evclose *c;
	struct evclose_result r;

	ck_assert_int_eq(evclose_start(&c, dir, dir_fd, 42, 1), 0);
	/* Not a file's descriptor: fdatasync fails, nothing renamed. */
	struct evclose_job job = job_for("bad-fd.dat", true);
	int pipe_fds[2];
	ck_assert_int_eq(pipe(pipe_fds), 0);
	close(job.fd);
	job.fd = pipe_fds[0];
	close(pipe_fds[1]);
	evclose_submit(c, &job);
	ck_assert(evclose_collect(c, true, &r));
	ck_assert_int_eq(r.err, EINVAL);
	ck_assert_str_eq(r.step, "fdatasync");
	ck_assert(exists("bad-fd.dat.writing"));
	ck_assert(!exists("bad-fd.dat"));
	ck_assert(!exists("bad-fd.dat.json"));
	/* Its NAME.writing gone: the rename fails, no manifest. */
	job = job_for("gone.dat", false);
	ck_assert_int_eq(unlinkat(dir_fd, "gone.dat.writing", 0), 0);
	evclose_submit(c, &job);
	ck_assert(evclose_collect(c, true, &r));
	ck_assert_int_eq(r.err, ENOENT);
	ck_assert_str_eq(r.step, "rename");
	ck_assert(!exists("gone.dat.json"));
	evclose_stop(c);
}
END_TEST

START_TEST(test_stop_finishes_the_file_in_flight)
{
	struct evclose *c;

	ck_assert_int_eq(evclose_start(&c, dir, dir_fd, 42, 1), 0);
	struct evclose_job job = job_for("last.dat", true);
	evclose_submit(c, &job);
	evclose_stop(c);
	ck_assert(exists("last.dat"));
	ck_assert(exists("last.dat.json"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("evclose");
	TCase *tc = tcase_create("closer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_files_closed_off_the_caller);
	tcase_add_test(tc, test_a_failed_step_is_named);
	tcase_add_test(tc, test_stop_finishes_the_file_in_flight);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
