/* What core/acct's files share and nothing else may include: the helpers
 * every equation is made with (acct_terms.c), the equations of several
 * builders (acct_builders.c) and of rails (acct_rails.c). */
#ifndef ES_CORE_ACCT_INTERNAL_H
#define ES_CORE_ACCT_INTERNAL_H

#include "core/acct.h"

#include <stdbool.h>
#include <stdint.h>

/* An impossible counter: recorded, and the run is not balanced. 0 or
 * -ENOMEM. */
int acct_violation(struct acct *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* x <= y, both counters present: else a named violation. The descriptions
 * say whose counter it is ("source 1's frags_sent"). */
int acct_check_le(struct acct *a, const char *xdesc, uint64_t x, bool fx, const char *ydesc,
		  uint64_t y, bool fy);

/* Overflow-checked sums: *sum += v, or false (and *sum saturated) when the
 * result does not fit in 64 bits. */
bool acct_sum(uint64_t *sum, uint64_t v);

/* known false: a side is unknown, and note says why. A side that overflowed
 * is passed as known = false with the overflow note. The name is the
 * kind's format of the ids that follow (unsigned each, as many as it has
 * "%u"; the unit tests produce every kind). */
struct acct_equation *acct_add(struct acct *a, uint64_t lhs, uint64_t rhs, bool known,
			       const char *note, enum acct_kind kind, ...);

extern const char ACCT_OVERFLOW_NOTE[];

/* Each recording builder's two equations (acct_record.c). */
void acct_recordings(struct acct *a, const struct acct_run *run);

/* Several builders: reader rd's hop to each builder (forwarded = received
 * by it); what it forwarded to a builder gone without a report is lost
 * with it, added to *lost (and the run's bucket). Nothing with one
 * builder. First, frames the reader dropped as lost with a builder when
 * the hub lost none (one builder included) are a named violation. */
int acct_hops_to_builders(struct acct *a, const struct acct_run *run, const struct acct_reader *rd,
			  uint64_t *lost);

/* Several builders: each one's assigned = decided + lost and misrouted =
 * 0, the run's IDs assigned once each; *outside gets the event IDs that no
 * report holds (lost, and what a builder gone without a report decided)
 * for the run's equation 5. Nothing with one builder. */
int acct_builders(struct acct *a, const struct acct_run *run, uint64_t ids, bool ids_known,
		  uint64_t *outside);

/* Rails: for each link of reader rd of two rails or more, per rail
 * forwarded = received, on both sides the rails' sums = the link's, and no
 * frame on the wrong rail. Nothing for links of one rail, nor for a builder
 * gone without a report (its link's loss is counted with the link). */
int acct_rails(struct acct *a, const struct acct_run *run, const struct acct_reader *rd);

/* Equations acct_rails() may add for one reader. */
size_t acct_rails_cap(const struct acct_run *run);

#endif
