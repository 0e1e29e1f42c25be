/* HDF5 event writer on a real file system: events of small and large
 * frames (and incomplete ones) written in batches, every closed file read
 * back through libhdf5 with its manifest beside it, each frame rebuilt
 * from its row and payload bytes and its own CRC checked, each event's
 * record CRC (the raw format's) made again from the rebuilt frames; files
 * rolled at the size limit (never over it) and at slices; nothing left
 * .writing after a close; a directory that does not exist refused by name;
 * an event the layout cannot hold refused, the writer going on; and, as
 * root, a small tmpfs filled up: the named "disk full" error before the
 * batch that would not fit, the file closed whole with the batches before,
 * and written + unwritten = handed over; the same tmpfs filled behind the
 * writer's back: a file the library cannot close left NAME.h5.writing and
 * named, never renamed as whole.
 *
 * The payload sizes are drawn at random; the seed is printed and
 * TEST_SEED=n repeats a run. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sys/h5writer.h"
#include "sys/h5writer_layout.h"
#include "wire/crc.h"
#include "wire/evfile.h"
#include "wire/frame.h"

#define RUN 42u
#define SOURCES 3u
#define MAX_PAYLOAD 5000u
#define SLAB_BYTES (8u << 20)

static uint64_t test_seed;
static char dir[64];
static uint8_t *slab;
static size_t slab_used;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/es-h5w-XXXXXX");
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

static uint8_t payload_byte(uint64_t id, unsigned int s, uint32_t i)
{
	return (uint8_t)(id * 31 + s * 7 + i);
}

/* An event's frames in the slab; every 10th event lacks source 1 (an
 * expired event's fragments). */
static void make_event(uint64_t id, uint32_t max_payload, struct evw_frame *frames,
		       struct evw_event *ev)
{
	unsigned int n = 0;

	for (unsigned int s = 0; s < SOURCES; s++) {
		uint32_t len = max_payload ? (uint32_t)random() % (max_payload + 1) : 0;
		struct frm_header h = { .source_id = (uint16_t)s, .run_id = RUN, .event_id = id,
					.sequence = id, .timestamp_ns = 1000 + id * 10 + s,
					.payload_len = len };
		uint8_t *at;

		if (id % 10 == 9 && s == 1)
			continue;
		if (slab_used + FRM_HEADER_BYTES + len > SLAB_BYTES)
			slab_used = 0;
		at = slab + slab_used;
		for (uint32_t i = 0; i < len; i++)
			at[FRM_HEADER_BYTES + i] = payload_byte(id, s, i);
		frames[n] = (struct evw_frame){ at, (uint32_t)frm_encode(at, &h, at + FRM_HEADER_BYTES),
						crc_update(0, at + FRM_HEADER_BYTES, len) };
		slab_used += frames[n++].frame_bytes;
	}
	*ev = (struct evw_event){ .event_id = id, .earliest_ns = 1000 + id * 10,
				  .flags = n < SOURCES ? EVF_FLAG_INCOMPLETE : 0,
				  .frame_count = (uint16_t)n, .frames = frames };
}

