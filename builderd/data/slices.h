/* A recording cut into slices (docs/RECORDING.md, "Slices"), as CMS cuts a
 * run into luminosity sections: a slice ends after --record-slice-ms from
 * the builder's first event (or after --record-slice-events written
 * events), its files are closed (the writer rolls), and the builder writes
 * its end-of-slice document: events, bytes and files as the closed files'
 * manifests say, their first and last event, the events expired and the
 * events not written in it. At the run's end, the end-of-run document: the
 * sum of the slices. Both through sys/afile: whole or not at all. */
#ifndef ES_BD_SLICES_H
#define ES_BD_SLICES_H

#include "sys/evpublish.h"

#include <stdbool.h>
#include <stdint.h>

struct slices_config {
	const char *dir;
	uint32_t run;
	uint16_t builder_id;
	uint64_t slice_ns;           /* 0: no slice by time */
	uint64_t slice_events;       /* 0: no slice by count */
};

/* One slice's figures, or the run's. */
struct slices_figures {
	uint64_t events;
	uint64_t bytes;
	uint64_t files;
	uint64_t first_event;        /* UINT64_MAX: none */
	uint64_t last_event;
	uint64_t expired;
	uint64_t unwritten;
};

struct slices;

struct slices *slices_create(const struct slices_config *config);
void slices_destroy(struct slices *s);

/* The slice the next events go to. */
uint32_t slices_current(const struct slices *s);

/* A file of slice info->slice closed (the writer's on_closed). */
void slices_file_closed(struct slices *s, const struct evw_file_info *info);
/* An event handed to the writer at now (monotonic); one expired; events
 * that could not be written. */
void slices_event(struct slices *s, uint64_t now);
void slices_expired(struct slices *s);
void slices_unwritten(struct slices *s, uint64_t events);

/* Whether the current slice is over at now (monotonic). */
bool slices_due(const struct slices *s, uint64_t now);

/* Writes the current slice's document (its files closed) and starts the
 * next. 0 or -errno. */
int slices_end_slice(struct slices *s, uint64_t now);

/* Writes the last slice's document and the end-of-run document. 0 or
 * -errno. */
int slices_end_run(struct slices *s, uint64_t now);

/* The run's figures so far: every slice ended and the current one. */
struct slices_figures slices_run(const struct slices *s);
uint32_t slices_ended(const struct slices *s);

/* "run000001_b0_s0003.eos.json", "run000001_b0.eor.json". */
void slices_slice_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice);
void slices_run_name(char *dst, size_t size, uint32_t run, uint16_t builder_id);

#endif
