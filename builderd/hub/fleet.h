/* The hub's view of its builders (--role hub): it receives no data, so what
 * the books, the watchdog and the reports know of the data side comes from
 * the readers' control HELLOs (which reader serves which source) and the
 * builders' END reports (docs/BUILDERS.md, "A builder's END report"): their
 * core counters summed, unique fragments per source (groups unique.K,
 * counters s<id>), frames per reader (groups reader.R), and their latency
 * histograms merged (groups hist and hist.K, counters b<index>). It is a
 * dataview.h for books.c, watchdog.c and peerlink.c. Private to builderd. */
#ifndef ES_BD_FLEET_H
#define ES_BD_FLEET_H

#include "hub/dataview.h"
#include "options.h"
#include "peer.h"

#include "core/builder.h"
#include "core/hist.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stdint.h>

struct snapshot;
struct fleet;

/* NULL when out of memory. peers outlives it. */
struct fleet *fleet_create(const struct options *opt, const struct peer_table *peers);
void fleet_destroy(struct fleet *f);

/* The view books.c, watchdog.c and peerlink.c read. */
void fleet_view(struct fleet *f, struct dataview *d);

/* A reader's control HELLO names its sources: kept unless one is outside
 * the run or another reader's (logged). */
void fleet_claim(struct fleet *f, const struct ctl_hello *h);

/* A builder's END report arrived (in its peer's report): sums again. */
void fleet_update(struct fleet *f);

/* Every builder has reported or is lost. */
bool fleet_all_in(const struct fleet *f);

/* Builder b's counter of its report's group "" (0 when absent). */
uint64_t fleet_builder_value(const struct fleet *f, uint32_t b, const char *name);

/* Builder report r's latency (groups hist and hist.K) as a histogram, and
 * its uncertainty. */
struct output_uncertainty;
void fleet_report_latency(const struct ctl_report *r, struct hist *h, struct output_uncertainty *u);

/* The data side's part of a report: the builders' sums, their merged
 * latency, a link per reader with no transport of the hub's own. */
void fleet_snapshot(const struct fleet *f, struct snapshot *s);

#endif
