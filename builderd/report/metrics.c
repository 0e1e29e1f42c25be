#include "report/metrics.h"

#include "metrics_json.h"

#include "core/builder.h"
#include "core/clockoffset.h"
#include "report/clockreport.h"
#include "core/hist.h"
#include "sys/log.h"
#include "io/shmring.h"
#include "snapshot.h"
#include "wire/counters.h"
#include "wire/text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SET(obj, key, value) metrics_json_set((obj), (key), (value))
#define U64(v) metrics_json_u64(v)

static json_t *json_group(const struct ctl_group *g)
{
	json_t *o = json_object();
	for (uint32_t i = 0; i < g->count; i++)
		SET(o, g->counters[i].name, U64(g->counters[i].value));
	return o;
}

/* A peer's report groups as "<role>.<id>" and "<role>.<id>.<group>". */
static void json_report(json_t *counters, const char *prefix, const struct ctl_report *r)
{
	if (r == NULL)
		return;
	for (uint32_t i = 0; i < r->group_count; i++) {
		const struct ctl_group *g = &r->groups[i];
		/* The clock groups are reported under "clocks", the process
		 * group under "processes". */
		if (strcmp(g->name, CNT_GROUP_PROCESS) == 0 || strcmp(g->name, CNT_GROUP_CLOCK) == 0 ||
		    strcmp(g->name, CKS_CHRONY_GROUP) == 0)
			continue;
		char name[96];
		if (g->name[0] == '\0')
			snprintf(name, sizeof name, "%s", prefix);
		else
			snprintf(name, sizeof name, "%s.%s", prefix, g->name);
		SET(counters, name, json_group(g));
	}
}

struct metrics_rates {
	double offered;
	double accepted;
	double duration_s;
	uint64_t generated;
};

static struct metrics_rates metrics_rates(const struct snapshot *b)
{
	struct metrics_rates m = { 0 };
	const struct bld_counters *c = &b->builder;
	m.generated = c->events_complete + c->events_expired + c->events_unobserved;
	uint64_t longest_ns = 0;
	for (uint16_t s = 0; s < b->opt->sources; s++) {
		bool found;
		uint64_t ns = acct_value(peer_source(b->peers, s)->report, CNT_GROUP_TOTALS,
					  CNT_SOURCE(sending_ns), &found);
		if (found && ns > longest_ns)
			longest_ns = ns;
	}
	if (longest_ns > 0)
		m.offered = (double)m.generated / ((double)longest_ns / 1e9);
	if (b->build_span_ns > 0)   /* role hub: the builders' own spans */
		m.duration_s = (double)b->build_span_ns / 1e9;
	else if (b->first_fragment_ns && b->last_complete_ns > b->first_fragment_ns)
		m.duration_s = (double)(b->last_complete_ns - b->first_fragment_ns) / 1e9;
	if (m.duration_s > 0)
		m.accepted = (double)c->events_accepted / m.duration_s;
	return m;
}

/* This process: a hub is not builder 0, which is a process of its own. */
static const char *metrics_self_role(const struct snapshot *b)
{
	return b->opt->role == ROLE_HUB ? options_role_names[ROLE_HUB] : "builder";
}

static json_t *json_process(const char *role, uint32_t id, const char *host, uint32_t pid,
			    const struct ctl_report *r)
{
	bool found;
	uint64_t user = acct_value(r, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_user_us), &found);
	uint64_t sys = acct_value(r, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_sys_us), NULL);
	uint64_t rss = acct_value(r, CNT_GROUP_PROCESS, CNT_PROCESS(max_rss_kib), NULL);
	json_t *o = json_object();
	SET(o, "role", metrics_json_text(role));
	SET(o, "id", U64(id));
	SET(o, "host", metrics_json_text(host));
	SET(o, "pid", U64(pid));
	SET(o, "cpu_user_s", found ? metrics_json_real((double)user / 1e6, 6) : NULL);
	SET(o, "cpu_sys_s", found ? metrics_json_real((double)sys / 1e6, 6) : NULL);
	SET(o, CNT_PROCESS(max_rss_kib), found ? U64(rss) : NULL);
	if (!found)
		SET(o, "note", metrics_json_text("no final counters"));
	return o;
}

