#include "core/acct.h"
#include "core/acct_internal.h"

#include "wire/counters.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool acct_sum3(uint64_t *sum, uint64_t x, uint64_t y, uint64_t z)
{
	*sum = x;
	return acct_sum(sum, y) && acct_sum(sum, z);
}

uint64_t acct_events_generated(const struct acct_run *run, bool *agree)
{
	uint64_t events = 0;
	bool any = false;
	*agree = true;
	for (uint16_t s = 0; s < run->sources; s++) {
		bool found;
		uint64_t v = acct_value(run->source_reports[s], CNT_GROUP_TOTALS, CNT_SOURCE(events),
					&found);
		if (!found) {
			if (run->source_gone == NULL || !run->source_gone[s])
				*agree = false;
			continue;
		}
		if (any && v != events)
			*agree = false;
		if (v > events)
			events = v;
		any = true;
	}
	*agree = *agree && any;
	return events;
}

static const struct acct_reader *acct_reader_of(const struct acct_run *run, uint16_t source)
{
	for (size_t r = 0; r < run->reader_count; r++)
		for (size_t i = 0; i < run->readers[r].source_count; i++)
			if (run->readers[r].sources[i] == source)
				return &run->readers[r];
	return NULL;
}

/* Every counter of a list in one group of a report, by the list's index:
 * its value (0 when absent) and whether it was there. */
static void acct_read(const struct ctl_report *r, const char *group, const char *const *names,
		      size_t count, uint64_t *v, bool *found)
{
	for (size_t i = 0; i < count; i++)
		v[i] = acct_value(r, group, names[i], &found[i]);
}

/* A source's final counters (CNT_LIST_SOURCE). */
struct acct_src {
	uint64_t v[CNT_SOURCE_COUNT];
	bool f[CNT_SOURCE_COUNT];
};

/* A reader's counters of one source (CNT_LIST_READER_SOURCE), in its
 * group "source.N". */
struct acct_hop {
	char group[CNT_GROUP_BYTES];
	uint64_t v[CNT_READER_SOURCE_COUNT];
	bool f[CNT_READER_SOURCE_COUNT];
};

/* The sums over every source of equation 2's two sides. */
struct acct_totals {
	uint64_t wire, received;
	bool wire_known, received_known, fit;
};

/* What the sources agree they generated. */
struct acct_generated {
	uint64_t ids;
	bool agree;
};

#define HOP(name) CNT_READER_SOURCE_##name

/* Reads a reader's counters of source s and checks the relations between
 * them: the hop equation's parts are each at most what was received, what
 * was forwarded or held was verified first, and a stream has one END. */
static int acct_read_hop(struct acct *a, const struct acct_reader *rd, uint16_t s,
			 struct acct_hop *h)
{
	static const struct {
		enum cnt_reader_source small, big;
	} le[] = {
		{ HOP(frames_forwarded), HOP(frames_received) },
		{ HOP(frames_rejected), HOP(frames_received) },
		{ HOP(frames_held_at_end), HOP(frames_received) },
		{ HOP(frames_verified), HOP(frames_received) },
		{ HOP(frames_held_at_end), HOP(frames_verified) },
		{ HOP(frames_forwarded), HOP(frames_verified) },
	};
	const struct ctl_report *r = rd != NULL ? rd->report : NULL;
	cnt_group_peer(h->group, CTL_ROLE_SOURCE, s);
	acct_read(r, h->group, cnt_reader_source_names, CNT_READER_SOURCE_COUNT, h->v, h->f);
	if (r == NULL)
		return 0;
	char x[96], y[96];
	int rc = 0;
	for (size_t i = 0; i < sizeof le / sizeof le[0] && rc == 0; i++) {
		snprintf(x, sizeof x, "reader %u's %s %s", rd->id, h->group,
			 cnt_reader_source_names[le[i].small]);
		snprintf(y, sizeof y, "reader %u's %s %s", rd->id, h->group,
			 cnt_reader_source_names[le[i].big]);
		rc = acct_check_le(a, x, h->v[le[i].small], h->f[le[i].small], y, h->v[le[i].big],
				   h->f[le[i].big]);
	}
	snprintf(x, sizeof x, "reader %u's %s %s", rd->id, h->group, CNT_READER_SOURCE(end_frames));
	if (rc == 0)
		rc = acct_check_le(a, x, h->v[HOP(end_frames)], h->f[HOP(end_frames)],
				   "one per stream", 1, true);
	return rc;
}

