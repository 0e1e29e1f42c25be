/* The kinds of equation of core/acct as documents show them
 * (acct_kind_describe): acct_equations.c names each equation it computes by its
 * kind's format, and tools/docgen writes README's and docs/METRICS.md's
 * tables from the same entries. */
#include "core/acct.h"

#include <stddef.h>

/* Every kind of equation, in README's order; its name is a format of the
 * numbers it is about (the ids after "source" and "reader"), so README's
 * table, written from this one (tools/docgen.c), names exactly what
 * metrics.json does. */
static const struct acct_kind_doc acct_kinds[ACCT_KIND_COUNT] = {
	[ACCT_SOURCE_GENERATED] = { "1 source %u: generated = omitted + sent + abandoned + cut by stop",
				    "source", "`source.N.events`",
				    "`frags_omitted + frags_sent + frags_abandoned + frags_cut_by_stop`" },
	[ACCT_SOURCE_WIRE] = { "2 source %u: frames on wire = received by reader %u",
			       "source, reader", "`source.N.frames_wire`",
			       "`reader.R.source.N.frames_received`" },
	[ACCT_HOP_SOURCE] = { "hop reader %u, source %u: received = forwarded + rejected + held at end",
			      "reader", "`frames_received`",
			      "`frames_forwarded + frames_rejected + frames_held_at_end` (+ `frames_late + frames_lost_builder` with several builders)" },
	[ACCT_ALL_WIRE] = { "2 all sources: frames on wire = received by readers",
			    "sources, readers", "sum of the above",
			    "sum (+ `frames_unread_at_stop` in a run stopped for a fault)" },
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
	[ACCT_HOP_READER_BUILDER] = { "hop reader %u to builder %u: forwarded = received by builder",
				      "reader, builder", "`reader.R.builder.B.frames_forwarded`",
				      "`builders.B.reader.R.frames_received` (+ `frames_lost_with_builders` when B is gone without a report)" },
	[ACCT_BUILDER_ASSIGNED] = { "builder %u: assigned = complete + expired + never observed + lost",
				    "manager, builder", "the manager's `assigned` to B",
				    "B's `events_complete + events_expired + events_unobserved` + its `lost` (gone without a report: its last token's `decided` + `lost`)" },
	[ACCT_BUILDER_MISROUTED] = { "builder %u: misrouted = 0",
				     "builder", "B's `frags_misrouted`", "0" },
	[ACCT_RUN_ASSIGNED] = { "run: event IDs assigned = event IDs generated",
				"manager, sources", "the manager's `assigned`, summed over builders (+ `ids_cut_unassigned`, the IDs a drained stop or a stop for a fault left unassigned)",
				"the sources' `events`" },
	[ACCT_HOP_RAIL] = { "hop reader %u to builder %u, rail %u: forwarded = received by builder",
			    "reader, builder", "`reader.R.builder.B.rail.K.frames_forwarded`",
			    "the builder's `from_reader.R.rail.K.frames_received` (B's `reader.R.rail.K` with several builders)" },
	[ACCT_RAILS_READER] = { "reader %u to builder %u: the rails' frames forwarded = the link's",
				"reader", "sum over K of `builder.B.rail.K.frames_forwarded`",
				"`builder.B.frames_forwarded` (one builder: the reader's `frames_forwarded`)" },
	[ACCT_RAILS_BUILDER] = { "builder %u from reader %u: the rails' frames received = the link's",
				 "builder", "sum over K of the rails' `frames_received`",
				 "the link's `frames_received`" },
	[ACCT_WRONG_RAIL] = { "builder %u from reader %u: frames on the wrong rail = 0",
			      "builder", "sum over K of the rails' `frames_wrong_rail`", "0" },
	[ACCT_SOURCE_WIRE_STOPPED] = { "2 source %u: frames on wire = received by reader %u + unread at the stop for a fault",
				       "source, reader", "`source.N.frames_wire`",
				       "`reader.R.source.N.frames_received` + `frames_unread_at_stop` (a run a peer stopped for a fault: the readers closed their sources at once)" },
	[ACCT_RECORD_ACCEPTED] = { "builder %u: accepted = data written + not written + not recorded",
				   "builder (recording)", "`events_accepted`",
				   "`data_events_written + data_events_unwritten + data_events_unrecorded`" },
	[ACCT_RECORD_FILES] = { "builder %u: events in the closed files = data written",
				"builder (recording)", "`data_events_in_files` (the manifests' events)",
				"`data_events_written`" },
};

const struct acct_kind_doc *acct_kind_describe(enum acct_kind kind)
{
	return (unsigned)kind < ACCT_KIND_COUNT ? &acct_kinds[kind] : NULL;
}
