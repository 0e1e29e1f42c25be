/* The HDF5 file of docs/hdf5-layout.md, for h5writer only: its types, its
 * creation with the root attributes and the empty extendible datasets, an
 * append of a batch's rows to one dataset, and the closing attributes.
 * Every function returns 0 or a negative value and leaves the library's
 * error stack for h5w_layout_errno(). */
#ifndef ES_SYS_H5WRITER_LAYOUT_H
#define ES_SYS_H5WRITER_LAYOUT_H

#include <stdint.h>

#include <hdf5.h>

#include "wire/evfile.h"

/* The root attribute `format` and `format_version` (docs/hdf5-layout.md). */
#define H5W_FORMAT_NAME "esdq-event-hdf5"
#define H5W_FORMAT_VERSION 1u
/* The events table, from the file's root. */
#define H5W_EVENTS_PATH "/events"

/* A row of /events. No padding: the memory layout is the file's. */
struct h5w_event_row {
	uint64_t event_id;
	uint64_t earliest_ns;
	uint32_t record_crc;     /* the raw format's record CRC of this event */
	uint16_t flags;
	uint16_t fragments;
};

/* A row of /source_N/frames: every field of the frame's 42-byte header
 * but its magic, and where its payload lies in /source_N/payload. */
struct h5w_frame_row {
	uint64_t event_id;
	uint64_t sequence;
	uint64_t timestamp_ns;
	uint64_t payload_offset;
	uint32_t run;
	uint32_t payload_len;
	uint32_t crc;            /* the frame's own CRC, as it arrived */
	uint16_t source_id;
	uint8_t version;
	uint8_t flags;
};

/* One extendible 1-D dataset and how many elements it holds. */
struct h5w_dataset {
	hid_t id;
	uint64_t size;
};

struct h5w_source_sets {
	hid_t group;
	struct h5w_dataset frames;
	struct h5w_dataset payload;
};

/* What a batch holds for one source: its frames' rows and payloads. */
struct h5w_batch_source {
	uint8_t *payload;
	uint64_t payload_bytes;
	struct h5w_frame_row *rows;
	uint32_t row_count;
};

/* What the root attributes say of a file. */
struct h5w_file_meta {
	uint32_t run;
	uint16_t builder_id;
	uint16_t sources;
	uint32_t file_seq;
	uint32_t slice;
	uint64_t created_ns;
	uint8_t config_sha256[EVF_SHA256_BYTES];
	const char *software;
	uint32_t chunk_bytes;        /* of the payload datasets */
};

/* The compound types of the two tables, made once per writer. */
int h5w_layout_types(hid_t *event_row, hid_t *frame_row);

/* Creates path (refused if it exists) with the root attributes, /events
 * and per source /source_N/{frames,payload}, all empty. The file's id, or
 * a negative value with nothing left open. */
hid_t h5w_layout_create(const char *path, const struct h5w_file_meta *m, hid_t event_row,
			hid_t frame_row, struct h5w_dataset *events, struct h5w_source_sets *sources);

/* Appends n elements (rows of `type`) to d: one extent change, one write. */
int h5w_layout_append(struct h5w_dataset *d, hid_t type, const void *data, uint64_t n);

/* Appends a batch: its event rows to /events, each source's rows and
 * payloads to its datasets. On a failure every dataset's size is what it
 * was before (h5w_layout_shrink() sets the extents back). */
int h5w_layout_append_batch(struct h5w_dataset *events, struct h5w_source_sets *sources,
			    unsigned int count, hid_t event_row, hid_t frame_row,
			    const struct h5w_event_row *rows, uint32_t row_count,
			    const struct h5w_batch_source *batch);

/* Sets every dataset's extent back to its size, after a failed append. */
void h5w_layout_shrink(const struct h5w_dataset *events, const struct h5w_source_sets *sources,
		       unsigned int count);

/* The closing attributes: event_count, first_event, last_event. */
int h5w_layout_finish(hid_t file, uint64_t events, uint64_t first_event, uint64_t last_event);

/* Closes every dataset and group and the file; 0 if the file closed. */
int h5w_layout_close(hid_t file, struct h5w_dataset *events, struct h5w_source_sets *sources,
		     unsigned int count);

/* The operating system's errno the library recorded for its last failure
 * ("errno = 28" of its file driver), or EIO when it recorded none. */
int h5w_layout_errno(void);

#endif
