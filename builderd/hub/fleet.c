#include "hub/fleet.h"

#include "data/output.h"
#include "snapshot.h"

#include "core/acct.h"
#include "sys/log.h"
#include "wire/counters.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prefixes of a builder's END groups of unique fragments per source
 * and of latency buckets (docs/BUILDERS.md), and their counters' letters:
 * group "unique.K" counter "s<source>", group "hist.K" counter "b<bucket>".
 * K only numbers the groups (48 counters each); the counter names the
 * source or bucket. */
#define FLEET_UNIQUE_PREFIX "unique."
#define FLEET_HIST_PREFIX CNT_GROUP_LATENCY "."

struct fleet_reader {
	bool claimed;
	uint16_t sources[CTL_MAX_SOURCE_LIST];
	size_t source_count;
};

struct fleet {
	const struct options *opt;
	const struct peer_table *peers;
	struct fleet_reader *readers;    /* [readers] */
	int32_t *reader_of_source;       /* [sources], -1 unknown */
	uint64_t *unique_from;           /* [sources], summed over builders */
	uint64_t *reader_frames;         /* [readers], summed over builders */
	struct bld_counters core;        /* summed over builders */
	uint64_t own[CNT_BUILDER_COUNT]; /* builderd's own counters, summed */
	uint64_t frames_received;
	struct hist latency;             /* merged */
	struct output_uncertainty uncertainty;   /* the largest; records summed */
	uint64_t build_span_ns;          /* the longest builder's */
};

struct fleet *fleet_create(const struct options *opt, const struct peer_table *peers)
{
	struct fleet *f = calloc(1, sizeof *f);
	if (f == NULL)
		return NULL;
	f->opt = opt;
	f->peers = peers;
	f->readers = calloc(opt->readers + 1, sizeof *f->readers);
	f->reader_of_source = calloc(opt->sources + 1, sizeof *f->reader_of_source);
	f->unique_from = calloc(opt->sources + 1, sizeof *f->unique_from);
	f->reader_frames = calloc(opt->readers + 1, sizeof *f->reader_frames);
	if (!f->readers || !f->reader_of_source || !f->unique_from || !f->reader_frames) {
		fleet_destroy(f);
		return NULL;
	}
	for (uint16_t s = 0; s < opt->sources; s++)
		f->reader_of_source[s] = -1;
	hist_reset(&f->latency);
	return f;
}

void fleet_destroy(struct fleet *f)
{
	if (f == NULL)
		return;
	free(f->readers);
	free(f->reader_of_source);
	free(f->unique_from);
	free(f->reader_frames);
	free(f);
}

void fleet_claim(struct fleet *f, const struct ctl_hello *h)
{
	if (h->id >= f->opt->readers || f->readers[h->id].claimed)
		return;
	for (uint32_t i = 0; i < h->source_count; i++) {
		uint16_t s = h->sources[i];
		if (s >= f->opt->sources || f->reader_of_source[s] >= 0) {
			log_warn("Reader %u claims source %u, which is %s; its sources are not booked to it",
				 h->id, s, s >= f->opt->sources ? "not in the run" : "another reader's");
			return;
		}
	}
	struct fleet_reader *rd = &f->readers[h->id];
	rd->claimed = true;
	rd->source_count = h->source_count;
	for (uint32_t i = 0; i < h->source_count; i++) {
		rd->sources[i] = h->sources[i];
		f->reader_of_source[h->sources[i]] = (int32_t)h->id;
	}
}

/* "<letter><number>" within limit: the number. */
static bool fleet_numbered(const char *name, char letter, uint64_t limit, uint64_t *n)
{
	if (name[0] != letter || name[1] < '0' || name[1] > '9')
		return false;
	char *end;
	unsigned long long v = strtoull(name + 1, &end, 10);
	if (*end != '\0' || v >= limit)
		return false;
	*n = v;
	return true;
}

static void fleet_add_groups(struct fleet *f, const struct ctl_report *r)
{
	size_t up = strlen(FLEET_UNIQUE_PREFIX), hp = strlen(FLEET_HIST_PREFIX);
	for (uint32_t g = 0; g < r->group_count; g++) {
		const struct ctl_group *gr = &r->groups[g];
		bool unique = strncmp(gr->name, FLEET_UNIQUE_PREFIX, up) == 0;
		bool hist = strncmp(gr->name, FLEET_HIST_PREFIX, hp) == 0;
		for (uint32_t c = 0; c < gr->count && (unique || hist); c++) {
			uint64_t n;
			if (unique && fleet_numbered(gr->counters[c].name, 's', f->opt->sources, &n))
				f->unique_from[n] += gr->counters[c].value;
			else if (hist && fleet_numbered(gr->counters[c].name, 'b', HIST_BUCKETS, &n))
				f->latency.counts[n] += gr->counters[c].value;
		}
	}
}

