#include "data/record.h"

#include "options.h"

#include "data/slices.h"
#include "sys/dwrite.h"

#include "core/fragstore.h"
#include "io/daemon.h"
#include "sys/h5writer.h"
#include "sys/log.h"
#include "wire/frame.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The writer of each format behind one set of calls. */
struct record_writer_ops {
	const char *format;
	int (*add)(void *w, const struct evw_event *ev);
	int (*flush)(void *w);
	int (*roll)(void *w, uint32_t slice);
	int (*close)(void *w);
	const char *(*error)(const void *w);
	void (*stats)(const void *w, struct evw_stats *out);
	void (*destroy)(void *w);
};

static int record_raw_add(void *w, const struct evw_event *ev) { return evw_add(w, ev); }
static int record_raw_flush(void *w) { return evw_flush(w); }
static int record_raw_roll(void *w, uint32_t slice) { return evw_roll(w, slice); }
static int record_raw_close(void *w) { return evw_close(w); }
static const char *record_raw_error(const void *w) { return evw_error(w); }
static void record_raw_stats(const void *w, struct evw_stats *out) { evw_stats(w, out); }
static void record_raw_destroy(void *w) { evw_destroy(w); }

static const struct record_writer_ops record_raw_ops = {
	"raw", record_raw_add, record_raw_flush, record_raw_roll, record_raw_close, record_raw_error,
	record_raw_stats, record_raw_destroy,
};

static int record_hdf5_add(void *w, const struct evw_event *ev) { return h5w_add(w, ev); }
static int record_hdf5_flush(void *w) { return h5w_flush(w); }
static int record_hdf5_roll(void *w, uint32_t slice) { return h5w_roll(w, slice); }
static int record_hdf5_close(void *w) { return h5w_close(w); }
static const char *record_hdf5_error(const void *w) { return h5w_error(w); }
static void record_hdf5_stats(const void *w, struct evw_stats *out) { h5w_stats(w, out); }
static void record_hdf5_destroy(void *w) { h5w_destroy(w); }

static const struct record_writer_ops record_hdf5_ops = {
	"hdf5", record_hdf5_add, record_hdf5_flush, record_hdf5_roll, record_hdf5_close, record_hdf5_error,
	record_hdf5_stats, record_hdf5_destroy,
};

struct record {
	const struct record_writer_ops *ops;
	void *writer;
	struct fragstore *store;
	struct slices *slices;
	uint64_t batch_events;           /* handed to the writer since the last flush */
	uint16_t sources;
	struct evw_frame *frames;        /* [sources]: one event's, for the writer */
	uint64_t events_unrecorded;
	uint64_t fragments_too_large;
	uint64_t stage_bytes;            /* the raw writer's direct-I/O staging buffer */
	uint64_t frames_in_place;
	uint64_t frames_copied_late;     /* kept in place, then copied (record_own) */
	bool sealed;
	bool failed;
};

static void record_on_closed(void *arg, const struct evw_file_info *file)
{
	struct record *r = arg;
	slices_file_closed(r->slices, file);
}

/* A file of this run and builder already in dir (a second run of the same
 * number would overwrite it): its name in *found. */
static bool record_dir_taken(const struct record_config *c, char *found, size_t found_size)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, "run%06u_b%u_", (unsigned)c->run, (unsigned)c->builder_id);
	char eor[96];
	slices_run_name(eor, sizeof eor, c->run, c->builder_id);
	DIR *d = opendir(c->dir);
	if (d == NULL)
		return false;     /* the writer names why it cannot use it */
	bool taken = false;
	for (struct dirent *e; !taken && (e = readdir(d)) != NULL;) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 || strcmp(e->d_name, eor) == 0) {
			snprintf(found, found_size, "%s", e->d_name);
			taken = true;
		}
	}
	closedir(d);
	return taken;
}

