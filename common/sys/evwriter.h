/* A builder's event files (docs/event-file-format.md, docs/RECORDING.md):
 * events appended in batches with one writev per batch, files rolled at a
 * size and at slice boundaries, each file written as NAME.writing and, at
 * close, given its trailer, flushed with fdatasync, renamed to NAME, the
 * directory fsynced, and a manifest NAME.json written beside it. A closed
 * file is never torn. Free space is checked before a file is opened and
 * every so many bytes while writing; a full disk or an I/O error stops the
 * writer with a named error, its file cut back to its last complete record
 * and closed, and every event not written counted.
 *
 * The frames handed to evw_add() are not copied: they must stay where they
 * are until the next evw_flush(), evw_roll() or evw_close() returns (an
 * evw_add() may flush by itself when its batch is full, which only
 * shortens that wait). No event loop; blocking file I/O on the caller's
 * thread. */
#ifndef ES_SYS_EVWRITER_H
#define ES_SYS_EVWRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys/evpublish.h"
#include "wire/evfile.h"

/* When file data reaches the disk. */
enum evw_sync {
	EVW_SYNC_CLOSE = 0,  /* fdatasync before each file's rename (the default) */
	EVW_SYNC_BATCH,      /* and after every batch: nothing acknowledged is lost */
	EVW_SYNC_NEVER,      /* no fdatasync: a crash may lose closed files (measurements only) */
};

struct evw_config {
	const char *dir;             /* exists and is writable */
	uint32_t run;
	uint16_t builder_id;
	uint16_t sources;
	uint64_t max_file_bytes;     /* a file rolls before it would pass this */
	uint64_t reserve_bytes;      /* free space kept on the file system; 0: max_file_bytes */
	enum evw_sync sync;
	uint8_t config_sha256[EVF_SHA256_BYTES];
	const char *software;
	uint64_t created_ns;         /* stamped into each file header; 0: the time of opening */
	/* Whole blocks by direct I/O (sys/dwrite), where the file system
	 * allows it; a file system that refuses (tmpfs) is written through
	 * the page cache. Costs a staging buffer of DWRITE_STAGE_BYTES. */
	bool direct;
};

/* One frame of an event: its bytes (42-byte header and payload), as they
 * arrived, and its payload's CRC (the frame decoder's payload_crc), from
 * which the record CRC is made without reading a large payload again. */
struct evw_frame {
	const uint8_t *bytes;
	uint32_t frame_bytes;
	uint32_t payload_crc;
};

struct evw_event {
	uint64_t event_id;
	uint64_t earliest_ns;
	uint16_t flags;              /* EVF_FLAG_INCOMPLETE for an expired event */
	uint16_t frame_count;
	const struct evw_frame *frames;   /* in ascending source order */
};


struct evw_stats {
	uint64_t files_closed;
	uint64_t events_written;     /* in closed files and in the open one's batches written */
	uint64_t bytes_written;      /* every byte written, headers and trailers included */
	uint64_t events_unwritten;   /* handed over but not written: after an error */
	uint64_t write_calls;
	uint64_t sync_calls;
	uint64_t write_ns;           /* time inside writev */
	uint64_t sync_ns;            /* time inside fdatasync and fsync */
	uint64_t free_bytes;         /* at the last check */
	uint64_t batch_bytes_peak;
	uint64_t direct_bytes;       /* of bytes_written, those written by direct I/O */
	bool failed;
};

struct evw;

/* Called as each file closes (after its manifest is written). */
typedef void (*evw_closed_fn)(void *arg, const struct evw_file_info *file);

/* Checks the directory and the free space and makes the writer; the first
 * file opens with the first event. 0, or -errno with *error naming the
 * problem ("output directory DIR: No such file or directory"). */
int evw_open(struct evw **out, const struct evw_config *config, evw_closed_fn on_closed,
	     void *arg, char *error, size_t error_size);

/* Adds one event to the batch (flushing the batch first when full). 0, or
 * -errno once the writer has failed (the event is counted unwritten). */
int evw_add(struct evw *w, const struct evw_event *ev);

/* Writes the batch. 0 or -errno (see evw_error()). */
int evw_flush(struct evw *w);

/* Closes the open file, if any; the next event opens a file of slice
 * `slice`. */
int evw_roll(struct evw *w, uint32_t slice);

/* Closes the open file, if any. The writer can take no more events. */
int evw_close(struct evw *w);

/* The named error that stopped the writer, or NULL. */
const char *evw_error(const struct evw *w);

void evw_stats(const struct evw *w, struct evw_stats *out);

/* Frees the writer. A file still open stays NAME.writing, as a crash
 * would leave it: close first. */
void evw_destroy(struct evw *w);

/* The name of file `file_seq` of slice `slice`: run000042_b0_s0003_f0007.dat. */
void evw_file_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice,
		   uint32_t file_seq);

#endif