void fleet_report_latency(const struct ctl_report *r, struct hist *h, struct output_uncertainty *u)
{
	hist_reset(h);
	size_t hp = strlen(FLEET_HIST_PREFIX);
	for (uint32_t g = 0; r != NULL && g < r->group_count; g++) {
		const struct ctl_group *gr = &r->groups[g];
		bool hist = strncmp(gr->name, FLEET_HIST_PREFIX, hp) == 0;
		for (uint32_t c = 0; hist && c < gr->count; c++) {
			uint64_t n;
			if (fleet_numbered(gr->counters[c].name, 'b', HIST_BUCKETS, &n))
				h->counts[n] += gr->counters[c].value;
		}
	}
	h->samples = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_samples), NULL);
	h->sum = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_sum_ns), NULL);
	h->max = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_max_ns), NULL);
	if (h->samples > 0)
		h->min = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_min_ns), NULL);
	uint64_t unc = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_uncertainty_max_ns), NULL);
	*u = (struct output_uncertainty){
		.max_ns = unc > INT64_MAX ? INT64_MAX : (int64_t)unc,
		.bounded = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_bounded), NULL),
		.unbounded = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_unbounded), NULL),
	};
}

/* The latency's totals: group "hist". A percentile of the merged records
 * is within the largest builder's uncertainty of the truth. */
static void fleet_add_latency(struct fleet *f, const struct ctl_report *r)
{
	uint64_t unc = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_uncertainty_max_ns), NULL);
	if (unc > (uint64_t)f->uncertainty.max_ns)
		f->uncertainty.max_ns = unc > INT64_MAX ? INT64_MAX : (int64_t)unc;
	f->uncertainty.bounded += acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_bounded), NULL);
	f->uncertainty.unbounded +=
		acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_unbounded), NULL);
	uint64_t samples = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_samples), NULL);
	if (samples == 0)
		return;
	uint64_t min = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_min_ns), NULL);
	uint64_t max = acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_max_ns), NULL);
	f->latency.samples += samples;
	f->latency.sum += acct_value(r, CNT_GROUP_LATENCY, CNT_LATENCY(hist_sum_ns), NULL);
	if (min < f->latency.min)
		f->latency.min = min;
	if (max > f->latency.max)
		f->latency.max = max;
}

static void fleet_add(struct fleet *f, const struct ctl_report *r)
{
#define FLEET_ADD_CORE(name) f->core.name += acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(name), NULL);
	CNT_LIST_BUILDER_CORE(FLEET_ADD_CORE)
#undef FLEET_ADD_CORE
	for (unsigned i = 0; i < CNT_BUILDER_COUNT; i++)
		f->own[i] += acct_value(r, CNT_GROUP_TOTALS, cnt_builder_names[i], NULL);
	uint64_t span = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_ROLE(build_span_ns), NULL);
	if (span > f->build_span_ns)
		f->build_span_ns = span;
	for (uint32_t rd = 0; rd < f->opt->readers; rd++) {
		char group[CNT_GROUP_BYTES];
		cnt_group_peer(group, CTL_ROLE_READER, rd);
		uint64_t v = acct_value(r, group, CNT_BUILDER_LINK(frames_received), NULL);
		f->reader_frames[rd] += v;
		f->frames_received += v;
	}
	fleet_add_groups(f, r);
	fleet_add_latency(f, r);
}

void fleet_update(struct fleet *f)
{
	memset(&f->core, 0, sizeof f->core);
	memset(f->own, 0, sizeof f->own);
	memset(f->unique_from, 0, f->opt->sources * sizeof *f->unique_from);
	memset(f->reader_frames, 0, f->opt->readers * sizeof *f->reader_frames);
	f->frames_received = 0;
	f->uncertainty = (struct output_uncertainty){ 0 };
	f->build_span_ns = 0;
	hist_reset(&f->latency);
	for (uint32_t b = 0; b < f->peers->builders; b++) {
		const struct peer *p = peer_builder(f->peers, b);
		if (p->report != NULL)
			fleet_add(f, p->report);
	}
}

bool fleet_all_in(const struct fleet *f)
{
	for (uint32_t b = 0; b < f->peers->builders; b++) {
		const struct peer *p = peer_builder(f->peers, b);
		if (!p->reported && !p->lost)
			return false;
	}
	return true;
}

uint64_t fleet_builder_value(const struct fleet *f, uint32_t b, const char *name)
{
	return acct_value(peer_builder(f->peers, b)->report, CNT_GROUP_TOTALS, name, NULL);
}

/* ---- the view ----------------------------------------------------------- */

/* The hub holds no data path: a reader's is up while its control link is,
 * and over once it reported or was lost. */
