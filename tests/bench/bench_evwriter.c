/* An event writer alone, the raw format's (common/sys/evwriter.c) or, with
 * --format hdf5, HDF5's (common/sys/h5writer.c): events of S frames of N
 * payload bytes, unpaced, into DIR, files rolled at --max-file-bytes and
 * closed crash-safe; prints one JSON line with the bytes, the wall and CPU
 * seconds, GB/s (of the bytes written and of the events' frames, the same
 * in both formats), CPU ns per byte and per event, and the writer's own
 * write and sync time. The frames sit in one slab, as a receive buffer or
 * ring would hold them; their payload CRCs are computed once beforehand,
 * as the frame decoder has them for free. analysis/bench_record.py runs it
 * beside a dd baseline of the same file system (make bench-record).
 *
 *   bench_evwriter --dir D [--sources 4] [--payload 16384] [--events 20000]
 *                  [--max-file-bytes 1073741824] [--sync close|batch|never]
 *                  [--format raw|hdf5] [--chunk-bytes B]   (hdf5: payload chunk)
 *                  [--keep]   (files are removed after the run otherwise) */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sys/evwriter.h"
#include "sys/h5writer.h"
#include "wire/crc.h"
#include "wire/frame.h"

#define MAX_SOURCES 64u
#define SLAB_EVENTS 64u   /* distinct events in the slab, reused round robin */

struct bench_args {
	const char *dir;
	unsigned int sources;
	uint32_t payload;
	uint64_t events;
	uint64_t max_file_bytes;
	enum evw_sync sync;
	int keep;
	int hdf5;
	uint32_t chunk_bytes;
	int direct;
};

static double now_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static int parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' }, { "sources", required_argument, NULL, 's' },
		{ "payload", required_argument, NULL, 'p' }, { "events", required_argument, NULL, 'e' },
		{ "max-file-bytes", required_argument, NULL, 'm' },
		{ "sync", required_argument, NULL, 'y' }, { "keep", no_argument, NULL, 'k' },
		{ "format", required_argument, NULL, 'f' },
		{ "chunk-bytes", required_argument, NULL, 'c' },
		{ "direct", no_argument, NULL, 'b' }, { NULL, 0, NULL, 0 } };
	int c;

	*a = (struct bench_args){ NULL, 4, 16384, 20000, 1ull << 30, EVW_SYNC_CLOSE, 0, 0, 0, 0 };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a->dir = optarg; break;
		case 's': a->sources = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p': a->payload = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'e': a->events = strtoull(optarg, NULL, 10); break;
		case 'm': a->max_file_bytes = strtoull(optarg, NULL, 10); break;
		case 'k': a->keep = 1; break;
		case 'b': a->direct = 1; break;
		case 'c': a->chunk_bytes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f':
			if (strcmp(optarg, "raw") != 0 && strcmp(optarg, "hdf5") != 0)
				return -1;
			a->hdf5 = strcmp(optarg, "hdf5") == 0;
			break;
		case 'y':
			if (strcmp(optarg, "close") == 0)
				a->sync = EVW_SYNC_CLOSE;
			else if (strcmp(optarg, "batch") == 0)
				a->sync = EVW_SYNC_BATCH;
			else if (strcmp(optarg, "never") == 0)
				a->sync = EVW_SYNC_NEVER;
			else
				return -1;
			break;
		default: return -1;
		}
	}
	if (a->dir == NULL || a->sources == 0 || a->sources > MAX_SOURCES ||
	    a->payload > FRM_MAX_PAYLOAD_BYTES || a->events == 0)
		return -1;
	return 0;
}

/* SLAB_EVENTS events of S frames, encoded one after the other. */
static uint8_t *make_slab(const struct bench_args *a, struct evw_frame *frames)
{
	size_t frame_bytes = FRM_HEADER_BYTES + a->payload;
	uint8_t *slab = malloc(frame_bytes * a->sources * SLAB_EVENTS);

	if (slab == NULL)
		return NULL;
	for (unsigned int e = 0; e < SLAB_EVENTS; e++) {
		for (unsigned int s = 0; s < a->sources; s++) {
			uint8_t *at = slab + (e * a->sources + s) * frame_bytes;
			struct frm_header h = { .source_id = (uint16_t)s, .run_id = 1, .event_id = e,
						.timestamp_ns = 1, .payload_len = a->payload };

			for (uint32_t i = 0; i < a->payload; i++)
				at[FRM_HEADER_BYTES + i] = (uint8_t)(e * 131 + s * 17 + i);
			frm_encode(at, &h, at + FRM_HEADER_BYTES);
			frames[e * a->sources + s] = (struct evw_frame){
				at, (uint32_t)frame_bytes,
				crc_update(0, at + FRM_HEADER_BYTES, a->payload) };
		}
	}
	return slab;
}

/* The two writers behind one face, so both run the same loop. */
struct bench_writer {
	struct evw *raw;
	struct h5w *h5;
};

