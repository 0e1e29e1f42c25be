/* The clocks' part of builderd's report (docs/METRICS.md, docs/CLOCKS.md):
 * the "clocks" member of metrics.json, the latency fields that depend on
 * clocks, and the summary's lines about them, made from the clock module's
 * plain views (bdc_view, bdc_peer_view) and the output's uncertainties.
 * Private to builderd. */
#ifndef ES_BD_CLOCKREPORT_H
#define ES_BD_CLOCKREPORT_H

#include <jansson.h>
#include <stdio.h>

struct bdc;

/* The "clocks" member of metrics.json (a new reference). */
json_t *clkr_json(const struct bdc *c);

/* Adds the latency fields that depend on clocks to metrics.json's
 * "latency" object, of the latency histogram lat (the record files', or in
 * role hub the builders' merged). merged (NULL in role both) is, in role
 * hub, the builders' uncertainty merged: the largest, the bounded and
 * unbounded records summed. */
struct hist;
struct out_uncertainty;
void clkr_latency_json(const struct bdc *c, const struct hist *lat,
		       const struct out_uncertainty *merged, json_t *latency);

/* " (+/- U, how)" after the latency percentiles of the summary. */
void clkr_print_latency_uncertainty(const struct bdc *c, const struct out_uncertainty *merged,
				    FILE *f);

/* Summary lines: peers not on the builder's clock, and any whose in-band
 * and chrony estimates disagree. */
void clkr_print_summary(const struct bdc *c, FILE *f);

#endif
