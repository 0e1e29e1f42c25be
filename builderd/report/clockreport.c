#include "report/clockreport.h"
#include "wire/counters.h"

#include "clock/clocks.h"
#include "metrics_json.h"
#include "data/output.h"
#include "clock/peerclock.h"
#include "peer.h"

#include "core/clockoffset.h"
#include "core/hist.h"
#include "core/interval.h"
#include "io/probe.h"
#include "wire/control.h"
#include "wire/text.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *clockreport_verdict_name(enum cks_verdict v)
{
	return v == CKS_CONSISTENT ? "consistent" : v == CKS_INCONSISTENT ? "inconsistent" : "unknown";
}

#define SET(obj, key, value) metrics_json_set((obj), (key), (value))

/* A bound in ns, or null when unknown (negative). */
static json_t *clockreport_json_bound(int64_t bound)
{
	return bound < 0 ? json_null() : json_integer(bound);
}

/* A double that is a whole number of ns, as an integer. */
static json_t *clockreport_json_whole(double v)
{
	if (!isfinite(v) || fabs(v) > 9.2e18)
		return json_null();
	return json_integer((json_int_t)llround(v));
}

static json_t *clockreport_json_chrony(const struct cks_chrony *ch)
{
	json_t *o = json_object();
	if (!ch->available) {
		SET(o, "available", json_false());
		SET(o, "bound_ns", json_null());
		SET(o, "reason", metrics_json_text(ch->reason));
		return o;
	}
	SET(o, "available", json_true());
	SET(o, "synchronised", json_boolean(ch->synchronised));
	SET(o, "stratum", json_integer(ch->stratum));
	SET(o, "leap", metrics_json_text(ch->leap));
	SET(o, "system_time_ns", clockreport_json_whole(ch->offset_s * 1e9));
	SET(o, "root_delay_ns", clockreport_json_whole(ch->root_delay_s * 1e9));
	SET(o, "root_dispersion_ns", clockreport_json_whole(ch->root_dispersion_s * 1e9));
	SET(o, "skew_ppm", metrics_json_real(ch->skew_ppm, 3));
	SET(o, "residual_freq_ppm", metrics_json_real(ch->residual_freq_ppm, 3));
	SET(o, "update_interval_s", metrics_json_real(ch->update_interval_s, 1));
	SET(o, "bound_ns", clockreport_json_bound(cks_chrony_bound_ns(ch)));
	return o;
}

static json_t *clockreport_json_snapshot(const struct peerclock_snapshot *s)
{
	if (!s->valid)
		return json_null();
	json_t *o = json_object();
	SET(o, "offset_ns", json_integer(s->offset_ns));
	SET(o, "bound_ns", json_integer(s->bound_ns));
	return o;
}

static json_t *clockreport_json_stamps(const struct clocks_peer_view *p)
{
	static const char *const name[4] = { "t1", "t2", "t3", "t4" };
	json_t *o = json_object();
	SET(o, "transport", metrics_json_text(p->udp ? "udp" : "control connection"));
	SET(o, "summary", metrics_json_text(p->clock.stamps_summary));
	for (int k = 0; k < 4; k++) {
		json_t *t = json_object();
		SET(t, "kernel software", metrics_json_u64(p->clock.stamps[k][PRB_STAMP_SOFTWARE]));
		SET(t, "hardware", metrics_json_u64(p->clock.stamps[k][PRB_STAMP_HARDWARE]));
		SET(t, "user space", metrics_json_u64(p->clock.stamps[k][PRB_STAMP_USER]));
		SET(o, name[k], t);
	}
	SET(o, "followups", metrics_json_u64(p->probe.followups));
	SET(o, "no_followup", metrics_json_u64(p->probe.no_followup));
	SET(o, "lost", metrics_json_u64(p->probe.lost));
	SET(o, "refused", metrics_json_u64(p->probe.refused));
	return o;
}