/* The hop equation of one source at its reader. */
static int acct_hop_equation(struct acct *a, const struct acct_reader *rd, uint16_t s,
			     const struct acct_hop *h)
{
	char note[128];
	uint64_t parts;
	/* Late and lost with a builder: 0, and absent, with one builder. */
	bool fits = acct_sum3(&parts, h->v[HOP(frames_forwarded)], h->v[HOP(frames_rejected)],
			      h->v[HOP(frames_held_at_end)]) &&
		    acct_sum3(&parts, parts, h->v[HOP(frames_late)], h->v[HOP(frames_lost_builder)]);
	bool found = h->f[HOP(frames_received)] && h->f[HOP(frames_forwarded)] &&
		     h->f[HOP(frames_rejected)] && h->f[HOP(frames_held_at_end)];
	if (found)
		snprintf(note, sizeof note, "%s", ACCT_OVERFLOW_NOTE);
	else
		snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
	acct_add(a, h->v[HOP(frames_received)], parts, found && fits, note, ACCT_HOP_SOURCE, rd->id, s);
	if (found && !fits)
		return acct_violation(a, "Impossible counters: reader %u's %s %s + %s + %s overflows 2^64",
				      rd->id, h->group, CNT_READER_SOURCE(frames_forwarded),
				      CNT_READER_SOURCE(frames_rejected),
				      CNT_READER_SOURCE(frames_held_at_end));
	return 0;
}

#define SRC(name) CNT_SOURCE_##name

/* A source's own counters against each other: what it sent, omitted,
 * abandoned or delayed is part of what it generated, a duplicate is a copy
 * of a sent fragment, and every frame on the wire is a fragment sent, its
 * copy or the injected bad frame. */
static int acct_check_source(struct acct *a, uint16_t s, const struct acct_src *c)
{
	static const struct {
		enum cnt_source small, big;
	} le[] = {
		{ SRC(frags_omitted), SRC(events) },     { SRC(frags_sent), SRC(events) },
		{ SRC(frags_abandoned), SRC(events) },   { SRC(frags_delayed), SRC(events) },
		{ SRC(frags_cut_by_stop), SRC(events) },
		{ SRC(frags_duplicated), SRC(frags_sent) }, { SRC(frames_bad_injected), SRC(frames_wire) },
	};
	const char *const *n = cnt_source_names;
	char x[64], y[64];
	int rc = 0;
	for (size_t i = 0; i < sizeof le / sizeof le[0] && rc == 0; i++) {
		snprintf(x, sizeof x, "source %u's %s", s, n[le[i].small]);
		snprintf(y, sizeof y, "source %u's %s", s, n[le[i].big]);
		rc = acct_check_le(a, x, c->v[le[i].small], c->f[le[i].small], y, c->v[le[i].big],
				   c->f[le[i].big]);
	}
	if (rc != 0 || !c->f[SRC(frames_wire)] || !c->f[SRC(frags_sent)] ||
	    !c->f[SRC(frags_duplicated)] || !c->f[SRC(frames_bad_injected)])
		return rc;
	uint64_t copies;
	const char *sent = n[SRC(frags_sent)], *dup = n[SRC(frags_duplicated)];
	const char *bad = n[SRC(frames_bad_injected)], *wire = n[SRC(frames_wire)];
	if (!acct_sum3(&copies, c->v[SRC(frags_sent)], c->v[SRC(frags_duplicated)],
		       c->v[SRC(frames_bad_injected)]))
		return acct_violation(a, "Impossible counters: source %u's %s + %s + %s overflows 2^64",
				      s, sent, dup, bad);
	if (c->v[SRC(frames_wire)] > copies)
		return acct_violation(a, "Impossible counters: source %u's %s = %" PRIu64 " exceeds its %s + %s + %s = %" PRIu64,
				      s, wire, c->v[SRC(frames_wire)], sent, dup, bad, copies);
	return 0;
}

/* Equation 1 of a source that reported: generated = omitted + sent +
 * abandoned + cut off by the operator's stop, after its counters' own
 * relations. */
