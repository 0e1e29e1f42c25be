/* Replays every input under tests/fuzz/regressions/<target>/ through the
 * harness bodies the libFuzzer targets run (tests/fuzz/harness.h), with the
 * normal build: inputs that once crashed a module, and small valid and
 * invalid examples, so `make unit` keeps checking them without clang. A
 * broken invariant aborts the forked test with the harness's message on
 * stderr. The directory is FUZZ_REGRESSIONS, default tests/fuzz/regressions
 * (make runs the tests from the repository root). */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../fuzz/harness.h"

#define MAX_INPUTS 1024

struct fuzz_target {
	const char *name;
	void (*run)(const uint8_t *data, size_t size);
	unsigned count;
};

static struct fuzz_target targets[] = {
	{ "frame", fuzz_frame_input, 0 },
	{ "ctl", fuzz_ctl_input, 0 },
	{ "ring", fuzz_ring_input, 0 },
	{ "evfile", fuzz_evfile_input, 0 },
};
#define TARGET_COUNT (sizeof targets / sizeof targets[0])

struct replay_input {
	const struct fuzz_target *target;
	char *path;
};

static struct replay_input inputs[MAX_INPUTS];
static unsigned input_count;

static int path_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the regular files of root/target in name order. */
static void list_target(const char *root, struct fuzz_target *t)
{
	char dir[4096], *names[MAX_INPUTS];
	unsigned n = 0;
	struct dirent *e;

	snprintf(dir, sizeof dir, "%s/%s", root, t->name);
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL && n < MAX_INPUTS) {
		char path[8192];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			names[n++] = strdup(path);
	}
	closedir(d);
	qsort(names, n, sizeof names[0], path_cmp);
	for (unsigned i = 0; i < n && input_count < MAX_INPUTS; i++) {
		inputs[input_count].target = t;
		inputs[input_count++].path = names[i];
		t->count++;
	}
}

static uint8_t *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	/* Exactly the file's size, so a read past it is caught under ASan. */
	buf = malloc(n > 0 ? (size_t)n : 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

START_TEST(test_replay)
{
	const struct replay_input *in = &inputs[_i];
	size_t size;
	uint8_t *data = read_file(in->path, &size);

	fuzz_set_input_name(in->path);
	in->target->run(data, size);
	fuzz_set_input_name(NULL);
	free(data);
}
END_TEST

/* An empty directory would make the replay pass by checking nothing. */
START_TEST(test_every_target_has_inputs)
{
	ck_assert_msg(targets[_i].count > 0, "no inputs for target %s under %s", targets[_i].name,
		      getenv("FUZZ_REGRESSIONS") ? getenv("FUZZ_REGRESSIONS")
						 : "tests/fuzz/regressions");
}
END_TEST

static Suite *fuzz_regressions_suite(void)
{
	Suite *s = suite_create("fuzz_regressions");
	TCase *tc = tcase_create("replay");

	tcase_add_loop_test(tc, test_every_target_has_inputs, 0, (int)TARGET_COUNT);
	tcase_add_loop_test(tc, test_replay, 0, (int)input_count);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *root = getenv("FUZZ_REGRESSIONS");
	SRunner *sr;
	int failed;

	if (root == NULL)
		root = "tests/fuzz/regressions";
	for (unsigned t = 0; t < TARGET_COUNT; t++)
		list_target(root, &targets[t]);
	printf("test_fuzz_regressions: %u inputs under %s (", input_count, root);
	for (unsigned t = 0; t < TARGET_COUNT; t++)
		printf("%s%s %u", t ? ", " : "", targets[t].name, targets[t].count);
	printf(")\n");
	fflush(stdout);

	sr = srunner_create(fuzz_regressions_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (unsigned i = 0; i < input_count; i++)
		free(inputs[i].path);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