static json_t *clockreport_json_ivl(bool valid, struct ivl v)
{
	if (!valid)
		return json_null();
	json_t *o = json_object();
	SET(o, "lo_ns", json_integer(v.lo));
	SET(o, "hi_ns", json_integer(v.hi));
	return o;
}

/* The estimate applied at the end of the run (else after the first
 * burst) and its two intervals: a peer's "applied". */
static json_t *clockreport_json_applied(const struct peerclock_view *p)
{
	const struct peerclock_snapshot *s = p->snap[PEERCLOCK_END].applied.basis != IVL_BASIS_NONE
						? &p->snap[PEERCLOCK_END]
						: &p->snap[PEERCLOCK_START];
	if (s->applied.basis == IVL_BASIS_NONE)
		return json_null();
	json_t *applied = json_object();
	SET(applied, "offset_ns", json_integer(s->applied.offset_ns));
	SET(applied, "bound_ns", json_integer(s->applied.bound_ns));
	SET(applied, "basis", metrics_json_text(ivl_basis_name(s->applied.basis)));
	SET(applied, "at", metrics_json_text(s == &p->snap[PEERCLOCK_END] ? "end" : "start"));
	SET(applied, "inband", clockreport_json_ivl(s->valid, s->inband));
	SET(applied, "chrony", clockreport_json_ivl(s->chrony_valid, s->chrony));
	return applied;
}

/* Every estimate made during the run: a peer's "estimates". */
static json_t *clockreport_json_estimates(const struct clocks_view *c, const struct peerclock_view *p)
{
	json_t *est = json_object(), *by_basis = json_object(), *history = json_array();
	SET(est, "count", metrics_json_u64(p->estimates));
	SET(est, "recorded", metrics_json_u64(p->recorded));
	SET(est, "window_disjoint", metrics_json_u64(p->window_disjoint));
	for (int k = IVL_BASIS_INBAND; k <= IVL_BASIS_UNION; k++)
		SET(by_basis, ivl_basis_name((enum ivl_basis)k), metrics_json_u64(p->by_basis[k]));
	SET(est, "by_basis", by_basis);
	json_t *against = json_null();
	if (p->clock_seen && p->estimates > 0) {
		against = json_object();
		SET(against, "expected_offset_ns", json_integer(p->injected_ns - c->clock->injected_ns));
		SET(against, "inside", metrics_json_u64(p->inside_injected));
		SET(against, "outside", metrics_json_u64(p->estimates - p->inside_injected));
		SET(against, "worst_margin_ns", json_integer(p->worst_margin_ns));
	}
	SET(est, "against_injected", against);
	json_t *fields = json_array();
	static const char *const field[] = { "at_ns", "offset_ns", "bound_ns", "basis" };
	for (size_t k = 0; k < sizeof field / sizeof field[0]; k++)
		json_array_append_new(fields, json_string(field[k]));
	SET(est, "history_fields", fields);
	for (uint32_t k = 0; k < p->recorded; k++) {
		const struct peerclock_record *r = &p->history[k];
		json_t *row = json_array();
		json_array_append_new(row, json_integer(r->at_ns));
		json_array_append_new(row, json_integer(r->offset_ns));
		json_array_append_new(row, json_integer(r->bound_ns));
		json_array_append_new(row, json_string(ivl_basis_name((enum ivl_basis)r->basis)));
		json_array_append_new(history, row);
	}
	SET(est, "history", history);
	return est;
}

