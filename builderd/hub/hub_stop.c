/* The operator's drained stop of the run (docs/RUNCONTROL.md, "stop"):
 * every source is proposed a last event to generate and answers where it
 * will end (a source the proposal reached late is past it); the highest
 * answer is the final stop, and every source ends there as at the run's
 * natural end, so the run closes the normal way: every event up to that
 * one built complete, the books balanced with the cut-off as its own
 * bucket.
 * And the stop at a fault a peer found: every source stops now. */
#include "hub/hub.h"
#include "hub/hub_internal.h"

#include "clock/clocks.h"
#include "hub/manager.h"
#include "clock/peerclock.h"
#include "hub/progress.h"

#include "io/msgstream.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/control.h"

#include <inttypes.h>
#include <stdio.h>

/* The least time the stop's margin covers. The event the hub knows was
 * generated lags the sources' position by the path from a source to a
 * decided event (the reader's batching, the builder's tick, with several
 * builders a token every 2 ms), and the STOP then travels to the sources
 * and is read between two pacing ticks. A source the STOP reaches past
 * last_event stops where it is, and the events it sent beyond the others
 * would expire incomplete; 50 ms of events more is a small price for an
 * operator's stop, and more than those lags on a LAN. */
#define HUB_DRAIN_MARGIN_MIN_NS 50000000u
/* Round trips of the control link the margin covers at least: the lag of
 * what the hub knows (one way) and the STOP's travel (the other). */
#define HUB_DRAIN_MARGIN_RTTS 4u

/* The longest best round trip of a source's clock exchanges (the control
 * link or its probe socket), 0 when none was measured. */
static uint64_t hub_drain_rtt_ns(const struct hub *b)
{
	uint64_t rtt = 0;
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		struct clocks_peer_view v;
		clocks_peer_view(b->clocks, s, &v);
		if (v.clock.best_delay_ns > 0 && (uint64_t)v.clock.best_delay_ns > rtt)
			rtt = (uint64_t)v.clock.best_delay_ns;
	}
	return rtt;
}

/* Events per second decided: the last second's, or since START while the
 * run is younger than that. */
static double hub_drain_rate(const struct hub *b, uint64_t now, uint64_t done)
{
	double rate = progress_rate(b->prog);
	if (rate <= 0.0 && b->started_ns != 0 && now > b->started_ns)
		rate = (double)done * 1e9 / (double)(now - b->started_ns);
	return rate;
}

/* The event boundary: the highest event the hub knows was generated
 * (decided so far: the core's complete ones in role both, the builders'
 * tokens in role hub) plus the events of the margin at the run's rate. */
static uint64_t hub_drain_boundary(const struct hub *b, uint64_t now)
{
	uint64_t done = hub_events_done(b);
	uint64_t margin_ns = HUB_DRAIN_MARGIN_RTTS * hub_drain_rtt_ns(b);
	if (margin_ns < HUB_DRAIN_MARGIN_MIN_NS)
		margin_ns = HUB_DRAIN_MARGIN_MIN_NS;
	double margin = hub_drain_rate(b, now, done) * (double)margin_ns / 1e9;
	uint64_t extra = margin < 1e15 ? (uint64_t)margin + 1 : (uint64_t)1e15;
	uint64_t last = b->opt.first_event + done + extra - 1;
	if (b->opt.events != 0 && last >= b->opt.first_event + b->opt.events)
		last = b->opt.first_event + b->opt.events - 1;
	return last;
}

/* The time sources have to answer the proposal. An answer is a turn of a
 * source's loop away; one that has not come by then is named, and the
 * final stop goes without it (that source may then end past the others,
 * its events beyond the final stop incomplete). */
#define HUB_DRAIN_ANSWER_MIN_NS 1000000000u

void hub_stop_drained(struct hub *b, const char *why)
{
	if (b->phase != HUB_RUNNING || b->drain_ns != 0) {
		log_info("Run %u: operator stop (%s) ignored: %s", b->opt.run_id, why,
			 b->phase != HUB_RUNNING ? "the run has ended" : "already stopping");
		return;
	}
	uint64_t now = clk_monotonic_ns();
	b->drain_ns = now;
	b->drain_proposed = b->drain_last_event = hub_drain_boundary(b, now);
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = CTL_STOP_ALL;
	m.u.stop.last_event = b->drain_proposed;
	m.u.stop.confirm = true;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason, "operator stop (%s)", why);
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		struct peer *p = peer_source(&b->peers, s);
		p->drain_answered = false;
		if (p->conn != NULL)
			msgconn_send(p->conn, &m);
	}
	log_info("Run %u: operator stop (%s) proposed at event %" PRIu64, b->opt.run_id, why,
		 b->drain_proposed);
	hub_drain_settle(b, now);
}

