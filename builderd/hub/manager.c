#include "hub/manager.h"
#include "snapshot.h"

#include "hub/fleet.h"
#include "metrics_json.h"
#include "data/output.h"

#include "core/acct.h"
#include "core/hist.h"
#include "sys/log.h"
#include "wire/counters.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET(obj, key, value) metrics_json_set((obj), (key), (value))
#define U64(v) metrics_json_u64(v)

struct manager_builder {
	bool joined;
	bool dead;
	uint64_t tokens;             /* TOKENs taken */
	uint64_t idle_seen_ns;       /* last seen with nothing in flight; 0: never */
	struct evm_loss loss;        /* when it died */
	char why[CTL_MAX_TEXT];      /* how it was given up */
};

struct manager {
	const struct options *opt;
	struct peer_table *peers;
	struct manager_hooks hooks;
	struct evm *evm;
	struct evm_config config;
	struct manager_builder *builders;      /* [builders] */
	bool started;
	uint64_t started_ns;
	uint64_t last_token_ns;
	enum evm_next last;                /* how the last pump ended */
	uint64_t counters[CNT_MANAGER_COUNT];
	uint64_t assign_sequence;
	bool drained;                      /* manager_drain: no batch past drain_end */
	uint64_t drain_end;                /* last_event + 1 */
};

