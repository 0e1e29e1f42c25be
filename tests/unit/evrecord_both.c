/* A test program, not a daemon: the same events handed to both event
 * writers, the raw format's (sys/evwriter) into one directory and HDF5's
 * (sys/h5writer) into another, so that tests/e2e/test_h5writer.py can read
 * both back and hold them to the same events, frame for frame.
 *
 *     evrecord_both --raw DIR --hdf5 DIR [--events N] [--sources S]
 *                   [--max-payload B] [--slice-at ID] [--max-file-bytes B]
 *                   [--seed N]
 *
 * Payload sizes are drawn from the seed up to --max-payload (every 50th
 * event's frames 20 times larger, every 13th event's empty); every 7th
 * event lacks source 1 and is flagged incomplete. Files roll at
 * --max-file-bytes and at event --slice-at (slice 1 after it). Prints one
 * JSON line with each writer's events written and files closed; exits 1
 * naming the writer's error. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys/evwriter.h"
#include "sys/h5writer.h"
#include "wire/crc.h"
#include "wire/evfile.h"
#include "wire/frame.h"

#define MAX_SOURCES 16u
#define RUN 7u

struct args {
	const char *raw_dir;
	const char *h5_dir;
	uint64_t events;
	unsigned int sources;
	uint32_t max_payload;
	uint64_t slice_at;
	uint64_t max_file_bytes;
	uint64_t seed;
};

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "raw", required_argument, NULL, 'r' }, { "hdf5", required_argument, NULL, 'h' },
		{ "events", required_argument, NULL, 'e' }, { "sources", required_argument, NULL, 's' },
		{ "max-payload", required_argument, NULL, 'p' },
		{ "slice-at", required_argument, NULL, 'l' },
		{ "max-file-bytes", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 'x' }, { NULL, 0, NULL, 0 } };
	int c;

	*a = (struct args){ NULL, NULL, 1000, 3, 2000, UINT64_MAX, 1ull << 30, 1 };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': a->raw_dir = optarg; break;
		case 'h': a->h5_dir = optarg; break;
		case 'e': a->events = strtoull(optarg, NULL, 10); break;
		case 's': a->sources = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p': a->max_payload = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'l': a->slice_at = strtoull(optarg, NULL, 10); break;
		case 'm': a->max_file_bytes = strtoull(optarg, NULL, 10); break;
		case 'x': a->seed = strtoull(optarg, NULL, 10); break;
		default: return -1;
		}
	}
	if (!a->raw_dir || !a->h5_dir || a->sources < 2 || a->sources > MAX_SOURCES ||
	    (uint64_t)a->max_payload * 20 > FRM_MAX_PAYLOAD_BYTES)
		return -1;
	return 0;
}

/* One event's frames, encoded into buf. */
static uint16_t make_event(const struct args *a, uint64_t id, uint8_t *buf,
			   struct evw_frame *frames, uint64_t *earliest)
{
	uint16_t n = 0;
	size_t used = 0;

	*earliest = UINT64_MAX;
	for (unsigned int s = 0; s < a->sources; s++) {
		uint32_t len = (uint32_t)random() % (a->max_payload + 1);
		struct frm_header h = { .source_id = (uint16_t)s, .run_id = RUN, .event_id = id,
					.sequence = id * 3 + s, .timestamp_ns = 5000000 + id * 1000 + (s * 37) % 11,
					.payload_len = 0 };
		uint8_t *at = buf + used;

		if (id % 7 == 6 && s == 1)
			continue;
		h.payload_len = id % 13 == 12 ? 0 : id % 50 == 49 ? len * 20 : len;
		for (uint32_t i = 0; i < h.payload_len; i++)
			at[FRM_HEADER_BYTES + i] = (uint8_t)random();
		frames[n] = (struct evw_frame){ at, (uint32_t)frm_encode(at, &h, at + FRM_HEADER_BYTES),
						crc_update(0, at + FRM_HEADER_BYTES, h.payload_len) };
		used += frames[n++].frame_bytes;
		if (h.timestamp_ns < *earliest)
			*earliest = h.timestamp_ns;
	}
	return n;
}

int main(int argc, char **argv)
{
	static struct evw_frame frames[MAX_SOURCES];
	struct evw_stats raw_st, h5_st;
	struct args a;
	struct evw *raw;
	struct h5w *h5;
	char err[512];
	int rc = 0;

	if (parse(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: evrecord_both --raw DIR --hdf5 DIR [--events N] [--sources S] "
				"[--max-payload B] [--slice-at ID] [--max-file-bytes B] [--seed N]\n");
		return 2;
	}
	uint8_t *buf = malloc((size_t)MAX_SOURCES * (FRM_HEADER_BYTES + 20u * a.max_payload));
	struct evw_config rc_cfg = { .dir = a.raw_dir, .run = RUN, .builder_id = 1,
				     .sources = (uint16_t)a.sources, .max_file_bytes = a.max_file_bytes,
				     .reserve_bytes = 1, .software = "evrecord_both" };
	struct h5w_config hc = { .dir = a.h5_dir, .run = RUN, .builder_id = 1,
				 .sources = (uint16_t)a.sources, .max_file_bytes = a.max_file_bytes,
				 .reserve_bytes = 1, .software = "evrecord_both", .chunk_bytes = 64u << 10 };

	for (unsigned int i = 0; i < EVF_SHA256_BYTES; i++)
		rc_cfg.config_sha256[i] = hc.config_sha256[i] = (uint8_t)(i * 7 + 1);
	if (buf == NULL || evw_open(&raw, &rc_cfg, NULL, NULL, err, sizeof(err)) != 0 ||
	    h5w_open(&h5, &hc, NULL, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "evrecord_both: %s\n", buf ? err : "out of memory");
		return 1;
	}
	srandom((unsigned)a.seed);
	for (uint64_t id = 100; id < 100 + a.events && rc == 0; id++) {
		struct evw_event ev = { .event_id = id, .frames = frames };

		if (id == a.slice_at && (evw_roll(raw, 1) != 0 || h5w_roll(h5, 1) != 0))
			rc = 1;
		ev.frame_count = make_event(&a, id, buf, frames, &ev.earliest_ns);
		ev.flags = ev.frame_count < a.sources ? EVF_FLAG_INCOMPLETE : 0;
		/* The raw writer keeps the frames until its next flush: flush
		 * it before buf is written again. */
		if (rc == 0 && (evw_add(raw, &ev) != 0 || evw_flush(raw) != 0 || h5w_add(h5, &ev) != 0))
			rc = 1;
	}
	if (evw_close(raw) != 0 || h5w_close(h5) != 0 || rc != 0) {
		fprintf(stderr, "evrecord_both: raw: %s; hdf5: %s\n", evw_error(raw) ? evw_error(raw) : "ok",
			h5w_error(h5) ? h5w_error(h5) : "ok");
		rc = 1;
	}
	evw_stats(raw, &raw_st);
	h5w_stats(h5, &h5_st);
	printf("{\"raw_events\": %" PRIu64 ", \"raw_files\": %" PRIu64 ", \"hdf5_events\": %" PRIu64
	       ", \"hdf5_files\": %" PRIu64 "}\n", raw_st.events_written, raw_st.files_closed,
	       h5_st.events_written, h5_st.files_closed);
	evw_destroy(raw);
	h5w_destroy(h5);
	free(buf);
	return rc;
}