static int writer_open(struct bench_writer *bw, const struct bench_args *a, char *err, size_t size)
{
	if (a->hdf5) {
		struct h5w_config c = { .dir = a->dir, .run = 1, .sources = (uint16_t)a->sources,
					.max_file_bytes = a->max_file_bytes, .reserve_bytes = 1,
					.sync = a->sync, .software = "bench_evwriter",
					.chunk_bytes = a->chunk_bytes };

		return h5w_open(&bw->h5, &c, NULL, NULL, err, size);
	}
	struct evw_config c = { .dir = a->dir, .run = 1, .sources = (uint16_t)a->sources,
				.max_file_bytes = a->max_file_bytes, .reserve_bytes = 1,
				.sync = a->sync, .software = "bench_evwriter",
				.direct = a->direct != 0 };

	return evw_open(&bw->raw, &c, NULL, NULL, err, size);
}

static int writer_add(struct bench_writer *bw, const struct evw_event *ev)
{
	return bw->h5 ? h5w_add(bw->h5, ev) : evw_add(bw->raw, ev);
}

static int writer_close(struct bench_writer *bw, struct evw_stats *st, const char **error)
{
	int rc = bw->h5 ? h5w_close(bw->h5) : evw_close(bw->raw);

	if (bw->h5)
		h5w_stats(bw->h5, st);
	else
		evw_stats(bw->raw, st);
	*error = bw->h5 ? h5w_error(bw->h5) : evw_error(bw->raw);
	return rc;
}

static void writer_destroy(struct bench_writer *bw)
{
	h5w_destroy(bw->h5);
	evw_destroy(bw->raw);
}

static void print_result(const struct bench_args *a, const struct evw_stats *st, double wall,
			 double cpu)
{
	double frame_bytes = (double)st->events_written * a->sources * (FRM_HEADER_BYTES + a->payload);

	printf("{\"format\": \"%s\", \"sources\": %u, \"payload\": %" PRIu32 ", \"event_count\": %" PRIu64
	       ", \"bytes\": %" PRIu64 ", \"frame_bytes\": %.0f, \"files\": %" PRIu64 ", \"wall_s\": %.6f"
	       ", \"cpu_s\": %.6f, \"gb_per_s\": %.4f, \"frame_gb_per_s\": %.4f"
	       ", \"cpu_ns_per_byte\": %.4f, \"cpu_ns_per_frame_byte\": %.4f, \"cpu_ns_per_event\": %.1f"
	       ", \"events_per_s\": %.0f, \"write_s\": %.6f, \"sync_s\": %.6f, \"writes\": %" PRIu64
	       ", \"sync\": \"%s\", \"chunk_bytes\": %" PRIu32 ", \"direct_bytes\": %" PRIu64 "}\n",
	       a->hdf5 ? "hdf5" : "raw", a->sources, a->payload, st->events_written, st->bytes_written,
	       frame_bytes, st->files_closed, wall, cpu, st->bytes_written / wall / 1e9,
	       frame_bytes / wall / 1e9, cpu * 1e9 / (double)st->bytes_written, cpu * 1e9 / frame_bytes,
	       cpu * 1e9 / (double)st->events_written, st->events_written / wall, st->write_ns / 1e9,
	       st->sync_ns / 1e9, st->write_calls,
	       a->sync == EVW_SYNC_CLOSE ? "close" : a->sync == EVW_SYNC_BATCH ? "batch" : "never",
	       a->hdf5 ? (a->chunk_bytes ? a->chunk_bytes : H5W_DEFAULT_CHUNK_BYTES) : 0,
	       st->direct_bytes);
}

int main(int argc, char **argv)
{
	static struct evw_frame frames[SLAB_EVENTS * MAX_SOURCES];
	struct bench_writer bw = { NULL, NULL };
	struct bench_args a;
	struct evw_stats st;
	const char *error;
	char err[512];

	if (parse(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: bench_evwriter --dir DIR [--sources S] [--payload BYTES] "
				"[--events N] [--max-file-bytes B] [--sync close|batch|never] "
				"[--format raw|hdf5] [--chunk-bytes B] [--keep]\n");
		return 2;
	}
	uint8_t *slab = make_slab(&a, frames);

	if (slab == NULL || writer_open(&bw, &a, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_evwriter: %s\n", slab ? err : "out of memory");
		return 1;
	}
	double t0 = now_s(CLOCK_MONOTONIC), c0 = cpu_s();
	for (uint64_t id = 0; id < a.events; id++) {
		/* The slab's frames carry its event numbers, which the HDF5
		 * writer checks against the event's; the writers never require
		 * increasing IDs. */
		struct evw_event ev = { .event_id = id % SLAB_EVENTS, .earliest_ns = 1,
					.frame_count = (uint16_t)a.sources,
					.frames = &frames[(id % SLAB_EVENTS) * a.sources] };

		if (writer_add(&bw, &ev) != 0)
			break;
	}
	int rc = writer_close(&bw, &st, &error);
	double wall = now_s(CLOCK_MONOTONIC) - t0, cpu = cpu_s() - c0;

	if (rc != 0)
		fprintf(stderr, "bench_evwriter: %s\n", error ? error : "failed");
	print_result(&a, &st, wall, cpu);
	writer_destroy(&bw);
	free(slab);
	if (!a.keep) {
		char cmd[1024];

		snprintf(cmd, sizeof(cmd), "rm -f '%s'/run*_b0_*.dat '%s'/run*_b0_*.dat.json "
			 "'%s'/run*_b0_*.h5 '%s'/run*_b0_*.h5.json", a.dir, a.dir, a.dir, a.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench_evwriter: could not remove the files in %s\n", a.dir);
	}
	return rc == 0 ? 0 : 1;
}
