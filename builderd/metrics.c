#include "metrics.h"

#include "builder.h"
#include "clk.h"
#include "clocks.h"
#include "hist.h"
#include "log.h"
#include "msgconn.h"
#include "net.h"
#include "output.h"
#include "procstat.h"
#include "prom.h"
#include "clocks.h"
#include "shmring.h"
#include "run_state.h"
#include "shm.h"

#include <errno.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The greeting counters of the builder's three listeners, summed. */
static void bdm_greetings(const struct bd *b, uint64_t *busy, uint64_t *timed_out)
{
	*busy = *timed_out = 0;
	for (int d = 0; d < BD_DOORS; d++) {
		*busy += b->doors[d].busy;
		*timed_out += b->doors[d].timed_out;
	}
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_group(FILE *f, const char *name, const struct ctl_group *g, bool *first)
{
	fprintf(f, "%s\n    ", *first ? "" : ",");
	*first = false;
	json_string(f, name);
	fputs(": {", f);
	for (uint32_t i = 0; i < g->count; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_string(f, g->counters[i].name);
		fprintf(f, ": %" PRIu64, g->counters[i].value);
	}
	fputc('}', f);
}

/* A peer's report groups as "<role>.<id>" and "<role>.<id>.<group>". */
static void json_report(FILE *f, const char *prefix, const struct ctl_report *r, bool *first)
{
	if (r == NULL)
		return;
	for (uint32_t i = 0; i < r->group_count; i++) {
		const struct ctl_group *g = &r->groups[i];
		/* "clock" and "chrony" are reported under "clocks". */
		if (strcmp(g->name, "process") == 0 || strcmp(g->name, "clock") == 0 ||
		    strcmp(g->name, "chrony") == 0)
			continue;
		char name[96];
		if (g->name[0] == '\0')
			snprintf(name, sizeof name, "%s", prefix);
		else
			snprintf(name, sizeof name, "%s.%s", prefix, g->name);
		json_group(f, name, g, first);
	}
}

struct metrics_rates {
	double offered;
	double accepted;
	double duration_s;
	uint64_t generated;
};

static struct metrics_rates metrics_rates(const struct bd *b)
{
	struct metrics_rates m = { 0 };
	const struct bld_counters *c = bld_counters(b->core);
	m.generated = c->events_complete + c->events_expired + c->events_unobserved;
	uint64_t longest_ns = 0;
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		bool found;
		uint64_t ns = acct_value(b->source_peers[s].report, "", "sending_ns", &found);
		if (found && ns > longest_ns)
			longest_ns = ns;
	}
	if (longest_ns > 0)
		m.offered = (double)m.generated / ((double)longest_ns / 1e9);
	if (b->first_fragment_ns && b->last_complete_ns > b->first_fragment_ns) {
		m.duration_s = (double)(b->last_complete_ns - b->first_fragment_ns) / 1e9;
		m.accepted = (double)c->events_accepted / m.duration_s;
	}
	return m;
}

static void json_process(FILE *f, const char *role, uint32_t id, const char *host, uint32_t pid,
			 const struct ctl_report *r, bool *first)
{
	bool found;
	uint64_t user = acct_value(r, "process", "cpu_user_us", &found);
	uint64_t sys = acct_value(r, "process", "cpu_sys_us", NULL);
	uint64_t rss = acct_value(r, "process", "max_rss_kib", NULL);
	fprintf(f, "%s\n    {\"role\": \"%s\", \"id\": %u, \"host\": ", *first ? "" : ",", role, id);
	*first = false;
	json_string(f, host);
	if (found)
		fprintf(f, ", \"pid\": %u, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, \"max_rss_kib\": %" PRIu64 "}",
			pid, (double)user / 1e6, (double)sys / 1e6, rss);
	else
		fprintf(f, ", \"pid\": %u, \"cpu_user_s\": null, \"cpu_sys_s\": null, \"max_rss_kib\": null, \"note\": \"no final counters\"}",
			pid);
}

