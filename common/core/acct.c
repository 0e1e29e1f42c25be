#include "core/acct.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t acct_value(const struct ctl_report *r, const char *group, const char *name, bool *found)
{
	uint64_t v = 0;
	bool ok = false;
	if (r != NULL) {
		const struct ctl_group *g = ctl_report_find(r, group);
		if (g != NULL)
			ok = ctl_group_get(g, name, &v);
	}
	if (found != NULL)
		*found = ok;
	return ok ? v : 0;
}

/* An impossible counter: recorded, and the run is not balanced. */
static int acct_violation(struct acct *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int acct_violation(struct acct *a, const char *fmt, ...)
{
	if (a->violation_count == a->violation_cap) {
		size_t cap = a->violation_cap ? 2 * a->violation_cap : 8;
		struct acct_violation *v = realloc(a->violations, cap * sizeof *v);
		if (v == NULL)
			return -ENOMEM;
		a->violations = v;
		a->violation_cap = cap;
	}
	struct acct_violation *v = &a->violations[a->violation_count++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->text, sizeof v->text, fmt, ap);
	va_end(ap);
	return 0;
}

/* x <= y, both counters present: else a named violation. The descriptions
 * say whose counter it is ("source 1's frags_sent"). */
static int acct_check_le(struct acct *a, const char *xdesc, uint64_t x, bool fx, const char *ydesc,
			 uint64_t y, bool fy)
{
	if (!fx || !fy || x <= y)
		return 0;
	return acct_violation(a, "Impossible counters: %s = %" PRIu64 " exceeds %s = %" PRIu64, xdesc,
			      x, ydesc, y);
}

/* Overflow-checked sums: *sum += v, or false (and *sum saturated) when the
 * result does not fit in 64 bits. */
static bool acct_sum(uint64_t *sum, uint64_t v)
{
	if (v > UINT64_MAX - *sum) {
		*sum = UINT64_MAX;
		return false;
	}
	*sum += v;
	return true;
}

static bool acct_sum3(uint64_t *sum, uint64_t x, uint64_t y, uint64_t z)
{
	*sum = x;
	return acct_sum(sum, y) && acct_sum(sum, z);
}

/* Every kind of equation, in README's order; its name is a format of the
 * numbers it is about (the ids after "source" and "reader"), so README's
 * table, written from this one (tools/docgen.c), names exactly what
 * metrics.json does. */
static const struct acct_kind_doc acct_kinds[ACCT_KIND_COUNT] = {
	[ACCT_SOURCE_GENERATED] = { "1 source %u: generated = omitted + sent + abandoned",
				    "source", "`source.N.events`",
				    "`frags_omitted + frags_sent + frags_abandoned`" },
	[ACCT_SOURCE_WIRE] = { "2 source %u: frames on wire = received by reader %u",
			       "source, reader", "`source.N.frames_wire`",
			       "`reader.R.source.N.frames_received`" },
	[ACCT_HOP_SOURCE] = { "hop reader %u, source %u: received = forwarded + rejected + held at end",
			      "reader", "`frames_received`",
			      "`frames_forwarded + frames_rejected + frames_held_at_end`" },
	[ACCT_ALL_WIRE] = { "2 all sources: frames on wire = received by readers",
			    "sources, readers", "sum of the above", "sum" },
	[ACCT_HOP_BUILDER] = { "hop reader %u to builder: forwarded = received by builder",
			       "reader, builder", "`reader.R.frames_forwarded`",
			       "`builder.from_reader.R.frames_received`" },
	[ACCT_BUILDER_READ] = { "builder: frames read from readers = fragments built",
				"builder", "`frames_read`", "`frags_received`" },
	[ACCT_RECEIVED] = { "3 builder: received = unique + duplicate + late + invalid",
			    "builder", "`frags_received`", "sum" },
	[ACCT_UNIQUE] = { "4 builder: unique = S x complete + held by expired",
			  "builder", "`frags_unique`", "`S × events_complete + frags_in_expired`" },
	[ACCT_EVENTS] = { "5 run: event IDs generated = complete + expired + never observed",
			  "sources, builder", "the sources' `events` (they must agree)",
			  "`events_complete + events_expired + events_unobserved`" },
	[ACCT_COMPLETE] = { "6 builder: complete = accepted + filtered",
			    "builder", "`events_complete`", "`events_accepted + events_filtered`" },
	[ACCT_EXPIRED] = { "builder: expired = timeout + window + end of run + skipped",
			   "builder", "`events_expired`", "sum of the four" },
	[ACCT_SOURCE_GONE] = { "1+2 source %u (gone): generated = unique fragments built + lost with the source",
			       "the other sources (`events`), builder",
			       "event IDs the other sources generated",
			       "the builder's unique fragments from N + `fragments_lost_with_sources`" },
	[ACCT_READER_GONE] = { "2+hop reader %u (gone): frames its sources put on wire = received by builder + lost with the reader",
			       "sources, builder", "its sources' `frames_wire`",
			       "frames the builder read from R + `frames_lost_with_readers`" },
};

const struct acct_kind_doc *acct_kind_describe(enum acct_kind kind)
{
	return (unsigned)kind < ACCT_KIND_COUNT ? &acct_kinds[kind] : NULL;
}

/* known false: a side is unknown, and note says why. A side that overflowed
 * is passed as known = false with the overflow note. The name is the
 * kind's format of the ids that follow (unsigned each, as many as it has
 * "%u"; the unit tests produce every kind). */
static struct acct_equation *acct_add(struct acct *a, uint64_t lhs, uint64_t rhs, bool known,
				      const char *note, enum acct_kind kind, ...)
{
	if (a->count == a->cap)
		return NULL;
	struct acct_equation *e = &a->equations[a->count++];
	va_list ap;
	va_start(ap, kind);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	vsnprintf(e->name, sizeof e->name, acct_kinds[kind].format, ap);
#pragma GCC diagnostic pop
	va_end(ap);
	e->kind = kind;
	e->lhs = lhs;
	e->rhs = rhs;
	e->ok = known && lhs == rhs;
	snprintf(e->note, sizeof e->note, "%s", known ? "" : note);
	return e;
}

static const char ACCT_OVERFLOW_NOTE[] = "a side's sum overflows 2^64: impossible counters";

uint64_t acct_events_generated(const struct acct_run *run, bool *agree)
{
	uint64_t events = 0;
	bool any = false;
	*agree = true;
	for (uint16_t s = 0; s < run->sources; s++) {
		bool found;
		uint64_t v = acct_value(run->source_reports[s], "", "events", &found);
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

/* A reader's counters of one source, with the relations between them: the
 * hop equation's parts are each at most what was received, what was
 * forwarded or held was verified first, and a stream has one END. */
struct acct_hop {
	uint64_t received, forwarded, rejected, held, verified, end_frames;
	bool f_received, f_forwarded, f_rejected, f_held, f_verified, f_end_frames;
};

static int acct_read_hop(struct acct *a, const struct acct_reader *rd, uint16_t s,
			 struct acct_hop *h)
{
	char group[CTL_MAX_NAME];
	snprintf(group, sizeof group, "source.%u", s);
	const struct ctl_report *r = rd != NULL ? rd->report : NULL;
	h->received = acct_value(r, group, "frames_received", &h->f_received);
	h->forwarded = acct_value(r, group, "frames_forwarded", &h->f_forwarded);
	h->rejected = acct_value(r, group, "frames_rejected", &h->f_rejected);
	h->held = acct_value(r, group, "frames_held_at_end", &h->f_held);
	h->verified = acct_value(r, group, "frames_verified", &h->f_verified);
	h->end_frames = acct_value(r, group, "end_frames", &h->f_end_frames);
	if (r == NULL)
		return 0;
	char x[96], y[96];
	const struct {
		const char *name;
		uint64_t value;
		bool found;
	} parts[] = {
		{ "frames_forwarded", h->forwarded, h->f_forwarded },
		{ "frames_rejected", h->rejected, h->f_rejected },
		{ "frames_held_at_end", h->held, h->f_held },
		{ "frames_verified", h->verified, h->f_verified },
	};
	int rc = 0;
	snprintf(y, sizeof y, "reader %u's %s frames_received", rd->id, group);
	for (size_t i = 0; i < sizeof parts / sizeof parts[0] && rc == 0; i++) {
		snprintf(x, sizeof x, "reader %u's %s %s", rd->id, group, parts[i].name);
		rc = acct_check_le(a, x, parts[i].value, parts[i].found, y, h->received, h->f_received);
	}
	snprintf(x, sizeof x, "reader %u's %s frames_held_at_end", rd->id, group);
	snprintf(y, sizeof y, "reader %u's %s frames_verified", rd->id, group);
	if (rc == 0)
		rc = acct_check_le(a, x, h->held, h->f_held, y, h->verified, h->f_verified);
	snprintf(x, sizeof x, "reader %u's %s frames_forwarded", rd->id, group);
	if (rc == 0)
		rc = acct_check_le(a, x, h->forwarded, h->f_forwarded, y, h->verified, h->f_verified);
	snprintf(x, sizeof x, "reader %u's %s end_frames", rd->id, group);
	if (rc == 0)
		rc = acct_check_le(a, x, h->end_frames, h->f_end_frames, "one per stream", 1, true);
	return rc;
}

/* The hop equation of one source at its reader. */
static int acct_hop_equation(struct acct *a, const struct acct_reader *rd, uint16_t s,
			     const struct acct_hop *h)
{
	char note[128];
	uint64_t parts;
	bool fits = acct_sum3(&parts, h->forwarded, h->rejected, h->held);
	bool found = h->f_received && h->f_forwarded && h->f_rejected && h->f_held;
	snprintf(note, sizeof note, "%s", !found ? "" : ACCT_OVERFLOW_NOTE);
	if (!found)
		snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
	acct_add(a, h->received, parts, found && fits, note,
		 ACCT_HOP_SOURCE, rd->id, s);
	if (found && !fits)
		return acct_violation(a, "Impossible counters: reader %u's source.%u frames_forwarded + frames_rejected + frames_held_at_end overflows 2^64",
				      rd->id, s);
	return 0;
}

/* A source's own counters against each other: what it sent, omitted,
 * abandoned or delayed is part of what it generated, a duplicate is a copy
 * of a sent fragment, and every frame on the wire is a fragment sent, its
 * copy or the injected bad frame. */
static int acct_check_source(struct acct *a, uint16_t s, const struct ctl_report *sr)
{
	static const char *const names[] = { "events", "frags_omitted", "frags_sent",
					     "frags_abandoned", "frags_delayed", "frags_duplicated",
					     "frames_wire", "frames_bad_injected" };
	enum { EVENTS, OMITTED, SENT, ABANDONED, DELAYED, DUPLICATED, WIRE, BAD, NAMES };
	uint64_t v[NAMES];
	bool f[NAMES];
	char x[64], y[64];
	for (size_t i = 0; i < NAMES; i++)
		v[i] = acct_value(sr, "", names[i], &f[i]);
	int rc = 0;
	static const struct {
		int small, big;
	} le[] = { { OMITTED, EVENTS }, { SENT, EVENTS }, { ABANDONED, EVENTS }, { DELAYED, EVENTS },
		   { DUPLICATED, SENT }, { BAD, WIRE } };
	for (size_t i = 0; i < sizeof le / sizeof le[0] && rc == 0; i++) {
		snprintf(x, sizeof x, "source %u's %s", s, names[le[i].small]);
		snprintf(y, sizeof y, "source %u's %s", s, names[le[i].big]);
		rc = acct_check_le(a, x, v[le[i].small], f[le[i].small], y, v[le[i].big], f[le[i].big]);
	}
	uint64_t copies;
	if (rc == 0 && f[WIRE] && f[SENT] && f[DUPLICATED] && f[BAD]) {
		if (!acct_sum3(&copies, v[SENT], v[DUPLICATED], v[BAD]))
			rc = acct_violation(a, "Impossible counters: source %u's frags_sent + frags_duplicated + frames_bad_injected overflows 2^64",
					    s);
		else if (v[WIRE] > copies)
			rc = acct_violation(a, "Impossible counters: source %u's frames_wire = %" PRIu64 " exceeds its frags_sent + frags_duplicated + frames_bad_injected = %" PRIu64,
					    s, v[WIRE], copies);
	}
	return rc;
}

int acct_compute(const struct acct_run *run, struct acct *a)
{
	a->cap = 4u * run->sources + 2u * run->reader_count + 16u;
	a->count = 0;
	a->lost_with_sources = a->lost_with_readers = 0;
	a->violations = NULL;
	a->violation_count = a->violation_cap = 0;
	a->equations = calloc(a->cap, sizeof *a->equations);
	if (a->equations == NULL)
		return -ENOMEM;
	int rc = 0;
	char note[128], x[96], y[96];
	uint64_t wire_total = 0, reader_received_total = 0;
	bool wire_known = true, reader_known = true, totals_fit = true;

	bool agree_generated;
	uint64_t generated_ids = acct_events_generated(run, &agree_generated);
	for (uint16_t s = 0; s < run->sources && rc == 0; s++) {
		const struct ctl_report *sr = run->source_reports[s];
		const struct acct_reader *rd = acct_reader_of(run, s);
		struct acct_hop hop;
		rc = acct_read_hop(a, rd, s, &hop);
		uint64_t unique = run->unique_from != NULL ? run->unique_from[s] : 0;
		if (rc == 0 && run->unique_from != NULL && rd != NULL) {
			/* The builder cannot build more of a source's fragments
			 * than its reader forwarded. */
			snprintf(x, sizeof x, "the builder's unique fragments of source %u", s);
			snprintf(y, sizeof y, "reader %u's source.%u frames_forwarded", rd->id, s);
			rc = acct_check_le(a, x, unique, true, y, hop.forwarded, hop.f_forwarded);
		}
		if (rc != 0)
			break;
		if (sr == NULL && run->source_gone != NULL && run->source_gone[s]) {
			/* The source died or stalled: the builder knows how many of
			 * its fragments it got, once each; the rest of what it
			 * generated (omitted, unsent, or lost with it) is the named
			 * bucket. Frames its reader saw include duplicates, so they
			 * cannot stand in for fragments. */
			bool known = run->unique_from != NULL && agree_generated && generated_ids >= unique;
			uint64_t lost = known ? generated_ids - unique : 0;
			if (!acct_sum(&a->lost_with_sources, lost))
				rc = acct_violation(a, "Impossible counters: the fragments lost with the sources overflow 2^64");
			snprintf(note, sizeof note, known ? "source %u is gone: %" PRIu64 " fragments counted as lost with it"
							  : "source %u is gone and the other sources' counts are missing",
				 s, lost);
			struct acct_equation *e = acct_add(a, generated_ids, unique + lost, known, note,
							   ACCT_SOURCE_GONE,
							   s);
			if (e != NULL && known)
				snprintf(e->note, sizeof e->note, "%s", note);
			if (rc == 0 && rd != NULL && rd->report != NULL)
				rc = acct_hop_equation(a, rd, s, &hop);
			continue;
		}
		rc = acct_check_source(a, s, sr);
		bool f1, f2, f3, f4;
		uint64_t events = acct_value(sr, "", "events", &f1);
		uint64_t omitted = acct_value(sr, "", "frags_omitted", &f2);
		uint64_t sent = acct_value(sr, "", "frags_sent", &f3);
		uint64_t abandoned = acct_value(sr, "", "frags_abandoned", &f4);
		uint64_t parts;
		bool fits = acct_sum3(&parts, omitted, sent, abandoned);
		bool found = f1 && f2 && f3 && f4;
		snprintf(note, sizeof note, "%s", found ? ACCT_OVERFLOW_NOTE : "");
		if (!found)
			snprintf(note, sizeof note, "no final counters from source %u", s);
		acct_add(a, events, parts, found && fits, note,
			 ACCT_SOURCE_GENERATED, s);
		if (rc == 0 && found && !fits)
			rc = acct_violation(a, "Impossible counters: source %u's frags_omitted + frags_sent + frags_abandoned overflows 2^64",
					    s);

		bool fw;
		uint64_t wire = acct_value(sr, "", "frames_wire", &fw);
		if (rd != NULL && rd->gone && rd->report == NULL)
			continue;   /* its reader's own equation below */
		if (rc == 0 && rd != NULL) {
			/* A reader cannot receive more than its source put on the wire. */
			snprintf(x, sizeof x, "reader %u's source.%u frames_received", rd->id, s);
			snprintf(y, sizeof y, "source %u's frames_wire", s);
			rc = acct_check_le(a, x, hop.received, hop.f_received, y, wire, fw);
		}
		if (rd == NULL)
			snprintf(note, sizeof note, "no reader serves source %u", s);
		else if (!fw)
			snprintf(note, sizeof note, "no final counters from source %u", s);
		else
			snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
		acct_add(a, wire, hop.received, fw && hop.f_received, note,
			 ACCT_SOURCE_WIRE, s,
			 rd ? rd->id : 0);
		totals_fit = acct_sum(&wire_total, wire) && totals_fit;
		totals_fit = acct_sum(&reader_received_total, hop.received) && totals_fit;
		wire_known = wire_known && fw;
		reader_known = reader_known && hop.f_received;

		if (rc == 0 && rd != NULL)
			rc = acct_hop_equation(a, rd, s, &hop);
	}
	if (rc != 0)
		goto out;
	snprintf(note, sizeof note, "%s",
		 !totals_fit ? ACCT_OVERFLOW_NOTE : "counters missing from a source or a reader");
	acct_add(a, wire_total, reader_received_total, wire_known && reader_known && totals_fit, note,
		 ACCT_ALL_WIRE);
	if (!totals_fit)
		rc = acct_violation(a, "Impossible counters: the sources' frames_wire or the readers' frames_received overflow 2^64 in total");

	for (size_t r = 0; r < run->reader_count && rc == 0; r++) {
		const struct acct_reader *rd = &run->readers[r];
		if (rd->gone && rd->report == NULL) {
			/* The reader died or stalled: its sources say what they put on
			 * the wire, the builder what arrived; the rest is lost with it. */
			uint64_t wire = 0;
			bool known = true, fits = true;
			for (size_t i = 0; i < rd->source_count; i++) {
				bool fw;
				fits = acct_sum(&wire, acct_value(run->source_reports[rd->sources[i]], "",
								  "frames_wire", &fw)) && fits;
				known = known && fw;
			}
			known = known && fits && wire >= rd->frames_received_by_builder;
			uint64_t lost = known ? wire - rd->frames_received_by_builder : 0;
			if (!acct_sum(&a->lost_with_readers, lost))
				rc = acct_violation(a, "Impossible counters: the frames lost with the readers overflow 2^64");
			if (rc == 0 && !fits)
				rc = acct_violation(a, "Impossible counters: the frames_wire of reader %u's sources overflow 2^64 in total",
						    rd->id);
			snprintf(note, sizeof note, known ? "reader %u is gone: %" PRIu64 " frames counted as lost with it"
					  : !fits ? "reader %u is gone and its sources' counts overflow 2^64"
						  : "reader %u is gone and a source's counts are missing",
				 rd->id, lost);
			struct acct_equation *e = acct_add(a, wire, rd->frames_received_by_builder + lost, known,
							   note, ACCT_READER_GONE,
							   rd->id);
			if (e != NULL && known)
				snprintf(e->note, sizeof e->note, "%s", note);
			continue;
		}
		bool found;
		uint64_t fwd = acct_value(rd->report, "", "frames_forwarded", &found);
		/* The reader's total is the sum of its sources' by construction. */
		uint64_t fwd_sum = 0;
		bool all = found, fits = true;
		for (size_t i = 0; i < rd->source_count; i++) {
			char group[CTL_MAX_NAME];
			bool f;
			snprintf(group, sizeof group, "source.%u", rd->sources[i]);
			fits = acct_sum(&fwd_sum, acct_value(rd->report, group, "frames_forwarded", &f)) && fits;
			all = all && f;
		}
		if (all && !fits)
			rc = acct_violation(a, "Impossible counters: reader %u's sources' frames_forwarded overflow 2^64 in total",
					    rd->id);
		else if (all && fwd != fwd_sum)
			rc = acct_violation(a, "Impossible counters: reader %u's frames_forwarded = %" PRIu64 " is not the sum of its sources' frames_forwarded = %" PRIu64,
					    rd->id, fwd, fwd_sum);
		snprintf(x, sizeof x, "the builder's frames received from reader %u", rd->id);
		snprintf(y, sizeof y, "reader %u's frames_forwarded", rd->id);
		if (rc == 0)
			rc = acct_check_le(a, x, rd->frames_received_by_builder, true, y, fwd, found);
		snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
		acct_add(a, fwd, rd->frames_received_by_builder, found, note,
			 ACCT_HOP_BUILDER, rd->id);
	}
	if (rc != 0)
		goto out;

	/* The builder's own counters: sums checked all the same, a wrapped
	 * sum must never balance. */
	const struct bld_counters *b = run->builder;
	uint64_t sum;
	bool fits;
	acct_add(a, run->builder_frames_received, b->frags_received, true, "",
		 ACCT_BUILDER_READ);
	fits = acct_sum3(&sum, b->frags_unique, b->frags_duplicate, b->frags_late) &&
	       acct_sum(&sum, b->frags_invalid);
	acct_add(a, b->frags_received, sum, fits, ACCT_OVERFLOW_NOTE,
		 ACCT_RECEIVED);
	fits = b->events_complete <= UINT64_MAX / (run->sources ? run->sources : 1);
	sum = fits ? (uint64_t)run->sources * b->events_complete : UINT64_MAX;
	fits = acct_sum(&sum, b->frags_in_expired) && fits;
	acct_add(a, b->frags_unique, sum, fits, ACCT_OVERFLOW_NOTE,
		 ACCT_UNIQUE);
	fits = acct_sum3(&sum, b->events_complete, b->events_expired, b->events_unobserved);
	acct_add(a, generated_ids, sum, agree_generated && fits,
		 fits ? "sources' event counts missing or disagreeing" : ACCT_OVERFLOW_NOTE,
		 ACCT_EVENTS);
	fits = acct_sum3(&sum, b->events_accepted, b->events_filtered, 0);
	acct_add(a, b->events_complete, sum, fits, ACCT_OVERFLOW_NOTE,
		 ACCT_COMPLETE);
	fits = acct_sum3(&sum, b->events_expired_timeout, b->events_expired_window,
			 b->events_expired_end_of_run) &&
	       acct_sum(&sum, b->events_expired_skipped);
	acct_add(a, b->events_expired, sum, fits, ACCT_OVERFLOW_NOTE,
		 ACCT_EXPIRED);
out:
	if (rc != 0)
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