static json_t *clockreport_json_inband(const struct clocks_peer_view *p, const struct peerclock_snapshot *best)
{
	const struct peerclock_view *v = &p->clock;
	json_t *o = json_object();
	SET(o, "offset_ns", best != NULL ? json_integer(best->offset_ns) : NULL);
	SET(o, "bound_ns", best != NULL ? json_integer(best->bound_ns) : NULL);
	SET(o, "drift_ppm", metrics_json_real(v->drift_ppm, 3));
	SET(o, "drift_from", metrics_json_text(v->drift_from_chrony ? "chrony" : "default"));
	SET(o, "best_delay_ns", clockreport_json_bound(v->best_delay_ns));
	SET(o, "stamps", clockreport_json_stamps(p));
	SET(o, "start", clockreport_json_snapshot(&v->snap[PEERCLOCK_START]));
	SET(o, "end", clockreport_json_snapshot(&v->snap[PEERCLOCK_END]));
	SET(o, "pings", metrics_json_u64(p->pings));
	SET(o, "pongs", metrics_json_u64(p->pongs));
	SET(o, "accepted", metrics_json_u64(v->accepted));
	SET(o, "rejected", metrics_json_u64(v->rejected));
	SET(o, "evicted", metrics_json_u64(v->evicted));
	SET(o, "unmatched", metrics_json_u64(p->pongs_unmatched));
	SET(o, "retried", metrics_json_u64(p->retried));
	return o;
}

/* A source's "latency": the correction applied to its timestamps and
 * what it left uncertain. */
static json_t *clockreport_json_source_latency(const struct clocks_view *c, const struct clocks_peer_view *p,
					uint16_t source)
{
	/* In role hub the latencies are the builders': none corrected here. */
	struct output_uncertainty u = c->out != NULL ? output_source_uncertainty(c->out, source)
						  : (struct output_uncertainty){ 0 };
	const char *how = p->same_clock ? "same clock: offset 0, uncertainty 0"
		       : c->correction ? "estimated offset subtracted"
				       : "not corrected (--no-clock-correction)";
	int64_t applied = p->same_clock || !p->clock.last_valid ? 0 : p->clock.last.offset_ns;
	json_t *lat = json_object();
	SET(lat, "correction", metrics_json_text(how));
	SET(lat, "applied_offset_ns", json_integer(c->correction ? applied : 0));
	SET(lat, "would_correct_ns", json_integer(applied));
	SET(lat, "earliest_in_events", metrics_json_u64(u.bounded + u.unbounded));
	SET(lat, "max_uncertainty_ns", clockreport_json_bound(u.unbounded ? -1 : u.max_ns));
	SET(lat, "unbounded_events", metrics_json_u64(u.unbounded));
	return lat;
}

static json_t *clockreport_json_peer(const struct clocks_view *c, const struct clocks_peer_view *p, uint32_t i)
{
	const struct peer *bp = p->peer;
	const struct peerclock_view *v = &p->clock;
	const struct peerclock_snapshot *best = peerclock_view_best(v);
	char name[48];
	json_t *o = json_object();
	snprintf(name, sizeof name, "%s.%u", ctl_role_name(bp->role), bp->id);
	SET(o, "peer", metrics_json_text(name));
	SET(o, "role", metrics_json_text(ctl_role_name(bp->role)));
	SET(o, "id", metrics_json_u64(bp->id));
	SET(o, "host", metrics_json_text(bp->host));
	SET(o, "same_host", json_boolean(p->same_host));
	SET(o, "same_clock", json_boolean(p->same_clock));
	SET(o, CNT_CLOCK(injected_offset_ns), v->clock_seen ? json_integer(v->injected_ns) : NULL);

	/* On one host the truth is known: the difference of the injections. */
	if (p->same_host && v->clock_seen) {
		int64_t expected = v->injected_ns - c->clock->injected_ns;
		SET(o, "expected_offset_ns", json_integer(expected));
		if (best != NULL) {
			int64_t error = best->offset_ns - expected;
			SET(o, "error_ns", json_integer(error));
			SET(o, "within_bound", json_boolean(peerclock_abs(error) <= (uint64_t)best->bound_ns));
		}
	} else {
		SET(o, "expected_offset_ns", NULL);
	}
	SET(o, "applied", clockreport_json_applied(v));
	SET(o, "estimates", clockreport_json_estimates(c, v));
	SET(o, "inband", clockreport_json_inband(p, best));
	for (int k = 0; k < PEERCLOCK_PHASES; k++) {
		snprintf(name, sizeof name, "chrony_%s", peerclock_phase_name(k));
		SET(o, name, clockreport_json_chrony(&v->chrony[k]));
	}
	int64_t pb = cks_chrony_bound_ns(&v->chrony[PEERCLOCK_END]);
	int64_t hb = cks_chrony_bound_ns(&c->clock->chrony[PEERCLOCK_END]);
	SET(o, "chrony_pair_bound_ns",
	    clockreport_json_bound(pb < 0 || hb < 0 ? -1 : peerclock_sat_add((uint64_t)pb, (uint64_t)hb)));
	json_t *agreement = json_object();
	SET(agreement, "start", metrics_json_text(clockreport_verdict_name(p->verdict[PEERCLOCK_START])));
	SET(agreement, "end", metrics_json_text(clockreport_verdict_name(p->verdict[PEERCLOCK_END])));
	SET(o, "agreement", agreement);
	SET(o, "consistent", p->overall == CKS_UNKNOWN ? NULL
						       : json_boolean(p->overall == CKS_CONSISTENT));
	if (i < c->sources && c->out != NULL)
		SET(o, "latency", clockreport_json_source_latency(c, p, (uint16_t)i));
	return o;
}