/* Each reader's data path: its transport and, for a reader that never sent
 * its final counters (it died), the fate of its sources' frames: what the
 * builder received from it, and the rest as lost with the reader. */
static void json_reader_links(FILE *f, const struct bd *b)
{
	fputs("  \"reader_links\": [", f);
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		const struct bd_reader *rd = &b->readers[r];
		const struct bd_peer *p = &b->reader_peers[r];
		struct bshm_info shm;
		bool via_shm = bshm_reader_info(rd, &shm);
		const char *transport = via_shm ? "shm" : rd->state == BD_DATA_WAITING ? "none" : "tcp";
		fprintf(f, "%s\n    {\"id\": %u, \"transport\": \"%s\"", r ? "," : "", r, transport);
		if (via_shm)
			fprintf(f, ", \"segment\": \"%s\", \"ring_capacity_bytes\": %" PRIu64
				   ", \"attached\": %s, \"wakeups\": %" PRIu64,
				shm.segment, shm.capacity_bytes, shm.attached ? "true" : "false",
				shm.wakeups);
		else if (rd->state != BD_DATA_WAITING)
			fprintf(f, ", \"address\": \"%s\"", rd->address);
		fprintf(f, ", \"frames_received\": %" PRIu64 ", \"end_frames\": %" PRIu64
			   ", \"died\": %s", rd->frames_received, rd->end_frames,
			(via_shm && shm.peer_died) || (p->lost && !p->reported) ? "true" : "false");
		if (p->report == NULL) {
			uint64_t wire = 0;
			bool known = rd->source_count > 0;
			for (size_t i = 0; i < rd->source_count; i++) {
				bool found;
				wire += acct_value(b->source_peers[rd->sources[i]].report, "", "frames_wire",
						   &found);
				known = known && found;
			}
			if (known && wire >= rd->frames_received)
				fprintf(f, ", \"frames_on_wire_from_its_sources\": %" PRIu64
					   ", \"frames_lost_with_reader\": %" PRIu64,
					wire, wire - rd->frames_received);
			else
				fputs(", \"frames_lost_with_reader\": null", f);
		}
		fputc('}', f);
	}
	fputs("\n  ],\n", f);
}

int metrics_write(const struct bd *b, const struct acct *a)
{
	char path[2048], tmp[2100];
	snprintf(path, sizeof path, "%s/metrics.json", b->opt.out_dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL) {
		int rc = -errno;
		log_error("Cannot write %s: %s", path, strerror(errno));
		return rc;
	}
	const struct bld_counters *c = bld_counters(b->core);
	const struct hist *lat = out_latency(b->out);
	struct metrics_rates rates = metrics_rates(b);

	fprintf(f, "{\n  \"run\": {\"run\": %u, \"sources\": %u, \"readers\": %u, \"window\": %u, "
		   "\"timeout_ms\": %" PRIu64 ", \"skip_timeout_ms\": %" PRIu64 ", "
		   "\"filter_modulo\": %u, \"filter_cost_us\": %u, "
		   "\"first_event\": %" PRIu64 ", \"admission\": %s, \"flush_every\": %u},\n",
		b->opt.run_id, b->opt.sources, b->opt.readers, b->opt.max_inflight, b->opt.timeout_ms,
		b->opt.skip_timeout_ms, b->opt.filter_modulo, b->opt.filter_cost_us, b->opt.first_event,
		b->opt.no_admission ? "false" : "true", b->opt.flush_every);
	bool balanced = acct_balanced(a);
	fprintf(f, "  \"status\": \"%s\",\n  \"exit_status\": %d,\n  \"balanced\": %s,\n",
		b->status == 0 && balanced ? "ok" : "failed", b->status == 0 && balanced ? 0 : 1,
		balanced ? "true" : "false");

	fputs("  \"equations\": [", f);
	for (size_t i = 0; i < a->count; i++) {
		const struct acct_equation *e = &a->equations[i];
		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_string(f, e->name);
		fprintf(f, ", \"lhs\": %" PRIu64 ", \"rhs\": %" PRIu64 ", \"ok\": %s", e->lhs, e->rhs,
			e->ok ? "true" : "false");
		if (e->note[0]) {
			fputs(", \"note\": ", f);
			json_string(f, e->note);
		}
		fputc('}', f);
	}
	fprintf(f, "\n  ],\n  \"losses\": {\"fragments_lost_with_sources\": %" PRIu64
		   ", \"frames_lost_with_readers\": %" PRIu64 ", \"peers_gone\": [",
		a->lost_with_sources, a->lost_with_readers);
	bool first_gone = true;
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		const struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
							     : &b->reader_peers[i - b->opt.sources];
		if (!p->lost || p->reported)
			continue;
		fprintf(f, "%s{\"role\": \"%s\", \"id\": %u, \"pid\": %u, \"how\": \"%s\"}",
			first_gone ? "" : ", ", ctl_role_name(p->role), p->id, p->pid,
			p->stalled ? "stalled" : "died");
		first_gone = false;
	}
	fputs("]},\n  \"errors\": [", f);
	for (uint32_t i = 0; i < b->error_count; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_string(f, b->errors[i]);
	}
	if (b->errors_dropped)
		fprintf(f, ",\n    \"... and %u more errors, see the log\"", b->errors_dropped);
	fputs("\n  ],\n", f);

	fputs("  \"counters\": {", f);
	bool first = true;
	fprintf(f, "\n    \"builder\": {");
	first = false;
	bool first_field = true;
