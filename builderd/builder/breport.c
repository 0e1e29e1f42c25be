#include "builder/breport.h"

#include "data/ingest.h"
#include "metrics_json.h"
#include "data/output.h"
#include "data/record.h"
#include "snapshot.h"

#include "core/hist.h"
#include "io/prom.h"
#include "sys/log.h"
#include "sys/procstat.h"

#include <errno.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counters per group of the sparse ones: unique.K and hist.K. */
#define BREPORT_PER_GROUP CTL_MAX_COUNTERS

/* Group "": the core's counters, builderd's, the role's; one report
 * group holds them all (it is full: a new counter of these lists needs
 * a group of its own). */
_Static_assert(CNT_BUILDER_CORE_COUNT + CNT_BUILDER_ROLE_COUNT + CNT_BUILDER_COUNT <=
		       CTL_MAX_COUNTERS,
	       "builderd's totals do not fit one report group");
static bool breport_totals(struct ctl_report *r, const struct snapshot *s,
			const struct breport_role *role)
{
	struct ctl_group *g = ctl_report_group(r, CNT_GROUP_TOTALS);
	bool ok = g != NULL;
#define BREPORT_SET(list, from, name) ok = ctl_group_set(g, CNT_##list(name), (from)->name) && ok;
#define BREPORT_CORE(name) BREPORT_SET(BUILDER_CORE, &s->builder, name)
#define BREPORT_ROLE(name) BREPORT_SET(BUILDER_ROLE, role, name)
	CNT_LIST_BUILDER_CORE(BREPORT_CORE)
	CNT_LIST_BUILDER_ROLE(BREPORT_ROLE)
#undef BREPORT_CORE
#undef BREPORT_ROLE
#undef BREPORT_SET
	const uint64_t own[CNT_BUILDER_COUNT] = {
		[CNT_BUILDER_greetings_busy] = s->greetings_busy,
		[CNT_BUILDER_greetings_evicted] = s->greetings_evicted,
		[CNT_BUILDER_greetings_timed_out] = s->greetings_timed_out,
		[CNT_BUILDER_frames_read] = s->frames_read,
		[CNT_BUILDER_refused_connections] = s->refused_connections,
		[CNT_BUILDER_credits_sent] = 0,
		[CNT_BUILDER_events_written] = s->events_written,
		[CNT_BUILDER_record_writes] = s->record_writes,
		[CNT_BUILDER_negative_latencies] = s->negative_latencies,
		[CNT_BUILDER_control_refused] = s->control_refused,
		[CNT_BUILDER_data_files] = s->data_files,
		[CNT_BUILDER_data_events_written] = s->data_events_written,
		[CNT_BUILDER_data_bytes_written] = s->data_bytes_written,
		[CNT_BUILDER_data_events_unwritten] = s->data_events_unwritten,
		[CNT_BUILDER_data_events_unrecorded] = s->data_events_unrecorded,
		[CNT_BUILDER_data_write_ns] = s->data_write_ns,
		[CNT_BUILDER_data_sync_calls] = s->data_sync_calls,
		[CNT_BUILDER_data_recording] = s->data_recording,
		[CNT_BUILDER_data_direct_bytes] = s->data_direct_bytes,
		[CNT_BUILDER_data_frames_in_place] = s->data_frames_in_place,
		[CNT_BUILDER_data_frames_copied_late] = s->data_frames_copied_late,
		[CNT_BUILDER_data_events_in_files] = s->data_events_in_files,
	};
	for (unsigned i = 0; i < CNT_BUILDER_COUNT; i++)
		ok = ctl_group_set(g, cnt_builder_names[i], own[i]) && ok;
	return ok;
}

/* Groups reader.R: each reader's data link. */
static bool breport_links(struct ctl_report *r, const struct snapshot *s, uint32_t readers)
{
	bool ok = true;
	for (uint32_t i = 0; i < readers; i++) {
		char name[CNT_GROUP_BYTES];
		const struct snapshot_link *l = &s->links[i];
		struct ctl_group *g = ctl_report_group(r, cnt_group_peer(name, CTL_ROLE_READER, i));
		ok = ctl_group_set(g, CNT_BUILDER_LINK(frames_received), l->frames_received) &&
		     ctl_group_set(g, CNT_BUILDER_LINK(end_frames), l->end_frames) &&
		     ctl_group_set(g, CNT_BUILDER_LINK(bytes_received), l->bytes_received) &&
		     ctl_group_set(g, CNT_BUILDER_LINK(read_calls), l->read_calls) && ok;
	}
	return ok;
}

/* The groups added after breport_fill's own: process here, clock and chrony by
 * the control link (io/ctlclient) as it sends the END. */
#define BREPORT_LATER_GROUPS 3u

/* Groups reader.R.rail.K: each connection of a link of two rails or more,
 * while room is left for the later groups; false when some did not fit. */
