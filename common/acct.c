#include "acct.h"

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

static struct acct_equation *acct_add(struct acct *a, uint64_t lhs, uint64_t rhs, bool known,
				      const char *note, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static struct acct_equation *acct_add(struct acct *a, uint64_t lhs, uint64_t rhs, bool known,
				      const char *note, const char *fmt, ...)
{
	if (a->count == a->cap)
		return NULL;
	struct acct_equation *e = &a->equations[a->count++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->name, sizeof e->name, fmt, ap);
	va_end(ap);
	e->lhs = lhs;
	e->rhs = rhs;
	e->ok = known && lhs == rhs;
	snprintf(e->note, sizeof e->note, "%s", known ? "" : note);
	return e;
}

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

int acct_compute(const struct acct_run *run, struct acct *a)
{
	a->cap = 4u * run->sources + 2u * run->reader_count + 16u;
	a->count = 0;
	a->lost_with_sources = a->lost_with_readers = 0;
	a->equations = calloc(a->cap, sizeof *a->equations);
	if (a->equations == NULL)
		return -ENOMEM;
	char note[128];
	uint64_t wire_total = 0, reader_received_total = 0;
	bool wire_known = true, reader_known = true;

	bool agree_generated;
	uint64_t generated_ids = acct_events_generated(run, &agree_generated);
	for (uint16_t s = 0; s < run->sources; s++) {
		const struct ctl_report *sr = run->source_reports[s];
		const struct acct_reader *rd = acct_reader_of(run, s);
		char group[CTL_MAX_NAME];
		snprintf(group, sizeof group, "source.%u", s);
		if (sr == NULL && run->source_gone != NULL && run->source_gone[s]) {
			/* The source died or stalled: the builder knows how many of
			 * its fragments it got, once each; the rest of what it
			 * generated (omitted, unsent, or lost with it) is the named
			 * bucket. Frames its reader saw include duplicates, so they
			 * cannot stand in for fragments. */
			bool fr = false;
			uint64_t received = rd ? acct_value(rd->report, group, "frames_received", &fr) : 0;
			uint64_t unique = run->unique_from != NULL ? run->unique_from[s] : 0;
			bool known = run->unique_from != NULL && agree_generated && generated_ids >= unique;
			uint64_t lost = known ? generated_ids - unique : 0;
			a->lost_with_sources += lost;
			snprintf(note, sizeof note, known ? "source %u is gone: %" PRIu64 " fragments counted as lost with it"
							  : "source %u is gone and the other sources' counts are missing",
				 s, lost);
			struct acct_equation *e = acct_add(a, generated_ids, unique + lost, known, note,
							   "1+2 source %u (gone): generated = unique fragments built + lost with the source",
							   s);
			if (e != NULL && known)
				snprintf(e->note, sizeof e->note, "%s", note);
			if (rd != NULL && rd->report != NULL) {
				bool g1, g2, g3;
				uint64_t fwd = acct_value(rd->report, group, "frames_forwarded", &g1);
				uint64_t rej = acct_value(rd->report, group, "frames_rejected", &g2);
				uint64_t held = acct_value(rd->report, group, "frames_held_at_end", &g3);
				snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
				acct_add(a, received, fwd + rej + held, fr && g1 && g2 && g3, note,
					 "hop reader %u, source %u: received = forwarded + rejected + held at end",
					 rd->id, s);
			}
			continue;
		}
		bool f1, f2, f3, f4;
		uint64_t events = acct_value(sr, "", "events", &f1);
		uint64_t omitted = acct_value(sr, "", "frags_omitted", &f2);
		uint64_t sent = acct_value(sr, "", "frags_sent", &f3);
		uint64_t abandoned = acct_value(sr, "", "frags_abandoned", &f4);
		snprintf(note, sizeof note, "no final counters from source %u", s);
		acct_add(a, events, omitted + sent + abandoned, f1 && f2 && f3 && f4, note,
			 "1 source %u: generated = omitted + sent + abandoned", s);

		bool fw;
		uint64_t wire = acct_value(sr, "", "frames_wire", &fw);
		if (rd != NULL && rd->gone && rd->report == NULL)
			continue;   /* its reader's own equation below */
		bool fr = false;
		uint64_t received = rd ? acct_value(rd->report, group, "frames_received", &fr) : 0;
		if (rd == NULL)
			snprintf(note, sizeof note, "no reader serves source %u", s);
		else if (!fw)
			snprintf(note, sizeof note, "no final counters from source %u", s);
		else
			snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
		acct_add(a, wire, received, fw && fr, note,
			 "2 source %u: frames on wire = received by reader %u", s,
			 rd ? rd->id : 0);
		wire_total += wire;
		reader_received_total += received;
		wire_known = wire_known && fw;
		reader_known = reader_known && fr;

		if (rd != NULL) {
			bool g1, g2, g3;
			uint64_t fwd = acct_value(rd->report, group, "frames_forwarded", &g1);
			uint64_t rej = acct_value(rd->report, group, "frames_rejected", &g2);
			uint64_t held = acct_value(rd->report, group, "frames_held_at_end", &g3);
			snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
			acct_add(a, received, fwd + rej + held, fr && g1 && g2 && g3, note,
				 "hop reader %u, source %u: received = forwarded + rejected + held at end",
				 rd->id, s);
		}
	}
	snprintf(note, sizeof note, "counters missing from a source or a reader");
	acct_add(a, wire_total, reader_received_total, wire_known && reader_known, note,
		 "2 all sources: frames on wire = received by readers");

	for (size_t r = 0; r < run->reader_count; r++) {
		const struct acct_reader *rd = &run->readers[r];
		if (rd->gone && rd->report == NULL) {
			/* The reader died or stalled: its sources say what they put on
			 * the wire, the builder what arrived; the rest is lost with it. */
			uint64_t wire = 0;
			bool known = true;
			for (size_t i = 0; i < rd->source_count; i++) {
				bool fw;
				wire += acct_value(run->source_reports[rd->sources[i]], "", "frames_wire", &fw);
				known = known && fw;
			}
			known = known && wire >= rd->frames_received_by_builder;
			uint64_t lost = known ? wire - rd->frames_received_by_builder : 0;
			a->lost_with_readers += lost;
			snprintf(note, sizeof note, known ? "reader %u is gone: %" PRIu64 " frames counted as lost with it"
							  : "reader %u is gone and a source's counts are missing",
				 rd->id, lost);
			struct acct_equation *e = acct_add(a, wire, rd->frames_received_by_builder + lost, known,
							   note, "2+hop reader %u (gone): frames its sources put on wire = received by builder + lost with the reader",
							   rd->id);
			if (e != NULL && known)
				snprintf(e->note, sizeof e->note, "%s", note);
			continue;
		}
		bool found;
		uint64_t fwd = acct_value(rd->report, "", "frames_forwarded", &found);
		snprintf(note, sizeof note, "no final counters from reader %u", rd->id);
		acct_add(a, fwd, rd->frames_received_by_builder, found, note,
			 "hop reader %u to builder: forwarded = received by builder", rd->id);
	}

	const struct bld_counters *b = run->builder;
	acct_add(a, run->builder_frames_received, b->frags_received, true, "",
		 "builder: frames read from readers = fragments built");
	acct_add(a, b->frags_received,
		 b->frags_unique + b->frags_duplicate + b->frags_late + b->frags_invalid, true, "",
		 "3 builder: received = unique + duplicate + late + invalid");
	acct_add(a, b->frags_unique, (uint64_t)run->sources * b->events_complete + b->frags_in_expired,
		 true, "", "4 builder: unique = S x complete + held by expired");
	acct_add(a, generated_ids, b->events_complete + b->events_expired + b->events_unobserved,
		 agree_generated,
		 "sources' event counts missing or disagreeing",
		 "5 run: event IDs generated = complete + expired + never observed");
	acct_add(a, b->events_complete, b->events_accepted + b->events_filtered, true, "",
		 "6 builder: complete = accepted + filtered");
	acct_add(a, b->events_expired,
		 b->events_expired_timeout + b->events_expired_window + b->events_expired_end_of_run +
			 b->events_expired_skipped,
		 true, "", "builder: expired = timeout + window + end of run + skipped");
	return 0;
}

bool acct_balanced(const struct acct *a)
{
	for (size_t i = 0; i < a->count; i++)
		if (!a->equations[i].ok)
			return false;
	return a->count > 0;
}

void acct_free(struct acct *a)
{
	free(a->equations);
	a->equations = NULL;
	a->count = a->cap = 0;
}
