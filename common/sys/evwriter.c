#include "sys/evwriter.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>


#include "sys/dwrite.h"
#include "sys/evclose.h"
#include "sys/evpublish.h"
#include "wire/crc.h"
#include "wire/frame.h"

/* A batch: up to this many iovecs (the kernel's limit per writev) and the
 * record headers they point at. An event takes one iovec for its header
 * and one per frame. */
#define EVW_BATCH_IOVS 1024u
#define EVW_BATCH_RECORDS 256u
/* Free space is looked at again after this many bytes are written. */
#define EVW_SPACE_CHECK_BYTES (64ull << 20)
/* Written data is handed to the disk in windows of this size, and a window
 * once on disk is dropped from the page cache: the streaming pattern that
 * keeps the kernel's dirty pages, and so its write throttling, low, and
 * a builder's memory flat however large its files. */
#define EVW_WRITEBACK_WINDOW_BYTES (8ull << 20)
#ifndef EVW_WRITEBACK_LAG
#define EVW_WRITEBACK_LAG 2
#endif
/* Frames up to this size are summed directly; beyond, their CRC is combined
 * from the payload's, which the decoder already has (as wire/frame.c does). */
#define EVW_RESUM_FRAME_BYTES 2048u

struct evw_open_file {
	int fd;
	char name[64];
	uint32_t file_seq;
	uint32_t slice;
	uint64_t bytes;          /* written to it and acknowledged */
	uint64_t kicked;         /* handed to writeback up to here */
	uint64_t dropped;        /* on disk and out of the page cache up to here */
	uint64_t events;
	uint64_t first_event;
	uint64_t last_event;
	uint32_t crc;            /* of its bytes so far, batch included */
	bool direct;             /* its whole blocks by direct I/O (w->dio) */
};

struct evw {
	struct evw_config cfg;
	char dir[PATH_MAX];
	char software[EVF_SOFTWARE_BYTES + 1];
	int dir_fd;
	evw_closed_fn on_closed;
	void *on_closed_arg;
	bool closed;
	char error[PATH_MAX + 256];

	struct evw_open_file file;    /* fd -1 when none is open */
	struct evclose *closer;       /* a file's fdatasync, rename and manifest, off the loop */
	struct dwrite dio;            /* cfg.direct: the staging buffer, the open file's direct fd */
	uint32_t next_seq;
	uint32_t slice;

	struct iovec iov[EVW_BATCH_IOVS];
	unsigned int iov_count;
	uint8_t headers[EVW_BATCH_RECORDS][EVF_RECORD_HEADER_BYTES];
	unsigned int header_count;
	uint64_t batch_bytes;
	uint32_t batch_file_crc;   /* the file's CRC before the batch: what a failed batch restores */
	uint64_t batch_events;
	uint64_t batch_first;
	uint64_t batch_last;
	uint64_t since_space_check;
	struct crc_shift_cache frame_shift;    /* for a large frame's payload */
	struct crc_shift_cache record_shift;   /* for a record's frames, to its header */

	struct evw_stats stats;
};

static int evw_collect(struct evw *w, bool wait);
static int evw_next_file(struct evw *w, uint32_t slice, bool wait);

static uint64_t evw_now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void evw_file_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice,
		   uint32_t file_seq)
{
	snprintf(dst, size, "run%06" PRIu32 "_b%u_s%04" PRIu32 "_f%04" PRIu32 ".dat", run,
		 (unsigned)builder_id, slice, file_seq);
}

static int evw_fail(struct evw *w, int err, const char *fmt, const char *what)
{
	if (!w->stats.failed) {
		snprintf(w->error, sizeof(w->error), fmt, what, w->dir, strerror(err));
		w->stats.failed = true;
	}
	return -err;
}

/* Whether `need` more bytes fit beside the reserve; else the writer stops
 * with the reason (sys/evpublish). */
static int evw_check_space(struct evw *w, uint64_t need)
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