static bool breport_rails(struct ctl_report *r, const struct snapshot *s, uint32_t readers)
{
	bool ok = true;
	for (uint32_t i = 0; i < readers; i++) {
		const struct snapshot_link *l = &s->links[i];
		char link[CNT_GROUP_BYTES], name[CNT_GROUP_BYTES];
		cnt_group_peer(link, CTL_ROLE_READER, i);
		for (uint32_t k = 0; l->rails > 1 && k < l->rails; k++) {
			if (r->group_count + BREPORT_LATER_GROUPS >= CTL_MAX_GROUPS) {
				ok = false;
				continue;
			}
			struct ctl_group *g = ctl_report_group(r, cnt_group_rail(name, link, k));
#define BREPORT_RAIL(field) ok = ctl_group_set(g, CNT_BUILDER_RAIL(field), l->rail[k].field) && ok;
			CNT_LIST_BUILDER_RAIL(BREPORT_RAIL)
#undef BREPORT_RAIL
		}
	}
	return ok;
}

/* Groups unique.K: source s's unique fragments as "s<s>" in group s / 48,
 * the sources with none left out. */
static bool breport_unique(struct ctl_report *r, const struct ingest *g, uint16_t sources)
{
	bool ok = true;
	for (uint16_t s = 0; s < sources; s++) {
		uint64_t n = ingest_unique_from(g, s);
		if (n == 0)
			continue;
		char group[CNT_GROUP_BYTES], name[CTL_MAX_NAME];
		snprintf(group, sizeof group, "unique.%u", (unsigned)(s / BREPORT_PER_GROUP));
		snprintf(name, sizeof name, "s%u", (unsigned)s);
		ok = ctl_group_set(ctl_report_group(r, group), name, n) && ok;
	}
	return ok;
}

/* Group hist and groups hist.K: the latency histogram's figures, then its
 * non-empty buckets as "b<index>", 48 to a group in bucket order. */
static bool breport_hist(struct ctl_report *r, const struct hist *h, const struct output_uncertainty *u)
{
	struct ctl_group *g = ctl_report_group(r, CNT_GROUP_LATENCY);
	bool empty = h == NULL || h->samples == 0;
	bool ok = ctl_group_set(g, CNT_LATENCY(hist_samples), empty ? 0 : h->samples) &&
		  ctl_group_set(g, CNT_LATENCY(hist_min_ns), empty ? 0 : h->min) &&
		  ctl_group_set(g, CNT_LATENCY(hist_max_ns), empty ? 0 : h->max) &&
		  ctl_group_set(g, CNT_LATENCY(hist_sum_ns), empty ? 0 : h->sum) &&
		  ctl_group_set(g, CNT_LATENCY(hist_uncertainty_max_ns),
				u->max_ns > 0 ? (uint64_t)u->max_ns : 0) &&
		  ctl_group_set(g, CNT_LATENCY(hist_bounded), u->bounded) &&
		  ctl_group_set(g, CNT_LATENCY(hist_unbounded), u->unbounded);
	unsigned written = 0;
	for (unsigned b = 0; !empty && b < HIST_BUCKETS; b++) {
		if (h->counts[b] == 0)
			continue;
		char group[CNT_GROUP_BYTES], name[CTL_MAX_NAME];
		snprintf(group, sizeof group, "%s.%u", CNT_GROUP_LATENCY, written / BREPORT_PER_GROUP);
		snprintf(name, sizeof name, "b%u", b);
		ok = ctl_group_set(ctl_report_group(r, group), name, h->counts[b]) && ok;
		written++;
	}
	return ok;
}

bool breport_fill(struct ctl_report *r, const struct ingest *g, const struct breport_role *role,
	       int32_t status)
{
	const struct options *opt = ingest_options(g);
	memset(r, 0, sizeof *r);
	r->status = status;
	struct snapshot s = { .opt = opt };
	struct snapshot_link *links = calloc(opt->readers + 1, sizeof *links);
	if (links == NULL)
		return false;
	s.links = links;
	ingest_snapshot(g, &s);
	struct output_uncertainty u = { 0 };
	if (ingest_output(g) != NULL)
		u = output_uncertainty(ingest_output(g));
	struct breport_role own = *role;
	if (s.first_fragment_ns != 0 && s.last_complete_ns > s.first_fragment_ns)
		own.build_span_ns = s.last_complete_ns - s.first_fragment_ns;
	bool ok = breport_totals(r, &s, &own);
	ok = breport_links(r, &s, opt->readers) && ok;
	ok = breport_unique(r, g, opt->sources) && ok;
	ok = breport_hist(r, s.latency, &u) && ok;
	ok = breport_rails(r, &s, opt->readers) && ok;
	procstat_report(r);
	free(links);
	return ok;
}

