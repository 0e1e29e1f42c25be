#include "sys/h5writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sys/evpublish.h"
#include "sys/h5writer_layout.h"
#include "wire/crc.h"
#include "wire/frame.h"

/* A batch: up to this many events, and per source up to
 * H5W_BATCH_PAYLOAD_BYTES / sources payload bytes (at least one frame of
 * the largest payload), then one append per dataset. */
#define H5W_BATCH_EVENTS 4096u
#define H5W_BATCH_PAYLOAD_BYTES (16ull << 20)
#define H5W_SPACE_CHECK_BYTES (64ull << 20)       /* free space read again after this */
#define H5W_WRITEBACK_WINDOW_BYTES (8ull << 20)   /* h5w_writeback() */
#define H5W_READ_BYTES (16u << 20)   /* the read back's window, for the file CRC */
/* Rows per table chunk (h5writer_layout.c) times the widest row. */
#define H5W_TABLE_CHUNK_BYTES (4096ull * sizeof(struct h5w_frame_row))
/* Superblock, object headers, attributes, chunk indexes: a bound, tested. */
#define H5W_METADATA_BYTES (64ull << 10)
#define H5W_RESUM_FRAME_BYTES 2048u   /* frames up to this are summed again, as evwriter's */

struct h5w_open_file {
	hid_t id;                /* -1 when none is open */
	int fd;                  /* the library's descriptor of it, for writeback */
	char name[64];
	uint32_t file_seq;
	uint32_t slice;
	uint64_t data_bytes;     /* rows and payloads appended */
	uint64_t kicked;         /* handed to writeback up to here */
	uint64_t events;
	uint64_t first_event;
	uint64_t last_event;
	struct h5w_dataset events_set;
	struct h5w_source_sets *sources;
};

struct h5w {
	struct h5w_config cfg;
	char dir[PATH_MAX];
	char software[EVF_SOFTWARE_BYTES + 1];
	int dir_fd;
	evw_closed_fn on_closed;
	void *on_closed_arg;
	bool closed;
	char error[PATH_MAX + 256];
	hid_t event_type;
	hid_t frame_type;
	struct h5w_open_file file;
	uint32_t next_seq;
	uint32_t slice;
	struct h5w_event_row *rows;
	uint32_t row_count;
	struct h5w_batch_source *batch;
	uint64_t source_capacity;
	uint64_t batch_bytes;
	uint64_t batch_first;
	uint64_t batch_last;
	uint64_t since_space_check;
	struct crc_shift_cache frame_shift;
	struct crc_shift_cache record_shift;
	struct evw_stats stats;
};

static uint64_t h5w_now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void h5w_file_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice,
		   uint32_t file_seq)
{
	snprintf(dst, size, "run%06" PRIu32 "_b%u_s%04" PRIu32 "_f%04" PRIu32 H5W_FILE_SUFFIX, run,
		 (unsigned)builder_id, slice, file_seq);
}

/* The writer stops with "WHAT: HOW DIR ...: REASON"; a file left open
 * after it is named by h5w_abandon(). */
static int h5w_fail(struct h5w *w, int err, const char *what, const char *how)
{
	if (!w->stats.failed) {
		snprintf(w->error, sizeof(w->error), "%s: %s %s: %s", what, how, w->dir, strerror(err));
		w->stats.failed = true;
	}
	return -err;
}

static int h5w_check_space(struct h5w *w, uint64_t need)
{
	uint64_t reserve = w->cfg.reserve_bytes ? w->cfg.reserve_bytes : w->cfg.max_file_bytes;
	char why[sizeof(w->error)];
	int rc = evp_check_space(w->dir_fd, w->dir, need, reserve, &w->stats.free_bytes, why,
				 sizeof(why));

	w->since_space_check = 0;
	if (rc != 0 && !w->stats.failed) {   /* the first reason stands */
		memcpy(w->error, why, sizeof(why));
		w->stats.failed = true;
	}
	return rc;
}

