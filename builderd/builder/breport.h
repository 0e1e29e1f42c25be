/* What a builder of a run of several reports (--role builder,
 * docs/BUILDERS.md, "A builder's END report"): its END's groups ("" with
 * the core's, builderd's and the role's counters; reader.R per data link;
 * unique.K, unique fragments per source; hist and hist.K, its latency
 * histogram's non-empty buckets; process), the same as builder.json in
 * --out for people, and /metrics. Private to builderd. */
#ifndef ES_BD_BREPORT_H
#define ES_BD_BREPORT_H

#include "wire/control.h"
#include "wire/counters.h"

#include <stdbool.h>
#include <stdint.h>

struct evbuffer;
struct ingest;

/* The role's counters, from their list (wire/counters.h). */
struct breport_role {
#define BREPORT_ROLE_FIELD(name) uint64_t name;
	CNT_LIST_BUILDER_ROLE(BREPORT_ROLE_FIELD)
#undef BREPORT_ROLE_FIELD
};

/* Fills r (zeroed first) with every group but the host's clock ones, which
 * the control link adds. false when a group or counter did not fit (the
 * hub then lacks some; logged once by the caller). */
bool breport_fill(struct ctl_report *r, const struct ingest *g, const struct breport_role *role,
	       int32_t status);

/* Fills r (zeroed first) with the STATS a builder sends its hub every
 * second (CNT_LIST_BUILDER_STATS): its core's events, the tokens it sent,
 * its IDs in flight, its rate over the last second and, when it records,
 * its event files. */
void breport_stats(struct ctl_report *r, const struct ingest *g, uint64_t tokens_sent,
		   uint64_t events_in_flight, double events_per_s);

/* Writes r as builder.json in dir. 0 or -errno (logged). */
int breport_write_json(const char *dir, uint32_t builder, uint32_t run, const struct ctl_report *r);

/* A fenced builder's cut (docs/BUILDERS.md, "A given-up builder is
 * fenced"): below, the event its records end before (its last TOKEN's
 * decided_below), decided that TOKEN's total, what the cut kept and
 * removed, the records dropped unwritten; complete false when a file could
 * not be cut. */
struct breport_fence {
	uint64_t below, decided, events_kept, expired_kept, removed, unwritten;
	bool complete;
};

/* builder.json of a fenced builder: status "fenced" and its "fence",
 * no END groups (the hub never had them). 0 or -errno (logged). */
int breport_write_fenced(const char *dir, uint32_t builder, uint32_t run,
		      const struct breport_fence *f);

/* r as /metrics (Prometheus text) or /status (JSON), with the events
 * completed per second over the last second. */
void breport_exposition(struct evbuffer *out, bool json, const struct ctl_report *r,
		     double events_per_s, int64_t data_free_bytes);

#endif
