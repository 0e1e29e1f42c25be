#include "core/acct.h"
#include "core/acct_internal.h"

#include "wire/counters.h"

#include <inttypes.h>
#include <stdio.h>

/* A reader drops frames as lost with a builder only once the hub has told
 * it that builder is lost; frames so dropped in a run where the hub lost no
 * builder mean the reader heard of a loss the hub never declared (a forged
 * or garbled control message), and the run must not end well. */
static int acct_lost_without_lost_builder(struct acct *a, const struct acct_run *run,
					  const struct acct_reader *rd)
{
	for (size_t k = 0; k < run->builder_count; k++)
		if (run->builders[k].gone || run->builders[k].lost > 0)
			return 0;
	const char *name = CNT_READER_SOURCE(frames_lost_builder);
	for (size_t i = 0; i < rd->source_count; i++) {
		char group[CNT_GROUP_BYTES];
		bool found;
		cnt_group_peer(group, CTL_ROLE_SOURCE, rd->sources[i]);
		uint64_t dropped = acct_value(rd->report, group, name, &found);
		if (dropped > 0)
			return acct_violation(a, "Impossible counters: reader %u's %s %s = %" PRIu64 " but the hub lost no builder",
					      rd->id, group, name, dropped);
	}
	return 0;
}

int acct_hops_to_builders(struct acct *a, const struct acct_run *run, const struct acct_reader *rd,
			  uint64_t *lost)
{
	char rgroup[CNT_GROUP_BYTES], bgroup[CNT_GROUP_BYTES], note[128];
	int rc = acct_lost_without_lost_builder(a, run, rd);
	if (rc != 0)
		return rc;
	cnt_group_peer(bgroup, CTL_ROLE_READER, rd->id);
	for (size_t k = 0; k < run->builder_count; k++) {
		const struct acct_builder *b = &run->builders[k];
		cnt_group_peer(rgroup, CTL_ROLE_BUILDER, b->id);
		bool ff, fr;
		uint64_t fwd = acct_value(rd->report, rgroup, CNT_READER_LINK(frames_forwarded), &ff);
		uint64_t got = acct_value(b->report, bgroup, CNT_BUILDER_LINK(frames_received), &fr);
		bool known = ff && fr;
		if (b->report == NULL && b->gone && ff) {
			/* What it last reported is nothing: the rest is lost with it. */
			if (!acct_sum(lost, fwd) || !acct_sum(&a->frames_lost_with_builders, fwd))
				return acct_violation(a, "Impossible counters: the frames lost with the builders overflow 2^64");
			snprintf(note, sizeof note, "builder %u is gone: %" PRIu64 " frames counted as lost with it",
				 b->id, fwd);
			struct acct_equation *e = acct_add(a, fwd, fwd, true, note, ACCT_HOP_READER_BUILDER,
							   rd->id, b->id);
			if (e != NULL)
				snprintf(e->note, sizeof e->note, "%s", note);
			continue;
		}
		if (!ff)
			snprintf(note, sizeof note, "no counters of its link to builder %u from reader %u",
				 b->id, rd->id);
		else
			snprintf(note, sizeof note, "no counters of reader %u's link from builder %u",
				 rd->id, b->id);
		acct_add(a, fwd, got, known, note, ACCT_HOP_READER_BUILDER, rd->id, b->id);
	}
	return 0;
}

/* Builder b's events: the manager's assigned against what it made of them. */
static int acct_builder_assigned(struct acct *a, const struct acct_builder *b, uint64_t *outside)
{
	char note[128], x[96], y[96];
	int rc = 0;
	if (b->report == NULL) {
		/* Gone without a report: "assigned = decided + lost" (its last
		 * token), and those events are in no report. */
		uint64_t sum = b->decided;
		bool fits = acct_sum(&sum, b->lost) && acct_sum(outside, sum);
		snprintf(note, sizeof note, b->gone ? "builder %u is gone: its last token's decided + lost"
						    : "no final counters from builder %u", b->id);
		struct acct_equation *e = acct_add(a, b->assigned, sum, b->gone && fits, note,
						   ACCT_BUILDER_ASSIGNED, b->id);
		if (e != NULL && b->gone)
			snprintf(e->note, sizeof e->note, "%s", note);
		return 0;
	}
	bool fc, fe, fu, fa;
	uint64_t done = acct_value(b->report, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(events_complete), &fc);
	bool fits = acct_sum(&done, acct_value(b->report, CNT_GROUP_TOTALS,
					       CNT_BUILDER_CORE(events_expired), &fe)) &&
		    acct_sum(&done, acct_value(b->report, CNT_GROUP_TOTALS,
					       CNT_BUILDER_CORE(events_unobserved), &fu));
	uint64_t own = acct_value(b->report, CNT_GROUP_TOTALS, CNT_BUILDER_ROLE(events_assigned), &fa);
	snprintf(x, sizeof x, "builder %u's last token's decided", b->id);
	snprintf(y, sizeof y, "its %s + %s + %s", CNT_BUILDER_CORE(events_complete),
		 CNT_BUILDER_CORE(events_expired), CNT_BUILDER_CORE(events_unobserved));
	rc = acct_check_le(a, x, b->decided, true, y, done, fc && fe && fu && fits);
	if (rc == 0 && fa && own != b->assigned)
		rc = acct_violation(a, "Impossible counters: builder %u's %s = %" PRIu64 " but the event manager assigned it %" PRIu64,
				    b->id, CNT_BUILDER_ROLE(events_assigned), own, b->assigned);
	uint64_t rhs = done;
	fits = acct_sum(&rhs, b->lost) && acct_sum(outside, b->lost) && fits;
	acct_add(a, b->assigned, rhs, fc && fe && fu && fits,
		 fits ? "counters missing from the builder's report" : ACCT_OVERFLOW_NOTE,
		 ACCT_BUILDER_ASSIGNED, b->id);
	return rc;
}

int acct_builders(struct acct *a, const struct acct_run *run, uint64_t ids, bool ids_known,
		  uint64_t *outside)
{
	*outside = 0;
	if (run->builder_count == 0)
		return 0;
	uint64_t assigned = 0;
	bool fits = true;
	int rc = 0;
	for (size_t k = 0; k < run->builder_count && rc == 0; k++) {
		const struct acct_builder *b = &run->builders[k];
		fits = acct_sum(&assigned, b->assigned) && fits;
		fits = acct_sum(&a->lost_with_builders, b->lost) && fits;
		rc = acct_builder_assigned(a, b, outside);
		bool found;
		uint64_t misrouted = acct_value(b->report, CNT_GROUP_TOTALS,
						CNT_BUILDER_ROLE(frags_misrouted), &found);
		char note[96];
		snprintf(note, sizeof note, "no final counters from builder %u", b->id);
		/* A builder gone without a report misrouted nothing anyone saw. */
		acct_add(a, misrouted, 0, found || (b->gone && b->report == NULL), note,
			 ACCT_BUILDER_MISROUTED, b->id);
	}
	/* IDs a drained stop cut before they were assigned are in no
	 * builder's books but are accounted for. */
	fits = acct_sum(&assigned, run->ids_cut_unassigned) &&
	       acct_sum(outside, run->ids_cut_unassigned) && fits;
	acct_add(a, assigned, ids, fits && ids_known,
		 fits ? "sources' event counts missing or disagreeing" : ACCT_OVERFLOW_NOTE,
		 ACCT_RUN_ASSIGNED);
	return rc;
}