static int h5w_alloc(struct h5w *w)
{
	uint16_t n = w->cfg.sources;

	w->source_capacity = H5W_BATCH_PAYLOAD_BYTES / n > FRM_MAX_PAYLOAD_BYTES ?
				     H5W_BATCH_PAYLOAD_BYTES / n : FRM_MAX_PAYLOAD_BYTES;
	w->rows = calloc(H5W_BATCH_EVENTS, sizeof(*w->rows));
	w->batch = calloc(n, sizeof(*w->batch));
	w->file.sources = calloc(n, sizeof(*w->file.sources));
	if (!w->rows || !w->batch || !w->file.sources)
		return -ENOMEM;
	for (unsigned int s = 0; s < n; s++) {
		w->batch[s].rows = calloc(H5W_BATCH_EVENTS, sizeof(struct h5w_frame_row));
		w->batch[s].payload = malloc(w->source_capacity);
		if (!w->batch[s].rows || !w->batch[s].payload)
			return -ENOMEM;
	}
	return h5w_layout_types(&w->event_type, &w->frame_type);
}

int h5w_open(struct h5w **out, const struct h5w_config *config, evw_closed_fn on_closed,
	     void *arg, char *error, size_t error_size)
{
	struct h5w *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (w == NULL) {
		snprintf(error, error_size, "out of memory");
		return -ENOMEM;
	}
	w->cfg = *config;
	snprintf(w->dir, sizeof(w->dir), "%s", config->dir);
	snprintf(w->software, sizeof(w->software), "%s", config->software ? config->software : "");
	w->cfg.software = w->software;
	w->cfg.dir = w->dir;
	if (w->cfg.chunk_bytes == 0)
		w->cfg.chunk_bytes = H5W_DEFAULT_CHUNK_BYTES;
	w->on_closed = on_closed;
	w->on_closed_arg = arg;
	w->file.id = w->event_type = w->frame_type = -1;
	w->file.fd = -1;
	/* The library's clean-up at exit closes files still open, and a file
	 * whose close failed (a full disk) crashes it: the writer closes its
	 * files itself. It names every failure itself too: the library's
	 * printing of its error stack would only repeat it. */
	H5dont_atexit();
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	w->dir_fd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dir_fd < 0 || faccessat(w->dir_fd, ".", W_OK, AT_EACCESS) != 0) {
		rc = -errno;
		snprintf(error, error_size, "output directory %s: %s", w->dir, strerror(errno));
		goto out;
	}
	if (config->sources == 0) {
		rc = -EINVAL;
		snprintf(error, error_size, "output %s: no sources", w->dir);
		goto out;
	}
	rc = h5w_alloc(w);
	if (rc != 0) {
		snprintf(error, error_size, "output %s: cannot make the writer: %s", w->dir, strerror(-rc));
		goto out;
	}
	rc = h5w_check_space(w, 0);
	if (rc != 0) {
		snprintf(error, error_size, "%s", w->error);
		goto out;
	}
	*out = w;
	return 0;
out:
	h5w_destroy(w);
	return rc;
}

static int h5w_open_file(struct h5w *w)
{
	struct h5w_open_file *f = &w->file;
	struct h5w_file_meta m = { .run = w->cfg.run, .builder_id = w->cfg.builder_id,
				   .sources = w->cfg.sources, .file_seq = w->next_seq,
				   .slice = w->slice, .software = w->software,
				   .chunk_bytes = w->cfg.chunk_bytes };
	char path[PATH_MAX + 96];
	int *fdp = NULL;
	int rc = h5w_check_space(w, 0);

	if (rc != 0)
		return rc;
	m.created_ns = w->cfg.created_ns ? w->cfg.created_ns : h5w_now_ns(CLOCK_REALTIME);
	memcpy(m.config_sha256, w->cfg.config_sha256, EVF_SHA256_BYTES);
	h5w_file_name(f->name, sizeof(f->name), w->cfg.run, w->cfg.builder_id, w->slice, w->next_seq);
	snprintf(path, sizeof(path), "%s/%s.writing", w->dir, f->name);
	/* Refused if it exists: a file of an earlier run is never overwritten. */
	f->id = h5w_layout_create(path, &m, w->event_type, w->frame_type, &f->events_set, f->sources);
	if (f->id < 0)
		return h5w_fail(w, (int)-f->id, "output", "cannot create a file in");
	f->fd = H5Fget_vfd_handle(f->id, H5P_DEFAULT, (void **)&fdp) >= 0 && fdp ? *fdp : -1;
	f->file_seq = w->next_seq++;
	f->slice = w->slice;
	f->data_bytes = f->kicked = f->events = f->first_event = f->last_event = 0;
	return 0;
}

