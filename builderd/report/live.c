#include "report/live.h"

#include "clock/clocks.h"
#include "snapshot.h"
#include "wire/counters.h"

#include "core/acct.h"
#include "core/builder.h"
#include "core/evm.h"
#include "core/hist.h"
#include "io/prom.h"
#include "sys/clock.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>

/* Role hub: each builder as its STATS and the manager see it. */
struct live_builder {
	struct evm_builder_view v;   /* the manager's: tokens, in flight, cap, pace */
	uint64_t events_complete;    /* its END, or its last STATS */
	uint64_t events_per_s;       /* its last STATS; 0 once it reported */
};

static void live_builder(const struct snapshot *b, uint32_t k, struct live_builder *lb)
{
	const struct peer *p = peer_builder(b->peers, k);
	*lb = (struct live_builder){ .events_complete = p->live.events_complete,
				     .events_per_s = p->report != NULL ? 0 : p->live.events_per_s };
	if (p->report != NULL)
		lb->events_complete = acct_value(p->report, CNT_GROUP_TOTALS,
						 CNT_BUILDER_CORE(events_complete), NULL);
	lb->v = b->builder_views[k];
}

static void live_status_builders(struct evbuffer *out, const struct snapshot *b)
{
	evbuffer_add_printf(out, ", \"assignment_backlog\": %" PRIu64 ", \"builders\": [",
			    b->assignment_backlog);
	for (uint32_t k = 0; k < b->opt->builders; k++) {
		struct live_builder lb;
		live_builder(b, k, &lb);
		evbuffer_add_printf(out, "%s{\"id\": %u, \"%s\": %" PRIu64 ", \"%s\": %" PRIu64
				    ", \"tokens\": %u, \"in_flight\": %" PRIu64 ", \"backlog_cap\": %" PRIu64
				    ", \"decided_per_s\": %" PRIu64 ", \"dead\": %s}",
				    k ? ", " : "", k, CNT_BUILDER_STATS(events_complete_per_s),
				    lb.events_per_s, CNT_BUILDER_CORE(events_complete),
				    lb.events_complete, lb.v.tokens, lb.v.in_flight, lb.v.cap,
				    lb.v.decided_per_s, lb.v.dead ? "true" : "false");
	}
	evbuffer_add_printf(out, "]");
}

static void live_prom_builders(struct evbuffer *out, const struct snapshot *b)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
		{ "es_hub_builder_events_per_second", "gauge", "events each builder completed per second (its last STATS)" },
		{ "es_hub_builder_events_complete_total", "counter", "events each builder completed" },
		{ "es_hub_builder_tokens", "gauge", "tokens each builder holds: slots minus its events in flight" },
		{ "es_hub_builder_in_flight_events", "gauge", "event IDs assigned to each builder and not yet decided" },
		{ "es_hub_builder_backlog_cap_events", "gauge", "the most each builder may hold now (its pace times --backlog-ms, at most its slots)" },
		{ "es_hub_builder_decided_per_second", "gauge", "each builder's pace as its tokens show it" },
	};
	for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
		prom_family(out, fam[f].name, fam[f].type, fam[f].help);
		for (uint32_t k = 0; k < b->opt->builders; k++) {
			struct live_builder lb;
			live_builder(b, k, &lb);
			const uint64_t v[] = { lb.events_per_s, lb.events_complete, lb.v.tokens,
					       lb.v.in_flight, lb.v.cap, lb.v.decided_per_s };
			prom_sample_u64_id(out, fam[f].name, "builder", k, v[f]);
		}
	}
	prom_family(out, "es_hub_assignment_backlog_events", "gauge",
		    "event IDs assigned and not yet decided, over every builder");
	prom_sample_u64(out, "es_hub_assignment_backlog_events", NULL, b->assignment_backlog);
}

/* The event files (--record, data/record.h): metrics.json's data_*
 * counters, data_write_ns in seconds; a hub's are its builders' END sums. */