bool record_open(struct record **out, const struct record_config *c, char *error,
		 size_t error_size)
{
	*out = NULL;
	char found[256];
	if (record_dir_taken(c, found, sizeof found)) {
		snprintf(error, error_size,
			 "output directory %s already holds run %u's files of builder %u (%s): a second "
			 "run of that number would overwrite them; give another --record-dir",
			 c->dir, (unsigned)c->run, (unsigned)c->builder_id, found);
		return false;
	}
	struct record *r = calloc(1, sizeof *r);
	if (r == NULL) {
		snprintf(error, error_size, "no memory for the recorder");
		return false;
	}
	r->sources = c->sources;
	r->ops = c->format == OPTIONS_RECORD_HDF5 ? &record_hdf5_ops : &record_raw_ops;
	r->frames = calloc(c->sources, sizeof *r->frames);
	r->store = fragstore_create(c->window, c->sources, FRM_HEADER_BYTES + c->max_payload);
	struct slices_config sc = { .dir = c->dir, .run = c->run, .builder_id = c->builder_id,
				    .slice_ns = c->slice_ns, .slice_events = c->slice_events };
	r->slices = slices_create(&sc);
	if (r->frames == NULL || r->store == NULL || r->slices == NULL) {
		snprintf(error, error_size,
			 "no memory for the fragments kept until written: window %u x %u sources x %u bytes",
			 c->window, c->sources, FRM_HEADER_BYTES + c->max_payload);
		record_close(r);
		return false;
	}
	static const char software[] = "builderd " ES_VERSION;
	int rc;
	if (c->format == OPTIONS_RECORD_HDF5) {
		struct h5w_config h = { .dir = c->dir, .run = c->run, .builder_id = c->builder_id,
					.sources = c->sources, .max_file_bytes = c->max_file_bytes,
					.sync = c->sync, .software = software };
		memcpy(h.config_sha256, c->config_sha256, sizeof h.config_sha256);
		struct h5w *w = NULL;
		rc = h5w_open(&w, &h, record_on_closed, r, error, error_size);
		r->writer = w;
	} else {
		struct evw_config e = { .dir = c->dir, .run = c->run, .builder_id = c->builder_id,
					.sources = c->sources, .max_file_bytes = c->max_file_bytes,
					.sync = c->sync, .software = software, .direct = c->direct };
		memcpy(e.config_sha256, c->config_sha256, sizeof e.config_sha256);
		struct evw *w = NULL;
		rc = evw_open(&w, &e, record_on_closed, r, error, error_size);
		r->writer = w;
		r->stage_bytes = c->direct ? DWRITE_STAGE_BYTES : 0;
	}
	if (rc != 0) {
		r->writer = NULL;
		record_close(r);
		return false;
	}
	*out = r;
	return true;
}

bool record_keep(struct record *r, uint32_t slot, uint16_t src, const uint8_t *frame,
		 uint32_t frame_bytes, uint32_t payload_crc, bool in_place)
{
	if (in_place && fragstore_put_ref(r->store, slot, src, frame, frame_bytes, payload_crc)) {
		r->frames_in_place++;
		return true;
	}
	if (!in_place && fragstore_put(r->store, slot, src, frame, frame_bytes, payload_crc))
		return true;
	r->fragments_too_large++;
	return false;
}

bool record_refers(const struct record *r, uint32_t slot, uint16_t src, const uint8_t *frame)
{
	return fragstore_refers(r->store, slot, src, frame);
}

void record_own(struct record *r, uint32_t slot, uint16_t src)
{
	fragstore_own(r->store, slot, src);
	r->frames_copied_late++;
}

void record_forget(struct record *r, uint32_t slot)
{
	if (!fragstore_held(r->store, slot))
		fragstore_clear(r->store, slot);
}

bool record_held(const struct record *r, uint32_t slot)
{
	return fragstore_held(r->store, slot);
}

void record_hold(struct record *r, uint32_t slot)
{
	fragstore_hold(r->store, slot);
}

void record_add(struct record *r, uint32_t slot, uint64_t event_id, uint64_t earliest_ns)
{
	if (r->sealed)
		return;
	for (uint16_t src = 0; src < r->sources; src++) {
		struct evw_frame *f = &r->frames[src];
		f->bytes = fragstore_frame(r->store, slot, src, &f->frame_bytes, &f->payload_crc);
		if (f->bytes == NULL) {
			/* A fragment larger than the cells: the event cannot be
			 * written whole. */
			r->events_unrecorded++;
			slices_unwritten(r->slices, 1);
			return;
		}
	}
	struct evw_event ev = { .event_id = event_id, .earliest_ns = earliest_ns,
				.frame_count = r->sources, .frames = r->frames };
	if (r->ops->add(r->writer, &ev) != 0) {
		slices_unwritten(r->slices, 1);
		if (!r->failed) {
			r->failed = true;
			log_error("Recording stopped: %s", r->ops->error(r->writer));
		}
		return;
	}
	r->batch_events++;
}