void hub_drain_answer(struct hub *b, struct peer *p, uint64_t last_event)
{
	if (b->drain_ns == 0 || b->drain_final || p->drain_answered) {
		log_warn("Run %u: ignoring source %u's answer to a drained stop (%s)", b->opt.run_id,
			 p->id, b->drain_ns == 0 ? "none was proposed" : b->drain_final
			 ? "the final stop has gone" : "it answered already");
		return;
	}
	p->drain_answered = true;
	p->drain_last = last_event;
	hub_drain_settle(b, clk_monotonic_ns());
}

/* Whether a source's answer is still awaited: its link is up and it has
 * neither answered nor been given up. */
static bool hub_drain_awaits(const struct peer *p)
{
	return p->conn != NULL && !p->lost && !p->drain_answered;
}

void hub_drain_settle(struct hub *b, uint64_t now)
{
	if (b->drain_ns == 0 || b->drain_final || b->phase != HUB_RUNNING)
		return;
	uint64_t wait_ns = HUB_DRAIN_MARGIN_RTTS * hub_drain_rtt_ns(b);
	if (wait_ns < HUB_DRAIN_ANSWER_MIN_NS)
		wait_ns = HUB_DRAIN_ANSWER_MIN_NS;
	bool late = now - b->drain_ns >= wait_ns;
	uint64_t last = b->drain_proposed;
	for (uint16_t s = 0; s < b->opt.sources; s++) {
		const struct peer *p = peer_source(&b->peers, s);
		if (hub_drain_awaits(p) && !late)
			return;
		if (hub_drain_awaits(p))
			log_warn("Run %u: source %u did not answer the drained stop within %" PRIu64
				 " ms; the final stop goes without it", b->opt.run_id, p->id,
				 wait_ns / 1000000u);
		if (p->drain_answered && p->drain_last != CTL_STOP_NOW && p->drain_last > last)
			last = p->drain_last;
	}
	b->drain_final = true;
	b->drain_last_event = last;
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = CTL_STOP_ALL;
	m.u.stop.last_event = last;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason, "operator stop, final");
	for (uint16_t s = 0; s < b->opt.sources; s++)
		if (peer_source(&b->peers, s)->conn != NULL)
			msgconn_send(peer_source(&b->peers, s)->conn, &m);
	log_info("Run %u: operator stop at event %" PRIu64 " (proposed %" PRIu64 ", answered in %.1f ms)",
		 b->opt.run_id, last, b->drain_proposed, (double)(now - b->drain_ns) / 1e6);
	if (b->mgr != NULL)
		manager_drain(b->mgr, last);
}

/* Whether the builders of a run stopped for a fault before START are due
 * their STOP: once every reader has reported or is gone, none will dial
 * them any more (a builder that ended sooner would turn a reader's late
 * data connection away), and nothing is on its way to them. */
static bool hub_fault_builders_due(const struct hub *b)
{
	if (b->started)
		return false;   /* they end with their readers' data */
	for (uint32_t r = 0; r < b->opt.readers; r++) {
		const struct peer *rd = peer_reader(&b->peers, r);
		if (!rd->reported && !rd->lost)
			return false;
	}
	return true;
}

/* Tells one peer of a run stopped for a fault to stop now: a source stops
 * sending, a reader closes its sources and reports, and a builder, before
 * START, ends, so that none waits for a reader that will never forward. */
void hub_fault_tell(struct hub *b, struct peer *p)
{
	if (b->fault_ns == 0 || p->conn == NULL || p->reported || p->lost ||
	    (p->role == CTL_ROLE_BUILDER && !hub_fault_builders_due(b)))
		return;
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = CTL_STOP_ALL;
	m.u.stop.last_event = CTL_STOP_NOW;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason, "%s", b->fault_reason);
	msgconn_send(p->conn, &m);
}

void hub_fault_tell_builders(struct hub *b)
{
	if (b->fault_ns == 0 || b->fault_builders_told || !hub_fault_builders_due(b))
		return;
	b->fault_builders_told = true;
	for (uint32_t k = 0; k < b->peers.builders; k++)
		hub_fault_tell(b, peer_builder(&b->peers, k));
}

void hub_stop_at_fault(struct hub *b, const struct peer *p)
{
	if (b->phase != HUB_RUNNING || b->fault_ns != 0)
		return;
	b->fault_ns = clk_monotonic_ns();
	snprintf(b->fault_reason, sizeof b->fault_reason,
		 "the run ends: %s %u stopped it for a fault (see the hub's log)",
		 ctl_role_name(p->role), p->id);
	/* The readers close their sources at once and forward what they
	 * verified: frames still on their way are never read, and the books
	 * count them (frames_unread_at_stop) rather than wait for frames of
	 * IDs that will not be assigned. Peers that join later are told as
	 * they join. */
	for (uint32_t i = 0; i < b->opt.sources + b->opt.readers; i++)
		hub_fault_tell(b, peer_at(&b->peers, i));
	hub_fault_tell_builders(b);
	if (b->mgr != NULL)
		manager_cut(b->mgr);
	log_warn("Run %u ends: %s %u stopped it for a fault; every source and reader is told to stop now%s",
		 b->opt.run_id, ctl_role_name(p->role), p->id,
		 b->mgr != NULL ? ", nothing more is assigned" : "");
}