static enum ingest_data_state fleet_reader_state(const void *ctx, uint32_t r)
{
	const struct fleet *f = ctx;
	const struct peer *p = peer_reader(f->peers, r);
	if (p->lost)
		return INGEST_DATA_FAILED;
	if (p->reported)
		return INGEST_DATA_CLOSED;
	return p->connected ? INGEST_DATA_STREAMING : INGEST_DATA_WAITING;
}

/* Known once every builder has reported or is lost; until then UINT64_MAX,
 * so that the watchdog never takes a reader for stuck on a sum not yet
 * complete. */
static uint64_t fleet_reader_frames(const void *ctx, uint32_t r)
{
	const struct fleet *f = ctx;
	return fleet_all_in(f) ? f->reader_frames[r] : UINT64_MAX;
}

static const uint16_t *fleet_reader_sources(const void *ctx, uint32_t r, size_t *count)
{
	const struct fleet *f = ctx;
	*count = f->readers[r].source_count;
	return f->readers[r].sources;
}

static int32_t fleet_reader_of_source(const void *ctx, uint16_t s)
{
	const struct fleet *f = ctx;
	return s < f->opt->sources ? f->reader_of_source[s] : -1;
}

static void fleet_cut(void *ctx, uint32_t r)
{
	(void)ctx;
	(void)r;   /* the readers' data paths end at the builders */
}

static bool fleet_end_frame(const void *ctx, uint16_t s, uint64_t *events)
{
	(void)ctx;
	(void)s;
	(void)events;
	return false;   /* END frames reach the builders, not the hub */
}

static uint64_t fleet_unique_from(const void *ctx, uint16_t s)
{
	const struct fleet *f = ctx;
	return f->unique_from[s];
}

static uint64_t fleet_frames_received(const void *ctx)
{
	const struct fleet *f = ctx;
	return f->frames_received;
}

static const struct bld_counters *fleet_counters(const void *ctx)
{
	const struct fleet *f = ctx;
	return &f->core;
}

static const struct dataview_ops fleet_ops = {
	.reader_state = fleet_reader_state,
	.reader_frames = fleet_reader_frames,
	.reader_sources = fleet_reader_sources,
	.reader_of_source = fleet_reader_of_source,
	.cut = fleet_cut,
	.end_frame = fleet_end_frame,
	.unique_from = fleet_unique_from,
	.frames_received = fleet_frames_received,
	.counters = fleet_counters,
};

void fleet_view(struct fleet *f, struct dataview *d)
{
	*d = (struct dataview){ .ops = &fleet_ops, .ctx = f };
}

void fleet_snapshot(const struct fleet *f, struct snapshot *s)
{
	s->frames_read = f->own[CNT_BUILDER_frames_read];
	s->builder = f->core;
	s->oldest_pending = UINT64_MAX;
	if (s->running)   /* what the builders yet to report said in their last STATS */
		for (uint32_t b = 0; b < f->peers->builders; b++) {
			const struct peer *p = peer_builder(f->peers, b);
			if (p->report != NULL || !p->live.seen)
				continue;
			s->builder.events_complete += p->live.events_complete;
			s->builder.events_expired += p->live.events_expired;
			s->builder.events_accepted += p->live.events_accepted;
		}
	s->latency = &f->latency;
	s->fleet_uncertainty = &f->uncertainty;
	s->build_span_ns = f->build_span_ns;
	s->events_written = f->own[CNT_BUILDER_events_written];
	s->record_writes = f->own[CNT_BUILDER_record_writes];
	s->negative_latencies = f->own[CNT_BUILDER_negative_latencies];
	s->data_files = f->own[CNT_BUILDER_data_files];
	s->data_events_written = f->own[CNT_BUILDER_data_events_written];
	s->data_bytes_written = f->own[CNT_BUILDER_data_bytes_written];
	s->data_events_unwritten = f->own[CNT_BUILDER_data_events_unwritten];
	s->data_events_unrecorded = f->own[CNT_BUILDER_data_events_unrecorded];
	s->data_write_ns = f->own[CNT_BUILDER_data_write_ns];
	s->data_sync_calls = f->own[CNT_BUILDER_data_sync_calls];
	s->data_events_in_files = f->own[CNT_BUILDER_data_events_in_files];
	s->data_recording = f->own[CNT_BUILDER_data_recording];
	s->data_direct_bytes = f->own[CNT_BUILDER_data_direct_bytes];
	s->data_frames_in_place = f->own[CNT_BUILDER_data_frames_in_place];
	s->data_frames_copied_late = f->own[CNT_BUILDER_data_frames_copied_late];
	struct snapshot_link *links = (struct snapshot_link *)s->links;
	for (uint32_t r = 0; r < f->opt->readers; r++)
		links[r] = (struct snapshot_link){
			.transport = "none",
			.address = "",
			.frames_received = f->reader_frames[r],
			.sources = f->readers[r].sources,
			.source_count = f->readers[r].source_count,
		};
}
