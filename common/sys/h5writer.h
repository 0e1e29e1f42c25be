/* A builder's events as HDF5 files (docs/hdf5-layout.md, docs/RECORDING.md),
 * the field's exchange format, beside the raw event files of evwriter and
 * with the same shape: the same events (struct evw_event), batches, files
 * rolled at a size and at slice boundaries, each file written as
 * NAME.h5.writing and at close flushed and closed by the library, read
 * back once for its CRC, fdatasynced, renamed to NAME.h5, the directory
 * fsynced and a manifest NAME.h5.json written beside it.
 *
 * The layout is for throughput: a few extendible, chunked datasets that
 * every batch appends to (an events table; per source a frames table and
 * one byte dataset of payloads), never an object per event. Each frame can
 * be rebuilt bit for bit from its row and its payload bytes.
 *
 * Unlike evw_add(), h5w_add() copies the payloads into the batch (a
 * dataset write takes one contiguous buffer): the caller's frames may be
 * reused as soon as it returns. h5w_add() allocates nothing; a batch's
 * writes go through libhdf5, which allocates inside. A full disk or an I/O
 * error stops the writer with a named error; the open file is then left
 * NAME.h5.writing, never renamed as if whole (the library cannot promise a
 * consistent file after a failed write), and every event not written is
 * counted. Blocking file I/O on the caller's thread; the library's error
 * printing and its clean-up at exit are turned off for the whole process
 * (a file whose close failed would crash that clean-up). */
#ifndef ES_SYS_H5WRITER_H
#define ES_SYS_H5WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys/evwriter.h"
#include "wire/evfile.h"

#define H5W_FILE_SUFFIX ".h5"
/* The payload datasets' chunk when the configuration gives none
 * (docs/RECORDING.md, "Measured", says how it was chosen). */
#define H5W_DEFAULT_CHUNK_BYTES (1u << 20)

struct h5w_config {
	const char *dir;             /* exists and is writable */
	uint32_t run;
	uint16_t builder_id;
	uint16_t sources;            /* source IDs 0 .. sources-1, one group each */
	uint64_t max_file_bytes;     /* a file rolls before its bound would pass this */
	uint64_t reserve_bytes;      /* free space kept on the file system; 0: max_file_bytes */
	enum evw_sync sync;
	uint8_t config_sha256[EVF_SHA256_BYTES];
	const char *software;
	uint64_t created_ns;         /* stamped into each file; 0: the time of opening */
	uint32_t chunk_bytes;        /* of the payload datasets; 0: H5W_DEFAULT_CHUNK_BYTES */
};

struct h5w;

/* Checks the directory and the free space and makes the writer (and its
 * batch buffers); the first file opens with the first event. 0, or -errno
 * with *error naming the problem ("output directory DIR: No such file or
 * directory"). on_closed is called as each file closes, its manifest
 * written; bytes are the closed file's. */
int h5w_open(struct h5w **out, const struct h5w_config *config, evw_closed_fn on_closed,
	     void *arg, char *error, size_t error_size);

/* Copies one event into the batch (writing the batch first when full).
 * 0; -EINVAL for an event the layout cannot hold (a frame without the
 * frame magic, of a source not below `sources` or not after the frame
 * before, of another event ID, or whose length disagrees with its header),
 * counted unwritten, the writer going on; -errno once the writer has
 * failed (the event counted unwritten). */
int h5w_add(struct h5w *w, const struct evw_event *ev);

/* Appends the batch to the file's datasets. 0 or -errno (see h5w_error()). */
int h5w_flush(struct h5w *w);

/* Closes the open file, if any; the next event opens a file of slice
 * `slice`. */
int h5w_roll(struct h5w *w, uint32_t slice);

/* Closes the open file, if any. The writer can take no more events. */
int h5w_close(struct h5w *w);

/* The named error that stopped the writer, or NULL. */
const char *h5w_error(const struct h5w *w);

/* The raw writer's statistics, the same fields: bytes_written are the
 * bytes of closed files and the data appended to the open one;
 * write_ns the time inside the library's writes, sync_ns in fdatasync,
 * fsync and the read back for the file CRC. */
void h5w_stats(const struct h5w *w, struct evw_stats *out);

/* Frees the writer. A file still open stays NAME.h5.writing, as a crash
 * would leave it: close first. */
void h5w_destroy(struct h5w *w);

/* run000042_b0_s0003_f0007.h5: the raw file's name with the HDF5 suffix. */
void h5w_file_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice,
		   uint32_t file_seq);

#endif