#define BLD_JSON(name) fprintf(f, "%s\"" #name "\": %" PRIu64, first_field ? "" : ", ", c->name); first_field = false;
	BLD_COUNTERS(BLD_JSON)
#undef BLD_JSON
	uint64_t busy, timed_out;
	bdm_greetings(b, &busy, &timed_out);
	fprintf(f, ", \"greetings_busy\": %" PRIu64 ", \"greetings_timed_out\": %" PRIu64, busy,
		timed_out);
	fprintf(f, ", \"frames_read\": %" PRIu64 ", \"refused_connections\": %" PRIu64
		   ", \"credits_sent\": %" PRIu64 ", \"events_written\": %" PRIu64
		   ", \"record_writes\": %" PRIu64 ", \"negative_latencies\": %" PRIu64 "}",
		b->frames_received, b->refused_connections, b->credits_sent,
		out_events_written(b->out), out_write_calls(b->out), out_negative_latencies(b->out));
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		const struct bd_reader *rd = &b->readers[r];
		fprintf(f, ",\n    \"builder.from_reader.%u\": {\"frames_received\": %" PRIu64
			   ", \"end_frames\": %" PRIu64 ", \"bytes_received\": %" PRIu64
			   ", \"read_calls\": %" PRIu64 "}",
			r, rd->frames_received, rd->end_frames, rd->bytes_received, rd->read_calls);
	}
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "source.%u", s);
		json_report(f, prefix, b->source_peers[s].report, &first);
	}
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "reader.%u", r);
		json_report(f, prefix, b->reader_peers[r].report, &first);
	}
	fputs("\n  },\n", f);

	fprintf(f, "  \"latency\": {\"p50_ns\": %" PRIu64 ", \"p90_ns\": %" PRIu64
		   ", \"p99_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 ", \"min_ns\": %" PRIu64
		   ", \"mean_ns\": %" PRIu64 ", \"samples\": %" PRIu64 ",\n",
		hist_quantile(lat, 0.5), hist_quantile(lat, 0.9), hist_quantile(lat, 0.99), lat->max,
		lat->samples ? lat->min : 0, lat->samples ? lat->sum / lat->samples : 0, lat->samples);
	bdc_write_latency_json(b->clocks, f);
	fputs("    \"buckets\": [", f);
	bool first_bucket = true;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (lat->counts[i] == 0)
			continue;
		fprintf(f, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", first_bucket ? "" : ", ",
			hist_bucket_lower(i), hist_bucket_upper(i), lat->counts[i]);
		first_bucket = false;
	}
	fputs("]},\n", f);
	bdc_write_json(b->clocks, f);

	fprintf(f, "  \"rates\": {\"offered_events_per_s\": %.1f, \"accepted_events_per_s\": %.1f, "
		   "\"build_duration_s\": %.6f, \"events_generated\": %" PRIu64 "},\n",
		rates.offered, rates.accepted, rates.duration_s, rates.generated);

	fputs("  \"processes\": [", f);
	first = true;
	struct ctl_report self;
	memset(&self, 0, sizeof self);
	procstat_report(&self);
	char host[256];
	net_host_name(host, sizeof host);
	json_process(f, "builder", 0, host, (uint32_t)getpid(), &self, &first);
	double cpu_total_us = 0;
	bool cpu_complete = true;
	cpu_total_us += (double)acct_value(&self, "process", "cpu_user_us", NULL) +
			(double)acct_value(&self, "process", "cpu_sys_us", NULL);
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		const struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
							     : &b->reader_peers[i - b->opt.sources];
		json_process(f, ctl_role_name(p->role), p->id, p->host, p->pid, p->report, &first);
		bool found;
		uint64_t u = acct_value(p->report, "process", "cpu_user_us", &found);
		uint64_t s = acct_value(p->report, "process", "cpu_sys_us", NULL);
		cpu_total_us += (double)(u + s);
		cpu_complete = cpu_complete && found;
	}
	fputs("\n  ],\n", f);
	uint64_t frags = c->frags_received;
	fprintf(f, "  \"cpu\": {\"total_s\": %.6f, \"fragments\": %" PRIu64
		   ", \"us_per_fragment\": %.4f, \"all_processes_reported\": %s},\n",
		cpu_total_us / 1e6, frags, frags ? cpu_total_us / (double)frags : 0.0,
		cpu_complete ? "true" : "false");

	json_reader_links(f, b);
	fprintf(f, "  \"memory_bounds\": {\"builder_core_bytes\": %" PRIu64
		   ", \"builder_read_buffers_bytes\": %" PRIu64 ", \"builder_output_bytes\": %" PRIu64,
		(uint64_t)bld_memory_bytes(b->core),
		(uint64_t)b->opt.readers * b->readers[0].cap, out_buffer_bytes(b->out));
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		bool found;
		uint64_t v = acct_value(b->reader_peers[r].report, "", "buffer_bytes", &found);
		if (found)
			fprintf(f, ", \"reader_%u_buffers_bytes\": %" PRIu64, r, v);
	}
	uint32_t rings = 0;
	for (uint32_t r = 0; r < b->opt.readers; r++)
		rings += b->readers[r].shm != NULL;
	if (bshm_capacity_bytes(b) != 0)
		fprintf(f, ", \"shm_ring_capacity_bytes\": %" PRIu64 ", \"shm_rings_bytes\": %" PRIu64,
			bshm_capacity_bytes(b),
			(uint64_t)rings * (SHR_HEADER_BYTES + bshm_capacity_bytes(b)));
	fputs("}\n}\n", f);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		int rc = -errno;
		log_error("Cannot write %s: %s", path, strerror(errno));
		return rc;
	}
	return 0;
}