static void live_prom_data(struct evbuffer *out, const struct snapshot *b)
{
	const struct {
		const char *name, *help;
		uint64_t value;
	} fam[] = {
		{ "es_builder_data_files_total", "event files closed", b->data_files },
		{ "es_builder_data_events_written_total", "events written to event files",
		  b->data_events_written },
		{ "es_builder_data_bytes_written_total", "bytes written to event files",
		  b->data_bytes_written },
		{ "es_builder_data_events_unwritten_total",
		  "events handed to the writer after it failed", b->data_events_unwritten },
		{ "es_builder_data_events_unrecorded_total",
		  "events with a fragment larger than --record-max-payload", b->data_events_unrecorded },
		{ "es_builder_data_sync_calls_total", "fdatasync and fsync calls of the writer",
		  b->data_sync_calls },
	};
	for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
		prom_family(out, fam[f].name, "counter", fam[f].help);
		prom_sample_u64(out, fam[f].name, NULL, fam[f].value);
	}
	prom_family(out, "es_builder_data_write_seconds_total", "counter",
		    "time in the writer's writes and syncs");
	prom_sample_f64(out, "es_builder_data_write_seconds_total", NULL,
			(double)b->data_write_ns / 1e9);
	if (b->data_format != NULL) {
		prom_family(out, "es_builder_data_free_bytes", "gauge",
			    "free bytes where the event files go, at the writer's last check");
		prom_sample_u64(out, "es_builder_data_free_bytes", NULL, b->data_free_bytes);
	}
}

/* /status: numbers and fixed words only, so plain printf is strict JSON. */
static void live_status(struct evbuffer *out, const struct snapshot *b)
{
	const struct bld_counters *c = &b->builder;
	const struct hist *lat = b->latency;
	uint64_t generated = b->opt->events;
	double completeness = generated ? (double)c->events_complete / (double)generated : 0.0;
	char oldest_text[24] = "null";
	if (b->oldest_pending != UINT64_MAX)
		snprintf(oldest_text, sizeof oldest_text, "%" PRIu64, b->oldest_pending);
	evbuffer_add_printf(out, "{\"run\": %u, \"phase\": \"%s\", \"%s\": %" PRIu64
			    ", \"%s\": %" PRIu64 ", \"%s\": %" PRIu64
			    ", \"events_pending\": %u, \"events_expected\": %" PRIu64
			    ", \"completeness\": %.6f, \"admission_limit\": %" PRIu64
			    ", \"oldest_pending\": %s, \"events_per_s\": %.1f, \"latency_p99_ns\": %" PRIu64
			    ", \"%s\": %" PRIu64 ", \"errors\": %u",
			    b->opt->run_id, b->running ? "running" : "finished",
			    CNT_BUILDER_CORE(events_complete), c->events_complete,
			    CNT_BUILDER_CORE(events_accepted), c->events_accepted,
			    CNT_BUILDER_CORE(events_expired), c->events_expired,
			    b->pending, generated, completeness, b->admission_limit, oldest_text,
			    b->recent_events_per_s, lat ? hist_quantile(lat, 0.99) : 0,
			    CNT_BUILDER(frames_read), b->frames_read, b->error_count);
	if (b->hub)
		live_status_builders(out, b);
	evbuffer_add_printf(out, "}\n");
}

/* Each connected peer's in-band clock offset and its bound. */
static void live_peer_clocks(struct evbuffer *out, const struct snapshot *b)
{
	prom_family(out, "es_builder_peer_clock_offset_seconds", "gauge", "in-band clock offset of each peer (peer minus builder)");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			prom_family(out, "es_builder_peer_clock_bound_seconds", "gauge", "error bound of that offset");
		for (uint32_t i = 0; i < peer_count(b->peers); i++) {
			const struct peer *p = peer_at(b->peers, i);
			int64_t offset, bound;
			if (!p->connected || !clocks_peer_estimate(b->clocks, p, &offset, &bound))
				continue;
			char labels[96] = "", id[16];
			snprintf(id, sizeof id, "%u", p->id);
			prom_label_add(labels, sizeof labels, "role", ctl_role_name(p->role));
			prom_label_add(labels, sizeof labels, "id", id);
			prom_sample_f64(out, pass == 0 ? "es_builder_peer_clock_offset_seconds"
						       : "es_builder_peer_clock_bound_seconds",
					labels, (double)(pass == 0 ? offset : bound) / 1e9);
		}
	}
}