json_t *clockreport_json(const struct clocks *clocks)
{
	struct clocks_view c;
	clocks_view(clocks, &c);
	json_t *o = json_object(), *builder = json_object(), *peers = json_array();
	json_t *inconsistent = json_array();
	char name[48];
	SET(o, "correction", json_boolean(c.correction));
	SET(o, "default_drift_ppm", clockreport_json_whole(CKS_DEFAULT_DRIFT_PPM));
	SET(o, "same_clock_rule", metrics_json_text(CLOCKS_SAME_CLOCK_RULE));
	SET(builder, "host", metrics_json_text(c.host));
	SET(builder, CNT_CLOCK(injected_offset_ns), json_integer(c.clock->injected_ns));
	for (int k = 0; k < PEERCLOCK_PHASES; k++) {
		snprintf(name, sizeof name, "chrony_%s", peerclock_phase_name(k));
		SET(builder, name, clockreport_json_chrony(&c.clock->chrony[k]));
	}
	SET(o, "builder", builder);
	for (uint32_t i = 0; i < c.count; i++) {
		struct clocks_peer_view p;
		clocks_peer_view(clocks, i, &p);
		json_array_append_new(peers, clockreport_json_peer(&c, &p, i));
		if (p.overall != CKS_INCONSISTENT)
			continue;
		snprintf(name, sizeof name, "%s.%u", ctl_role_name(p.peer->role), p.peer->id);
		json_array_append_new(inconsistent, metrics_json_text(name));
	}
	SET(o, "peers", peers);
	SET(o, "inconsistent_peers", inconsistent);
	return o;
}

/* Which clocks the latencies were measured with, for "uncertainty". */
static const char *clockreport_latency_basis(const struct clocks_view *c, const struct output_uncertainty *u)
{
	if (u->unbounded > 0)
		return "unknown: some events came from sources with no clock estimate yet";
	if (c->all_sources_same_clock)
		return "same clock";
	return c->correction ? "clock offsets applied (in band, intersected with chrony's bound where both are known)"
			     : "not corrected (--no-clock-correction): includes the offsets left in";
}

/* What the hub has when it writes no records (role hub): no uncertainty
 * of its own. */
static const struct hist *clockreport_empty_hist(void)
{
	static struct hist empty;
	static bool init;
	if (!init) {
		hist_reset(&empty);
		init = true;
	}
	return &empty;
}