/* Each reader's data path: its transport and, for a reader that never sent
 * its final counters (it died), the fate of its sources' frames: what the
 * builder received from it, and the rest as lost with the reader. */
static json_t *json_reader_links(const struct snapshot *b)
{
	json_t *links = json_array();
	for (uint32_t r = 0; r < b->opt->readers; r++) {
		const struct snapshot_link *rd = &b->links[r];
		const struct peer *p = peer_reader(b->peers, r);
		bool via_shm = strcmp(rd->transport, "shm") == 0;
		const char *transport = rd->transport;
		json_t *o = json_object();
		SET(o, "id", U64(r));
		SET(o, "transport", metrics_json_text(transport));
		if (via_shm) {
			SET(o, "segment", metrics_json_text(rd->segment));
			/* The ring's size, named as its reader's counter of it. */
			SET(o, CNT_READER(ring_capacity_bytes), U64(rd->ring_capacity_bytes));
			SET(o, "attached", json_boolean(rd->attached));
			SET(o, "wakeups", U64(rd->wakeups));
		} else if (strcmp(transport, "none") != 0) {
			SET(o, "address", metrics_json_text(rd->address));
		}
		SET(o, CNT_BUILDER_LINK(frames_received), U64(rd->frames_received));
		SET(o, CNT_BUILDER_LINK(end_frames), U64(rd->end_frames));
		SET(o, "died", json_boolean((via_shm && rd->peer_died) || (p->lost && !p->reported)));
		if (p->report == NULL) {
			uint64_t wire = 0;
			bool known = rd->source_count > 0;
			for (size_t i = 0; i < rd->source_count; i++) {
				bool found;
				uint64_t v = acct_value(peer_source(b->peers, rd->sources[i])->report,
							CNT_GROUP_TOTALS, CNT_SOURCE(frames_wire), &found);
				/* A sum beyond 2^64 is an impossible count, not a loss. */
				known = known && found && v <= UINT64_MAX - wire;
				wire = known ? wire + v : wire;
			}
			if (known && wire >= rd->frames_received) {
				SET(o, "frames_on_wire_from_its_sources", U64(wire));
				SET(o, "frames_lost_with_reader", U64(wire - rd->frames_received));
			} else {
				SET(o, "frames_lost_with_reader", NULL);
			}
		}
		json_array_append_new(links, o);
	}
	return links;
}

static json_t *json_run(const struct snapshot *b)
{
	json_t *o = json_object();
	SET(o, "run", U64(b->opt->run_id));
	SET(o, "sources", U64(b->opt->sources));
	SET(o, "readers", U64(b->opt->readers));
	SET(o, "window", U64(b->opt->max_inflight));
	SET(o, "timeout_ms", U64(b->opt->timeout_ms));
	SET(o, "skip_timeout_ms", U64(b->opt->skip_timeout_ms));
	SET(o, "filter_modulo", U64(b->opt->filter_modulo));
	SET(o, "filter_cost_us", U64(b->opt->filter_cost_us));
	SET(o, "first_event", U64(b->opt->first_event));
	SET(o, "admission", json_boolean(!b->opt->no_admission));
	SET(o, "flush_every", U64(b->opt->flush_every));
	return o;
}

/* A span in ms between two monotonic times, null when either is unknown. */
static json_t *json_span_ms(uint64_t from_ns, uint64_t to_ns)
{
	if (from_ns == 0 || to_ns < from_ns)
		return json_null();
	return metrics_json_real((double)(to_ns - from_ns) / 1e6, 3);
}

/* The operator's view of the run (docs/RUNCONTROL.md): START to the first
 * decided event, the drained stop (null without one) to the books closed. */