/* Each connection of a link of two rails or more (core/rails.h). */
static void live_rails(struct evbuffer *out, const struct snapshot *b)
{
	static const char *const families[][2] = {
		{ "es_builder_rail_frames_total", "frames read from each reader's connection on each rail" },
		{ "es_builder_rail_frames_wrong_rail_total", "frames of an event whose lane is another rail's (an error)" },
	};
	for (int f = 0; f < 2; f++) {
		bool any = false;
		for (uint32_t r = 0; r < b->opt->readers; r++) {
			const struct snapshot_link *l = &b->links[r];
			for (uint32_t k = 0; l->rails > 1 && k < l->rails; k++) {
				if (!any)
					prom_family(out, families[f][0], "counter", families[f][1]);
				any = true;
				char labels[64] = "", id[16];
				snprintf(id, sizeof id, "%u", r);
				prom_label_add(labels, sizeof labels, "reader", id);
				snprintf(id, sizeof id, "%u", k);
				prom_label_add(labels, sizeof labels, "rail", id);
				prom_sample_u64(out, families[f][0], labels,
						f == 0 ? l->rail[k].frames_received
						       : l->rail[k].frames_wrong_rail);
			}
		}
	}
}

void live_fill(struct evbuffer *out, bool json, const struct snapshot *b)
{
	if (json) {
		live_status(out, b);
		return;
	}
	const struct bld_counters *c = &b->builder;
	const struct hist *lat = b->latency;
	uint64_t limit = b->admission_limit;
	uint64_t oldest = b->oldest_pending;
	uint64_t generated = b->opt->events;
	double completeness = generated ? (double)c->events_complete / (double)generated : 0.0;
#define LIVE_COUNTER(name) \
	prom_family(out, "es_builder_" #name "_total", "counter", "builder core: " #name); \
	prom_sample_u64(out, "es_builder_" #name "_total", NULL, c->name);
	CNT_LIST_BUILDER_CORE(LIVE_COUNTER)
#undef LIVE_COUNTER
	live_prom_data(out, b);
	prom_family(out, "es_builder_frames_read_total", "counter", "frames read from all readers");
	prom_sample_u64(out, "es_builder_frames_read_total", NULL, b->frames_read);
	prom_family(out, "es_builder_reader_frames_total", "counter", "frames read from each reader");
	for (uint32_t r = 0; r < b->opt->readers; r++)
		prom_sample_u64_id(out, "es_builder_reader_frames_total", "reader", r,
				   b->links[r].frames_received);
	prom_family(out, "es_builder_reader_held_seconds", "gauge", "time each reader held sources back (its last report)");
	for (uint32_t r = 0; r < b->opt->readers; r++)
		prom_sample_f64_id(out, "es_builder_reader_held_seconds", "reader", r,
				   (double)peer_reader(b->peers, r)->held_ns / 1e9);
	prom_family(out, "es_builder_refused_connections_total", "counter", "connections refused at greeting");
	prom_sample_u64(out, "es_builder_refused_connections_total", NULL, b->refused_connections);
	uint64_t busy = b->greetings_busy, timed_out = b->greetings_timed_out;
	prom_family(out, "es_builder_greetings_busy_total", "counter",
		    "connections told busy: a listener's greeting cap or one address's share was full");
	prom_sample_u64(out, "es_builder_greetings_busy_total", NULL, busy);
	prom_family(out, "es_builder_greetings_evicted_total", "counter",
		    "greetings in progress evicted to make room for a newcomer at a full door");
	prom_sample_u64(out, "es_builder_greetings_evicted_total", NULL, b->greetings_evicted);
	prom_family(out, "es_builder_greetings_timed_out_total", "counter",
		    "greetings dropped at the handshake deadline");
	prom_sample_u64(out, "es_builder_greetings_timed_out_total", NULL, timed_out);
	prom_family(out, "es_builder_credits_sent_total", "counter", "CREDIT messages sent to readers");
	prom_sample_u64(out, "es_builder_credits_sent_total", NULL, b->credits_sent);
	prom_family(out, "es_builder_errors", "gauge", "errors recorded so far in the run");
	prom_sample_u64(out, "es_builder_errors", NULL, b->error_count);
	prom_family(out, "es_builder_pending_events", "gauge", "events waiting for fragments");
	prom_sample_u64(out, "es_builder_pending_events", NULL, b->pending);
	prom_family(out, "es_builder_window_events", "gauge", "the window (--max-inflight)");
	prom_sample_u64(out, "es_builder_window_events", NULL, b->opt->max_inflight);
	prom_family(out, "es_builder_admission_limit", "gauge", "readers forward event IDs below this (0: admission off)");
	prom_sample_u64(out, "es_builder_admission_limit", NULL, limit);
	if (oldest != UINT64_MAX) {
		prom_family(out, "es_builder_oldest_pending_event", "gauge", "lowest event ID still pending");
		prom_sample_u64(out, "es_builder_oldest_pending_event", NULL, oldest);
	}
	prom_family(out, "es_builder_events_per_second", "gauge", "events completed per second over the last second");
	prom_sample_f64(out, "es_builder_events_per_second", NULL, b->recent_events_per_s);
	if (generated) {
		prom_family(out, "es_builder_completeness_ratio", "gauge", "complete events over the events of the run");
		prom_sample_f64(out, "es_builder_completeness_ratio", NULL, completeness);
	}
	live_rails(out, b);
	live_peer_clocks(out, b);
	if (b->hub)
		live_prom_builders(out, b);
	if (lat != NULL)
		prom_histogram_ns(out, "es_builder_latency_seconds",
				  "source timestamp to record write, clock-corrected", lat);
}

/* A source's place in its run (its last STATS) and the second of the run
 * it was at there. */
static void live_source_json(json_t *o, const struct peer *p)
{
	if (!p->sent.seen)
		return;
	json_object_set_new(o, CNT_SOURCE_STATS(run_second), json_integer((json_int_t)p->sent.run_second));
	json_object_set_new(o, CNT_SOURCE_STATS(send_positions),
			    json_integer((json_int_t)p->sent.send_positions));
	if (p->sent.send_positions > 0)
		json_object_set_new(o, CNT_SOURCE_STATS(last_event_sent),
				    json_integer((json_int_t)p->sent.last_event_sent));
}

/* A reader's credits (role both: the admission limit last sent to it and
 * how many CREDITs), its holds and the frames it verified (its last STATS). */
static void live_reader_json(json_t *o, const struct snapshot *b, const struct peer *p)
{
	json_object_set_new(o, CNT_BUILDER_LINK(frames_received),
			    json_integer((json_int_t)b->links[p->id].frames_received));
	json_object_set_new(o, "held_s", json_real((double)p->held_ns / 1e9));
	json_object_set_new(o, CNT_READER_SOURCE(held_count), json_integer((json_int_t)p->held_count));
	json_object_set_new(o, CNT_READER_SOURCE(frames_verified),
			    json_integer((json_int_t)p->verified));
	if (!b->hub) {
		json_object_set_new(o, "credit_limit", json_integer((json_int_t)p->credit_sent));
		json_object_set_new(o, CNT_BUILDER(credits_sent), json_integer((json_int_t)p->credits));
	}
}

/* The event files as a builder's STATS or END report says (a hub's
 * builders), or as this process writes them (role both). */
static json_t *live_recording(const char *format, uint64_t files, uint64_t bytes,
			      uint64_t write_ns, uint64_t free_bytes)
{
	return json_pack("{s:s?, s:I, s:I, s:I, s:I}", "format", format, CNT_BUILDER(data_files),
			 (json_int_t)files, CNT_BUILDER(data_bytes_written), (json_int_t)bytes,
			 CNT_BUILDER(data_write_ns), (json_int_t)write_ns,
			 CNT_BUILDER_STATS(data_free_bytes), (json_int_t)free_bytes);
}

/* A builder of role hub: its rate, the tokens it sent and holds, its
 * event files; from its END once it reported, else its last STATS. */
static void live_builder_json(json_t *o, const struct snapshot *b, const struct peer *p)
{
	if (p->id < EVM_MAX_BUILDERS)
		json_object_set_new(o, "tokens", json_integer(b->builder_views[p->id].tokens));
	const struct ctl_report *r = p->report;
	if (r != NULL) {
		json_object_set_new(o, CNT_BUILDER_ROLE(tokens_sent), json_integer((json_int_t)acct_value(
			r, CNT_GROUP_TOTALS, CNT_BUILDER_ROLE(tokens_sent), NULL)));
		if (acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_recording), NULL) != 0)
			json_object_set_new(o, "recording", live_recording(NULL,
				acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_files), NULL),
				acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_bytes_written), NULL),
				acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_write_ns), NULL),
				p->live.data_free_bytes));
		return;
	}
	if (!p->live.seen)
		return;
	json_object_set_new(o, "events_per_s", json_integer((json_int_t)p->live.events_per_s));
	json_object_set_new(o, CNT_BUILDER_ROLE(tokens_sent),
			    json_integer((json_int_t)p->live.tokens_sent));
	if (p->live.recording)
		json_object_set_new(o, "recording", live_recording(NULL, p->live.data_files,
			p->live.data_bytes_written, p->live.data_write_ns, p->live.data_free_bytes));
}

