#include "hub/books.h"

#include "hub/dataview.h"
#include "hub/manager.h"

#include "core/acct.h"
#include "wire/counters.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void books_error(const struct books *bk, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void books_error(const struct books *bk, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	bk->error(bk->ctx, text);
}

uint64_t books_events_generated(const struct books *bk)
{
	if (bk->opt->events != 0)
		return bk->opt->events;
	uint64_t n = 0;
	for (uint16_t s = 0; s < bk->opt->sources; s++) {
		bool found;
		uint64_t v = acct_value(peer_source(bk->peers, s)->report, CNT_GROUP_TOTALS,
					CNT_SOURCE(events), &found);
		if (found && v > n)
			n = v;
		uint64_t announced;
		if (dataview_end_frame(bk->data, s, &announced) && announced > n)
			n = announced;
	}
	return n;
}

/* A source's END frame and its final report agree on its event count. */
static void books_check_end_frames(const struct books *bk)
{
	for (uint16_t s = 0; s < bk->opt->sources; s++) {
		bool found;
		uint64_t v = acct_value(peer_source(bk->peers, s)->report, CNT_GROUP_TOTALS,
					CNT_SOURCE(events), &found);
		uint64_t announced;
		if (dataview_end_frame(bk->data, s, &announced) && found && announced != v)
			books_error(bk, "Source %u's END frame announced %" PRIu64 " events but it reported %" PRIu64,
				 s, announced, v);
	}
}

/* The error counters and statuses in the peers' reports. */
static void books_collect_peer_errors(const struct books *bk)
{
	static const struct {
		enum cnt_reader_source counter;
		const char *what;
	} kinds[] = {
		{ CNT_READER_SOURCE_err_magic, "frames with a bad magic" },
		{ CNT_READER_SOURCE_err_version, "frames with a bad version" },
		{ CNT_READER_SOURCE_err_flags, "frames with bad flags" },
		{ CNT_READER_SOURCE_err_length, "frames with an oversized length" },
		{ CNT_READER_SOURCE_err_crc, "frames with a checksum mismatch" },
		{ CNT_READER_SOURCE_err_run, "frames of another run" },
		{ CNT_READER_SOURCE_err_truncated, "connections closed inside a frame" },
		{ CNT_READER_SOURCE_err_no_end, "connections closed without an END frame" },
		{ CNT_READER_SOURCE_err_after_end, "connections with data after END" },
		{ CNT_READER_SOURCE_err_dropped, "connections dropped because the source was gone" },
		{ CNT_READER_SOURCE_err_idle, "connections given up with no complete frame within the inactivity limit" },
	};
	for (uint32_t r = 0; r < bk->opt->readers; r++) {
		const struct peer *p = peer_reader(bk->peers, r);
		size_t count;
		const uint16_t *sources = dataview_reader_sources(bk->data, r, &count);
		for (size_t i = 0; i < count; i++) {
			char group[CNT_GROUP_BYTES];
			uint16_t sid = sources[i];
			cnt_group_peer(group, CTL_ROLE_SOURCE, sid);
			for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
				const char *counter = cnt_reader_source_names[kinds[k].counter];
				uint64_t v = acct_value(p->report, group, counter, NULL);
				if (v > 0)
					books_error(bk, "Reader %u rejected source %u: %" PRIu64 " %s (%s)", r, sid,
						 v, kinds[k].what, counter);
			}
		}
	}
	for (uint32_t i = 0; i < peer_count(bk->peers); i++) {
		const struct peer *p = peer_at(bk->peers, i);
		if (p->report != NULL && p->report->status != 0)
			books_error(bk, "%s %u (pid %u on %s) ended with errors (status %d); see its log",
				 ctl_role_title(p->role), p->id, p->pid, p->host, p->report->status);
	}
}

void books_check(const struct books *bk)
{
	books_check_end_frames(bk);
	books_collect_peer_errors(bk);
}

/* Every builder that records and reported: its recording's figures, from
 * this process (--role both) or each builder's END report (--role hub).
 * Returns how many. */