static int acct_source_generated(struct acct *a, uint16_t s, const struct acct_src *c)
{
	int rc = acct_check_source(a, s, c);
	uint64_t parts;
	bool fits = acct_sum3(&parts, c->v[SRC(frags_omitted)], c->v[SRC(frags_sent)],
			      c->v[SRC(frags_abandoned)]) &&
		    acct_sum(&parts, c->v[SRC(frags_cut_by_stop)]);
	/* The cut-off is 0, and may be absent, when no drained stop came (a
	 * peer like examples/minimal_source never reports it). */
	bool found = c->f[SRC(events)] && c->f[SRC(frags_omitted)] && c->f[SRC(frags_sent)] &&
		     c->f[SRC(frags_abandoned)];
	char note[128];
	if (found)
		snprintf(note, sizeof note, "%s", ACCT_OVERFLOW_NOTE);
	else
		snprintf(note, sizeof note, "no final counters from source %u", s);
	acct_add(a, c->v[SRC(events)], parts, found && fits, note, ACCT_SOURCE_GENERATED, s);
	if (!acct_sum(&a->cut_by_stop, c->v[SRC(frags_cut_by_stop)]) && rc == 0)
		rc = acct_violation(a, "Impossible counters: the fragments cut by the stop overflow 2^64");
	if (rc == 0 && found && !fits)
		rc = acct_violation(a, "Impossible counters: source %u's %s + %s + %s + %s overflows 2^64",
				    s, CNT_SOURCE(frags_omitted), CNT_SOURCE(frags_sent),
				    CNT_SOURCE(frags_abandoned), CNT_SOURCE(frags_cut_by_stop));
	return rc;
}

/* Equation 2 of a source (frames on the wire = received by its reader),
 * its part of the totals, and its hop at the reader. A reader that is gone
 * without a report has its own equation instead (acct_reader_gone). */
static int acct_source_wire(struct acct *a, uint16_t s, const struct acct_src *c,
			    const struct acct_reader *rd, const struct acct_hop *h,
			    struct acct_totals *t, bool stopped)
{
	uint64_t wire = c->v[SRC(frames_wire)];
	bool fw = c->f[SRC(frames_wire)];
	uint64_t received = h->v[HOP(frames_received)];
	bool fr = h->f[HOP(frames_received)];
	if (rd != NULL && rd->gone && rd->report == NULL)
		return 0;
	/* Stopped for a fault: the reader closed the source with frames
	 * still on their way, which no one read. */
	uint64_t unread = stopped && fw && fr && wire > received ? wire - received : 0;
	if (!acct_sum(&a->unread_at_stop, unread))
		return acct_violation(a, "Impossible counters: the frames unread at the stop overflow 2^64");
	int rc = 0;
	char note[128];
	if (rd != NULL) {
		/* A reader cannot receive more than its source put on the wire. */
		char x[96], y[96];
		snprintf(x, sizeof x, "reader %u's %s %s", rd->id, h->group,
			 CNT_READER_SOURCE(frames_received));
		snprintf(y, sizeof y, "source %u's %s", s, CNT_SOURCE(frames_wire));
		rc = acct_check_le(a, x, received, fr, y, wire, fw);
	}
	if (rd == NULL)
		snprintf(note, sizeof note, "no reader serves source %u", s);
	else if (!fw)
		snprintf(note, sizeof note, "no final counters from source %u", s);
	else
		snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
	acct_add(a, wire, received + unread, fw && fr, note,
		 stopped ? ACCT_SOURCE_WIRE_STOPPED : ACCT_SOURCE_WIRE, s, rd ? rd->id : 0);
	t->fit = acct_sum(&t->wire, wire) && t->fit;
	t->fit = acct_sum(&t->received, received + unread) && t->fit;
	t->wire_known = t->wire_known && fw;
	t->received_known = t->received_known && fr;
	if (rc == 0 && rd != NULL)
		rc = acct_hop_equation(a, rd, s, h);
	return rc;
}

/* A source that died or stalled: the builder knows how many of its
 * fragments it got, once each; the rest of what it generated (omitted,
 * unsent, or lost with it) is the named bucket. Frames its reader saw
 * include duplicates, so they cannot stand in for fragments. */