/* One peer as the run object sees it. */
static json_t *live_peer_json(const struct snapshot *b, const struct peer *p, uint64_t now_ns)
{
	json_t *o = json_pack("{s:s, s:I, s:b, s:b, s:b, s:b, s:b}", "role", ctl_role_name(p->role),
			      "id", (json_int_t)p->id, "connected", p->connected, "reported",
			      p->reported, "lost", p->lost, "stalled", p->stalled, "stuck", p->stuck);
	int64_t offset, bound;
	if (o == NULL)
		return NULL;
	if (p->connected && clocks_peer_estimate(b->clocks, p, &offset, &bound)) {
		json_object_set_new(o, "clock_offset_ns", json_integer(offset));
		json_object_set_new(o, "clock_bound_ns", json_integer(bound));
	}
	if (p->last_heard_ns != 0 && now_ns >= p->last_heard_ns)
		json_object_set_new(o, "last_heard_ms_ago",
				    json_integer((json_int_t)((now_ns - p->last_heard_ns) / 1000000u)));
	if (p->role == CTL_ROLE_SOURCE)
		live_source_json(o, p);
	else if (p->role == CTL_ROLE_READER && p->id < b->opt->readers)
		live_reader_json(o, b, p);
	else if (p->role == CTL_ROLE_BUILDER)
		live_builder_json(o, b, p);
	return o;
}