/* A frame's header checked for what the layout relies on to rebuild it
 * bit for bit and find it again: the magic (the one field not stored), a
 * source with a group, sources ascending, a length that agrees, the
 * event's ID (a reader matches rows to events by it). */
static bool h5w_frame_fits(const struct h5w *w, const struct evw_event *ev,
			   const struct evw_frame *fr, int prev_source, struct frm_header *h)
{
	if (fr->frame_bytes < FRM_HEADER_BYTES ||
	    ((uint32_t)fr->bytes[0] << 8 | fr->bytes[1]) != FRM_MAGIC)
		return false;
	frm_parse_header(fr->bytes, h);
	return h->source_id < w->cfg.sources && (int)h->source_id > prev_source &&
	       h->payload_len == fr->frame_bytes - FRM_HEADER_BYTES && h->event_id == ev->event_id;
}

/* The event's frames checked, their CRC in sequence (as the raw record's)
 * and the bytes it adds to the file. */
static bool h5w_event_fits(struct h5w *w, const struct evw_event *ev, uint32_t *frames_crc,
			   uint64_t *frames_bytes)
{
	struct frm_header h;
	int prev = -1;
	uint32_t crc = 0;

	*frames_bytes = 0;
	if (ev->frame_count > w->cfg.sources)
		return false;
	for (unsigned int i = 0; i < ev->frame_count; i++) {
		const struct evw_frame *fr = &ev->frames[i];

		if (!h5w_frame_fits(w, ev, fr, prev, &h))
			return false;
		prev = h.source_id;
		if (fr->frame_bytes <= H5W_RESUM_FRAME_BYTES) {
			crc = crc_update(crc, fr->bytes, fr->frame_bytes);
		} else {
			crc = crc_update(crc, fr->bytes, FRM_HEADER_BYTES);
			crc = crc_combine_cached(&w->frame_shift, crc, fr->payload_crc, h.payload_len);
		}
		*frames_bytes += fr->frame_bytes;
	}
	*frames_crc = crc;
	return true;
}

/* What the open file would hold, at most, with `more` data bytes besides
 * the batch: each dataset's last chunk allocated whole, and the metadata. */
static uint64_t h5w_file_bound(const struct h5w *w, uint64_t more)
{
	uint64_t data = w->file.data_bytes + w->batch_bytes + more;

	return data + (uint64_t)w->cfg.sources * w->cfg.chunk_bytes +
	       (w->cfg.sources + 1ull) * H5W_TABLE_CHUNK_BYTES + H5W_METADATA_BYTES + data / 1024;
}

static bool h5w_batch_full(const struct h5w *w, const struct evw_event *ev)
{
	if (w->row_count == H5W_BATCH_EVENTS)
		return true;
	for (unsigned int i = 0; i < ev->frame_count; i++) {
		const struct evw_frame *fr = &ev->frames[i];
		uint16_t s = (uint16_t)(fr->bytes[4] << 8 | fr->bytes[5]);

		if (w->batch[s].payload_bytes + fr->frame_bytes - FRM_HEADER_BYTES > w->source_capacity)
			return true;
	}
	return false;
}

/* The frames' rows and payloads copied into the batch. */
static void h5w_copy_frames(struct h5w *w, const struct evw_event *ev)
{
	for (unsigned int i = 0; i < ev->frame_count; i++) {
		const struct evw_frame *fr = &ev->frames[i];
		struct frm_header h;

		frm_parse_header(fr->bytes, &h);
		struct h5w_batch_source *b = &w->batch[h.source_id];
		struct h5w_frame_row *r = &b->rows[b->row_count++];

		r->event_id = h.event_id;
		r->sequence = h.sequence;
		r->timestamp_ns = h.timestamp_ns;
		r->payload_offset = w->file.sources[h.source_id].payload.size + b->payload_bytes;
		r->run = h.run_id;
		r->payload_len = h.payload_len;
		r->crc = h.crc32;
		r->source_id = h.source_id;
		r->version = fr->bytes[2];
		r->flags = h.flags;
		memcpy(b->payload + b->payload_bytes, fr->bytes + FRM_HEADER_BYTES, h.payload_len);
		b->payload_bytes += h.payload_len;
	}
}