static size_t books_recordings(const struct books *bk, struct acct_recording *out)
{
	if (bk->manager == NULL)
		return dataview_recording(bk->data, &out[0]) ? 1 : 0;
	size_t n = 0;
	for (uint32_t k = 0; k < bk->peers->builders; k++) {
		const struct ctl_report *r = peer_builder(bk->peers, k)->report;
		if (r == NULL || acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_recording), NULL) == 0)
			continue;
		out[n++] = (struct acct_recording){
			.builder = k,
			.accepted = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(events_accepted), NULL),
			.written = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_events_written), NULL),
			.unwritten = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_events_unwritten), NULL),
			.unrecorded = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_events_unrecorded), NULL),
			.in_files = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_events_in_files), NULL),
		};
	}
	return n;
}

/* --role hub: what the manager gave each builder and what it reported. */
static void books_builders(const struct books *bk, struct acct_builder *builders)
{
	for (uint32_t k = 0; k < bk->peers->builders; k++) {
		const struct peer *p = peer_builder(bk->peers, k);
		struct evm_builder_view v = { 0 };
		manager_builder_view(bk->manager, k, &v);
		builders[k] = (struct acct_builder){
			.id = k,
			.report = p->report,
			.gone = p->lost && !p->reported,
			.assigned = v.assigned,
			.decided = v.decided,
			.lost = v.lost,
		};
	}
}

void books_account(const struct books *bk, struct acct *a)
{
	uint16_t S = bk->opt->sources;
	uint32_t N = bk->opt->readers;
	const struct ctl_report **source_reports = calloc(S + 1, sizeof *source_reports);
	struct acct_reader *readers = calloc(N + 1, sizeof *readers);
	bool *source_gone = calloc(S + 1, sizeof *source_gone);
	uint64_t *unique_from = calloc(S + 1, sizeof *unique_from);
	uint32_t M = bk->manager != NULL ? bk->peers->builders : 0;
	struct acct_builder *builders = calloc(M + 1, sizeof *builders);
	struct acct_recording *recordings = calloc(M + 1, sizeof *recordings);
	if (source_reports == NULL || readers == NULL || source_gone == NULL || unique_from == NULL ||
	    builders == NULL || recordings == NULL) {
		books_error(bk, "Out of memory for the end-of-run accounting");
		goto out;
	}
	for (uint16_t s = 0; s < S; s++) {
		const struct peer *p = peer_source(bk->peers, s);
		source_reports[s] = p->report;
		source_gone[s] = p->lost && !p->reported;
		unique_from[s] = dataview_unique_from(bk->data, s);
	}
	for (uint32_t r = 0; r < N; r++) {
		const struct peer *p = peer_reader(bk->peers, r);
		readers[r].id = r;
		readers[r].report = p->report;
		readers[r].gone = p->lost && !p->reported;
		readers[r].frames_received_by_builder = dataview_reader_frames(bk->data, r);
		readers[r].sources = dataview_reader_sources(bk->data, r, &readers[r].source_count);
		const struct snapshot_rail *rail;
		readers[r].rails = dataview_reader_rails(bk->data, r, &rail);
		for (uint32_t k = 0; k < readers[r].rails; k++) {
			readers[r].rail_frames_received[k] = rail[k].frames_received;
			readers[r].rail_frames_wrong[k] = rail[k].frames_wrong_rail;
		}
	}
	struct acct_run run = {
		.sources = S,
		.source_reports = source_reports,
		.source_gone = source_gone,
		.unique_from = unique_from,
		.reader_count = N,
		.readers = readers,
		.builder = dataview_counters(bk->data),
		.builder_frames_received = dataview_frames_received(bk->data),
		.builder_count = M,
		.builders = builders,
		.ids_cut_unassigned = M > 0 ? manager_ids_cut_unassigned(bk->manager) : 0,
		.stopped_at_fault = bk->stopped_at_fault,
		.recordings = recordings,
	};
	run.recording_count = books_recordings(bk, recordings);
	if (M > 0)
		books_builders(bk, builders);
	if (acct_compute(&run, a) < 0)
		books_error(bk, "Out of memory for the end-of-run accounting");
	for (size_t i = 0; i < a->violation_count; i++)
		books_error(bk, "%s", a->violations[i].text);
out:
	free(source_reports);
	free(source_gone);
	free(unique_from);
	free(readers);
	free(builders);
	free(recordings);
}