static void json_run_control(json_t *root, const struct snapshot *b)
{
	SET(root, "start_to_first_event_ms", json_span_ms(b->started_ns, b->first_built_ns));
	SET(root, "stop_to_books_ms", json_span_ms(b->drain_ns, b->books_ns));
	SET(root, "stop_last_event", b->drain_ns != 0 ? U64(b->drain_last_event) : json_null());
	SET(root, "stop_proposed_event", b->drain_ns != 0 ? U64(b->drain_proposed) : json_null());
	SET(root, "fault_to_books_ms", json_span_ms(b->fault_ns, b->books_ns));
}

static json_t *json_equations(const struct acct *a)
{
	json_t *eqs = json_array();
	for (size_t i = 0; i < a->count; i++) {
		const struct acct_equation *e = &a->equations[i];
		json_t *o = json_object();
		SET(o, "name", metrics_json_text(e->name));
		SET(o, "lhs", U64(e->lhs));
		SET(o, "rhs", U64(e->rhs));
		SET(o, "ok", json_boolean(e->ok));
		if (e->note[0])
			SET(o, "note", metrics_json_text(e->note));
		json_array_append_new(eqs, o);
	}
	return eqs;
}

static json_t *json_impossible_counters(const struct acct *a)
{
	json_t *list = json_array();
	for (size_t i = 0; i < a->violation_count; i++)
		json_array_append_new(list, metrics_json_text(a->violations[i].text));
	return list;
}

static json_t *json_losses(const struct snapshot *b, const struct acct *a)
{
	json_t *o = json_object(), *gone = json_array();
	SET(o, "fragments_lost_with_sources", U64(a->lost_with_sources));
	SET(o, "fragments_cut_by_stop", U64(a->cut_by_stop));
	SET(o, "frames_lost_with_readers", U64(a->lost_with_readers));
	SET(o, "frames_unread_at_stop", U64(a->unread_at_stop));
	if (b->hub)
		SET(o, CNT_MANAGER(events_lost_with_builders), U64(a->lost_with_builders));
	if (b->hub)
		SET(o, "frames_lost_with_builders", U64(a->frames_lost_with_builders));
	for (uint32_t i = 0; i < peer_count(b->peers); i++) {
		const struct peer *p = peer_at(b->peers, i);
		if (!p->lost || p->reported)
			continue;
		json_t *g = json_object();
		SET(g, "role", metrics_json_text(ctl_role_name(p->role)));
		SET(g, "id", U64(p->id));
		SET(g, "pid", U64(p->pid));
		SET(g, "how", metrics_json_text(peer_how_gone(p)));
		json_array_append_new(gone, g);
	}
	SET(o, "peers_gone", gone);
	return o;
}

static json_t *json_errors(const struct snapshot *b)
{
	json_t *errors = json_array();
	for (uint32_t i = 0; i < b->error_count; i++)
		json_array_append_new(errors, metrics_json_text(b->errors[i]));
	if (b->errors_dropped) {
		char more[64];
		snprintf(more, sizeof more, "... and %u more errors, see the log", b->errors_dropped);
		json_array_append_new(errors, metrics_json_text(more));
	}
	return errors;
}

/* A link of two rails or more: each connection's counters, in group
 * "<link>.rail.K" beside the link's own (its sums). */
static void json_rails(json_t *counters, const char *link, const struct snapshot_link *rd)
{
	char name[CNT_GROUP_BYTES];
	for (uint32_t k = 0; rd->rails > 1 && k < rd->rails; k++) {
		json_t *o = json_object();
#define RAIL_JSON(field) SET(o, CNT_BUILDER_RAIL(field), U64(rd->rail[k].field));
		CNT_LIST_BUILDER_RAIL(RAIL_JSON)
#undef RAIL_JSON
		SET(counters, cnt_group_rail(name, link, k), o);
	}
}