static int acct_source_gone(struct acct *a, const struct acct_run *run, uint16_t s,
			    const struct acct_generated *g)
{
	uint64_t unique = run->unique_from != NULL ? run->unique_from[s] : 0;
	bool known = run->unique_from != NULL && g->agree && g->ids >= unique;
	uint64_t lost = known ? g->ids - unique : 0;
	int rc = 0;
	if (!acct_sum(&a->lost_with_sources, lost))
		rc = acct_violation(a, "Impossible counters: the fragments lost with the sources overflow 2^64");
	char note[128];
	if (known)
		snprintf(note, sizeof note, "source %u is gone: %" PRIu64 " fragments counted as lost with it",
			 s, lost);
	else
		snprintf(note, sizeof note, "source %u is gone and the other sources' counts are missing", s);
	struct acct_equation *e = acct_add(a, g->ids, unique + lost, known, note, ACCT_SOURCE_GONE, s);
	if (e != NULL && known)
		snprintf(e->note, sizeof e->note, "%s", note);
	return rc;
}

/* Every equation of one source, in README's order. */
static int acct_source(struct acct *a, const struct acct_run *run, uint16_t s,
		       const struct acct_generated *g, struct acct_totals *t)
{
	const struct ctl_report *sr = run->source_reports[s];
	const struct acct_reader *rd = acct_reader_of(run, s);
	struct acct_hop hop;
	int rc = acct_read_hop(a, rd, s, &hop);
	if (rc == 0 && run->unique_from != NULL && rd != NULL) {
		/* The builder cannot build more of a source's fragments than
		 * its reader forwarded. */
		char x[96], y[96];
		snprintf(x, sizeof x, "the builder's unique fragments of source %u", s);
		snprintf(y, sizeof y, "reader %u's %s %s", rd->id, hop.group,
			 CNT_READER_SOURCE(frames_forwarded));
		rc = acct_check_le(a, x, run->unique_from[s], true, y, hop.v[HOP(frames_forwarded)],
				   hop.f[HOP(frames_forwarded)]);
	}
	if (rc != 0)
		return rc;
	if (sr == NULL && run->source_gone != NULL && run->source_gone[s]) {
		rc = acct_source_gone(a, run, s, g);
		if (rc == 0 && rd != NULL && rd->report != NULL)
			rc = acct_hop_equation(a, rd, s, &hop);
		return rc;
	}
	struct acct_src c;
	acct_read(sr, CNT_GROUP_TOTALS, cnt_source_names, CNT_SOURCE_COUNT, c.v, c.f);
	rc = acct_source_generated(a, s, &c);
	if (rc == 0)
		rc = acct_source_wire(a, s, &c, rd, &hop, t, run->stopped_at_fault);
	return rc;
}

/* Equation 2 over every source. */
static int acct_all_wire(struct acct *a, const struct acct_totals *t)
{
	acct_add(a, t->wire, t->received, t->wire_known && t->received_known && t->fit,
		 !t->fit ? ACCT_OVERFLOW_NOTE : "counters missing from a source or a reader",
		 ACCT_ALL_WIRE);
	if (t->fit)
		return 0;
	return acct_violation(a, "Impossible counters: the sources' %s or the readers' %s overflow 2^64 in total",
			      CNT_SOURCE(frames_wire), CNT_READER_SOURCE(frames_received));
}

/* A reader that died or stalled: its sources say what they put on the
 * wire, the builder what arrived; the rest is lost with it. */
static int acct_reader_gone(struct acct *a, const struct acct_run *run, const struct acct_reader *rd)
{
	uint64_t wire = 0;
	bool known = true, fits = true;
	for (size_t i = 0; i < rd->source_count; i++) {
		bool fw;
		fits = acct_sum(&wire, acct_value(run->source_reports[rd->sources[i]], CNT_GROUP_TOTALS,
						  CNT_SOURCE(frames_wire), &fw)) && fits;
		known = known && fw;
	}
	known = known && fits && wire >= rd->frames_received_by_builder;
	uint64_t lost = known ? wire - rd->frames_received_by_builder : 0;
	int rc = 0;
	if (!acct_sum(&a->lost_with_readers, lost))
		rc = acct_violation(a, "Impossible counters: the frames lost with the readers overflow 2^64");
	if (rc == 0 && !fits)
		rc = acct_violation(a, "Impossible counters: the %s of reader %u's sources overflow 2^64 in total",
				    CNT_SOURCE(frames_wire), rd->id);
	char note[128];
	if (known)
		snprintf(note, sizeof note, "reader %u is gone: %" PRIu64 " frames counted as lost with it",
			 rd->id, lost);
	else if (!fits)
		snprintf(note, sizeof note, "reader %u is gone and its sources' counts overflow 2^64", rd->id);
	else
		snprintf(note, sizeof note, "reader %u is gone and a source's counts are missing", rd->id);
	struct acct_equation *e = acct_add(a, wire, rd->frames_received_by_builder + lost, known, note,
					   ACCT_READER_GONE, rd->id);
	if (e != NULL && known)
		snprintf(e->note, sizeof e->note, "%s", note);
	return rc;
}

