#include "sys/h5writer_layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>


/* Rows per chunk of the tables: 96 KiB of events, 192 KiB of frames, so a
 * batch of small events fills a chunk or more and a file of large ones
 * does not end with a mostly empty chunk per source. */
#define H5W_TABLE_CHUNK_ROWS 4096u

/* The file driver's own errno in its message, e.g. "... errno = 28, error
 * message = 'No space left on device' ...". */
static herr_t h5w_find_errno(unsigned n, const H5E_error2_t *e, void *arg)
{
	const char *at = e->desc ? strstr(e->desc, "errno = ") : NULL;
	int *err = arg;

	(void)n;
	if (at != NULL && *err == 0)
		*err = atoi(at + 8);
	return 0;
}

int h5w_layout_errno(void)
{
	int err = 0;

	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5w_find_errno, &err);
	return err > 0 ? err : EIO;
}

int h5w_layout_types(hid_t *event_row, hid_t *frame_row)
{
	hid_t e = H5Tcreate(H5T_COMPOUND, sizeof(struct h5w_event_row));
	hid_t f = H5Tcreate(H5T_COMPOUND, sizeof(struct h5w_frame_row));

	if (e < 0 || f < 0 ||
	    H5Tinsert(e, "event_id", HOFFSET(struct h5w_event_row, event_id), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(e, "earliest_ns", HOFFSET(struct h5w_event_row, earliest_ns), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(e, "record_crc", HOFFSET(struct h5w_event_row, record_crc), H5T_NATIVE_UINT32) < 0 ||
	    H5Tinsert(e, "flags", HOFFSET(struct h5w_event_row, flags), H5T_NATIVE_UINT16) < 0 ||
	    H5Tinsert(e, "fragments", HOFFSET(struct h5w_event_row, fragments), H5T_NATIVE_UINT16) < 0 ||
	    H5Tinsert(f, "event_id", HOFFSET(struct h5w_frame_row, event_id), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(f, "sequence", HOFFSET(struct h5w_frame_row, sequence), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(f, "timestamp_ns", HOFFSET(struct h5w_frame_row, timestamp_ns), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(f, "payload_offset", HOFFSET(struct h5w_frame_row, payload_offset), H5T_NATIVE_UINT64) < 0 ||
	    H5Tinsert(f, "run", HOFFSET(struct h5w_frame_row, run), H5T_NATIVE_UINT32) < 0 ||
	    H5Tinsert(f, "payload_len", HOFFSET(struct h5w_frame_row, payload_len), H5T_NATIVE_UINT32) < 0 ||
	    H5Tinsert(f, "crc", HOFFSET(struct h5w_frame_row, crc), H5T_NATIVE_UINT32) < 0 ||
	    H5Tinsert(f, "source_id", HOFFSET(struct h5w_frame_row, source_id), H5T_NATIVE_UINT16) < 0 ||
	    H5Tinsert(f, "version", HOFFSET(struct h5w_frame_row, version), H5T_NATIVE_UINT8) < 0 ||
	    H5Tinsert(f, "flags", HOFFSET(struct h5w_frame_row, flags), H5T_NATIVE_UINT8) < 0) {
		int err = h5w_layout_errno();

		if (e >= 0)
			H5Tclose(e);
		if (f >= 0)
			H5Tclose(f);
		return -err;
	}
	*event_row = e;
	*frame_row = f;
	return 0;
}

static int h5w_attr(hid_t loc, const char *name, hid_t type, const void *value)
{
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t a = space < 0 ? -1 : H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
	int rc = a < 0 || H5Awrite(a, type, value) < 0 ? -h5w_layout_errno() : 0;

	if (a >= 0)
		H5Aclose(a);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

/* A fixed-length string attribute, its length the string's. */
static int h5w_attr_string(hid_t loc, const char *name, const char *value)
{
	hid_t type = H5Tcopy(H5T_C_S1);
	int rc;

	if (type < 0)
		return -h5w_layout_errno();
	if (H5Tset_size(type, strlen(value) > 0 ? strlen(value) : 1) < 0 ||
	    H5Tset_strpad(type, H5T_STR_NULLPAD) < 0)
		rc = -h5w_layout_errno();
	else
		rc = h5w_attr(loc, name, type, value);
	H5Tclose(type);
	return rc;
}

static int h5w_root_attrs(hid_t file, const struct h5w_file_meta *m)
{
	char hex[2 * EVF_SHA256_BYTES + 1];
	uint16_t version = H5W_FORMAT_VERSION;
	int rc;

	for (unsigned int i = 0; i < EVF_SHA256_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->config_sha256[i]);
	if ((rc = h5w_attr_string(file, "format", H5W_FORMAT_NAME)) != 0 ||
	    (rc = h5w_attr(file, "format_version", H5T_NATIVE_UINT16, &version)) != 0 ||
	    (rc = h5w_attr(file, "run", H5T_NATIVE_UINT32, &m->run)) != 0 ||
	    (rc = h5w_attr(file, "builder_id", H5T_NATIVE_UINT16, &m->builder_id)) != 0 ||
	    (rc = h5w_attr(file, "sources", H5T_NATIVE_UINT16, &m->sources)) != 0 ||
	    (rc = h5w_attr(file, "file_seq", H5T_NATIVE_UINT32, &m->file_seq)) != 0 ||
	    (rc = h5w_attr(file, "slice", H5T_NATIVE_UINT32, &m->slice)) != 0 ||
	    (rc = h5w_attr(file, "created_ns", H5T_NATIVE_UINT64, &m->created_ns)) != 0 ||
	    (rc = h5w_attr_string(file, "config_sha256", hex)) != 0)
		return rc;
	return h5w_attr_string(file, "software", m->software ? m->software : "");
}

/* An empty 1-D dataset, unlimited, chunked by `chunk` elements, never
 * filled (every element is written). `cached`: whether partial chunks
 * stay in the library's chunk cache (the tables); the payloads' chunks
 * are written straight to their place in the file. */
static int h5w_dataset(hid_t loc, const char *name, hid_t type, hsize_t chunk, bool cached,
		       struct h5w_dataset *d)
{
	hsize_t zero = 0, unlimited = H5S_UNLIMITED;
	hid_t space = H5Screate_simple(1, &zero, &unlimited);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
	int rc = 0;

	d->size = 0;
	d->id = -1;
	if (space < 0 || dcpl < 0 || dapl < 0 || H5Pset_chunk(dcpl, 1, &chunk) < 0 ||
	    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
	    (!cached && H5Pset_chunk_cache(dapl, 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) ||
	    (d->id = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, dapl)) < 0)
		rc = -h5w_layout_errno();
	if (dapl >= 0)
		H5Pclose(dapl);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

static int h5w_source_create(hid_t file, const struct h5w_file_meta *m, unsigned int s,
			     hid_t frame_row, struct h5w_source_sets *src)
{
	char name[32];

	snprintf(name, sizeof(name), "source_%u", s);
	src->group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	src->frames.id = src->payload.id = -1;
	if (src->group < 0)
		return -h5w_layout_errno();
	int rc = h5w_dataset(src->group, "frames", frame_row, H5W_TABLE_CHUNK_ROWS, true, &src->frames);
	if (rc == 0)
		rc = h5w_dataset(src->group, "payload", H5T_NATIVE_UINT8, m->chunk_bytes, false,
				 &src->payload);
	return rc;
}

hid_t h5w_layout_create(const char *path, const struct h5w_file_meta *m, hid_t event_row,
			hid_t frame_row, struct h5w_dataset *events, struct h5w_source_sets *sources)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	hid_t file = -1;
	int rc = 0;

	events->id = -1;
	for (unsigned int s = 0; s < m->sources; s++)
		sources[s].group = sources[s].frames.id = sources[s].payload.id = -1;
	/* The 1.10 format: a chunked dataset with one unlimited dimension is
	 * indexed by an extensible array, made for appending. Closing strong:
	 * H5Fclose closes what is still open rather than leave the file open. */
	if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0 ||
	    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0 ||
	    (file = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl)) < 0) {
		rc = -h5w_layout_errno();
		goto out;
	}
	rc = h5w_root_attrs(file, m);
	if (rc == 0)
		rc = h5w_dataset(file, H5W_EVENTS_PATH, event_row, H5W_TABLE_CHUNK_ROWS, true, events);
	for (unsigned int s = 0; rc == 0 && s < m->sources; s++)
		rc = h5w_source_create(file, m, s, frame_row, &sources[s]);
	if (rc != 0) {
		h5w_layout_close(file, events, sources, m->sources);
		file = -1;
	}
out:
	if (fapl >= 0)
		H5Pclose(fapl);
	return rc != 0 ? rc : file;
}

int h5w_layout_append(struct h5w_dataset *d, hid_t type, const void *data, uint64_t n)
{
	hsize_t start = d->size, count = n, extent = d->size + n;
	hid_t file_space = -1, mem_space = -1;
	int rc = 0;

	if (n == 0)
		return 0;
	if (H5Dset_extent(d->id, &extent) < 0 || (file_space = H5Dget_space(d->id)) < 0 ||
	    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
	    (mem_space = H5Screate_simple(1, &count, NULL)) < 0 ||
	    H5Dwrite(d->id, type, mem_space, file_space, H5P_DEFAULT, data) < 0)
		rc = -h5w_layout_errno();
	else
		d->size = extent;
	if (mem_space >= 0)
		H5Sclose(mem_space);
	if (file_space >= 0)
		H5Sclose(file_space);
	return rc;
}

static void h5w_set_extent(const struct h5w_dataset *d)
{
	hsize_t extent = d->size;

	if (d->id >= 0)
		H5Dset_extent(d->id, &extent);
}

void h5w_layout_shrink(const struct h5w_dataset *events, const struct h5w_source_sets *sources,
		       unsigned int count)
{
	h5w_set_extent(events);
	for (unsigned int s = 0; s < count; s++) {
		h5w_set_extent(&sources[s].frames);
		h5w_set_extent(&sources[s].payload);
	}
}

int h5w_layout_append_batch(struct h5w_dataset *events, struct h5w_source_sets *sources,
			    unsigned int count, hid_t event_row, hid_t frame_row,
			    const struct h5w_event_row *rows, uint32_t row_count,
			    const struct h5w_batch_source *batch)
{
	uint64_t events_size = events->size;
	int rc = h5w_layout_append(events, event_row, rows, row_count);

	for (unsigned int s = 0; rc == 0 && s < count; s++) {
		uint64_t frames_size = sources[s].frames.size;

		rc = h5w_layout_append(&sources[s].frames, frame_row, batch[s].rows, batch[s].row_count);
		if (rc == 0)
			rc = h5w_layout_append(&sources[s].payload, H5T_NATIVE_UINT8, batch[s].payload,
					       batch[s].payload_bytes);
		if (rc != 0)
			sources[s].frames.size = frames_size;
		for (unsigned int t = 0; rc != 0 && t < s; t++) {
			sources[t].frames.size -= batch[t].row_count;
			sources[t].payload.size -= batch[t].payload_bytes;
		}
	}
	if (rc != 0)
		events->size = events_size;
	return rc;
}

int h5w_layout_finish(hid_t file, uint64_t events, uint64_t first_event, uint64_t last_event)
{
	int rc;

	if ((rc = h5w_attr(file, "event_count", H5T_NATIVE_UINT64, &events)) != 0 ||
	    (rc = h5w_attr(file, "first_event", H5T_NATIVE_UINT64, &first_event)) != 0)
		return rc;
	return h5w_attr(file, "last_event", H5T_NATIVE_UINT64, &last_event);
}

int h5w_layout_close(hid_t file, struct h5w_dataset *events, struct h5w_source_sets *sources,
		     unsigned int count)
{
	for (unsigned int s = 0; s < count; s++) {
		if (sources[s].payload.id >= 0)
			H5Dclose(sources[s].payload.id);
		if (sources[s].frames.id >= 0)
			H5Dclose(sources[s].frames.id);
		if (sources[s].group >= 0)
			H5Gclose(sources[s].group);
		sources[s].group = sources[s].frames.id = sources[s].payload.id = -1;
	}
	if (events->id >= 0)
		H5Dclose(events->id);
	events->id = -1;
	return H5Fclose(file) < 0 ? -h5w_layout_errno() : 0;
}