static json_t *json_counters(const struct snapshot *b)
{
	const struct bld_counters *c = &b->builder;
	json_t *counters = json_object(), *bld = json_object();
#define BLD_JSON(name) SET(bld, #name, U64(c->name));
	CNT_LIST_BUILDER_CORE(BLD_JSON)
#undef BLD_JSON
	/* The snapshot's fields are named as the counters. */
#define METRICS_BUILDER_FIELD(name) SET(bld, CNT_BUILDER(name), U64(b->name));
	CNT_LIST_BUILDER(METRICS_BUILDER_FIELD)
#undef METRICS_BUILDER_FIELD
	SET(counters, ctl_role_name(CTL_ROLE_BUILDER), bld);
	char name[CNT_GROUP_BYTES];
	for (uint32_t r = 0; r < b->opt->readers; r++) {
		const struct snapshot_link *rd = &b->links[r];
		json_t *o = json_object();
#define LINK_JSON(field) SET(o, CNT_BUILDER_LINK(field), U64(rd->field));
		CNT_LIST_BUILDER_LINK(LINK_JSON)
#undef LINK_JSON
		SET(counters, cnt_group_builder_link(name, r), o);
		json_rails(counters, name, rd);
	}
	for (uint16_t s = 0; s < b->opt->sources; s++)
		json_report(counters, cnt_group_peer(name, CTL_ROLE_SOURCE, s),
			    peer_source(b->peers, s)->report);
	for (uint32_t r = 0; r < b->opt->readers; r++)
		json_report(counters, cnt_group_peer(name, CTL_ROLE_READER, r),
			    peer_reader(b->peers, r)->report);
	return counters;
}

static json_t *json_latency(const struct snapshot *b)
{
	const struct hist *lat = b->latency;
	json_t *o = json_object();
	SET(o, "p50_ns", U64(hist_quantile(lat, 0.5)));
	SET(o, "p90_ns", U64(hist_quantile(lat, 0.9)));
	SET(o, "p99_ns", U64(hist_quantile(lat, 0.99)));
	SET(o, "max_ns", U64(lat->max));
	SET(o, "min_ns", U64(lat->samples ? lat->min : 0));
	SET(o, "mean_ns", U64(lat->samples ? lat->sum / lat->samples : 0));
	SET(o, "samples", U64(lat->samples));
	clockreport_latency_json(b->clocks, lat, b->fleet_uncertainty, o);
	json_t *buckets = json_array();
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (lat->counts[i] == 0)
			continue;
		json_t *bucket = json_array();
		json_array_append_new(bucket, U64(hist_bucket_lower(i)));
		json_array_append_new(bucket, U64(hist_bucket_upper(i)));
		json_array_append_new(bucket, U64(lat->counts[i]));
		json_array_append_new(buckets, bucket);
	}
	SET(o, "buckets", buckets);
	return o;
}

static json_t *json_rates(const struct snapshot *b)
{
	struct metrics_rates rates = metrics_rates(b);
	json_t *o = json_object();
	SET(o, "offered_events_per_s", metrics_json_real(rates.offered, 1));
	SET(o, "accepted_events_per_s", metrics_json_real(rates.accepted, 1));
	SET(o, "build_duration_s", metrics_json_real(rates.duration_s, 6));
	SET(o, "events_generated", U64(rates.generated));
	return o;
}