/* A reader that reported: what it forwarded = what the builder received
 * from it; its total is the sum of its sources' by construction. */
static int acct_reader_to_builder(struct acct *a, const struct acct_reader *rd, uint64_t lost)
{
	const char *fwd_name = CNT_READER_SOURCE(frames_forwarded);
	bool found;
	uint64_t fwd = acct_value(rd->report, CNT_GROUP_TOTALS, fwd_name, &found);
	uint64_t fwd_sum = 0;
	bool all = found, fits = true;
	for (size_t i = 0; i < rd->source_count; i++) {
		char group[CNT_GROUP_BYTES];
		bool f;
		cnt_group_peer(group, CTL_ROLE_SOURCE, rd->sources[i]);
		fits = acct_sum(&fwd_sum, acct_value(rd->report, group, fwd_name, &f)) && fits;
		all = all && f;
	}
	int rc = 0;
	if (all && !fits)
		rc = acct_violation(a, "Impossible counters: reader %u's sources' %s overflow 2^64 in total",
				    rd->id, fwd_name);
	else if (all && fwd != fwd_sum)
		rc = acct_violation(a, "Impossible counters: reader %u's %s = %" PRIu64 " is not the sum of its sources' %s = %" PRIu64,
				    rd->id, fwd_name, fwd, fwd_name, fwd_sum);
	char x[96], y[96], note[128];
	snprintf(x, sizeof x, "the builder's frames received from reader %u", rd->id);
	snprintf(y, sizeof y, "reader %u's %s", rd->id, fwd_name);
	if (rc == 0)
		rc = acct_check_le(a, x, rd->frames_received_by_builder, true, y, fwd, found);
	snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
	acct_add(a, fwd, rd->frames_received_by_builder + lost, found, note, ACCT_HOP_BUILDER, rd->id);
	return rc;
}

#define CORE(name) CNT_BUILDER_CORE_##name
#define CORE_OFFSET_(name) offsetof(struct bld_counters, name),

/* Where each core counter is in struct bld_counters, by its list index. */
static const size_t acct_core_offset[CNT_BUILDER_CORE_COUNT] = {
	CNT_LIST_BUILDER_CORE(CORE_OFFSET_)
};

static uint64_t acct_core(const struct bld_counters *b, enum cnt_builder_core i)
{
	uint64_t v;
	memcpy(&v, (const char *)b + acct_core_offset[i], sizeof v);
	return v;
}

/* The builder's equations: lhs = the sum of its parts, each a core
 * counter. The lhs is a core counter too but for the frames read from the
 * readers and the event IDs the sources generated, which are given. */
#define ACCT_GIVEN CNT_BUILDER_CORE_COUNT
static const struct acct_builder_sum {
	enum acct_kind kind;
	enum cnt_builder_core lhs;        /* or ACCT_GIVEN */
	bool times_sources;               /* the first part counts S times */
	unsigned n_parts;
	enum cnt_builder_core parts[4];
} acct_builder_sums[] = {
	{ ACCT_BUILDER_READ, ACCT_GIVEN, false, 1, { CORE(frags_received) } },
	{ ACCT_RECEIVED, CORE(frags_received), false, 4,
	  { CORE(frags_unique), CORE(frags_duplicate), CORE(frags_late), CORE(frags_invalid) } },
	{ ACCT_UNIQUE, CORE(frags_unique), true, 2, { CORE(events_complete), CORE(frags_in_expired) } },
	{ ACCT_EVENTS, ACCT_GIVEN, false, 3,
	  { CORE(events_complete), CORE(events_expired), CORE(events_unobserved) } },
	{ ACCT_COMPLETE, CORE(events_complete), false, 2, { CORE(events_accepted), CORE(events_filtered) } },
	{ ACCT_EXPIRED, CORE(events_expired), false, 4,
	  { CORE(events_expired_timeout), CORE(events_expired_window), CORE(events_expired_end_of_run),
	    CORE(events_expired_skipped) } },
};