static void manager_error(struct manager *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void manager_error(struct manager *m, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	m->hooks.error(m->hooks.ctx, text);
}

struct manager *manager_create(const struct options *opt, struct peer_table *peers,
		       const struct manager_hooks *hooks)
{
	struct manager *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->opt = opt;
	m->peers = peers;
	m->hooks = *hooks;
	m->last = EVM_ASSIGNED;
	uint64_t high = 4u * (uint64_t)opt->batch;
	m->config = (struct evm_config){
		.plan = { .builders = opt->builders, .first_event = opt->first_event,
			  .events = opt->events, .batch = opt->batch,
			  .window_batches = opt->window_batches },
		.mode = opt->routing == CTL_ROUTING_STATIC ? EVM_STATIC : EVM_MANAGER,
		.low_water = opt->batch,
		.high_water = high > UINT32_MAX ? UINT32_MAX : (uint32_t)high,
		.backlog_ns = opt->backlog_ms * 1000000u,
	};
	m->builders = calloc(opt->builders + 1, sizeof *m->builders);
	m->evm = m->builders != NULL ? evm_create(&m->config) : NULL;
	if (m->evm == NULL) {
		log_error("The event manager of %u builders, %" PRIu64 " events from %" PRIu64
			  ", batches of %u, %u live at most: %s", opt->builders, opt->events,
			  opt->first_event, opt->batch, opt->window_batches,
			  errno == EINVAL ? "the plan is out of range" : "out of memory");
		manager_destroy(m);
		return NULL;
	}
	return m;
}

void manager_destroy(struct manager *m)
{
	if (m == NULL)
		return;
	evm_destroy(m->evm);
	free(m->builders);
	free(m);
}

void manager_welcomed(struct manager *m, struct peer *p)
{
	if (p->conn == NULL || (p->role != CTL_ROLE_READER && p->role != CTL_ROLE_BUILDER))
		return;
	struct ctl_msg msg = { .type = CTL_ROUTING };
	msg.u.routing = (struct ctl_routing){
		.mode = m->config.mode == EVM_STATIC ? CTL_ROUTING_STATIC : CTL_ROUTING_MANAGER,
		.builders = m->config.plan.builders,
		.first_event = m->config.plan.first_event,
		.events = m->config.plan.events,
		.batch = m->config.plan.batch,
		.window_batches = m->config.plan.window_batches,
	};
	m->hooks.send(m->hooks.ctx, p, &msg);
}

/* Why evm_join() or evm_tokens() refused, as the end of a sentence. */
static const char *manager_refusal(int rc, bool join, uint32_t high_water)
{
	static char text[128];
	switch (rc) {
	case -EINVAL:
		if (join) {
			snprintf(text, sizeof text,
				 "its slots must exceed the high water mark of %u events (4 batches), or once busy it could never be free again",
				 high_water);
			return text;
		}
		return "its decided total went backwards";
	case -ERANGE:
		return "it claims more decided than it was assigned, or decided_below past what was assigned";
	case -ESRCH:
		return "it was given up already";
	case -EALREADY:
		return "it joined already";
	default:
		return "the manager refused it";
	}
}

void manager_token(struct manager *m, struct peer *p, const struct ctl_token *t, uint64_t now)
{
	struct manager_builder *mb = &m->builders[p->id];
	m->counters[CNT_MANAGER_tokens_received]++;
	bool join = !mb->joined && !mb->dead;
	if (join && evm_set_lanes(m->evm, p->id, p->rails > 1 ? p->rails : 1) < 0)
		log_warn("Builder %u announced %u rails; the event manager counts it as one lane",
			 p->id, p->rails);
	int rc = join ? evm_join(m->evm, p->id, t->slots, now)
		      : evm_tokens(m->evm, p->id, t->decided, t->decided_below, now);
	if (rc == 0 && join)
		rc = evm_tokens(m->evm, p->id, t->decided, t->decided_below, now);
	if (rc < 0) {
		m->counters[CNT_MANAGER_tokens_refused]++;
		manager_error(m, "Builder %u (pid %u on %s) sent a token the event manager refused (slots %u, decided %" PRIu64
			  ", decided_below %" PRIu64 ", sequence %" PRIu64 "): %s",
			  p->id, p->pid, p->host, t->slots, t->decided, t->decided_below, t->sequence,
			  manager_refusal(rc, join, m->config.high_water));
		return;
	}
	mb->tokens++;
	if (now > m->last_token_ns)
		m->last_token_ns = now;
	if (join) {
		mb->joined = true;
		if (!m->opt->quiet)
			log_info("Builder %u joined the event manager with %u slots", p->id,
				 t->slots);
	}
	m->hooks.progress(m->hooks.ctx, now);
	manager_pump(m);
}

bool manager_all_joined(const struct manager *m)
{
	for (uint32_t b = 0; b < m->opt->builders; b++)
		if (!m->builders[b].joined && !m->builders[b].dead)
			return false;
	return true;
}

void manager_start(struct manager *m, uint64_t now)
{
	m->started = true;
	m->started_ns = now;
	manager_pump(m);
}

void manager_span(const struct manager *m, uint64_t *start_ns, uint64_t *last_token_ns)
{
	*start_ns = m->started_ns;
	*last_token_ns = m->started ? m->last_token_ns : 0;
}

/* Every reader and builder whose control link is up. */
static void manager_broadcast(struct manager *m, const struct ctl_msg *msg)
{
	for (uint32_t i = 0; i < peer_count(m->peers); i++) {
		struct peer *p = peer_at(m->peers, i);
		if (p->conn != NULL && (p->role == CTL_ROLE_READER || p->role == CTL_ROLE_BUILDER))
			m->hooks.send(m->hooks.ctx, p, msg);
	}
}

void manager_pump(struct manager *m)
{
	if (!m->started)
		return;
	for (;;) {
		if (m->drained && evm_totals(m->evm).assigned_end >= m->drain_end)
			return;
		struct evm_assignment a;
		enum evm_next what = evm_next(m->evm, &a);
		if (what != EVM_ASSIGNED) {
			if (what != m->last && what == EVM_WAIT_TOKENS)
				m->counters[CNT_MANAGER_waits_for_tokens]++;
			else if (what != m->last && what == EVM_WAIT_WINDOW)
				m->counters[CNT_MANAGER_waits_for_window]++;
			m->last = what;
			return;
		}
		m->last = EVM_ASSIGNED;
		m->counters[CNT_MANAGER_assignments]++;
		m->counters[CNT_MANAGER_events_assigned] += a.count;
		struct ctl_msg msg = { .type = CTL_ASSIGN };
		msg.u.assign = (struct ctl_assign){
			.first = a.first,
			.count = a.count,
			.builder = a.builder,
			.retired_below = evm_totals(m->evm).retired_below,
			.sequence = ++m->assign_sequence,
		};
		manager_broadcast(m, &msg);
	}
}

void manager_drain(struct manager *m, uint64_t last_event)
{
	if (m->drained)
		return;
	m->drained = true;
	m->drain_end = last_event < UINT64_MAX ? last_event + 1 : UINT64_MAX;
	manager_pump(m);
}

void manager_cut(struct manager *m)
{
	if (m->drained)
		return;
	m->drained = true;
	m->drain_end = evm_totals(m->evm).assigned_end;
}

uint64_t manager_ids_cut_unassigned(const struct manager *m)
{
	uint64_t end = m->config.plan.first_event + m->config.plan.events;
	uint64_t assigned_end = evm_totals(m->evm).assigned_end;
	return m->drained && assigned_end < end ? end - assigned_end : 0;
}

void manager_builder_gone(struct manager *m, uint32_t b, const char *why)
{
	if (b >= m->opt->builders || m->builders[b].dead)
		return;
	struct manager_builder *mb = &m->builders[b];
	if (evm_dead(m->evm, b, &mb->loss) < 0)
		return;
	mb->dead = true;
	snprintf(mb->why, sizeof mb->why, "%s", why);
	m->counters[CNT_MANAGER_builders_lost]++;
	m->counters[CNT_MANAGER_events_lost_with_builders] += mb->loss.events;
	if (mb->loss.events > 0)
		log_warn("Builder %u is lost with %" PRIu64 " events in flight (%" PRIu64
			 " batches, IDs %" PRIu64 " .. %" PRIu64 "); the other builders go on",
			 b, mb->loss.events, mb->loss.batches, mb->loss.lowest, mb->loss.end - 1);
	else
		log_warn("Builder %u is lost with no events in flight; the other builders go on", b);
	struct ctl_msg msg = { .type = CTL_LOST };
	msg.u.lost.builder = b;
	snprintf(msg.u.lost.reason, sizeof msg.u.lost.reason, "builder %u %s", b, why);
	manager_broadcast(m, &msg);
	manager_pump(m);
}

/* A builder's silence counts from its last token, from START, or from
 * the last check that saw it hold nothing (it got events after that),
 * whichever is latest: a builder that joined long before slow sources
 * started, or sat idle with nothing to decide, owes no token for that
 * time. */
int32_t manager_stalled_builder(struct manager *m, uint64_t now, uint64_t stall_ns)
{
	if (!m->started)
		return -1;
	for (uint32_t b = 0; b < m->opt->builders; b++) {
		struct manager_builder *mb = &m->builders[b];
		struct evm_builder_view v;
		if (!evm_builder_view(m->evm, b, &v) || !v.joined || v.dead)
			continue;
		if (v.in_flight == 0) {
			mb->idle_seen_ns = now;
			continue;
		}
		uint64_t from = v.last_token_ns;
		if (m->started_ns > from)
			from = m->started_ns;
		if (mb->idle_seen_ns > from)
			from = mb->idle_seen_ns;
		if (now > from && now - from > stall_ns)
			return (int32_t)b;
	}
	return -1;
}

bool manager_builder_view(const struct manager *m, uint32_t b, struct evm_builder_view *v)
{
	return evm_builder_view(m->evm, b, v);
}

struct evm_totals manager_totals(const struct manager *m)
{
	return evm_totals(m->evm);
}

static json_t *manager_section_routing(const void *m) { return manager_json_routing(m); }
static json_t *manager_section_manager(const void *m) { return manager_json_manager(m); }
static json_t *manager_section_builders(const void *m) { return manager_json_builders(m); }

void manager_snapshot(const struct manager *m, struct snapshot *s)
{
	s->hub = true;
	s->assignment_backlog = 0;
	s->decided_below = evm_totals(m->evm).retired_below;
	for (uint32_t k = 0; k < m->opt->builders && k < EVM_MAX_BUILDERS; k++) {
		if (!evm_builder_view(m->evm, k, &s->builder_views[k]))
			s->builder_views[k] = (struct evm_builder_view){ 0 };
		s->assignment_backlog += s->builder_views[k].in_flight;
	}
	/* The rates are over the span of the tokens. */
	manager_span(m, &s->first_fragment_ns, &s->last_complete_ns);
	s->n_sections = 0;
	s->sections[s->n_sections++] = (struct snapshot_section){ "routing", manager_section_routing, m };
	s->sections[s->n_sections++] = (struct snapshot_section){ "manager", manager_section_manager, m };
	s->sections[s->n_sections++] = (struct snapshot_section){ "builders", manager_section_builders, m };
}

/* ---- metrics.json -------------------------------------------------------- */

json_t *manager_json_routing(const struct manager *m)
{
	json_t *o = json_object();
	SET(o, "mode", metrics_json_text(evm_mode_name(m->config.mode)));
	SET(o, "builder_stall_ms", U64(options_builder_stall_ms(m->opt)));
	SET(o, "builders", U64(m->config.plan.builders));
	SET(o, "first_event", U64(m->config.plan.first_event));
	SET(o, CNT_SOURCE(events), U64(m->config.plan.events));   /* the run's, as the routing message says */
	SET(o, "batch", U64(m->config.plan.batch));
	SET(o, "window_batches", U64(m->config.plan.window_batches));
	SET(o, "low_water", U64(m->config.low_water));
	SET(o, "high_water", U64(m->config.high_water));
	return o;
}

json_t *manager_json_manager(const struct manager *m)
{
	uint64_t busy = 0;
	for (uint32_t b = 0; b < m->opt->builders; b++) {
		struct evm_builder_view v;
		if (evm_builder_view(m->evm, b, &v))
			busy += v.busy_spells;
	}
	json_t *o = json_object();
	for (unsigned i = 0; i < CNT_MANAGER_COUNT; i++)
		SET(o, cnt_manager_names[i],
		    U64(i == CNT_MANAGER_busy_spells ? busy : m->counters[i]));
	struct evm_totals t = evm_totals(m->evm);
	SET(o, "assigned_end", U64(t.assigned_end));
	SET(o, "ids_cut_unassigned", U64(manager_ids_cut_unassigned(m)));
	SET(o, "retired_below", U64(t.retired_below));
	SET(o, "live_batches", U64(t.live_batches));
	SET(o, "memory_bytes", U64(evm_memory_bytes(m->evm)));
	return o;
}

static json_t *manager_json_group(const struct ctl_group *g)
{
	json_t *o = json_object();
	for (uint32_t i = 0; g != NULL && i < g->count; i++)
		SET(o, g->counters[i].name, U64(g->counters[i].value));
	return o;
}

/* A builder's latency from its END report: percentiles of its histogram,
 * and the uncertainty every one of them is within (null: unknown). */
static json_t *manager_json_latency(const struct ctl_report *r)
{
	struct hist h;
	struct output_uncertainty u;
	fleet_report_latency(r, &h, &u);
	json_t *o = json_object();
	SET(o, "p50_ns", U64(hist_quantile(&h, 0.5)));
	SET(o, "p99_ns", U64(hist_quantile(&h, 0.99)));
	SET(o, "max_ns", U64(h.max));
	SET(o, "samples", U64(h.samples));
	SET(o, "uncertainty_ns", u.unbounded ? json_null() : U64((uint64_t)u.max_ns));
	SET(o, "unbounded_samples", U64(u.unbounded));
	return o;
}

/* One builder: the manager's view, its loss, its END report's groups but
 * its latency buckets, its latency summed up. */
static json_t *manager_json_builder(const struct manager *m, uint32_t b)
{
	const struct peer *p = peer_builder(m->peers, b);
	const struct manager_builder *mb = &m->builders[b];
	struct evm_builder_view v = { 0 };
	evm_builder_view(m->evm, b, &v);
	json_t *o = json_object();
	SET(o, "host", metrics_json_text(p->host));
	SET(o, "pid", U64(p->pid));
	SET(o, "status", metrics_json_text(p->reported ? "reported" : p->lost ? peer_how_gone(p)
					 : p->connected ? "connected" : "never connected"));
	SET(o, "joined", json_boolean(v.joined));
	SET(o, "slots", U64(v.slots));
	SET(o, "assigned", U64(v.assigned));
	SET(o, "decided", U64(v.decided));
	SET(o, "decided_below", U64(v.decided_below));
	SET(o, "batches", U64(v.batches));
	SET(o, "tokens", U64(mb->tokens));
	SET(o, "pace_events_per_s", U64(v.decided_per_s));
	SET(o, "backlog_cap", U64(v.cap));
	SET(o, CNT_MANAGER(busy_spells), U64(v.busy_spells));
	SET(o, "lost", U64(v.lost));
	/* Decided events per second from START to its last token. */
	uint64_t span = v.last_token_ns > m->started_ns ? v.last_token_ns - m->started_ns : 0;
	double rate = m->started && span > 0 ? (double)v.decided * 1e9 / (double)span : 0.0;
	SET(o, "events_per_s", metrics_json_real(rate, 1));
	SET(o, "lost_batches", U64(mb->loss.batches));
	SET(o, "lost_reason", mb->dead ? metrics_json_text(mb->why) : json_null());
	SET(o, "misrouted", U64(acct_value(p->report, CNT_GROUP_TOTALS,
					   CNT_BUILDER_ROLE(frags_misrouted), NULL)));
	json_t *groups = json_object();
	size_t hp = strlen(CNT_GROUP_LATENCY);
	for (uint32_t g = 0; p->report != NULL && g < p->report->group_count; g++) {
		const struct ctl_group *gr = &p->report->groups[g];
		/* Its histogram is summed up in "latency"; builder.json has it. */
		if (strncmp(gr->name, CNT_GROUP_LATENCY, hp) == 0 &&
		    (gr->name[hp] == '\0' || gr->name[hp] == '.'))
			continue;
		SET(groups, gr->name[0] == '\0' ? ctl_role_name(CTL_ROLE_BUILDER) : gr->name,
		    manager_json_group(gr));
	}
	SET(o, "counters", groups);
	SET(o, "latency", p->report != NULL ? manager_json_latency(p->report) : json_null());
	return o;
}

json_t *manager_json_builders(const struct manager *m)
{
	json_t *o = json_object();
	for (uint32_t b = 0; b < m->opt->builders; b++) {
		char id[16];
		snprintf(id, sizeof id, "%u", b);
		SET(o, id, manager_json_builder(m, b));
	}
	return o;
}