static void print_duration(FILE *f, uint64_t ns)
{
	if (ns < 10000)
		fprintf(f, "%" PRIu64 " ns", ns);
	else if (ns < 10000000)
		fprintf(f, "%.1f us", (double)ns / 1e3);
	else
		fprintf(f, "%.2f ms", (double)ns / 1e6);
}

void metrics_print_summary(FILE *f, const struct bd *b, const struct acct *a)
{
	const struct bld_counters *c = bld_counters(b->core);
	const struct hist *lat = out_latency(b->out);
	struct metrics_rates rates = metrics_rates(b);
	fprintf(f, "run %u: %" PRIu64 " event IDs: %" PRIu64 " complete (%" PRIu64 " accepted, %" PRIu64
		   " filtered), %" PRIu64 " expired (%" PRIu64 " timeout, %" PRIu64 " skipped, %" PRIu64
		   " window, %" PRIu64 " end of run), %" PRIu64 " never observed\n",
		b->opt.run_id, rates.generated, c->events_complete, c->events_accepted,
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
	print_duration(f, hist_quantile(lat, 0.5));
	fprintf(f, ", p99 ");
	print_duration(f, hist_quantile(lat, 0.99));
	fprintf(f, ", max ");
	print_duration(f, lat->max);
	bdc_print_latency_uncertainty(b->clocks, f);
	fprintf(f, ", %" PRIu64 " samples\n", lat->samples);
	bdc_print_summary(b->clocks, f);
	fprintf(f, "peak RSS: builder %.1f MiB", (double)procstat_peak_rss_kib() / 1024.0);
	for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
		const struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
							     : &b->reader_peers[i - b->opt.sources];
		bool found;
		uint64_t rss = acct_value(p->report, "process", "max_rss_kib", &found);
		if (found)
			fprintf(f, ", %s %u %.1f MiB", ctl_role_name(p->role), p->id, (double)rss / 1024.0);
	}
	fputc('\n', f);
	size_t ok = 0;
	for (size_t i = 0; i < a->count; i++)
		ok += a->equations[i].ok;
	fprintf(f, "equations: %zu of %zu balanced\n", ok, a->count);
	for (size_t i = 0; i < a->count; i++) {
		const struct acct_equation *e = &a->equations[i];
		if (!e->ok)
			fprintf(f, "  NOT BALANCED: %s: %" PRIu64 " != %" PRIu64 "%s%s\n", e->name, e->lhs,
				e->rhs, e->note[0] ? " - " : "", e->note);
	}
	for (uint32_t i = 0; i < b->error_count; i++)
		fprintf(f, "error: %s\n", b->errors[i]);
	bool good = b->status == 0 && acct_balanced(a);
	fprintf(f, "status: %s; records in %s\n", good ? "OK" : "FAILED", b->opt.out_dir);
}

