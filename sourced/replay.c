#include "replay.h"

#include "wire/evfile.h"
#include "wire/frame.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A recording of more files than this is refused: a run of a few hundred
 * GB in 1 GiB files stays well below it. */
#define REPLAY_MAX_FILES 4096u

/* One mapped file and where its walk stands. */
struct replay_file {
	const uint8_t *map;
	size_t bytes;
	size_t end;              /* where its records end (its trailer) */
	size_t at;               /* the next record */
	uint64_t next_event;     /* that record's event ID; UINT64_MAX when done */
};

struct src_replay {
	uint16_t source;
	struct replay_file *files;
	unsigned int count;
	struct replay_summary summary;
};

/* nftw() has no argument for its callback: the list being made. */
static struct replay_listing {
	char **paths;
	unsigned int count;
	bool too_many;
} listing;

static int replay_list_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	size_t n = strlen(path);

	(void)st;
	(void)ftw;
	if (type != FTW_F || n < 4 || strcmp(path + n - 4, ".dat") != 0)
		return 0;
	if (listing.count == REPLAY_MAX_FILES) {
		listing.too_many = true;
		return 1;
	}
	listing.paths[listing.count] = strdup(path);
	if (listing.paths[listing.count] == NULL)
		return -1;
	listing.count++;
	return 0;
}

static void replay_fail(char *error, size_t size, const char *path, const char *what)
{
	snprintf(error, size, "--replay: %s: %s", path, what);
}

static void replay_advance(struct replay_file *f)
{
	struct evf_record_header r;

	if (f->at >= f->end) {
		f->next_event = UINT64_MAX;
		return;
	}
	evf_parse_record_header(f->map + f->at, &r);
	f->next_event = r.event_id;
}

/* This source's frame in the record at f->at, or NULL. */
static const uint8_t *replay_own_frame(const struct src_replay *r, const struct replay_file *f,
				       uint32_t *len)
{
	struct evf_record_header h;
	struct frm_header fh;
	size_t at = f->at + EVF_RECORD_HEADER_BYTES, end;

	evf_parse_record_header(f->map + f->at, &h);
	end = f->at + h.record_bytes;
	while (at < end) {
		frm_parse_header(f->map + at, &fh);
		if (fh.source_id == r->source) {
			*len = fh.payload_len;
			return f->map + at + FRM_HEADER_BYTES;
		}
		at += FRM_HEADER_BYTES + fh.payload_len;
	}
	return NULL;
}

/* Maps one file and verifies it whole; counts this source's fragments. */
static int replay_map(struct src_replay *r, struct replay_file *f, const char *path,
		      uint32_t max_payload_bytes, char *error, size_t size)
{
	struct evf_scan scan;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) != 0) {
		replay_fail(error, size, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	f->bytes = (size_t)st.st_size;
	f->map = f->bytes ? mmap(NULL, f->bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		replay_fail(error, size, path, strerror(errno));
		return -EIO;
	}
	evf_scan(f->map ? f->map : (const uint8_t *)"", f->bytes, FRM_MAX_PAYLOAD_BYTES, &scan);
	if (!scan.complete) {
		char what[160];
		snprintf(what, sizeof what, "%s at offset %zu", evf_status_name(scan.status),
			 scan.bad_offset);
		replay_fail(error, size, path, what);
		return -EPROTO;
	}
	f->at = EVF_HEADER_BYTES;
	f->end = scan.good_bytes;
	r->summary.records += scan.records.events;
	for (replay_advance(f); f->next_event != UINT64_MAX; ) {
		uint32_t len;
		if (replay_own_frame(r, f, &len) != NULL) {
			if (len > max_payload_bytes) {
				char what[160];
				snprintf(what, sizeof what, "event %llu holds a payload of %u bytes, over "
					 "--payload %u", (unsigned long long)f->next_event, len,
					 max_payload_bytes);
				replay_fail(error, size, path, what);
				return -EMSGSIZE;
			}
			if (r->summary.fragments++ == 0 || f->next_event < r->summary.first_event)
				r->summary.first_event = f->next_event;
			if (f->next_event > r->summary.last_event)
				r->summary.last_event = f->next_event;
		}
		struct evf_record_header h;
		evf_parse_record_header(f->map + f->at, &h);
		f->at += h.record_bytes;
		replay_advance(f);
	}
	f->at = EVF_HEADER_BYTES;
	replay_advance(f);
	return 0;
}

static void replay_free_listing(void)
{
	for (unsigned int i = 0; i < listing.count; i++)
		free(listing.paths[i]);
	free(listing.paths);
	listing = (struct replay_listing){ 0 };
}

int replay_open(struct src_replay **out, const char *run_dir, uint16_t source,
		uint32_t max_payload_bytes, char *error, size_t error_size)
{
	struct src_replay *r = calloc(1, sizeof *r);
	int rc = 0;

	*out = NULL;
	listing = (struct replay_listing){ .paths = calloc(REPLAY_MAX_FILES, sizeof(char *)) };
	if (r == NULL || listing.paths == NULL) {
		snprintf(error, error_size, "--replay: out of memory");
		rc = -ENOMEM;
		goto out;
	}
	r->source = source;
	if (nftw(run_dir, replay_list_one, 16, FTW_PHYS) == -1) {
		rc = -errno;
		replay_fail(error, error_size, run_dir, strerror(errno));
		goto out;
	}
	if (listing.too_many || listing.count == 0) {
		rc = -ENOENT;
		replay_fail(error, error_size, run_dir, listing.too_many ? "more event files than "
			    "a replay takes" : "no event file (*.dat) in it");
		goto out;
	}
	r->files = calloc(listing.count, sizeof *r->files);
	if (r->files == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (unsigned int i = 0; i < listing.count && rc == 0; i++, r->count++)
		rc = replay_map(r, &r->files[i], listing.paths[i], max_payload_bytes, error,
				error_size);
	r->summary.files = r->count;
out:
	replay_free_listing();
	if (rc != 0) {
		replay_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void replay_summary(const struct src_replay *r, struct replay_summary *out)
{
	*out = r->summary;
}

bool replay_fragment(struct src_replay *r, uint64_t event_id, const uint8_t **payload,
		     uint32_t *len)
{
	bool found = false;

	for (unsigned int i = 0; i < r->count; i++) {
		struct replay_file *f = &r->files[i];

		while (f->next_event < event_id || (f->next_event == event_id && !found)) {
			if (f->next_event == event_id) {
				*payload = replay_own_frame(r, f, len);
				found = *payload != NULL;
			}
			struct evf_record_header h;
			evf_parse_record_header(f->map + f->at, &h);
			f->at += h.record_bytes;
			replay_advance(f);
		}
	}
	return found;
}

void replay_close(struct src_replay *r)
{
	if (r == NULL)
		return;
	for (unsigned int i = 0; i < r->count; i++)
		if (r->files[i].map != NULL)
			munmap((void *)r->files[i].map, r->files[i].bytes);
	free(r->files);
	free(r);
}
