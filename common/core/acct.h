/* The conservation equations of a distributed run (the EventStream note's
 * six, plus one per hop), computed from every daemon's final counters. A
 * run is balanced when every equation holds and no counter is impossible; a
 * daemon whose counters never arrived makes its equations fail by name
 * rather than vanish. Counters come from peers, so every sum is checked for
 * overflow (a wrapped sum could balance an equation by accident) and every
 * counter against what the counters it derives from allow (a source cannot
 * send more fragments than it generated, a reader cannot receive more frames
 * than its source put on the wire, ...). */
#ifndef ES_CORE_ACCT_H
#define ES_CORE_ACCT_H

#include "core/builder.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds of equation (acct_kind_describe); a run has one of a kind per
 * source, reader or hop where the name says so. */
enum acct_kind {
	ACCT_SOURCE_GENERATED,
	ACCT_SOURCE_WIRE,
	ACCT_HOP_SOURCE,
	ACCT_ALL_WIRE,
	ACCT_HOP_BUILDER,
	ACCT_BUILDER_READ,
	ACCT_RECEIVED,
	ACCT_UNIQUE,
	ACCT_EVENTS,
	ACCT_COMPLETE,
	ACCT_EXPIRED,
	ACCT_SOURCE_GONE,
	ACCT_READER_GONE,
	/* several builders (--role hub, docs/BUILDERS.md) */
	ACCT_HOP_READER_BUILDER,
	ACCT_BUILDER_ASSIGNED,
	ACCT_BUILDER_MISROUTED,
	ACCT_RUN_ASSIGNED,
	/* rails (docs/BUILDERS.md, "Rails"): links of two rails or more */
	ACCT_HOP_RAIL,
	ACCT_RAILS_READER,
	ACCT_RAILS_BUILDER,
	ACCT_WRONG_RAIL,
	/* a run a peer stopped for a fault (docs/BUILDERS.md) */
	ACCT_SOURCE_WIRE_STOPPED,
	/* a builder that records the events' data (docs/RECORDING.md) */
	ACCT_RECORD_ACCEPTED,
	ACCT_RECORD_FILES,
	ACCT_KIND_COUNT
};

/* A kind as documents show it (README, docs/METRICS.md): the printf format
 * of its name (of unsigned source and reader ids), whose counters it reads,
 * and its two sides in words (N a source, R a reader). */
struct acct_kind_doc {
	const char *format;
	const char *from;
	const char *lhs;
	const char *rhs;
};

/* NULL outside the enum. */
const struct acct_kind_doc *acct_kind_describe(enum acct_kind kind);

struct acct_equation {
	enum acct_kind kind;
	char name[128];
	uint64_t lhs;
	uint64_t rhs;
	bool ok;
	char note[128];          /* why it fails when a side is unknown or overflows */
};

#define ACCT_VIOLATION_TEXT 256u

/* An impossible counter or a sum of counters beyond 2^64: which peer, which
 * counter, which relation, as one sentence. */
struct acct_violation {
	char text[ACCT_VIOLATION_TEXT];
};

struct acct {
	struct acct_equation *equations;
	size_t count;
	size_t cap;
	/* Named buckets for peers that died or stalled before reporting: what
	 * they held, so the books still close. */
	uint64_t lost_with_sources;
	uint64_t cut_by_stop;                 /* the sources' frags_cut_by_stop: not lost, never generated */
	uint64_t lost_with_readers;
	uint64_t lost_with_builders;          /* event IDs in flight at a dead builder */
	uint64_t frames_lost_with_builders;   /* forwarded to a builder gone without a report */
	uint64_t unread_at_stop;              /* on the wire, unread when a fault stopped the run */
	struct acct_violation *violations;
	size_t violation_count;
	size_t violation_cap;
};

/* What the builder knows of one reader: its final report (NULL when none
 * arrived) and what arrived from it on the data path. */
struct acct_reader {
	uint32_t id;
	const struct ctl_report *report;
	uint64_t frames_received_by_builder;
	size_t source_count;
	const uint16_t *sources;
	bool gone;                 /* died or stalled: a missing report is expected */
	/* One builder (--role both) and a link of two rails or more: what the
	 * builder read on each of its connections (rails 0 otherwise; with
	 * several builders their END reports say it). */
	uint32_t rails;
	uint64_t rail_frames_received[CTL_MAX_RAILS];
	uint64_t rail_frames_wrong[CTL_MAX_RAILS];
};

/* What the hub knows of one builder of several (--role hub): its END
 * report and what its event manager assigned it. */
struct acct_builder {
	uint32_t id;
	const struct ctl_report *report;   /* NULL when none arrived */
	bool gone;                         /* died or stalled: a missing report is expected */
	uint64_t assigned;                 /* event IDs the manager gave it */
	uint64_t decided;                  /* as its last TOKEN said */
	uint64_t lost;                     /* in flight when it died (evm_loss); 0 alive */
};

/* A builder that records the events' data (docs/RECORDING.md): its
 * accepted events and what became of their data, from its final counters. */
struct acct_recording {
	uint32_t builder;
	uint64_t accepted;                 /* the core's events_accepted */
	uint64_t written;                  /* data_events_written: the writer's count */
	uint64_t unwritten;                /* data_events_unwritten */
	uint64_t unrecorded;               /* data_events_unrecorded */
	uint64_t in_files;                 /* data_events_in_files: the closed files' manifests */
};

struct acct_run {
	uint16_t sources;
	const struct ctl_report *const *source_reports;   /* [sources], NULL when absent */
	const bool *source_gone;                           /* [sources]: died or stalled; may be NULL */
	const uint64_t *unique_from;                       /* [sources]: unique fragments the builder got */
	size_t reader_count;
	const struct acct_reader *readers;
	const struct bld_counters *builder;
	uint64_t builder_frames_received;                   /* from all readers */
	/* Several builders: builder is then the sum of their cores, the
	 * readers' frames_received_by_builder the sum of their links'. 0 and
	 * NULL with one builder (--role both). */
	size_t builder_count;
	const struct acct_builder *builders;
	/* Several builders and the operator's drained stop: the event IDs past
	 * the stop the manager never assigned (0 otherwise). */
	uint64_t ids_cut_unassigned;
	/* A peer stopped the run for a fault: every reader closed its sources
	 * at once, so the frames a source put on the wire and its reader never
	 * read are the named bucket frames_unread_at_stop (equation 2 becomes
	 * ACCT_SOURCE_WIRE_STOPPED). */
	bool stopped_at_fault;
	/* Every builder that records and reported: its recording's books. */
	size_t recording_count;
	const struct acct_recording *recordings;
};

/* Computes every equation of the run into a (allocated here; free with
 * acct_free). Returns 0 or -ENOMEM. */
int acct_compute(const struct acct_run *run, struct acct *a);

/* Every equation holds and no counter is impossible. */
bool acct_balanced(const struct acct *a);

void acct_free(struct acct *a);

/* Value of a counter in a report's group, 0 when absent; *found tells. */
uint64_t acct_value(const struct ctl_report *r, const char *group, const char *name, bool *found);

/* The number of event IDs the sources generated: the value the reports
 * that arrived agree on; *agree is false when none arrived, when they
 * disagree, or when one is missing from a source that is not known gone. */
uint64_t acct_events_generated(const struct acct_run *run, bool *agree);

#endif
