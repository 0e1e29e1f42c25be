#include "metrics.h"

#include "sys/log.h"
#include "sys/procstat.h"
#include "wire/control.h"
#include "wire/counters.h"
#include "io/prom.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void rmet_fwd_total(rmet_fwds f, uint32_t n, struct fwd_stats *st)
{
	memset(st, 0, sizeof *st);
	for (uint32_t d = 0; d < n; d++) {
		struct fwd_stats one;
		fwd_stats(f[d], &one);
		st->writev_calls += one.writev_calls;
		st->bytes_forwarded += one.bytes_forwarded;
		st->ring_records += one.ring_records;
		st->ring_full_waits += one.ring_full_waits;
		st->ring_capacity_bytes += one.ring_capacity_bytes;
		st->ring_fill_bytes += one.ring_fill_bytes;
		st->socket_buffer_bytes += one.socket_buffer_bytes;
		if (one.shm && !st->shm)
			st->ring_name = one.ring_name;
		st->shm = st->shm || one.shm;
	}
}

/* The stats of link b's forwarders, summed over its rails. */
static void rmet_link_stats(const struct intake *in, rmet_fwds f, uint32_t b,
			    struct fwd_stats *st)
{
	rmet_fwd_total(f + intake_connection(in, b, 0), intake_link_rails(in, b), st);
}

/* One value of builder link d's list (CNT_LIST_READER_LINK). */
static uint64_t rmet_link_value(enum cnt_reader_link c, const struct intake_link_view *v,
				const struct fwd_stats *st)
{
	switch (c) {
	case CNT_READER_LINK_frames_forwarded: return v->frames_forwarded;
	case CNT_READER_LINK_bytes_forwarded: return st->bytes_forwarded;
	case CNT_READER_LINK_end_frames: return v->end_frames;
	case CNT_READER_LINK_writev_calls: return st->writev_calls;
	case CNT_READER_LINK_transport_shm: return st->shm ? 1 : 0;
	case CNT_READER_LINK_pending_frames_max: return v->q.peak_frames;
	case CNT_READER_LINK_pending_bytes_max: return v->q.peak_bytes;
	case CNT_READER_LINK_pending_full: return v->q.refused;
	case CNT_READER_LINK_COUNT: break;
	}
	return 0;
}

/* One value of a rail's list (CNT_LIST_READER_RAIL). */
static uint64_t rmet_rail_value(enum cnt_reader_rail c, const struct intake_link_view *v,
				const struct fwd_stats *st)
{
	switch (c) {
	case CNT_READER_RAIL_frames_forwarded: return v->frames_forwarded;
	case CNT_READER_RAIL_bytes_forwarded: return st->bytes_forwarded;
	case CNT_READER_RAIL_writev_calls: return st->writev_calls;
	case CNT_READER_RAIL_socket_buffer_bytes: return st->socket_buffer_bytes;
	case CNT_READER_RAIL_COUNT: break;
	}
	return 0;
}

/* A group of the END report while room is left for process here, clock
 * and chrony at the send; NULL (warned: the caller adds no more) past it. */
static struct ctl_group *rmet_room(struct ctl_report *rep, const char *name)
{
	if (rep->group_count + 3 < CTL_MAX_GROUPS)
		return ctl_report_group(rep, name);
	log_warn("Reader: no room in the END report for group %s and those after it (%u groups at most)",
		 name, CTL_MAX_GROUPS);
	return NULL;
}

/* Group "builder.B.rail.K" per connection of a link of two rails or more. */
static bool rmet_rail_groups(struct ctl_report *rep, const struct intake *in, rmet_fwds f,
			     uint32_t b, const char *link)
{
	if (intake_link_rails(in, b) < 2)
		return true;
	for (uint32_t k = 0; k < intake_link_rails(in, b); k++) {
		struct intake_link_view v;
		struct fwd_stats st;
		intake_rail_view(in, b, k, &v);
		fwd_stats(f[intake_connection(in, b, k)], &st);
		char name[CNT_GROUP_BYTES];
		struct ctl_group *g = rmet_room(rep, cnt_group_rail(name, link, k));
		if (g == NULL)
			return false;
		for (int c = 0; c < CNT_READER_RAIL_COUNT; c++)
			ctl_group_set(g, cnt_reader_rail_names[c],
				      rmet_rail_value((enum cnt_reader_rail)c, &v, &st));
	}
	return true;
}