int h5w_add(struct h5w *w, const struct evw_event *ev)
{
	struct evf_record_header r = { .run = w->cfg.run, .event_id = ev->event_id,
				       .fragments = ev->frame_count, .flags = ev->flags,
				       .earliest_ns = ev->earliest_ns };
	uint8_t head[EVF_RECORD_HEADER_BYTES];
	uint64_t frames_bytes, add_bytes;
	uint32_t frames_crc;
	int rc;

	if (w->stats.failed || w->closed) {
		w->stats.events_unwritten++;
		return w->stats.failed ? -EIO : -EINVAL;
	}
	if (!h5w_event_fits(w, ev, &frames_crc, &frames_bytes)) {
		w->stats.events_unwritten++;
		return -EINVAL;
	}
	/* A frame's header becomes its row. */
	add_bytes = frames_bytes - (uint64_t)ev->frame_count * FRM_HEADER_BYTES +
		    (uint64_t)ev->frame_count * sizeof(struct h5w_frame_row) + sizeof(struct h5w_event_row);
	if (w->file.id >= 0 && w->file.events + w->row_count > 0 &&
	    h5w_file_bound(w, add_bytes) > w->cfg.max_file_bytes && (rc = h5w_roll(w, w->slice)) != 0)
		goto unwritten;
	if (h5w_batch_full(w, ev) && (rc = h5w_flush(w)) != 0)
		goto unwritten;
	if (w->file.id < 0 && (rc = h5w_open_file(w)) != 0)
		goto unwritten;
	r.record_bytes = (uint32_t)(EVF_RECORD_HEADER_BYTES + frames_bytes);
	evf_encode_record_header(head, &r);
	r.record_crc = crc_update(0, head, EVF_RECORD_CRC_COVERED_BYTES);
	if (frames_bytes > 0)
		r.record_crc = crc_combine_cached(&w->record_shift, r.record_crc, frames_crc, frames_bytes);
	h5w_copy_frames(w, ev);
	struct h5w_event_row *row = &w->rows[w->row_count++];
	row->event_id = ev->event_id;
	row->earliest_ns = ev->earliest_ns;
	row->record_crc = r.record_crc;
	row->flags = ev->flags;
	row->fragments = ev->frame_count;
	if (w->row_count == 1)
		w->batch_first = ev->event_id;
	w->batch_last = ev->event_id;
	w->batch_bytes += add_bytes;
	if (w->batch_bytes > w->stats.batch_bytes_peak)
		w->stats.batch_bytes_peak = w->batch_bytes;
	return 0;
unwritten:
	w->stats.events_unwritten++;
	return rc;
}

static void h5w_batch_clear(struct h5w *w)
{
	w->row_count = 0;
	w->batch_bytes = 0;
	for (unsigned int s = 0; s < w->cfg.sources; s++) {
		w->batch[s].row_count = 0;
		w->batch[s].payload_bytes = 0;
	}
}

/* After a failure: the datasets set back to what the last whole batch
 * left and the file closed as far as the library can, but left
 * NAME.h5.writing (named in the error), never renamed as whole. */
static void h5w_abandon(struct h5w *w)
{
	struct h5w_open_file *f = &w->file;
	size_t len = strlen(w->error);

	if (f->id < 0)
		return;
	h5w_layout_shrink(&f->events_set, f->sources, w->cfg.sources);
	h5w_layout_close(f->id, &f->events_set, f->sources, w->cfg.sources);
	f->id = -1;
	f->fd = -1;
	snprintf(w->error + len, sizeof(w->error) - len, "; %s.writing left unfinished", f->name);
}

/* Starts writeback of each full window, waits for the one before it
 * (mostly done by then) and drops it from the page cache: dirty pages and
 * the cache stay small, as evwriter's; the CRC at close reads the file
 * again (docs/RECORDING.md, "Measured", weighs this). Advice only. */
