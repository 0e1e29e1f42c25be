/* Unit tests of common/io/shmguard: a guarded shared mapping whose file is
 * cut short reads zeros where its pages were lost and reports it; an
 * unguarded one still dies of SIGBUS; slots are reused and run out. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/shmguard.h"

/* A shared mapping of a two-page memfd filled with 0xab. */
static uint8_t *map_two_pages(int *fd, size_t *bytes)
{
	*bytes = 2 * (size_t)sysconf(_SC_PAGESIZE);
	*fd = memfd_create("shmguard-test", MFD_CLOEXEC);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(ftruncate(*fd, (off_t)*bytes), 0);
	uint8_t *map = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	ck_assert(map != MAP_FAILED);
	memset(map, 0xab, *bytes);
	return map;
}

START_TEST(test_truncated_reads_zeros)
{
	int fd;
	size_t bytes;
	uint8_t *map = map_two_pages(&fd, &bytes);
	int slot = shg_guard(map, bytes);
	ck_assert_int_ge(slot, 0);
	ck_assert(!shg_truncated(slot));
	ck_assert_uint_eq(map[bytes - 1], 0xab);

	/* Another process could do this while the ring is mapped. */
	ck_assert_int_eq(ftruncate(fd, (off_t)(bytes / 2)), 0);
	ck_assert_uint_eq(((volatile uint8_t *)map)[bytes - 1], 0);
	ck_assert(shg_truncated(slot));
	/* The page still there is untouched. */
	ck_assert_uint_eq(map[0], 0xab);

	shg_unguard(slot);
	ck_assert(!shg_truncated(-1));
	munmap(map, bytes);
	close(fd);
}
END_TEST

START_TEST(test_unguarded_still_dies)
{
	int fd;
	size_t bytes;
	uint8_t *map = map_two_pages(&fd, &bytes);
	/* The handler is installed, for another mapping. */
	uint8_t other[64];
	int slot = shg_guard(other, sizeof other);
	ck_assert_int_ge(slot, 0);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* A sanitizer's report of the fault would only look alarming. */
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		volatile uint8_t b = map[0];
		(void)b;
		_exit(0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	/* Killed by SIGBUS, or by the handler that was there before the
	 * guard's (AddressSanitizer's reports the fault and exits 1). */
	ck_assert_msg((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
		      (WIFEXITED(status) && WEXITSTATUS(status) != 0), "status 0x%x", status);
	shg_unguard(slot);
	munmap(map, bytes);
	close(fd);
}
END_TEST

START_TEST(test_slots)
{
	static uint8_t areas[SHG_MAX_GUARDED + 1][8];
	int slots[SHG_MAX_GUARDED];
	for (int i = 0; i < SHG_MAX_GUARDED; i++) {
		slots[i] = shg_guard(areas[i], sizeof areas[i]);
		ck_assert_int_ge(slots[i], 0);
	}
	/* Full: the next mapping goes unguarded. */
	ck_assert_int_eq(shg_guard(areas[SHG_MAX_GUARDED], 8), -1);
	shg_unguard(slots[3]);
	ck_assert_int_eq(shg_guard(areas[SHG_MAX_GUARDED], 8), slots[3]);
	for (int i = 0; i < SHG_MAX_GUARDED; i++)
		shg_unguard(slots[i]);
	shg_unguard(-1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shmguard");
	TCase *tc = tcase_create("guard");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_truncated_reads_zeros);
	tcase_add_test(tc, test_unguarded_still_dies);
	tcase_add_test(tc, test_slots);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