/* Group "builder.B" per link in a run of several builders, and its rails';
 * the one builder's rails ("builder.0.rail.K") otherwise. */
static void rmet_link_groups(struct ctl_report *rep, const struct intake *in, rmet_fwds f,
			     bool routing)
{
	for (uint32_t b = 0; b < intake_link_count(in); b++) {
		struct intake_link_view v;
		struct fwd_stats st;
		intake_link_view(in, b, &v);
		rmet_link_stats(in, f, b, &st);
		char link[CNT_GROUP_BYTES];
		cnt_group_peer(link, CTL_ROLE_BUILDER, b);
		if (routing) {
			struct ctl_group *g = rmet_room(rep, link);
			if (g == NULL)
				return;
			for (int c = 0; c < CNT_READER_LINK_COUNT; c++)
				ctl_group_set(g, cnt_reader_link_names[c],
					      rmet_link_value((enum cnt_reader_link)c, &v, &st));
		}
		if (!rmet_rail_groups(rep, in, f, b, link))
			return;
	}
}

void rmet_end_report(struct ctl_msg *m, const struct rmet_reader *rd, const struct intake *in,
		     rmet_fwds f, struct rdr_counters *total)
{
	memset(m, 0, sizeof *m);
	m->type = CTL_END;
	m->u.report.status = rd->status;
	memset(total, 0, sizeof *total);
	for (size_t i = 0; i < intake_source_count(in); i++) {
		struct intake_view v;
		intake_view(in, i, &v);
		char name[CNT_GROUP_BYTES];
		struct ctl_group *g =
			ctl_report_group(&m->u.report, cnt_group_peer(name, CTL_ROLE_SOURCE, v.id));
#define RMET_SET(f) ctl_group_set(g, CNT_READER_SOURCE(f), v.c.f); total->f += v.c.f;
		CNT_LIST_READER_SOURCE(RMET_SET)
#undef RMET_SET
	}
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
#define RMET_SET_TOTAL(f) ctl_group_set(g, CNT_READER_SOURCE(f), total->f);
	CNT_LIST_READER_SOURCE(RMET_SET_TOTAL)
#undef RMET_SET_TOTAL
	struct fwd_stats st;
	rmet_fwd_total(f, intake_connection_count(in), &st);
	ctl_group_set(g, CNT_READER(writev_calls), st.writev_calls);
	ctl_group_set(g, CNT_READER(bytes_forwarded), st.bytes_forwarded);
	ctl_group_set(g, CNT_READER(transport_shm), st.shm ? 1 : 0);
	if (st.shm) {
		ctl_group_set(g, CNT_READER(ring_records), st.ring_records);
		ctl_group_set(g, CNT_READER(ring_full_waits), st.ring_full_waits);
		ctl_group_set(g, CNT_READER(ring_capacity_bytes), st.ring_capacity_bytes);
	}
	ctl_group_set(g, CNT_READER(credits_received), rd->credits_received);
	ctl_group_set(g, CNT_READER(refused_connections), rd->refused_connections);
	ctl_group_set(g, CNT_READER(greetings_busy), rd->greetings_busy);
	ctl_group_set(g, CNT_READER(greetings_evicted), rd->greetings_evicted);
	ctl_group_set(g, CNT_READER(greetings_timed_out), rd->greetings_timed_out);
	ctl_group_set(g, CNT_READER(buffer_bytes), rd->buffer_bytes);
	rmet_link_groups(&m->u.report, in, f, rd->routing);
	procstat_report(&m->u.report);
}

void rmet_stats(struct ctl_msg *m, const struct intake *in)
{
	uint64_t held_ns = 0, held_count = 0, verified = 0;
	for (size_t i = 0; i < intake_source_count(in); i++) {
		struct intake_view v;
		intake_view(in, i, &v);
		held_ns += v.c.held_ns + v.holding_ns;
		held_count += v.c.held_count;
		verified += v.c.frames_verified;
	}
	/* The report is large: reset only what is filled in again. */
	m->type = CTL_STATS;
	m->u.report.group_count = 0;
	m->u.report.status = 0;
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
	ctl_group_set(g, CNT_READER_SOURCE(held_ns), held_ns);
	ctl_group_set(g, CNT_READER_SOURCE(held_count), held_count);
	ctl_group_set(g, CNT_READER_SOURCE(frames_verified), verified);
}