/* "processes" and "cpu": every process's CPU and memory. */
static void json_processes(json_t *root, const struct snapshot *b)
{
	json_t *procs = json_array();
	json_array_append_new(procs, json_process(metrics_self_role(b), 0, b->self_host, b->self_pid,
						  b->self));
	double cpu_total_us =
		(double)acct_value(b->self, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_user_us), NULL) +
		(double)acct_value(b->self, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_sys_us), NULL);
	bool cpu_complete = true;
	for (uint32_t i = 0; i < peer_count(b->peers); i++) {
		const struct peer *p = peer_at(b->peers, i);
		json_array_append_new(procs, json_process(ctl_role_name(p->role), p->id, p->host,
							  p->pid, p->report));
		bool found;
		uint64_t u = acct_value(p->report, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_user_us), &found);
		uint64_t s = acct_value(p->report, CNT_GROUP_PROCESS, CNT_PROCESS(cpu_sys_us), NULL);
		cpu_total_us += (double)u + (double)s;   /* a peer's u + s may wrap in 64 bits */
		cpu_complete = cpu_complete && found;
	}
	SET(root, "processes", procs);
	uint64_t frags = b->builder.frags_received;
	json_t *cpu = json_object();
	SET(cpu, "total_s", metrics_json_real(cpu_total_us / 1e6, 6));
	SET(cpu, "fragments", U64(frags));
	SET(cpu, "us_per_fragment", metrics_json_real(frags ? cpu_total_us / (double)frags : 0.0, 4));
	SET(cpu, "all_processes_reported", json_boolean(cpu_complete));
	SET(root, "cpu", cpu);
}

static json_t *json_memory_bounds(const struct snapshot *b)
{
	json_t *o = json_object();
	SET(o, "builder_core_bytes", U64((uint64_t)b->core_memory_bytes));
	SET(o, "builder_read_buffers_bytes", U64(b->read_buffers_bytes));
	SET(o, "builder_output_bytes", U64(b->output_bytes));
	if (b->data_format != NULL)
		SET(o, "builder_record_store_bytes", U64(b->data_store_bytes));
	for (uint32_t r = 0; r < b->opt->readers; r++) {
		bool found;
		uint64_t v = acct_value(peer_reader(b->peers, r)->report, CNT_GROUP_TOTALS,
					CNT_READER(buffer_bytes), &found);
		if (found) {
			char name[48];
			snprintf(name, sizeof name, "reader_%u_buffers_bytes", r);
			SET(o, name, U64(v));
		}
	}
	uint32_t rings = 0;
	for (uint32_t r = 0; r < b->opt->readers; r++)
		rings += strcmp(b->links[r].transport, "shm") == 0;
	if (b->shm_capacity_bytes != 0) {
		SET(o, "shm_ring_capacity_bytes", U64(b->shm_capacity_bytes));
		SET(o, "shm_rings_bytes",
		    U64((uint64_t)rings * (SHR_HEADER_BYTES + b->shm_capacity_bytes)));
	}
	return o;
}

/* Fields in the order docs/METRICS.md lists them. */
json_t *metrics_json(const struct snapshot *b, const struct acct *a)
{
	json_t *root = json_object();
	bool balanced = acct_balanced(a);
	bool good = b->status == 0 && balanced;
	SET(root, "run", json_run(b));
	SET(root, "status", metrics_json_text(good ? "ok" : "failed"));
	SET(root, "exit_status", json_integer(good ? 0 : 1));
	SET(root, "balanced", json_boolean(balanced));
	SET(root, "equations", json_equations(a));
	SET(root, "impossible_counters", json_impossible_counters(a));
	SET(root, "losses", json_losses(b, a));
	json_run_control(root, b);
	SET(root, "errors", json_errors(b));
	SET(root, "counters", json_counters(b));
	SET(root, "latency", json_latency(b));
	SET(root, "clocks", clockreport_json(b->clocks));
	SET(root, "rates", json_rates(b));
	json_processes(root, b);
	SET(root, "reader_links", json_reader_links(b));
	SET(root, "memory_bounds", json_memory_bounds(b));
	/* --role hub (docs/BUILDERS.md): the plan, the manager, each builder. */
	for (size_t i = 0; i < b->n_sections; i++)
		SET(root, b->sections[i].name, b->sections[i].make(b->sections[i].owner));
	return root;
}