void clockreport_latency_json(const struct clocks *clocks, const struct hist *lat,
		       const struct output_uncertainty *merged, json_t *latency)
{
	struct clocks_view c;
	clocks_view(clocks, &c);
	const struct output *o = c.out;
	struct output_uncertainty u = o != NULL ? output_uncertainty(o)
				   : merged != NULL ? *merged : (struct output_uncertainty){ 0 };
	int64_t unc = u.unbounded ? -1 : u.max_ns;
	static const struct {
		const char *name;
		double q;
	} pct[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };

	const struct hist *uh = o != NULL ? output_uncertainty_hist(o) : clockreport_empty_hist();
	SET(latency, "uncertainty_ns", clockreport_json_bound(unc));
	/* What is typical besides the bound that holds for every percentile:
	 * the per-record uncertainty's own percentiles (histogram upper edges,
	 * within 6.25 %), over the records whose uncertainty is known. */
	json_t *dist = json_null();
	if (uh->samples > 0) {
		dist = json_object();
		SET(dist, "p50_ns", metrics_json_u64(hist_quantile(uh, 0.5)));
		SET(dist, "p90_ns", metrics_json_u64(hist_quantile(uh, 0.9)));
		SET(dist, "p99_ns", metrics_json_u64(hist_quantile(uh, 0.99)));
		SET(dist, "max_ns", metrics_json_u64(uh->max));
		SET(dist, "min_ns", metrics_json_u64(uh->min));
		SET(dist, "records", metrics_json_u64(uh->samples));
	}
	SET(latency, "uncertainty_distribution", dist);
	SET(latency, "uncertainty_basis", metrics_json_text(clockreport_latency_basis(&c, &u)));
	SET(latency, "clock_corrected", json_boolean(c.correction));
	SET(latency, "unbounded_samples", metrics_json_u64(u.unbounded));
	json_t *with = json_object();
	for (size_t k = 0; k <= sizeof pct / sizeof pct[0]; k++) {
		bool max = k == sizeof pct / sizeof pct[0];
		json_t *v = json_object();
		SET(v, "value_ns", metrics_json_u64(max ? lat->max : hist_quantile(lat, pct[k].q)));
		SET(v, "uncertainty_ns", clockreport_json_bound(unc));
		SET(with, max ? "max" : pct[k].name, v);
	}
	SET(latency, "with_uncertainty", with);
	SET(latency, "definition", metrics_json_text("builder record write time minus (earliest source timestamp of the event minus that source's clock offset), on the builder's clock; each value is within uncertainty_ns of the true latency (docs/CLOCKS.md)"));
}

#undef SET

static void clockreport_put_duration(FILE *f, int64_t ns)
{
	char d[TEXT_DURATION_BYTES];
	fputs(text_duration(d, ns), f);
}

void clockreport_print_latency_uncertainty(const struct clocks *clocks, const struct output_uncertainty *merged,
				    FILE *f)
{
	struct clocks_view c;
	clocks_view(clocks, &c);
	if (c.out == NULL && merged == NULL)
		return;
	struct output_uncertainty u = c.out != NULL ? output_uncertainty(c.out) : *merged;
	if (u.unbounded > 0) {
		fprintf(f, " (+/- unknown: %" PRIu64 " samples had no clock estimate)", u.unbounded);
		return;
	}
	fputs(" (+/- ", f);
	clockreport_put_duration(f, u.max_ns);
	const struct hist *uh = c.out != NULL ? output_uncertainty_hist(c.out) : clockreport_empty_hist();
	if (u.max_ns > 0 && uh->samples > 0) {
		fputs(" max, median ", f);
		clockreport_put_duration(f, (int64_t)hist_quantile(uh, 0.5));
		fputs(", p99 ", f);
		clockreport_put_duration(f, (int64_t)hist_quantile(uh, 0.99));
	}
	if (c.all_sources_same_clock)
		fputs(", same clock)", f);
	else if (c.correction)
		fputs(", clock-corrected)", f);
	else
		fputs(", NOT clock-corrected)", f);
}