/* One per-source counter family of /metrics. Prometheus names a counter
 * *_total and a duration in seconds, and reads _count as a histogram's: so
 * held_ns is es_reader_held_seconds_total (with the hold in progress, as the
 * END report counts it), held_count es_reader_holds_total, and every other
 * counter es_reader_<its metrics.json name>_total. */
static void rmet_prom_counter(struct evbuffer *out, const struct intake_view *views, size_t n,
			      enum cnt_reader_source counter, size_t offset)
{
	const char *field = cnt_reader_source_names[counter];
	bool seconds = counter == CNT_READER_SOURCE_held_ns;
	char name[96], help[128];
	if (seconds)
		snprintf(name, sizeof name, "es_reader_held_seconds_total");
	else if (counter == CNT_READER_SOURCE_held_count)
		snprintf(name, sizeof name, "es_reader_holds_total");
	else
		snprintf(name, sizeof name, "es_reader_%s_total", field);
	snprintf(help, sizeof help, "per source: %s of metrics.json reader.N.source.M%s", field,
		 seconds ? ", in seconds" : "");
	prom_family(out, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		memcpy(&v, (const char *)&views[i].c + offset, sizeof v);
		if (seconds)
			prom_sample_f64_id(out, name, "source", views[i].id,
					   (double)(v + views[i].holding_ns) / 1e9);
		else
			prom_sample_u64_id(out, name, "source", views[i].id, v);
	}
}

/* /status's builder links, in a run of several builders. */
static void rmet_status_links(struct evbuffer *out, const struct intake *in, rmet_fwds f)
{
	evbuffer_add_printf(out, ", \"builders\": [");
	for (uint32_t d = 0; d < intake_link_count(in); d++) {
		struct intake_link_view v;
		struct fwd_stats st;
		intake_link_view(in, d, &v);
		rmet_link_stats(in, f, d, &st);
		evbuffer_add_printf(out, "%s{\"builder\": %u, \"closed\": %s, \"pending_frames\": %" PRIu64
				    ", \"pending_bytes\": %" PRIu64, d ? ", " : "", d,
				    v.closed ? "true" : "false", v.q.frames, v.q.bytes);
		for (int c = 0; c < CNT_READER_LINK_COUNT; c++)
			evbuffer_add_printf(out, ", \"%s\": %" PRIu64, cnt_reader_link_names[c],
					    rmet_link_value((enum cnt_reader_link)c, &v, &st));
		evbuffer_add_printf(out, "}");
	}
	evbuffer_add_printf(out, "]");
}

static void rmet_status_json(struct evbuffer *out, const struct rmet_reader *rd, uint64_t limit,
			     const struct intake_view *views, size_t n)
{
	evbuffer_add_printf(out, "{\"reader\": %u, \"run\": %u, \"admission_limit\": %" PRIu64
			    ", \"sources\": [", rd->id, rd->run_id, limit);
	for (size_t i = 0; i < n; i++) {
		const struct intake_view *v = &views[i];
		evbuffer_add_printf(out, "%s{\"source\": %u, \"state\": %d, \"%s\": %" PRIu64
				    ", \"%s\": %" PRIu64 ", \"held\": %s}", i ? ", " : "",
				    v->id, (int)v->state, CNT_READER_SOURCE(frames_verified),
				    v->c.frames_verified, CNT_READER_SOURCE(frames_rejected),
				    v->c.frames_rejected, v->held ? "true" : "false");
	}
	evbuffer_add_printf(out, "]");
}

/* Per builder link: es_reader_link_<counter>_total{builder="B"} (the
 * maxima as gauges), and what each queue holds now. */
