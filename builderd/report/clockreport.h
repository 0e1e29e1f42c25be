/* The clocks' part of builderd's report (docs/METRICS.md, docs/CLOCKS.md):
 * the "clocks" member of metrics.json, the latency fields that depend on
 * clocks, and the summary's lines about them, made from the clock module's
 * plain views (clocks_view, clocks_peer_view) and the output's uncertainties.
 * Private to builderd. */
#ifndef ES_BD_CLOCKREPORT_H
#define ES_BD_CLOCKREPORT_H

#include <jansson.h>
#include <stdio.h>

struct clocks;

/* The "clocks" member of metrics.json (a new reference). */
json_t *clockreport_json(const struct clocks *c);

/* Adds the latency fields that depend on clocks to metrics.json's
 * "latency" object, of the latency histogram lat (the record files', or in
 * role hub the builders' merged). merged (NULL in role both) is, in role
 * hub, the builders' uncertainty merged: the largest, the bounded and
 * unbounded records summed. */
struct hist;
struct output_uncertainty;
void clockreport_latency_json(const struct clocks *c, const struct hist *lat,
		       const struct output_uncertainty *merged, json_t *latency);

/* " (+/- U, how)" after the latency percentiles of the summary. */
void clockreport_print_latency_uncertainty(const struct clocks *c, const struct output_uncertainty *merged,
				    FILE *f);

/* Summary lines: peers not on the builder's clock, and any whose in-band
 * and chrony estimates disagree. */
void clockreport_print_summary(const struct clocks *c, FILE *f);

#endif