static void h5w_writeback(struct h5w *w)
{
	struct h5w_open_file *f = &w->file;
	const uint64_t win = H5W_WRITEBACK_WINDOW_BYTES;

	while (f->fd >= 0 && f->data_bytes - f->kicked >= win) {
		sync_file_range(f->fd, (off_t)f->kicked, win, SYNC_FILE_RANGE_WRITE);
		if (f->kicked >= win) {
			sync_file_range(f->fd, (off_t)(f->kicked - win), win, SYNC_FILE_RANGE_WAIT_BEFORE |
					SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
			posix_fadvise(f->fd, (off_t)(f->kicked - win), (off_t)win, POSIX_FADV_DONTNEED);
		}
		f->kicked += win;
	}
}

/* Room for the batch and whatever chunks and metadata it may make the
 * library allocate, beside the reserve, known before a byte is written:
 * the library, once a write of its file fails, may be unable to close
 * it. The free space is read again when what was last read, less what
 * was written since, might not do. */
static int h5w_room_for_batch(struct h5w *w)
{
	uint64_t need = h5w_file_bound(w, 0) - w->file.data_bytes;
	uint64_t reserve = w->cfg.reserve_bytes ? w->cfg.reserve_bytes : w->cfg.max_file_bytes;

	if (w->since_space_check < w->stats.free_bytes &&
	    w->stats.free_bytes - w->since_space_check >= need + reserve)
		return 0;
	return h5w_check_space(w, need);
}

int h5w_flush(struct h5w *w)
{
	struct h5w_open_file *f = &w->file;
	uint64_t t0;
	int rc;

	if (w->stats.failed)
		return -EIO;
	if (w->row_count == 0)
		return 0;
	if ((rc = h5w_room_for_batch(w)) != 0)
		return rc;
	t0 = h5w_now_ns(CLOCK_MONOTONIC);
	rc = h5w_layout_append_batch(&f->events_set, f->sources, w->cfg.sources, w->event_type,
				     w->frame_type, w->rows, w->row_count, w->batch);
	w->stats.write_calls += 1u + 2u * w->cfg.sources;
	w->stats.write_ns += h5w_now_ns(CLOCK_MONOTONIC) - t0;
	if (rc != 0) {
		w->stats.events_unwritten += w->row_count;
		h5w_batch_clear(w);
		rc = h5w_fail(w, -rc, -rc == ENOSPC ? "disk full" : "output", "write to");
		h5w_abandon(w);
		return rc;
	}
	/* The library's metadata to the file after every batch (to the
	 * kernel; with sync batch to the disk too): a killed builder's file
	 * is then whole up to a batch, which evdump --recover can close;
	 * else its metadata may be only in this process, the file unreadable. */
	t0 = h5w_now_ns(CLOCK_MONOTONIC);
	errno = 0;
	if (H5Fflush(f->id, H5F_SCOPE_LOCAL) < 0 ||
	    (w->cfg.sync == EVW_SYNC_BATCH && fdatasync(f->fd) != 0)) {
		rc = h5w_fail(w, errno ? errno : EIO, "output", "flush in");
		h5w_abandon(w);
		return rc;
	}
	if (w->cfg.sync == EVW_SYNC_BATCH) {
		w->stats.sync_calls++;
		w->stats.sync_ns += h5w_now_ns(CLOCK_MONOTONIC) - t0;
	}
	if (f->events == 0)
		f->first_event = w->batch_first;
	f->events += w->row_count;
	f->last_event = w->batch_last;
	f->data_bytes += w->batch_bytes;
	w->stats.events_written += w->row_count;
	w->stats.bytes_written += w->batch_bytes;
	w->since_space_check += w->batch_bytes;
	h5w_batch_clear(w);
	h5w_writeback(w);
	if (w->since_space_check >= H5W_SPACE_CHECK_BYTES)
		return h5w_check_space(w, 0);
	return 0;
}

/* Closing attributes, the library's close, the read back and fdatasync,
 * rename to NAME.h5, directory fsync, manifest. */
static int h5w_close_file(struct h5w *w)
{
	struct h5w_open_file *f = &w->file;
	struct evw_file_info info = { .file_seq = f->file_seq, .slice = f->slice,
				      .events = f->events, .first_event = f->first_event,
				      .last_event = f->last_event };
	char open_name[80];
	bool sync = w->cfg.sync != EVW_SYNC_NEVER;
	int rc = h5w_layout_finish(f->id, f->events, f->first_event, f->last_event);
	uint64_t t0;

	if (rc != 0) {
		rc = h5w_fail(w, -rc, -rc == ENOSPC ? "disk full" : "output", "closing attributes in");
		h5w_abandon(w);
		return rc;
	}
	t0 = h5w_now_ns(CLOCK_MONOTONIC);
	rc = h5w_layout_close(f->id, &f->events_set, f->sources, w->cfg.sources);
	w->stats.write_ns += h5w_now_ns(CLOCK_MONOTONIC) - t0;
	f->id = -1;
	f->fd = -1;
	snprintf(open_name, sizeof(open_name), "%s.writing", f->name);
	snprintf(info.name, sizeof(info.name), "%s", f->name);
	if (rc != 0) {
		rc = h5w_fail(w, -rc, -rc == ENOSPC ? "disk full" : "output", "closing a file in");
		size_t len = strlen(w->error);
		snprintf(w->error + len, sizeof(w->error) - len, "; %s left unfinished", open_name);
		return rc;
	}
	t0 = h5w_now_ns(CLOCK_MONOTONIC);
	rc = evp_crc_and_sync(w->dir_fd, open_name, sync, H5W_READ_BYTES, &info.bytes, &info.file_crc);
	if (rc != 0)
		return h5w_fail(w, -rc, "output", "read back or fdatasync in");
	if ((rc = evp_rename(w->dir_fd, open_name, f->name, sync)) != 0)
		return h5w_fail(w, -rc, "output", "rename or directory fsync in");
	if (sync)
		w->stats.sync_calls += 2;
	w->stats.sync_ns += h5w_now_ns(CLOCK_MONOTONIC) - t0;
	w->stats.bytes_written += info.bytes - f->data_bytes;
	w->stats.files_closed++;
	if ((rc = evp_manifest(w->dir, &info, w->cfg.run, w->cfg.builder_id)) != 0)
		return h5w_fail(w, -rc, "output", "manifest in");
	if (w->on_closed)
		w->on_closed(w->on_closed_arg, &info);
	return 0;
}

/* The writer stopped on the free space, not on a write to this file:
 * the file holds whole batches and is closed as any other (the reserve is
 * for this), what the batch held counted unwritten. Should even that
 * fail, the file is left NAME.h5.writing, named after the first error. */
static void h5w_salvage(struct h5w *w)
{
	w->stats.events_unwritten += w->row_count;
	h5w_batch_clear(w);
	if (h5w_close_file(w) != 0 && w->file.id >= 0)
		h5w_abandon(w);
}

int h5w_roll(struct h5w *w, uint32_t slice)
{
	int rc = 0;

	if (w->file.id >= 0) {
		rc = h5w_flush(w);
		if (rc == 0)
			rc = h5w_close_file(w);
		else if (w->file.id >= 0)
			h5w_salvage(w);
	}
	w->slice = slice;
	return rc;
}

int h5w_close(struct h5w *w)
{
	int rc = w->closed ? 0 : h5w_roll(w, w->slice);

	if (w->stats.failed && rc == 0)
		rc = -EIO;
	w->closed = true;
	return rc;
}

const char *h5w_error(const struct h5w *w)
{
	return w->stats.failed ? w->error : NULL;
}

void h5w_stats(const struct h5w *w, struct evw_stats *out)
{
	*out = w->stats;
}

void h5w_destroy(struct h5w *w)
{
	if (w == NULL)
		return;
	if (w->file.id >= 0)
		h5w_layout_close(w->file.id, &w->file.events_set, w->file.sources, w->cfg.sources);
	if (w->event_type >= 0)
		H5Tclose(w->event_type);
	if (w->frame_type >= 0)
		H5Tclose(w->frame_type);
	if (w->dir_fd >= 0)
		close(w->dir_fd);
	for (unsigned int s = 0; w->batch && s < w->cfg.sources; s++) {
		free(w->batch[s].rows);
		free(w->batch[s].payload);
	}
	free(w->batch);
	free(w->rows);
	free(w->file.sources);
	free(w);
}