void breport_stats(struct ctl_report *r, const struct ingest *g, uint64_t tokens_sent,
		   uint64_t events_in_flight, double events_per_s)
{
	const struct bld_counters *c = ingest_counters(g);
	memset(r, 0, sizeof *r);
	struct ctl_group *t = ctl_report_group(r, CNT_GROUP_TOTALS);
	ctl_group_set(t, CNT_BUILDER_CORE(events_complete), c->events_complete);
	ctl_group_set(t, CNT_BUILDER_CORE(events_expired), c->events_expired);
	ctl_group_set(t, CNT_BUILDER_CORE(events_accepted), c->events_accepted);
	ctl_group_set(t, CNT_BUILDER_ROLE(tokens_sent), tokens_sent);
	ctl_group_set(t, CNT_BUILDER_STATS(events_in_flight), events_in_flight);
	ctl_group_set(t, CNT_BUILDER_STATS(events_complete_per_s), (uint64_t)(events_per_s + 0.5));
	const struct output *o = ingest_output(g);
	struct record_stats rs;
	if (o == NULL || !output_record_stats(o, &rs))
		return;
	ctl_group_set(t, CNT_BUILDER(data_recording), 1);
	ctl_group_set(t, CNT_BUILDER(data_files), rs.files_closed);
	ctl_group_set(t, CNT_BUILDER(data_bytes_written), rs.bytes_written);
	ctl_group_set(t, CNT_BUILDER(data_write_ns), rs.write_ns);
	ctl_group_set(t, CNT_BUILDER_STATS(data_free_bytes), rs.free_bytes);
}

int breport_write_json(const char *dir, uint32_t builder, uint32_t run, const struct ctl_report *r)
{
	json_t *root = json_object(), *groups = json_object();
	metrics_json_set(root, "builder", metrics_json_u64(builder));
	metrics_json_set(root, "run", metrics_json_u64(run));
	metrics_json_set(root, "status", metrics_json_text(r->status == 0 ? "ok" : "failed"));
	for (uint32_t i = 0; i < r->group_count; i++) {
		const struct ctl_group *g = &r->groups[i];
		json_t *o = json_object();
		for (uint32_t c = 0; c < g->count; c++)
			metrics_json_set(o, g->counters[c].name, metrics_json_u64(g->counters[c].value));
		metrics_json_set(groups, g->name, o);
	}
	metrics_json_set(root, "groups", groups);
	char path[2048];
	snprintf(path, sizeof path, "%s/builder.json", dir);
	int rc = metrics_json_write(path, root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	return rc;
}

int breport_write_fenced(const char *dir, uint32_t builder, uint32_t run,
		      const struct breport_fence *f)
{
	json_t *root = json_object(), *fence = json_object();
	metrics_json_set(root, "builder", metrics_json_u64(builder));
	metrics_json_set(root, "run", metrics_json_u64(run));
	metrics_json_set(root, "status", metrics_json_text("fenced"));
	metrics_json_set(fence, "below", metrics_json_u64(f->below));
	metrics_json_set(fence, "decided", metrics_json_u64(f->decided));
	metrics_json_set(fence, "events_kept", metrics_json_u64(f->events_kept));
	metrics_json_set(fence, "expired_kept", metrics_json_u64(f->expired_kept));
	metrics_json_set(fence, "records_removed", metrics_json_u64(f->removed));
	metrics_json_set(fence, "records_unwritten", metrics_json_u64(f->unwritten));
	metrics_json_set(fence, "cut", json_boolean(f->complete));
	metrics_json_set(root, "fence", fence);
	char path[2048];
	snprintf(path, sizeof path, "%s/builder.json", dir);
	int rc = metrics_json_write(path, root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	return rc;
}

void breport_exposition(struct evbuffer *out, bool json, const struct ctl_report *r,
		     double events_per_s, int64_t data_free_bytes)
{
	const struct ctl_group *g = ctl_report_find(r, CNT_GROUP_TOTALS);
	if (json) {
		/* events_per_s as role both's /status names it (the launcher reads it) */
		evbuffer_add_printf(out, "{\"status\": \"%s\", \"events_per_s\": %.1f",
				    r->status == 0 ? "ok" : "failed", events_per_s);
		for (uint32_t c = 0; g != NULL && c < g->count; c++)
			evbuffer_add_printf(out, ", \"%s\": %" PRIu64, g->counters[c].name,
					    g->counters[c].value);
		evbuffer_add_printf(out, "}\n");
		return;
	}
	for (uint32_t c = 0; g != NULL && c < g->count; c++) {
		char name[CTL_MAX_NAME + 32];
		snprintf(name, sizeof name, "es_builder_%s_total", g->counters[c].name);
		prom_family(out, name, "counter", "the builder role's END counter of that name");
		prom_sample_u64(out, name, NULL, g->counters[c].value);
	}
	prom_family(out, "es_builder_events_per_second", "gauge",
		    "events completed per second over the last second");
	prom_sample_f64(out, "es_builder_events_per_second", NULL, events_per_s);
	if (data_free_bytes >= 0) {
		prom_family(out, "es_builder_data_free_bytes", "gauge",
			    "free bytes where the event files go, at the writer's last check");
		prom_sample_u64(out, "es_builder_data_free_bytes", NULL, (uint64_t)data_free_bytes);
	}
}
