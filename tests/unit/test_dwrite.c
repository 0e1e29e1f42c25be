/* Unit tests of common/sys/dwrite: appends of every size, across the
 * staging buffer and across blocks, leave the file byte for byte what was
 * appended, with every byte in the file when the append returns; tmpfs,
 * which refuses direct I/O, is refused by name; a full file system is an
 * error, not a short file taken for whole. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/dwrite.h"

static char dir[64];

static void setup(void)
{
	/* /tmp is the root file system here, which takes direct I/O. */
	snprintf(dir, sizeof dir, "/var/tmp/es-dwrite-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "umount %s/small 2>/dev/null; rm -rf %s", dir, dir);
	(void)!system(cmd);
}

/* A file of d's directory opened as the writer opens one, its head written. */
static int begin(struct dwrite *d, const char *in, const char *name, const uint8_t *head,
		 size_t len, int *fd_out)
{
	int dir_fd = open(in, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dir_fd, 0);
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, head, len), (ssize_t)len);
	int rc = dwrite_begin(d, dir_fd, name, fd, head, len);
	close(dir_fd);
	*fd_out = fd;
	return rc;
}

START_TEST(test_appends_are_the_file)
{
	enum { TOTAL = 11 << 20 };
	uint8_t *want = malloc(TOTAL);
	ck_assert_ptr_nonnull(want);
	srand(7);
	for (size_t i = 0; i < TOTAL; i++)
		want[i] = (uint8_t)rand();
	struct dwrite d;
	ck_assert_int_eq(dwrite_init(&d), 0);
	int fd;
	ck_assert_int_eq(begin(&d, dir, "f.writing", want, 128, &fd), 0);
	size_t at = 128;
	/* One byte, a block less one, a block, a stage and more, many iovecs. */
	static const size_t sizes[] = { 1, 4095, 4096, 4097, 36, 5 << 20, 3, 100000, 7, 4096 * 3 };
	for (unsigned k = 0; at < TOTAL; k++) {
		size_t n = sizes[k % (sizeof sizes / sizeof sizes[0])];
		if (n > TOTAL - at)
			n = TOTAL - at;
		struct iovec iov[3] = { { want + at, n / 3 }, { want + at + n / 3, n / 3 },
					{ want + at + 2 * (n / 3), n - 2 * (n / 3) } };
		ck_assert_int_eq(dwrite_append(&d, iov, 3), 0);
		at += n;
		struct stat st;
		ck_assert_int_eq(fstat(fd, &st), 0);
		ck_assert_uint_eq((uint64_t)st.st_size, at);   /* nothing left in the process */
		ck_assert_uint_eq(dwrite_end(&d), at);
	}
	ck_assert_uint_gt(d.direct_bytes, TOTAL / 2);
	ck_assert_uint_eq(d.direct_bytes % DWRITE_BLOCK, 0);
	dwrite_end_file(&d);
	close(fd);
	char path[128];
	snprintf(path, sizeof path, "%s/f.writing", dir);
	FILE *f = fopen(path, "rb");
	uint8_t *got = malloc(TOTAL + 1);
	ck_assert_uint_eq(fread(got, 1, TOTAL + 1, f), TOTAL);
	fclose(f);
	ck_assert(memcmp(got, want, TOTAL) == 0);
	free(got);
	free(want);
	dwrite_free(&d);
}
END_TEST

START_TEST(test_tmpfs_refuses)
{
	char shm[64];
	snprintf(shm, sizeof shm, "/dev/shm/es-dwrite-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(shm));
	struct dwrite d;
	ck_assert_int_eq(dwrite_init(&d), 0);
	int fd;
	uint8_t head[128] = { 1 };
	ck_assert_int_eq(begin(&d, shm, "f", head, sizeof head, &fd), -EINVAL);
	ck_assert_int_eq(d.direct_fd, -1);
	close(fd);
	dwrite_free(&d);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", shm);
	(void)!system(cmd);
}
END_TEST

/* A 4 MiB ext4 file system (a loop device; root only): appending more
 * than it holds fails with ENOSPC, never silently short. */
START_TEST(test_full_file_system)
{
	char cmd[1024], small[96];
	snprintf(small, sizeof small, "%s/small", dir);
	snprintf(cmd, sizeof cmd,
		 "mkdir -p %s && truncate -s 4M %s/img && mkfs.ext4 -q -F %s/img >/dev/null 2>&1 && "
		 "mount -o loop %s/img %s", small, dir, dir, dir, small);
	if (geteuid() != 0 || system(cmd) != 0) {
		fprintf(stderr, "test_dwrite: no loop-mounted ext4 here (root and mkfs.ext4 needed); the full file system is not tried\n");
		return;
	}
	struct dwrite d;
	ck_assert_int_eq(dwrite_init(&d), 0);
	int fd;
	static uint8_t chunk[1 << 20];
	ck_assert_int_eq(begin(&d, small, "f", chunk, 128, &fd), 0);
	int rc = 0;
	for (int i = 0; i < 8 && rc == 0; i++) {
		struct iovec iov = { chunk, sizeof chunk };
		rc = dwrite_append(&d, &iov, 1);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	dwrite_end_file(&d);
	close(fd);
	dwrite_free(&d);
}
END_TEST

static Suite *dwrite_suite(void)
{
	Suite *s = suite_create("dwrite");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_appends_are_the_file);
	tcase_add_test(tc, test_tmpfs_refuses);
	tcase_add_test(tc, test_full_file_system);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(dwrite_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