void record_expired(struct record *r)
{
	if (!r->sealed)
		slices_expired(r->slices);
}

int record_flush(struct record *r, uint64_t now)
{
	int rc = 0;
	if (!r->sealed) {
		rc = r->ops->flush(r->writer);
		if (rc != 0 && !r->failed) {
			r->failed = true;
			log_error("Recording stopped: %s", r->ops->error(r->writer));
		}
	}
	fragstore_release_all(r->store);
	for (; r->batch_events > 0; r->batch_events--)
		slices_event(r->slices, now);
	if (!r->sealed && slices_due(r->slices, now)) {
		/* The slice's files close before its document says what they hold. */
		int roll = r->ops->roll(r->writer, slices_current(r->slices) + 1);
		int doc = slices_end_slice(r->slices, now);
		if ((roll != 0 || doc != 0) && !r->failed) {
			r->failed = true;
			log_error("Recording stopped at the end of a slice: %s",
				  roll != 0 && r->ops->error(r->writer) ? r->ops->error(r->writer)
									: strerror(-(roll ? roll : doc)));
		}
		rc = rc != 0 ? rc : roll != 0 ? roll : doc;
	}
	return rc;
}

void record_seal(struct record *r)
{
	if (r->sealed)
		return;
	r->ops->close(r->writer);
	r->sealed = true;
	fragstore_release_all(r->store);
}

bool record_end(struct record *r, uint64_t now, char *why, size_t why_size)
{
	if (!r->sealed) {
		record_flush(r, now);
		if (r->ops->close(r->writer) != 0)
			r->failed = true;
		if (slices_end_run(r->slices, now) != 0 && !r->failed) {
			r->failed = true;
			snprintf(why, why_size, "the end-of-run document could not be written in the output directory");
			r->sealed = true;
			return false;
		}
		r->sealed = true;
	}
	struct record_stats st;
	record_stats(r, &st);
	if (st.failed || st.events_unwritten > 0) {
		snprintf(why, why_size, "%llu events' data not written: %s",
			 (unsigned long long)st.events_unwritten,
			 r->ops->error(r->writer) ? r->ops->error(r->writer) : "the writer failed");
		return false;
	}
	if (st.events_unrecorded > 0) {
		snprintf(why, why_size,
			 "%llu events' data not recorded: %llu fragments larger than --record-max-payload",
			 (unsigned long long)st.events_unrecorded,
			 (unsigned long long)st.fragments_too_large);
		return false;
	}
	return true;
}

bool record_close(struct record *r)
{
	if (r == NULL)
		return true;
	bool ok = !r->failed;
	if (r->writer != NULL) {
		if (!r->sealed) {
			if (r->ops->flush(r->writer) != 0 || r->ops->close(r->writer) != 0)
				ok = false;
		}
		if (r->ops->error(r->writer) != NULL)
			ok = false;
		r->ops->destroy(r->writer);
	}
	fragstore_destroy(r->store);
	slices_destroy(r->slices);
	free(r->frames);
	free(r);
	return ok;
}

const char *record_error(const struct record *r)
{
	return r->ops->error(r->writer);
}

void record_stats(const struct record *r, struct record_stats *out)
{
	struct evw_stats w;
	r->ops->stats(r->writer, &w);
	*out = (struct record_stats){
		.format = r->ops->format,
		.files_closed = w.files_closed,
		.events_written = w.events_written,
		.events_in_files = slices_run(r->slices).events,
		.bytes_written = w.bytes_written,
		.direct_bytes = w.direct_bytes,
		.events_unwritten = w.events_unwritten,
		.events_unrecorded = r->events_unrecorded,
		.fragments_too_large = r->fragments_too_large,
		.write_calls = w.write_calls,
		.sync_calls = w.sync_calls,
		.write_ns = w.write_ns,
		.sync_ns = w.sync_ns,
		.free_bytes = w.free_bytes,
		.store_bytes = fragstore_bytes(r->store) + r->stage_bytes,
		.batch_bytes_peak = w.batch_bytes_peak,
		.held_peak = fragstore_held_peak(r->store),
		.frames_in_place = r->frames_in_place,
		.frames_copied_late = r->frames_copied_late,
		.slices_ended = slices_ended(r->slices),
		.failed = r->failed || w.failed,
	};
}