/* The window sources may be apart in: --max-inflight, or with several
 * builders the manager's live batches (--batch x --window-batches). */
static uint64_t live_window_events(const struct snapshot *b)
{
	return b->hub ? (uint64_t)b->opt->batch * b->opt->window_batches : b->opt->max_inflight;
}

json_t *live_json(const struct snapshot *b)
{
	struct evbuffer *out = evbuffer_new();
	if (out == NULL)
		return NULL;
	live_status(out, b);
	json_t *status = json_loadb((const char *)evbuffer_pullup(out, -1), evbuffer_get_length(out),
				    0, NULL);
	evbuffer_free(out);
	json_t *peers = json_array();
	uint64_t now_ns = clk_monotonic_ns();
	for (uint32_t i = 0; i < peer_count(b->peers); i++)
		json_array_append_new(peers, live_peer_json(b, peer_at(b->peers, i), now_ns));
	json_t *recording = b->data_format != NULL && !b->hub
		? live_recording(b->data_format, b->data_files, b->data_bytes_written,
				 b->data_write_ns, b->data_free_bytes)
		: json_null();
	return json_pack("{s:o, s:o, s:o, s:I, s:I, s:o, s:o}", "status", status ? status : json_null(),
			 "latency_p50_ns", b->latency ? json_integer((json_int_t)hist_quantile(b->latency, 0.5))
						  : json_null(),
			 "last_error", b->error_count ? json_string(b->errors[b->error_count - 1])
						      : json_null(),
			 "window_events", (json_int_t)live_window_events(b),
			 "decided_below", (json_int_t)b->decided_below,
			 "recording", recording, "peers", peers);
}