void metrics_fill_live(struct evbuffer *out, bool json, void *arg)
{
	const struct bd *b = arg;
	const struct bld_counters *c = bld_counters(b->core);
	const struct hist *lat = b->out != NULL ? out_latency(b->out) : NULL;
	uint64_t limit = b->opt.no_admission ? 0 : bld_admission_limit(b->core);
	uint64_t oldest = bld_oldest_pending(b->core);
	uint64_t generated = b->opt.events;
	double completeness = generated ? (double)c->events_complete / (double)generated : 0.0;
	if (json) {
		char oldest_text[24] = "null";
		if (oldest != UINT64_MAX)
			snprintf(oldest_text, sizeof oldest_text, "%" PRIu64, oldest);
		evbuffer_add_printf(out, "{\"run\": %u, \"phase\": \"%s\", \"events_complete\": %" PRIu64
				    ", \"events_accepted\": %" PRIu64 ", \"events_expired\": %" PRIu64
				    ", \"events_pending\": %u, \"events_expected\": %" PRIu64
				    ", \"completeness\": %.6f, \"admission_limit\": %" PRIu64
				    ", \"oldest_pending\": %s, \"events_per_s\": %.1f, \"latency_p99_ns\": %" PRIu64
				    ", \"frames_read\": %" PRIu64 ", \"errors\": %u}\n",
				    b->opt.run_id, b->phase == BD_RUNNING ? "running" : "finished",
				    c->events_complete, c->events_accepted, c->events_expired,
				    bld_pending(b->core), generated, completeness, limit, oldest_text,
				    b->recent_events_per_s, lat ? hist_quantile(lat, 0.99) : 0,
				    b->frames_received, b->error_count);
		return;
	}
#define LIVE_COUNTER(name) \
	prom_family(out, "es_builder_" #name "_total", "counter", "builder core: " #name); \
	prom_sample_u64(out, "es_builder_" #name "_total", NULL, c->name);
	BLD_COUNTERS(LIVE_COUNTER)
#undef LIVE_COUNTER
	prom_family(out, "es_builder_frames_read_total", "counter", "frames read from all readers");
	prom_sample_u64(out, "es_builder_frames_read_total", NULL, b->frames_received);
	prom_family(out, "es_builder_reader_frames_total", "counter", "frames read from each reader");
	for (uint32_t r = 0; r < b->opt.readers; r++)
		prom_sample_u64_id(out, "es_builder_reader_frames_total", "reader", r,
				   b->readers[r].frames_received);
	prom_family(out, "es_builder_reader_held_seconds", "gauge", "time each reader held sources back (its last report)");
	for (uint32_t r = 0; r < b->opt.readers; r++)
		prom_sample_f64_id(out, "es_builder_reader_held_seconds", "reader", r,
				   (double)b->reader_peers[r].held_ns / 1e9);
	prom_family(out, "es_builder_refused_connections_total", "counter", "connections refused at greeting");
	prom_sample_u64(out, "es_builder_refused_connections_total", NULL, b->refused_connections);
	uint64_t busy, timed_out;
	bdm_greetings(b, &busy, &timed_out);
	prom_family(out, "es_builder_greetings_busy_total", "counter",
		    "connections refused busy: past a listener's greeting cap or one address's share");
	prom_sample_u64(out, "es_builder_greetings_busy_total", NULL, busy);
	prom_family(out, "es_builder_greetings_timed_out_total", "counter",
		    "greetings dropped at the handshake deadline");
	prom_sample_u64(out, "es_builder_greetings_timed_out_total", NULL, timed_out);
	prom_family(out, "es_builder_credits_sent_total", "counter", "CREDIT messages sent to readers");
	prom_sample_u64(out, "es_builder_credits_sent_total", NULL, b->credits_sent);
	prom_family(out, "es_builder_errors", "gauge", "errors recorded so far in the run");
	prom_sample_u64(out, "es_builder_errors", NULL, b->error_count);
	prom_family(out, "es_builder_pending_events", "gauge", "events waiting for fragments");
	prom_sample_u64(out, "es_builder_pending_events", NULL, bld_pending(b->core));
	prom_family(out, "es_builder_window_events", "gauge", "the window (--max-inflight)");
	prom_sample_u64(out, "es_builder_window_events", NULL, b->opt.max_inflight);
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
	prom_family(out, "es_builder_peer_clock_offset_seconds", "gauge", "in-band clock offset of each peer (peer minus builder)");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			prom_family(out, "es_builder_peer_clock_bound_seconds", "gauge", "error bound of that offset");
		for (uint32_t i = 0; i < (uint32_t)b->opt.sources + b->opt.readers; i++) {
			const struct bd_peer *p = i < b->opt.sources ? &b->source_peers[i]
								     : &b->reader_peers[i - b->opt.sources];
			int64_t offset, bound;
			if (!p->connected || !bdc_peer_estimate(b->clocks, p, &offset, &bound))
				continue;
			char labels[48];
			snprintf(labels, sizeof labels, "role=\"%s\",id=\"%u\"", ctl_role_name(p->role), p->id);
			prom_sample_f64(out, pass == 0 ? "es_builder_peer_clock_offset_seconds"
						       : "es_builder_peer_clock_bound_seconds",
					labels, (double)(pass == 0 ? offset : bound) / 1e9);
		}
	}
	if (lat != NULL)
		prom_histogram_ns(out, "es_builder_latency_seconds",
				  "source timestamp to record write, clock-corrected", lat);
}