int evw_open(struct evw **out, const struct evw_config *config, evw_closed_fn on_closed,
	     void *arg, char *error, size_t error_size)
{
	struct evw *w = calloc(1, sizeof(*w));
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
	w->on_closed = on_closed;
	w->on_closed_arg = arg;
	w->file.fd = -1;
	w->dio = (struct dwrite){ .fd = -1, .direct_fd = -1 };
	if (w->cfg.direct && dwrite_init(&w->dio) != 0) {
		rc = -ENOMEM;
		snprintf(error, error_size, "out of memory for the direct-I/O staging buffer");
		w->dir_fd = -1;
		goto out;
	}
	w->dir_fd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dir_fd < 0 || faccessat(w->dir_fd, ".", W_OK, AT_EACCESS) != 0) {
		rc = -errno;
		snprintf(error, error_size, "output directory %s: %s", w->dir, strerror(errno));
		goto out;
	}
	rc = evw_check_space(w, 0);
	if (rc != 0) {
		snprintf(error, error_size, "%s", w->error);
		goto out;
	}
	rc = evclose_start(&w->closer, w->dir, w->dir_fd, w->cfg.run, w->cfg.builder_id);
	if (rc != 0) {
		snprintf(error, error_size, "cannot start the thread that closes files: %s", strerror(-rc));
		goto out;
	}
	*out = w;
	return 0;
out:
	evw_destroy(w);
	return rc;
}

