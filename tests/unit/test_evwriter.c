/* Event file writer on a real file system: events of small and large
 * frames written in batches, every closed file scanned back whole by the
 * codec (common/wire/evfile.c) with its manifest beside it; files rolled at
 * the size limit and at slices; nothing left .writing after a close; a
 * directory that does not exist refused by name; and, as root, a small
 * tmpfs filled up: the named "disk full" error, the file cut back to its
 * last written record and closed, and written + unwritten = handed over.
 *
 * The payload sizes are drawn at random; the seed is printed and
 * TEST_SEED=n repeats a run. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sys/evwriter.h"
#include "wire/crc.h"
#include "wire/evfile.h"
#include "wire/frame.h"

#define RUN 42u
#define SOURCES 3u
#define MAX_PAYLOAD 5000u
#define SLAB_BYTES (8u << 20)

static uint64_t test_seed;
static char dir[64];
static uint8_t *slab;          /* the frames, as a receive buffer would hold them */
static size_t slab_used;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/es-evw-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	slab = malloc(SLAB_BYTES);
	ck_assert_ptr_nonnull(slab);
	slab_used = 0;
	srandom((unsigned)test_seed);
}

static void teardown(void)
{
	char cmd[128];

	umount2(dir, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(slab);
}

/* An event's frames, encoded into the slab; payload sizes random up to max. */
static void make_event(uint64_t id, uint32_t max_payload, struct evw_frame *frames,
		       struct evw_event *ev)
{
	for (unsigned int s = 0; s < SOURCES; s++) {
		uint32_t len = max_payload ? (uint32_t)random() % (max_payload + 1) : 0;
		struct frm_header h = { .source_id = (uint16_t)s, .run_id = RUN, .event_id = id,
					.sequence = id, .timestamp_ns = 1000 + id * 10 + s,
					.payload_len = len };
		uint8_t *at;

		if (slab_used + FRM_HEADER_BYTES + len > SLAB_BYTES)
			slab_used = 0;
		at = slab + slab_used;
		for (uint32_t i = 0; i < len; i++)
			at[FRM_HEADER_BYTES + i] = (uint8_t)(id * 31 + s * 7 + i);
		frames[s] = (struct evw_frame){ at, (uint32_t)frm_encode(at, &h, at + FRM_HEADER_BYTES),
						crc_update(0, at + FRM_HEADER_BYTES, len) };
		slab_used += frames[s].frame_bytes;
	}
	*ev = (struct evw_event){ .event_id = id, .earliest_ns = 1000 + id * 10,
				  .frame_count = SOURCES, .frames = frames };
}

static struct evw_config config(uint64_t max_file_bytes)
{
	struct evw_config c = { .dir = dir, .run = RUN, .builder_id = 2, .sources = SOURCES,
				.max_file_bytes = max_file_bytes, .reserve_bytes = 1,
				.software = "test_evwriter" };

	memset(c.config_sha256, 0xab, sizeof(c.config_sha256));
	return c;
}

struct closed_files {
	unsigned int count;
	uint64_t events;
	struct evw_file_info last;
};

static void on_closed(void *arg, const struct evw_file_info *f)
{
	struct closed_files *c = arg;

	c->count++;
	c->events += f->events;
	c->last = *f;
}

/* Scans every file of the directory: each must be closed, whole, with its
 * manifest; returns the events and checks they run first .. first+n-1. */
static uint64_t scan_dir(uint64_t first, unsigned int *files)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	uint64_t events = 0, next = first;

	ck_assert_int_ge(n, 0);
	*files = 0;
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		size_t len = strlen(name);
		char path[400], manifest[420];

		ck_assert_msg(strstr(name, ".writing") == NULL && strstr(name, ".tmp") == NULL,
			      "%s left in %s", name, dir);
		if (len < 4 || strcmp(name + len - 4, ".dat") != 0)
			goto next;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		snprintf(manifest, sizeof(manifest), "%s.json", path);
		ck_assert_msg(access(manifest, R_OK) == 0, "no manifest beside %s", name);
		int fd = open(path, O_RDONLY);
		struct stat st;
		ck_assert(fd >= 0 && fstat(fd, &st) == 0);
		uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		ck_assert(map != MAP_FAILED);
		struct evf_scan s;
		evf_scan(map, (size_t)st.st_size, MAX_PAYLOAD, &s);
		ck_assert_msg(s.complete, "%s: %s at %zu", name, evf_status_name(s.status), s.bad_offset);
		ck_assert_uint_eq(s.header.run, RUN);
		ck_assert_uint_eq(s.header.builder_id, 2);
		if (s.records.events > 0) {
			ck_assert_uint_eq(s.records.first_event, next);
			next = s.records.last_event + 1;
		}
		events += s.records.events;
		(*files)++;
		munmap(map, (size_t)st.st_size);
		close(fd);
next:
		free(names[i]);
	}
	free(names);
	return events;
}