static void rmet_prom_links(struct evbuffer *out, const struct intake *in, rmet_fwds f)
{
	uint32_t n = intake_link_count(in);
	for (int c = 0; c < CNT_READER_LINK_COUNT; c++) {
		bool gauge = c == CNT_READER_LINK_pending_frames_max ||
			     c == CNT_READER_LINK_pending_bytes_max || c == CNT_READER_LINK_transport_shm;
		char name[96], help[128];
		snprintf(name, sizeof name, "es_reader_link_%s%s", cnt_reader_link_names[c],
			 gauge ? "" : "_total");
		snprintf(help, sizeof help, "per builder: %s of metrics.json reader.N.builder.B",
			 cnt_reader_link_names[c]);
		prom_family(out, name, gauge ? "gauge" : "counter", help);
		for (uint32_t d = 0; d < n; d++) {
			struct intake_link_view v;
			struct fwd_stats st;
			intake_link_view(in, d, &v);
			rmet_link_stats(in, f, d, &st);
			prom_sample_u64_id(out, name, "builder", d,
					   rmet_link_value((enum cnt_reader_link)c, &v, &st));
		}
	}
	prom_family(out, "es_reader_link_pending_frames", "gauge", "frames routed to a builder, not yet written");
	for (uint32_t d = 0; d < n; d++) {
		struct intake_link_view v;
		intake_link_view(in, d, &v);
		prom_sample_u64_id(out, "es_reader_link_pending_frames", "builder", d, v.q.frames);
	}
}

static void rmet_prom_forwarder(struct evbuffer *out, const struct intake *in, rmet_fwds f)
{
	struct fwd_stats st;
	rmet_fwd_total(f, intake_connection_count(in), &st);
	prom_family(out, "es_reader_writev_calls_total", "counter", "system calls forwarding to the builder");
	prom_sample_u64(out, "es_reader_writev_calls_total", NULL, st.writev_calls);
	prom_family(out, "es_reader_bytes_forwarded_total", "counter", "bytes forwarded to the builder");
	prom_sample_u64(out, "es_reader_bytes_forwarded_total", NULL, st.bytes_forwarded);
}

static void rmet_prom_ring(struct evbuffer *out, const struct intake *in, rmet_fwds f)
{
	struct fwd_stats st;
	rmet_fwd_total(f, intake_connection_count(in), &st);
	if (!st.shm || st.ring_capacity_bytes == 0)
		return;
	/* The producer's view: what it wrote that the builder has not yet
	 * released. */
	prom_family(out, "es_reader_ring_fill_bytes", "gauge", "bytes in the shared-memory ring");
	prom_sample_u64(out, "es_reader_ring_fill_bytes", NULL, st.ring_fill_bytes);
	prom_family(out, "es_reader_ring_capacity_bytes", "gauge", "size of the shared-memory ring");
	prom_sample_u64(out, "es_reader_ring_capacity_bytes", NULL, st.ring_capacity_bytes);
	prom_family(out, "es_reader_ring_records_total", "counter", "frames put in the ring");
	prom_sample_u64(out, "es_reader_ring_records_total", NULL, st.ring_records);
}

/* /metrics and /status: every per-source counter, the admission limit and
 * what is held. */
void rmet_exposition(struct evbuffer *out, bool json, const struct rmet_reader *rd,
		     const struct intake *in, rmet_fwds f)
{
	struct intake_view views[RDR_MAX_SOURCES];
	size_t n = intake_source_count(in);
	for (size_t i = 0; i < n; i++)
		intake_view(in, i, &views[i]);
	uint64_t limit = intake_limit(in);
	if (json) {
		rmet_status_json(out, rd, limit, views, n);
		if (rd->routing)
			rmet_status_links(out, in, f);
		evbuffer_add_printf(out, "}\n");
		return;
	}
	prom_family(out, "es_reader_admission_limit", "gauge", "event IDs at or beyond this are held");
	prom_sample_u64(out, "es_reader_admission_limit", NULL, limit);
	rmet_prom_forwarder(out, in, f);
	if (rd->routing)
		rmet_prom_links(out, in, f);
	prom_family(out, "es_reader_buffered_bytes", "gauge", "bytes in a source's receive buffer");
	for (size_t i = 0; i < n; i++)
		prom_sample_u64_id(out, "es_reader_buffered_bytes", "source", views[i].id,
				   views[i].buffered_bytes);
	rmet_prom_ring(out, in, f);
	prom_family(out, "es_reader_held", "gauge", "1 while a source is held by the admission limit");
	for (size_t i = 0; i < n; i++)
		prom_sample_u64_id(out, "es_reader_held", "source", views[i].id, views[i].held);
#define RMET_PROM(f) \
	rmet_prom_counter(out, views, n, CNT_READER_SOURCE_##f, offsetof(struct rdr_counters, f));
	CNT_LIST_READER_SOURCE(RMET_PROM)
#undef RMET_PROM
}
