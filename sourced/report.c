#include "report.h"

#include "io/prom.h"
#include "sys/procstat.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void report_end(struct ctl_msg *m, const struct src_counters *c, int status)
{
	memset(m, 0, sizeof *m);
	m->type = CTL_END;
	m->u.report.status = status;
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
#define REPORT_SET(name) ctl_group_set(g, CNT_SOURCE(name), c->name);
	CNT_LIST_SOURCE(REPORT_SET)
#undef REPORT_SET
	procstat_report(&m->u.report);
}

void report_stats(struct ctl_msg *m, uint64_t run_second, uint64_t send_positions,
		  uint64_t last_event_sent)
{
	memset(m, 0, sizeof *m);
	m->type = CTL_STATS;
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
	ctl_group_set(g, CNT_SOURCE_STATS(run_second), run_second);
	ctl_group_set(g, CNT_SOURCE_STATS(send_positions), send_positions);
	ctl_group_set(g, CNT_SOURCE_STATS(last_event_sent), last_event_sent);
}

/* One family of /metrics per counter of the END report. Prometheus names a
 * counter *_total and a duration in seconds: events is the configured
 * number (--events), a gauge es_source_events; sending_ns, the time from the
 * first frame to the last, set once sending ends, a gauge
 * es_source_sending_seconds; every other one a counter es_source_<its
 * metrics.json name>_total. */
static void report_prom_counter(struct evbuffer *out, enum cnt_source counter, uint64_t value)
{
	const char *field = cnt_source_names[counter];
	char name[96], help[128];
	if (counter == CNT_SOURCE_events) {
		prom_family(out, "es_source_events", "gauge", "event IDs this source is to generate a fragment for (--events)");
		prom_sample_u64(out, "es_source_events", NULL, value);
	} else if (counter == CNT_SOURCE_sending_ns) {
		prom_family(out, "es_source_sending_seconds", "gauge",
			    "time from the first frame sent to the last, once sending has ended (sending_ns)");
		prom_sample_f64(out, "es_source_sending_seconds", NULL, (double)value / 1e9);
	} else {
		snprintf(name, sizeof name, "es_source_%s_total", field);
		snprintf(help, sizeof help, "source: %s of metrics.json source.N", field);
		prom_family(out, name, "counter", help);
		prom_sample_u64(out, name, NULL, value);
	}
}

void report_live(struct evbuffer *out, bool json, const struct src_counters *c,
		 const struct report_live *live)
{
	if (json) {
		evbuffer_add_printf(out, "{\"source\": %u, \"run\": %u, \"state\": %d, \"position\": %" PRIu64
				    ", \"%s\": %" PRIu64 ", \"%s\": %" PRIu64 ", \"delayed_held\": %u}\n",
				    live->id, live->run_id, live->state, live->position,
				    CNT_SOURCE(events), live->events, CNT_SOURCE(frames_wire),
				    c->frames_wire, live->delayed_held);
		return;
	}
#define REPORT_PROM(f) report_prom_counter(out, CNT_SOURCE_##f, c->f);
	CNT_LIST_SOURCE(REPORT_PROM)
#undef REPORT_PROM
	prom_family(out, "es_source_position", "gauge", "send positions done of the run's events");
	prom_sample_u64(out, "es_source_position", NULL, live->position);
	prom_family(out, "es_source_delayed_held", "gauge", "fragments held back by the delay fault");
	prom_sample_u64(out, "es_source_delayed_held", NULL, live->delayed_held);
}