/* The builder's own counters: sums checked all the same, a wrapped sum
 * must never balance. */
static void acct_builder(struct acct *a, const struct acct_run *run, const struct acct_generated *g,
			 uint64_t outside)
{
	const struct bld_counters *b = run->builder;
	uint64_t sources = run->sources ? run->sources : 1;
	for (size_t i = 0; i < sizeof acct_builder_sums / sizeof acct_builder_sums[0]; i++) {
		const struct acct_builder_sum *q = &acct_builder_sums[i];
		uint64_t lhs = q->lhs != ACCT_GIVEN ? acct_core(b, q->lhs)
			       : q->kind == ACCT_EVENTS ? g->ids : run->builder_frames_received;
		uint64_t sum = acct_core(b, q->parts[0]);
		bool fits = true;
		if (q->times_sources) {
			fits = sum <= UINT64_MAX / sources;
			sum = fits ? (uint64_t)run->sources * sum : UINT64_MAX;
		}
		for (unsigned k = 1; k < q->n_parts; k++)
			fits = acct_sum(&sum, acct_core(b, q->parts[k])) && fits;
		bool events = q->kind == ACCT_EVENTS;
		if (events)   /* several builders: what no report holds (lost, or a dead one's) */
			fits = acct_sum(&sum, outside) && fits;
		acct_add(a, lhs, sum, fits && (!events || g->agree),
			 events && fits ? "sources' event counts missing or disagreeing" : ACCT_OVERFLOW_NOTE,
			 q->kind);
	}
}

int acct_compute(const struct acct_run *run, struct acct *a)
{
	a->cap = 4u * run->sources + 2u * run->reader_count + 16u +
		 (run->reader_count + 2u) * run->builder_count +
		 run->reader_count * acct_rails_cap(run) + 2u * run->recording_count;
	a->count = 0;
	a->lost_with_sources = a->lost_with_readers = a->cut_by_stop = 0;
	a->lost_with_builders = a->frames_lost_with_builders = a->unread_at_stop = 0;
	a->violations = NULL;
	a->violation_count = a->violation_cap = 0;
	a->equations = calloc(a->cap, sizeof *a->equations);
	if (a->equations == NULL)
		return -ENOMEM;
	struct acct_generated g;
	g.ids = acct_events_generated(run, &g.agree);
	struct acct_totals t = { .wire_known = true, .received_known = true, .fit = true };
	int rc = 0;
	for (uint16_t s = 0; s < run->sources && rc == 0; s++)
		rc = acct_source(a, run, s, &g, &t);
	if (rc == 0)
		rc = acct_all_wire(a, &t);
	for (size_t r = 0; r < run->reader_count && rc == 0; r++) {
		const struct acct_reader *rd = &run->readers[r];
		uint64_t lost = 0;
		if (rd->gone && rd->report == NULL)
			rc = acct_reader_gone(a, run, rd);
		else if ((rc = acct_hops_to_builders(a, run, rd, &lost)) == 0 &&
			 (rc = acct_reader_to_builder(a, rd, lost)) == 0)
			rc = acct_rails(a, run, rd);
	}
	uint64_t outside = 0;
	if (rc == 0)
		rc = acct_builders(a, run, g.ids, g.agree, &outside);
	if (rc == 0) {
		acct_builder(a, run, &g, outside);
		acct_recordings(a, run);
	} else
		acct_free(a);
	return rc;
}

bool acct_balanced(const struct acct *a)
{
	for (size_t i = 0; i < a->count; i++)
		if (!a->equations[i].ok)
			return false;
	return a->count > 0 && a->violation_count == 0;
}

void acct_free(struct acct *a)
{
	free(a->equations);
	a->equations = NULL;
	a->count = a->cap = 0;
	free(a->violations);
	a->violations = NULL;
	a->violation_count = a->violation_cap = 0;
}