static int evw_open_file(struct evw *w)
{
	struct evw_open_file *f = &w->file;
	struct evf_file_header h = { .run = w->cfg.run, .builder_id = w->cfg.builder_id,
				     .sources = w->cfg.sources, .file_seq = w->next_seq,
				     .slice = w->slice };
	uint8_t head[EVF_HEADER_BYTES];
	char open_name[80];
	int rc = evw_check_space(w, EVF_HEADER_BYTES);

	if (rc != 0)
		return rc;
	h.created_ns = w->cfg.created_ns ? w->cfg.created_ns : evw_now_ns(CLOCK_REALTIME);
	memcpy(h.config_sha256, w->cfg.config_sha256, EVF_SHA256_BYTES);
	snprintf(h.software, sizeof(h.software), "%s", w->software);
	evf_encode_file_header(head, &h);
	memset(f, 0, sizeof(*f));
	evw_file_name(f->name, sizeof(f->name), w->cfg.run, w->cfg.builder_id, w->slice, w->next_seq);
	snprintf(open_name, sizeof(open_name), "%s.writing", f->name);
	/* O_EXCL: a file of an earlier run of the same number is never
	 * overwritten; the launcher gives each run a directory of its own. */
	f->fd = openat(w->dir_fd, open_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (f->fd < 0)
		return evw_fail(w, errno, "%s: cannot create a file in %s: %s", "output");
	f->file_seq = w->next_seq++;
	f->slice = w->slice;
	if (write(f->fd, head, sizeof(head)) != (ssize_t)sizeof(head))
		return evw_fail(w, errno ? errno : EIO, "%s: write to %s failed: %s", "output");
	f->bytes = sizeof(head);
	f->crc = crc_update(0, head, sizeof(head));
	/* A file system that refuses direct I/O refuses it for every file. */
	if (w->cfg.direct) {
		rc = dwrite_begin(&w->dio, w->dir_fd, open_name, f->fd, head, sizeof(head));
		f->direct = rc == 0;
		w->cfg.direct = rc == 0;
	}
	w->stats.bytes_written += sizeof(head);
	return 0;
}

/* CRC of an event's frames, one after the other: small frames read again
 * (they are in cache, about to be written), large ones combined from the
 * CRC of their header and of their payload. */
static uint32_t evw_frames_crc(struct evw *w, const struct evw_event *ev, uint64_t *bytes)
{
	uint32_t crc = 0;

	*bytes = 0;
	for (unsigned int i = 0; i < ev->frame_count; i++) {
		const struct evw_frame *fr = &ev->frames[i];
		uint32_t payload_bytes = fr->frame_bytes - FRM_HEADER_BYTES;

		if (fr->frame_bytes <= EVW_RESUM_FRAME_BYTES) {
			crc = crc_update(crc, fr->bytes, fr->frame_bytes);
		} else {
			crc = crc_update(crc, fr->bytes, FRM_HEADER_BYTES);
			crc = crc_combine_cached(&w->frame_shift, crc, fr->payload_crc, payload_bytes);
		}
		*bytes += fr->frame_bytes;
	}
	return crc;
}

/* Starts writeback of each full window written, and drops the window
 * before it once on disk (waiting for it, which by then is mostly done).
 * Advice only: a file system that ignores it loses nothing. */
static void evw_writeback(struct evw *w)
{
	struct evw_open_file *f = &w->file;

	if (f->direct)
		return;   /* nothing of it is in the page cache but a part block */
	while (f->bytes - f->kicked >= EVW_WRITEBACK_WINDOW_BYTES) {
		sync_file_range(f->fd, (off_t)f->kicked, EVW_WRITEBACK_WINDOW_BYTES,
				SYNC_FILE_RANGE_WRITE);
		f->kicked += EVW_WRITEBACK_WINDOW_BYTES;
		if (f->kicked - f->dropped >= EVW_WRITEBACK_LAG * EVW_WRITEBACK_WINDOW_BYTES) {
			sync_file_range(f->fd, (off_t)f->dropped, EVW_WRITEBACK_WINDOW_BYTES,
					SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						SYNC_FILE_RANGE_WAIT_AFTER);
			posix_fadvise(f->fd, (off_t)f->dropped, EVW_WRITEBACK_WINDOW_BYTES,
				      POSIX_FADV_DONTNEED);
			f->dropped += EVW_WRITEBACK_WINDOW_BYTES;
		}
	}
}

/* A batch that could not be written: its events unwritten, the file's CRC
 * back to its last acknowledged byte, the writer failed. */
static int evw_batch_failed(struct evw *w, int err)
{
	w->stats.events_unwritten += w->batch_events;
	w->file.crc = w->batch_file_crc;
	w->iov_count = w->header_count = 0;
	w->batch_events = w->batch_bytes = 0;
	return evw_fail(w, err, "%s: write to %s failed: %s", err == ENOSPC ? "disk full" : "output");
}

int evw_flush(struct evw *w)
{
	struct evw_open_file *f = &w->file;
	struct iovec *iov = w->iov;
	unsigned int left = w->iov_count;
	uint64_t t0, done = 0;

	if (evw_collect(w, false) != 0 || w->stats.failed)
		return -EIO;
	if (w->iov_count == 0)
		return 0;
	t0 = evw_now_ns(CLOCK_MONOTONIC);
	if (f->direct) {
		uint64_t calls = w->dio.calls, direct = w->dio.direct_bytes;
		int rc = dwrite_append(&w->dio, iov, left);

		w->stats.write_calls += w->dio.calls - calls;
		w->stats.direct_bytes += w->dio.direct_bytes - direct;
		if (rc != 0)
			return evw_batch_failed(w, -rc);
		done = w->batch_bytes;
		left = 0;
	}
	while (left > 0) {
		ssize_t n = writev(f->fd, iov, (int)left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return evw_batch_failed(w, n < 0 ? errno : EIO);
		w->stats.write_calls++;
		done += (uint64_t)n;
		while (left > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			left--;
		}
		if (left > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	w->stats.write_ns += evw_now_ns(CLOCK_MONOTONIC) - t0;
	if (w->cfg.sync == EVW_SYNC_BATCH) {
		t0 = evw_now_ns(CLOCK_MONOTONIC);
		if (fdatasync(f->fd) != 0)
			return evw_fail(w, errno, "%s: fdatasync in %s failed: %s", "output");
		w->stats.sync_calls++;
		w->stats.sync_ns += evw_now_ns(CLOCK_MONOTONIC) - t0;
	}
	f->bytes += done;
	if (f->events == 0)
		f->first_event = w->batch_first;
	f->events += w->batch_events;
	f->last_event = w->batch_last;
	w->stats.events_written += w->batch_events;
	w->stats.bytes_written += done;
	w->since_space_check += done;
	w->iov_count = w->header_count = 0;
	w->batch_events = w->batch_bytes = 0;
	evw_writeback(w);
	if (w->since_space_check >= EVW_SPACE_CHECK_BYTES)
		return evw_check_space(w, 0);
	return 0;
}

/* Whether the event fits the open file, the batch's iovecs and headers. */
static bool evw_batch_full(const struct evw *w, const struct evw_event *ev)
{
	return w->iov_count + 1u + ev->frame_count > EVW_BATCH_IOVS ||
	       w->header_count == EVW_BATCH_RECORDS;
}

int evw_add(struct evw *w, const struct evw_event *ev)
{
	struct evf_record_header r = { .run = w->cfg.run, .event_id = ev->event_id,
				       .fragments = ev->frame_count, .flags = ev->flags,
				       .earliest_ns = ev->earliest_ns };
	uint64_t frames_bytes;
	uint32_t frames_crc;
	uint8_t *head;
	int rc;

	if (w->stats.failed || w->closed || 1u + ev->frame_count > EVW_BATCH_IOVS) {
		w->stats.events_unwritten++;
		return w->stats.failed ? -EIO : -EINVAL;
	}
	frames_crc = evw_frames_crc(w, ev, &frames_bytes);
	r.record_bytes = (uint32_t)(EVF_RECORD_HEADER_BYTES + frames_bytes);
	if (w->file.fd >= 0 && w->file.events + w->batch_events > 0 &&
	    w->file.bytes + w->batch_bytes + r.record_bytes + EVF_TRAILER_BYTES > w->cfg.max_file_bytes) {
		/* Rolled at its size: its fdatasync and manifest go on while
		 * the next file is written. */
		rc = evw_next_file(w, w->slice, false);
		if (rc != 0)
			goto unwritten;
	}
	if (evw_batch_full(w, ev) && (rc = evw_flush(w)) != 0)
		goto unwritten;
	if (w->file.fd < 0 && (rc = evw_open_file(w)) != 0)
		goto unwritten;
	if (w->batch_events == 0)
		w->batch_file_crc = w->file.crc;
	head = w->headers[w->header_count++];
	evf_encode_record_header(head, &r);
	r.record_crc = crc_update(0, head, EVF_RECORD_CRC_COVERED_BYTES);
	if (frames_bytes > 0)
		r.record_crc = crc_combine_cached(&w->record_shift, r.record_crc, frames_crc, frames_bytes);
	evf_encode_record_header(head, &r);
	w->file.crc = crc_update(w->file.crc, head, EVF_RECORD_HEADER_BYTES);
	if (frames_bytes > 0)
		w->file.crc = crc_combine_cached(&w->record_shift, w->file.crc, frames_crc, frames_bytes);
	w->iov[w->iov_count++] = (struct iovec){ head, EVF_RECORD_HEADER_BYTES };
	for (unsigned int i = 0; i < ev->frame_count; i++)
		w->iov[w->iov_count++] = (struct iovec){ (void *)ev->frames[i].bytes,
							 ev->frames[i].frame_bytes };
	if (w->batch_events++ == 0)
		w->batch_first = ev->event_id;
	w->batch_last = ev->event_id;
	w->batch_bytes += r.record_bytes;
	if (w->batch_bytes > w->stats.batch_bytes_peak)
		w->stats.batch_bytes_peak = w->batch_bytes;
	return 0;
unwritten:
	w->stats.events_unwritten++;
	return rc;
}

/* The closer's answer for a file handed to it: counted closed, or the
 * writer failed naming the step. 0 also when none was finished. */
static int evw_collect(struct evw *w, bool wait)
{
	static const char *const fmts[][2] = {
		{ "fdatasync", "%s: fdatasync in %s failed: %s" },
		{ "rename", "%s: rename in %s failed: %s" },
		{ "fsync", "%s: fsync of %s failed: %s" },
		{ "manifest", "%s: manifest in %s: %s" },
	};
	struct evclose_result r;

	if (w->closer == NULL || !evclose_collect(w->closer, wait, &r))
		return 0;
	if (r.err != 0) {
		for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
			if (strcmp(fmts[i][0], r.step) == 0)
				return evw_fail(w, r.err, fmts[i][1], "output");
		return evw_fail(w, r.err, "%s: closing a file in %s failed: %s", "output");
	}
	if (w->cfg.sync != EVW_SYNC_NEVER)
		w->stats.sync_calls += 2;
	w->stats.sync_ns += r.sync_ns;
	w->stats.files_closed++;
	if (w->on_closed)
		w->on_closed(w->on_closed_arg, &r.info);
	return 0;
}

/* The trailer here; fdatasync, rename to NAME, directory fsync and the
 * manifest by the closer (sys/evclose). wait: until they are done too. */
static int evw_close_file(struct evw *w, bool wait)
{
	struct evw_open_file *f = &w->file;
	struct evf_trailer t = { .events = f->events,
				 .record_bytes = f->bytes - EVF_HEADER_BYTES,
				 .first_event = f->first_event, .last_event = f->last_event };
	struct evclose_job job = { .sync = w->cfg.sync != EVW_SYNC_NEVER };
	uint8_t trailer[EVF_TRAILER_BYTES];
	int rc;

	evf_encode_trailer(trailer, &t, f->crc);
	dwrite_end_file(&w->dio);
	f->direct = false;
	if (pwrite(f->fd, trailer, sizeof(trailer), (off_t)f->bytes) != (ssize_t)sizeof(trailer))
		return evw_fail(w, errno ? errno : EIO, "%s: trailer in %s: %s", "output");
	f->bytes += sizeof(trailer);
	w->stats.bytes_written += sizeof(trailer);
	job.fd = f->fd;
	job.info = (struct evw_file_info){ .file_seq = f->file_seq, .slice = f->slice, .bytes = f->bytes,
					   .events = f->events, .first_event = f->first_event,
					   .last_event = f->last_event, .file_crc = t.file_crc };
	snprintf(job.info.name, sizeof(job.info.name), "%s", f->name);
	/* One file at a time: the one before is answered first. */
	rc = evw_collect(w, true);
	if (rc != 0)
		return rc;
	f->fd = -1;
	evclose_submit(w->closer, &job);
	return wait ? evw_collect(w, true) : 0;
}

/* After a failed write: the file cut back to its last acknowledged record
 * and closed with its trailer, so what it holds is whole; if even that
 * fails it stays NAME.writing, which recovery closes. */
static void evw_salvage(struct evw *w)
{
	struct evw_open_file *f = &w->file;
	bool failed = w->stats.failed;

	dwrite_end_file(&w->dio);
	f->direct = false;
	if (ftruncate(f->fd, (off_t)f->bytes) != 0 || lseek(f->fd, 0, SEEK_END) < 0) {
		close(f->fd);
		f->fd = -1;
		return;
	}
	w->stats.failed = false;
	if (evw_close_file(w, true) != 0 && f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	w->stats.failed = failed;
}

/* The open file closed (the closer's part awaited, or not), the next
 * one of slice. */
static int evw_next_file(struct evw *w, uint32_t slice, bool wait)
{
	int rc = 0;

	if (w->file.fd >= 0) {
		rc = evw_flush(w);
		if (rc == 0)
			rc = evw_close_file(w, wait);
		else
			evw_salvage(w);
	}
	w->slice = slice;
	if (rc == 0 && wait)
		rc = evw_collect(w, true);
	return rc;
}

int evw_roll(struct evw *w, uint32_t slice)
{
	return evw_next_file(w, slice, true);
}

int evw_close(struct evw *w)
{
	int rc = w->closed ? 0 : evw_roll(w, w->slice);

	w->closed = true;
	return rc;
}

const char *evw_error(const struct evw *w)
{
	return w->stats.failed ? w->error : NULL;
}

void evw_stats(const struct evw *w, struct evw_stats *out)
{
	*out = w->stats;
}

void evw_destroy(struct evw *w)
{
	if (w == NULL)
		return;
	evclose_stop(w->closer);
	if (w->file.fd >= 0)
		close(w->file.fd);
	dwrite_free(&w->dio);
	if (w->dir_fd >= 0)
		close(w->dir_fd);
	free(w);
}