int metrics_write(const struct snapshot *b, const struct acct *a)
{
	char path[2048];
	snprintf(path, sizeof path, "%s/metrics.json", b->opt->out_dir);
	json_t *root = metrics_json(b, a);
	/* 15 digits print every rounded real as its decimal text. */
	int rc = metrics_json_write(path, root, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	json_decref(root);
	return rc;
}

static void put_duration(FILE *f, uint64_t ns)
{
	char d[TEXT_DURATION_BYTES];
	fputs(text_duration(d, ns > INT64_MAX ? INT64_MAX : (int64_t)ns), f);
}

void metrics_print_summary(FILE *f, const struct snapshot *b, const struct acct *a)
{
	const struct bld_counters *c = &b->builder;
	const struct hist *lat = b->latency;
	struct metrics_rates rates = metrics_rates(b);
	fprintf(f, "run %u: %" PRIu64 " event IDs: %" PRIu64 " complete (%" PRIu64 " accepted, %" PRIu64
		   " filtered), %" PRIu64 " expired (%" PRIu64 " timeout, %" PRIu64 " skipped, %" PRIu64
		   " window, %" PRIu64 " end of run), %" PRIu64 " never observed\n",
		b->opt->run_id, rates.generated, c->events_complete, c->events_accepted,
		c->events_filtered, c->events_expired, c->events_expired_timeout,
		c->events_expired_skipped, c->events_expired_window, c->events_expired_end_of_run,
		c->events_unobserved);
	fprintf(f, "fragments: %" PRIu64 " received: %" PRIu64 " unique, %" PRIu64 " duplicate, %" PRIu64
		   " late, %" PRIu64 " invalid; %" PRIu64 " held by expired events\n",
		c->frags_received, c->frags_unique, c->frags_duplicate, c->frags_late,
		c->frags_invalid, c->frags_in_expired);
	fprintf(f, "rates: offered %.0f events/s, accepted %.0f events/s over %.3f s\n",
		rates.offered, rates.accepted, rates.duration_s);
	fprintf(f, "latency: p50 ");
	put_duration(f, hist_quantile(lat, 0.5));
	fprintf(f, ", p99 ");
	put_duration(f, hist_quantile(lat, 0.99));
	fprintf(f, ", max ");
	put_duration(f, lat->max);
	clockreport_print_latency_uncertainty(b->clocks, b->fleet_uncertainty, f);
	fprintf(f, ", %" PRIu64 " samples\n", lat->samples);
	clockreport_print_summary(b->clocks, f);
	fprintf(f, "peak RSS: %s %.1f MiB", metrics_self_role(b),
		(double)b->self_peak_rss_kib / 1024.0);
	for (uint32_t i = 0; i < peer_count(b->peers); i++) {
		const struct peer *p = peer_at(b->peers, i);
		bool found;
		uint64_t rss = acct_value(p->report, CNT_GROUP_PROCESS, CNT_PROCESS(max_rss_kib), &found);
		if (found)
			fprintf(f, ", %s %u %.1f MiB", ctl_role_name(p->role), p->id, (double)rss / 1024.0);
	}
	fputc('\n', f);
	size_t ok = 0;
	for (size_t i = 0; i < a->count; i++)
		ok += a->equations[i].ok;
	fprintf(f, "equations: %zu of %zu balanced", ok, a->count);
	if (a->violation_count > 0)
		fprintf(f, "; %zu impossible counter%s", a->violation_count,
			a->violation_count == 1 ? "" : "s");
	fputc('\n', f);
	for (size_t i = 0; i < a->count; i++) {
		const struct acct_equation *e = &a->equations[i];
		if (!e->ok)
			fprintf(f, "  NOT BALANCED: %s: %" PRIu64 " != %" PRIu64 "%s%s\n", e->name, e->lhs,
				e->rhs, e->note[0] ? " - " : "", e->note);
	}
	for (uint32_t i = 0; i < b->error_count; i++) {
		/* Errors quote peers; the summary is a log a person reads. */
		char line[1024];
		text_log_escape(line, sizeof line, b->errors[i], strlen(b->errors[i]));
		fprintf(f, "error: %s\n", line);
	}
	bool good = b->status == 0 && acct_balanced(a);
	fprintf(f, "status: %s; records in %s\n", good ? "OK" : "FAILED", b->opt->out_dir);
}