/* "+5000.1 us +/- 963 ns" */
static void clockreport_put_offset(FILE *f, int64_t offset_ns, int64_t bound_ns)
{
	fputs(offset_ns < 0 ? "" : "+", f);
	clockreport_put_duration(f, offset_ns);
	fputs(" +/- ", f);
	clockreport_put_duration(f, bound_ns);
}

/* One peer's line: its offset in band, chrony's bound, what was applied,
 * and what disagrees. */
static void clockreport_print_peer(const struct clocks_view *c, const struct clocks_peer_view *p, uint32_t i,
			    FILE *f)
{
	const struct peer *bp = p->peer;
	const struct peerclock_view *v = &p->clock;
	const struct peerclock_snapshot *best = peerclock_view_best(v);
	char host[4 * CTL_MAX_TEXT];
	text_log_escape(host, sizeof host, bp->host, strlen(bp->host));
	fprintf(f, "  %s %u on %s: offset ", ctl_role_name(bp->role), bp->id, host);
	if (best == NULL) {
		fputs("not measured", f);
	} else {
		clockreport_put_offset(f, best->offset_ns, best->bound_ns);
		fprintf(f, " (in band, %" PRIu64 " exchanges, %s stamps)", v->accepted,
			v->stamps_summary);
	}
	int64_t pb = cks_chrony_bound_ns(&v->chrony[PEERCLOCK_END]);
	if (pb >= 0) {
		fputs(", chrony bound ", f);
		clockreport_put_duration(f, pb);
	} else {
		fputs(", no chrony bound", f);
	}
	if (v->last_valid) {
		fputs("; applied ", f);
		clockreport_put_offset(f, v->last.offset_ns, v->last.bound_ns);
		fprintf(f, " (%s)", ivl_basis_name(v->last.basis));
	}
	if (v->by_basis[IVL_BASIS_UNION] > 0)
		fprintf(f, "; INCONSISTENT: in band and chrony disjoint in %" PRIu64 " of %" PRIu64
			   " estimates, their union applied", v->by_basis[IVL_BASIS_UNION],
			v->estimates);
	else if (p->overall == CKS_INCONSISTENT)
		fputs("; DISAGREES with chrony beyond both bounds", f);
	if (!c->correction && i < c->sources && best != NULL && !p->same_clock) {
		fputs("; not corrected: its latencies are off by ", f);
		clockreport_put_duration(f, -best->offset_ns);
	}
	fputc('\n', f);
}

void clockreport_print_summary(const struct clocks *clocks, FILE *f)
{
	struct clocks_view c;
	clocks_view(clocks, &c);
	uint32_t same = 0, chrony_peers = 0;
	for (uint32_t i = 0; i < c.count; i++) {
		struct clocks_peer_view p;
		clocks_peer_view(clocks, i, &p);
		same += p.same_clock;
		chrony_peers += cks_chrony_bound_ns(&p.clock.chrony[PEERCLOCK_END]) >= 0;
	}
	fprintf(f, "clocks: %u of %u peers on the builder's clock", same, c.count);
	const struct cks_chrony *hc = &c.clock->chrony[PEERCLOCK_END];
	int64_t hb = cks_chrony_bound_ns(hc);
	if (hb >= 0) {
		fputs("; chrony bound of the builder host ", f);
		clockreport_put_duration(f, hb);
	} else {
		fprintf(f, "; chrony on the builder host: %s",
			hc->available ? "not synchronised" : hc->reason);
	}
	fprintf(f, "; %u of %u peers report a chrony bound\n", chrony_peers, c.count);
	for (uint32_t i = 0; i < c.count; i++) {
		struct clocks_peer_view p;
		clocks_peer_view(clocks, i, &p);
		if (!p.peer->connected || (p.same_clock && p.overall != CKS_INCONSISTENT))
			continue;
		clockreport_print_peer(&c, &p, i, f);
	}
}
