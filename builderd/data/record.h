/* The builder's event data (docs/RECORDING.md): every accepted event's
 * fragments, as the wire frames they arrived as, in event files (raw,
 * common/sys/evwriter, or HDF5, common/sys/h5writer). Each unique fragment
 * is copied once, into its window slot's cell (core/fragstore.h), as the
 * core takes it; a completed event holds its slot from when it is queued
 * until the batch it is in is written, and the writers read the frames
 * from the cells (one writev per batch for raw). The output (data/output.c)
 * queues, adds and flushes; a fragment for a held slot makes it write
 * first. Expired events are not written: they are counted in the books.
 *
 * Memory by construction: the store's window x sources x (42 +
 * --record-max-payload + 16) and the writer's batch. */
#ifndef ES_BD_RECORD_H
#define ES_BD_RECORD_H

#include "sys/evwriter.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct record_config {
	int format;                  /* enum options_record: raw or hdf5 */
	const char *dir;
	uint32_t run;
	uint16_t builder_id;
	uint16_t sources;
	uint32_t window;             /* the core's, in event IDs */
	uint32_t max_payload;        /* larger fragments are not recorded */
	uint64_t max_file_bytes;
	enum evw_sync sync;
	bool direct;                 /* raw files: whole blocks by direct I/O where allowed */
	uint64_t slice_ns;           /* data/slices.h; 0: no slice by time */
	uint64_t slice_events;       /* 0: no slice by count */
	uint8_t config_sha256[EVF_SHA256_BYTES];
};

struct record_stats {
	const char *format;          /* "raw" or "hdf5" */
	uint64_t files_closed;
	uint64_t events_written;
	uint64_t events_in_files;    /* the closed files' manifests' events */
	uint64_t bytes_written;
	uint64_t direct_bytes;       /* of bytes_written, by direct I/O */
	uint64_t events_unwritten;   /* handed to the writer after it failed */
	uint64_t events_unrecorded;  /* a fragment larger than the cells */
	uint64_t fragments_too_large;
	uint64_t write_calls;
	uint64_t sync_calls;
	uint64_t write_ns;
	uint64_t sync_ns;
	uint64_t free_bytes;
	uint64_t store_bytes;        /* the store's memory, allocated at open */
	uint64_t batch_bytes_peak;
	uint32_t held_peak;          /* slots held at once, at most */
	uint64_t frames_in_place;    /* kept where they arrived (record_keep in_place) */
	uint64_t frames_copied_late; /* of those, copied to free their place */
	uint32_t slices_ended;       /* end-of-slice documents written */
	bool failed;
};

struct record;

/* Makes the store and the writer (no file until the first event). false
 * with *error naming the problem: a directory that does not exist or is
 * not writable, too little space, no memory for the store. */
bool record_open(struct record **out, const struct record_config *config, char *error,
		 size_t error_size);

/* A unique fragment of the event in window slot `slot`: its frame copied
 * into the slot's cell, or, in_place, referred to where it is: the caller
 * keeps those bytes until record_refers says no more, or has them copied
 * (record_own). false when it is larger than the cells: its event will be
 * counted unrecorded. The slot must not be held (record_held). */
bool record_keep(struct record *r, uint32_t slot, uint16_t src, const uint8_t *frame,
		 uint32_t frame_bytes, uint32_t payload_crc, bool in_place);
bool record_refers(const struct record *r, uint32_t slot, uint16_t src, const uint8_t *frame);
void record_own(struct record *r, uint32_t slot, uint16_t src);

/* The slot's event was decided without being written (expired, filtered
 * out): its cells let go of their frames. */
void record_forget(struct record *r, uint32_t slot);
bool record_held(const struct record *r, uint32_t slot);

/* A completed, accepted event queued for writing: its slot held. */
void record_hold(struct record *r, uint32_t slot);

/* The queued event of slot to the writer's batch (frames not copied). */
void record_add(struct record *r, uint32_t slot, uint64_t event_id, uint64_t earliest_ns);

/* Writes the batch and releases every held slot; at now (monotonic) ends
 * the slice when it is over (data/slices.h): its file closed, its
 * document written. 0 or -errno. */
int record_flush(struct record *r, uint64_t now);

/* An expired event, counted in its slice. */
void record_expired(struct record *r);

/* A fenced builder: closes the open file as it stands and writes nothing
 * more. */
void record_seal(struct record *r);

/* The run's end: flushes and closes the open file (trailer, fdatasync,
 * rename, manifest); nothing more is written, the figures stay. false with
 * *why when not every event handed over was written: the writer failed
 * (its named error), or fragments did not fit their cells. */
bool record_end(struct record *r, uint64_t now, char *why, size_t why_size);

/* Ends (if not yet) and frees. false when the writer failed at any time. */
bool record_close(struct record *r);

/* The named error that stopped the writer, or NULL. */
const char *record_error(const struct record *r);
void record_stats(const struct record *r, struct record_stats *out);

#endif