static struct h5w_config config(uint64_t max_file_bytes)
{
	struct h5w_config c = { .dir = dir, .run = RUN, .builder_id = 2, .sources = SOURCES,
				.max_file_bytes = max_file_bytes, .reserve_bytes = 1,
				.software = "test_h5writer", .chunk_bytes = 64u << 10 };

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

static void *read_all(hid_t file, const char *name, hid_t type, size_t elem, hsize_t *n)
{
	hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
	hid_t space = H5Dget_space(d);
	void *buf;

	ck_assert(d >= 0 && space >= 0);
	ck_assert_int_eq(H5Sget_simple_extent_dims(space, n, NULL), 1);
	buf = malloc(*n * elem + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert(*n == 0 || H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
	H5Sclose(space);
	H5Dclose(d);
	return buf;
}

static uint64_t read_u64_attr(hid_t file, const char *name)
{
	hid_t a = H5Aopen(file, name, H5P_DEFAULT);
	uint64_t v = 0;

	ck_assert_msg(a >= 0, "no attribute %s", name);
	ck_assert(H5Aread(a, H5T_NATIVE_UINT64, &v) >= 0);
	H5Aclose(a);
	return v;
}

struct source_data {
	struct h5w_frame_row *rows;
	uint8_t *payload;
	hsize_t rows_n, payload_n, next;
};

/* The frame of row r rebuilt, its CRC and its payload checked; then the
 * frames' CRC in sequence for the record CRC. */
static uint32_t check_frame(const struct source_data *sd, const struct h5w_frame_row *r,
			    unsigned int s, uint32_t crc_so_far, uint8_t *buf)
{
	struct frm_header h = { .flags = r->flags, .source_id = r->source_id, .run_id = r->run,
				.event_id = r->event_id, .sequence = r->sequence,
				.timestamp_ns = r->timestamp_ns, .payload_len = r->payload_len };

	ck_assert_uint_le(r->payload_offset + r->payload_len, sd->payload_n);
	ck_assert_uint_eq(r->source_id, s);
	ck_assert_uint_eq(r->run, RUN);
	ck_assert_uint_eq(r->version, FRM_VERSION);
	size_t n = frm_encode(buf, &h, sd->payload + r->payload_offset);
	ck_assert_msg(h.crc32 == r->crc, "event %" PRIu64 " source %u: frame CRC %08x, row %08x",
		      r->event_id, s, h.crc32, r->crc);
	uint32_t i = 0;
	while (i < r->payload_len && buf[FRM_HEADER_BYTES + i] == payload_byte(r->event_id, s, i))
		i++;
	ck_assert_msg(i == r->payload_len, "event %" PRIu64 " source %u: payload byte %u differs",
		      r->event_id, s, i);
	return crc_update(crc_so_far, buf, n);
}

/* One closed file: its attributes, every event's frames rebuilt and its
 * record CRC made again. Returns its events; *next the ID after its last. */
static uint64_t check_file(const char *path, uint64_t *next)
{
	hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), event_row, frame_row;
	struct source_data sd[SOURCES];
	static uint8_t buf[FRM_HEADER_BYTES + MAX_PAYLOAD];
	hsize_t n;

	ck_assert_msg(file >= 0, "%s does not open", path);
	ck_assert_int_eq(h5w_layout_types(&event_row, &frame_row), 0);
	struct h5w_event_row *ev = read_all(file, H5W_EVENTS_PATH, event_row, sizeof(*ev), &n);
	ck_assert_uint_eq(read_u64_attr(file, "event_count"), n);
	for (unsigned int s = 0; s < SOURCES; s++) {
		char name[64];

		snprintf(name, sizeof(name), "source_%u/frames", s);
		sd[s].rows = read_all(file, name, frame_row, sizeof(struct h5w_frame_row), &sd[s].rows_n);
		snprintf(name, sizeof(name), "source_%u/payload", s);
		sd[s].payload = read_all(file, name, H5T_NATIVE_UINT8, 1, &sd[s].payload_n);
		sd[s].next = 0;
	}
	for (hsize_t i = 0; i < n; i++) {
		struct evf_record_header r = { .run = RUN, .event_id = ev[i].event_id,
					       .fragments = ev[i].fragments, .flags = ev[i].flags,
					       .earliest_ns = ev[i].earliest_ns };
		uint8_t head[EVF_RECORD_HEADER_BYTES];
		uint32_t frames_crc = 0;
		uint64_t frames_bytes = 0;
		unsigned int found = 0;

		ck_assert_uint_eq(ev[i].event_id, *next);
		(*next)++;
		for (unsigned int s = 0; s < SOURCES; s++) {
			if (sd[s].next == sd[s].rows_n || sd[s].rows[sd[s].next].event_id != ev[i].event_id)
				continue;
			const struct h5w_frame_row *row = &sd[s].rows[sd[s].next++];
			frames_crc = check_frame(&sd[s], row, s, frames_crc, buf);
			frames_bytes += FRM_HEADER_BYTES + row->payload_len;
			found++;
		}
		ck_assert_uint_eq(found, ev[i].fragments);
		ck_assert_uint_eq(ev[i].flags, found < SOURCES ? EVF_FLAG_INCOMPLETE : 0);
		r.record_bytes = (uint32_t)(EVF_RECORD_HEADER_BYTES + frames_bytes);
		evf_encode_record_header(head, &r);
		ck_assert_uint_eq(evf_record_crc(head, frames_crc, frames_bytes), ev[i].record_crc);
	}
	for (unsigned int s = 0; s < SOURCES; s++) {
		ck_assert_uint_eq(sd[s].next, sd[s].rows_n);
		free(sd[s].rows);
		free(sd[s].payload);
	}
	free(ev);
	H5Tclose(event_row);
	H5Tclose(frame_row);
	ck_assert_int_ge(H5Fclose(file), 0);
	return n;
}

/* Every file of the directory closed, whole, at most max_bytes, with its
 * manifest; the events, which must run first .. first+n-1. */
static uint64_t scan_dir(uint64_t first, uint64_t max_bytes, unsigned int *files)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	uint64_t events = 0, next = first;

	ck_assert_int_ge(n, 0);
	*files = 0;
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		size_t len = strlen(name);
		char path[sizeof(dir) + 256 + 2], manifest[sizeof(path) + 8];
		struct stat st;

		ck_assert_msg(strstr(name, ".writing") == NULL && strstr(name, ".tmp") == NULL,
			      "%s left in %s", name, dir);
		if (len > 3 && strcmp(name + len - 3, ".h5") == 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			snprintf(manifest, sizeof(manifest), "%s.json", path);
			ck_assert_msg(access(manifest, R_OK) == 0, "no manifest beside %s", name);
			ck_assert(stat(path, &st) == 0);
			ck_assert_msg((uint64_t)st.st_size <= max_bytes, "%s: %lld bytes over %" PRIu64,
				      name, (long long)st.st_size, max_bytes);
			events += check_file(path, &next);
			(*files)++;
		}
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
	struct h5w *w;
	char err[256];
	unsigned int files;
	struct h5w_config c = config(256u << 20);

	ck_assert_int_eq(h5w_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (uint64_t id = 0; id < 6000; id++) {
		/* Mostly small frames, a run of large ones (the CRC-combine path). */
		make_event(id, id % 500 < 100 ? MAX_PAYLOAD : 200, frames, &ev);
		ck_assert_int_eq(h5w_add(w, &ev), 0);
		if (id % 997 == 0)
			ck_assert_int_eq(h5w_flush(w), 0);
	}
	ck_assert_int_eq(h5w_close(w), 0);
	h5w_stats(w, &st);
	ck_assert_ptr_null(h5w_error(w));
	ck_assert_uint_eq(st.events_written, 6000);
	ck_assert_uint_eq(st.events_unwritten, 0);
	ck_assert_uint_eq(st.files_closed, 1);
	ck_assert_uint_eq(closed.count, 1);
	ck_assert_uint_eq(closed.last.events, 6000);
	ck_assert_uint_eq(closed.last.bytes, st.bytes_written);
	ck_assert_uint_eq(scan_dir(0, c.max_file_bytes, &files), 6000);
	ck_assert_uint_eq(files, 1);
	h5w_destroy(w);
}
END_TEST

START_TEST(test_files_roll_at_the_size_limit_and_at_slices)
{
	struct closed_files closed = { 0 };
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct h5w *w;
	char err[256];
	unsigned int files;
	struct h5w_config c = config(2u << 20);

	ck_assert_int_eq(h5w_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (uint64_t id = 0; id < 12000; id++) {
		if (id == 6000)
			ck_assert_int_eq(h5w_roll(w, 1), 0);
		make_event(id, 300, frames, &ev);
		ck_assert_int_eq(h5w_add(w, &ev), 0);
	}
	ck_assert_int_eq(h5w_close(w), 0);
	ck_assert_uint_eq(scan_dir(0, c.max_file_bytes, &files), 12000);
	ck_assert_uint_eq(files, closed.count);
	ck_assert_uint_ge(files, 4);
	ck_assert_uint_eq(closed.events, 12000);
	ck_assert_uint_eq(closed.last.slice, 1);
	ck_assert_uint_eq(closed.last.file_seq, files - 1);
	h5w_destroy(w);
}
END_TEST

START_TEST(test_a_missing_directory_is_named)
{
	struct h5w_config c = config(1 << 20);
	struct h5w *w = (struct h5w *)1;
	char err[256];

	c.dir = "/nonexistent/es-h5w";
	ck_assert_int_eq(h5w_open(&w, &c, NULL, NULL, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_null(w);
	ck_assert_str_eq(err, "output directory /nonexistent/es-h5w: No such file or directory");
}
END_TEST

/* A frame of a source without a group, and one of another event: each
 * event refused and counted, the writer going on. */
START_TEST(test_an_event_the_layout_cannot_hold_is_refused)
{
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw_stats st;
	struct h5w *w;
	char err[256];
	struct h5w_config c = config(1u << 30);

	c.sources = SOURCES - 1;
	ck_assert_int_eq(h5w_open(&w, &c, NULL, NULL, err, sizeof(err)), 0);
	make_event(0, 100, frames, &ev);
	ck_assert_int_eq(h5w_add(w, &ev), -EINVAL);
	ev.frame_count = SOURCES - 1;
	ev.event_id = 1;
	ck_assert_int_eq(h5w_add(w, &ev), -EINVAL);
	ev.event_id = 0;
	ck_assert_int_eq(h5w_add(w, &ev), 0);
	ck_assert_int_eq(h5w_close(w), 0);
	h5w_stats(w, &st);
	ck_assert_ptr_null(h5w_error(w));
	ck_assert_uint_eq(st.events_written, 1);
	ck_assert_uint_eq(st.events_unwritten, 2);
	h5w_destroy(w);
}
END_TEST

/* An 8 MiB tmpfs, filled: the writer sees, before the batch that would
 * not fit, that the file system has no room for it and stops with the
 * named "disk full" error; the file holds the batches before, closed
 * whole; the rest counted unwritten. */
START_TEST(test_a_full_disk_is_named_and_nothing_is_torn)
{
	struct closed_files closed = { 0 };
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw_stats st;
	struct h5w *w;
	char err[256];
	unsigned int files;
	uint64_t id, failed_at = 0;

	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=8m") != 0) {
		printf("test_h5writer: full disk test skipped (needs root to mount a tmpfs)\n");
		return;
	}
	struct h5w_config c = config(64u << 20);
	ck_assert_int_eq(h5w_open(&w, &c, on_closed, &closed, err, sizeof(err)), 0);
	for (id = 0; id < 20000; id++) {
		make_event(id, 600, frames, &ev);
		if (h5w_add(w, &ev) != 0 && failed_at == 0)
			failed_at = id;
	}
	ck_assert_uint_gt(failed_at, 0);
	ck_assert_int_ne(h5w_close(w), 0);
	h5w_stats(w, &st);
	ck_assert_ptr_nonnull(h5w_error(w));
	ck_assert_msg(strncmp(h5w_error(w), "disk full", 9) == 0, "%s", h5w_error(w));
	ck_assert_msg(strstr(h5w_error(w), dir) != NULL, "%s does not name %s", h5w_error(w), dir);
	ck_assert_uint_eq(st.events_written + st.events_unwritten, 20000);
	ck_assert_uint_gt(st.events_written, 1000);
	ck_assert_uint_eq(scan_dir(0, c.max_file_bytes, &files), st.events_written);
	ck_assert_uint_eq(files, 1);
	ck_assert_uint_eq(closed.events, st.events_written);
	h5w_destroy(w);
}
END_TEST

/* The disk filled by someone else once the writer's file is open: the
 * writer may learn it from its check before a batch or from a failed write
 * or close; either way the error says "disk full", the books balance, and
 * the file is either closed whole (read back) or left NAME.h5.writing and
 * named in the error, never renamed unless whole. The process exits
 * cleanly after the library failed to close a file. */
START_TEST(test_a_disk_filled_behind_the_writer_leaves_nothing_torn)
{
	struct evw_frame frames[SOURCES];
	struct evw_event ev;
	struct evw_stats st;
	struct h5w *w;
	char err[256], left[96], path[160];
	unsigned int files;
	struct stat sb;
	static char junk[1 << 16];

	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=8m") != 0) {
		printf("test_h5writer: full disk test skipped (needs root to mount a tmpfs)\n");
		return;
	}
	struct h5w_config c = config(64u << 20);
	ck_assert_int_eq(h5w_open(&w, &c, NULL, NULL, err, sizeof(err)), 0);
	make_event(0, 600, frames, &ev);
	ck_assert_int_eq(h5w_add(w, &ev), 0);
	snprintf(path, sizeof(path), "%s/filler", dir);
	FILE *filler = fopen(path, "w");
	ck_assert_ptr_nonnull(filler);
	while (fwrite(junk, 1, sizeof(junk), filler) == sizeof(junk) && fflush(filler) == 0)
		;
	fclose(filler);
	for (uint64_t id = 1; id < 20000; id++) {
		make_event(id, 600, frames, &ev);
		h5w_add(w, &ev);
	}
	ck_assert_int_ne(h5w_close(w), 0);
	h5w_stats(w, &st);
	ck_assert_msg(strncmp(h5w_error(w), "disk full", 9) == 0, "%s", h5w_error(w));
	ck_assert_uint_eq(st.events_written + st.events_unwritten, 20000);
	ck_assert_int_eq(unlink(path), 0);
	h5w_file_name(left, sizeof(left), RUN, 2, 0, 0);
	snprintf(path, sizeof(path), "%s/%s", dir, left);
	if (st.files_closed == 0) {
		strcat(left, ".writing");
		ck_assert_msg(strstr(h5w_error(w), left) != NULL, "%s does not name %s", h5w_error(w), left);
		ck_assert_msg(stat(path, &sb) != 0, "%s renamed as if whole", path);
		strcat(path, ".writing");
		ck_assert_msg(stat(path, &sb) == 0, "%s is not there", path);
		ck_assert_int_eq(unlink(path), 0);
	} else {
		ck_assert_uint_eq(scan_dir(0, c.max_file_bytes, &files), st.events_written);
	}
	h5w_destroy(w);
}
END_TEST

static Suite *h5writer_suite(void)
{
	Suite *s = suite_create("h5writer");
	TCase *tc = tcase_create("files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_events_written_read_back_whole);
	tcase_add_test(tc, test_files_roll_at_the_size_limit_and_at_slices);
	tcase_add_test(tc, test_a_missing_directory_is_named);
	tcase_add_test(tc, test_an_event_the_layout_cannot_hold_is_refused);
	tcase_add_test(tc, test_a_full_disk_is_named_and_nothing_is_torn);
	tcase_add_test(tc, test_a_disk_filled_behind_the_writer_leaves_nothing_torn);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("TEST_SEED");
	SRunner *sr;
	int failed;

	test_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	printf("test_h5writer: seed %" PRIu64 " (TEST_SEED=%" PRIu64 " repeats this run)\n",
	       test_seed, test_seed);
	fflush(stdout);
	sr = srunner_create(h5writer_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