START_TEST(test_events_written_read_back_whole)
{
	struct closed_files closed = { 0 };
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw_stats st;
	struct evw *w;
	char err[256];
	unsigned int files;

	struct evw_config c = config(64u << 20);
	ck_assert_int_eq(evw_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (uint64_t id = 0; id < 3000; id++) {
		/* Mostly small frames, a run of large ones (the CRC-combine path). */
		make_event(id, id % 500 < 100 ? MAX_PAYLOAD : 200, frames, &ev);
		ck_assert_int_eq(evw_add(w, &ev), 0);
		if (id % 97 == 0)
			ck_assert_int_eq(evw_flush(w), 0);
	}
	ck_assert_int_eq(evw_close(w), 0);
	evw_stats(w, &st);
	ck_assert_ptr_null(evw_error(w));
	ck_assert_uint_eq(st.events_written, 3000);
	ck_assert_uint_eq(st.events_unwritten, 0);
	ck_assert_uint_eq(st.files_closed, 1);
	ck_assert_uint_eq(closed.count, 1);
	ck_assert_uint_eq(closed.last.events, 3000);
	ck_assert_uint_eq(scan_dir(0, &files), 3000);
	ck_assert_uint_eq(files, 1);
	evw_destroy(w);
}
END_TEST

START_TEST(test_files_roll_at_the_size_limit_and_at_slices)
{
	struct closed_files closed = { 0 };
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw *w;
	char err[256];
	unsigned int files;
	struct evw_config c = config(64u << 10);

	ck_assert_int_eq(evw_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (uint64_t id = 0; id < 2000; id++) {
		if (id == 1000)
			ck_assert_int_eq(evw_roll(w, 1), 0);
		make_event(id, 300, frames, &ev);
		ck_assert_int_eq(evw_add(w, &ev), 0);
	}
	ck_assert_int_eq(evw_close(w), 0);
	ck_assert_uint_eq(scan_dir(0, &files), 2000);
	ck_assert_uint_eq(files, closed.count);
	ck_assert_uint_ge(files, 2000 * 3 * 190 / (64u << 10));
	ck_assert_uint_eq(closed.events, 2000);
	ck_assert_uint_eq(closed.last.slice, 1);
	ck_assert_uint_eq(closed.last.file_seq, files - 1);
	ck_assert_uint_le(closed.last.bytes, 64u << 10);
	evw_destroy(w);
}
END_TEST

START_TEST(test_a_missing_directory_is_named)
{
	struct evw_config c = config(1 << 20);
	struct evw *w = (struct evw *)1;
	char err[256];

	c.dir = "/nonexistent/es-evw";
	ck_assert_int_eq(evw_open(&w, &c, NULL, NULL, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_null(w);
	ck_assert_str_eq(err, "output directory /nonexistent/es-evw: No such file or directory");
}
END_TEST

/* A 1 MiB tmpfs, filled: the writer stops with a named error, its file
 * closed after the last record written, the rest counted unwritten. */
START_TEST(test_a_full_disk_is_named_and_nothing_is_torn)
{
	struct closed_files closed = { 0 };
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw_stats st;
	struct evw *w;
	char err[256];
	unsigned int files;
	uint64_t id, failed_at = 0;

	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=1m") != 0) {
		printf("test_evwriter: full disk test skipped (needs root to mount a tmpfs)\n");
		return;
	}
	struct evw_config c = config(4u << 20);
	ck_assert_int_eq(evw_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (id = 0; id < 10000; id++) {
		make_event(id, 600, frames, &ev);
		if (evw_add(w, &ev) != 0 && failed_at == 0)
			failed_at = id;
	}
	ck_assert_uint_gt(failed_at, 0);
	ck_assert_int_ne(evw_close(w), 0);
	evw_stats(w, &st);
	ck_assert_ptr_nonnull(evw_error(w));
	ck_assert_msg(strncmp(evw_error(w), "disk full", 9) == 0, "%s", evw_error(w));
	ck_assert_uint_eq(st.events_written + st.events_unwritten, 10000);
	ck_assert_uint_gt(st.events_written, 100);
	ck_assert_uint_eq(scan_dir(0, &files), st.events_written);
	ck_assert_uint_eq(files, 1);
	ck_assert_uint_eq(closed.events, st.events_written);
	evw_destroy(w);
}
END_TEST

static Suite *evwriter_suite(void)
{
	Suite *s = suite_create("evwriter");
	TCase *tc = tcase_create("files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_events_written_read_back_whole);
	tcase_add_test(tc, test_files_roll_at_the_size_limit_and_at_slices);
	tcase_add_test(tc, test_a_missing_directory_is_named);
	tcase_add_test(tc, test_a_full_disk_is_named_and_nothing_is_torn);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("TEST_SEED");
	SRunner *sr;
	int failed;

	test_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	printf("test_evwriter: seed %" PRIu64 " (TEST_SEED=%" PRIu64 " repeats this run)\n",
	       test_seed, test_seed);
	fflush(stdout);
	sr = srunner_create(evwriter_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
