#include "clock/clocks.h"
#include "clock/clockfan.h"
#include "wire/counters.h"

#include "data/output.h"
#include "clock/peerclock.h"
#include "peer.h"

#include "io/msgstream.h"
#include "io/net.h"
#include "io/chronyc.h"
#include "io/probe.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/control.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* One peer's exchanges; its estimate is the pclk. */
struct clocks_peer {
	struct clocks *owner;
	uint32_t index;
	struct peerclock *clock;        /* offsets, bounds, chrony states, estimates */
	bool stats_seen;           /* its first STATS arrived: probe port known */
	bool ready;                /* first burst answered, or given up on */
	uint64_t joined_ns;        /* monotonic */
	uint64_t probe_answers;    /* exchanges completed over the probe socket */
	unsigned retries;          /* early exchanges since the last quiet one */
	uint64_t retried;          /* early exchanges in all */
	struct prb_prober *prober; /* UDP probes; NULL: PINGs on the control link */
	uint64_t next_ping_ns;     /* monotonic; 0 when none is planned */
	unsigned burst_left;       /* pings of the current burst still to send */
	uint64_t sequence;         /* of the last PING sent */
	uint64_t last_pong_sequence;
	uint64_t close_sequence;   /* the final burst is answered at this PONG */
	uint64_t pings;
	uint64_t pongs;
	uint64_t pongs_unmatched;  /* PONGs answering no PING of ours */
	bool local;                /* its control connection is from our own addresses */
	struct output_clock applied;  /* --role hub: its clock against ours, as last estimated */
	bool applied_set;
};

struct clocks {
	struct peer_table *table;  /* the hub's peers, whose connections carry the exchanges */
	struct event_base *base;   /* for the probe sockets */
	void (*ready)(void *arg);  /* every source measured: the hub may start */
	void *ready_arg;
	struct output *out;           /* where source offsets are applied */
	uint16_t sources;
	uint32_t run_id;
	bool quiet;
	uint64_t probe_period_ns;
	struct event *ev_timer;
	uint32_t count;            /* sources, then readers */
	struct clocks_peer *peers;
	char host[CTL_MAX_TEXT];
	struct peerclock_host clock;    /* the builder host's: injected offset, chrony reads */
	bool correction;
	bool closing;
	bool finished;
	void (*done)(void *arg);
	void *done_arg;
	uint64_t close_deadline_ns;
	uint64_t timer_at_ns;      /* monotonic; when the pump wakes next */
	struct ctl_msg ping;       /* a control message is large: one, reused */
};

static uint32_t clocks_index(const struct clocks *c, const struct peer *p)
{
	return peer_index(c->table, p);
}

static struct peer *clocks_table_peer(const struct clocks *c, uint32_t i)
{
	return peer_at(c->table, i);
}

/* Same host: the peer's control connection came from an address of the
 * builder's own network stack (net_fd_is_local, decided when it joined),
 * taken to mean the same kernel clock, so the true offset is the
 * difference of the injected offsets. The HELLO's host name is the peer's
 * say and is never trusted for this (docs/CLOCKS.md). */
static bool clocks_same_host(const struct clocks *c, uint32_t i)
{
	return clocks_table_peer(c, i)->connected && c->peers[i].local;
}

/* The rule of docs/CLOCKS.md: same host and nothing injected on either
 * side. Until the peer's "clock" group arrives it is not known. */
static bool clocks_same_clock(const struct clocks *c, uint32_t i)
{
	int64_t injected;
	return peerclock_injected(c->peers[i].clock, &injected) && injected == 0 &&
	       c->clock.injected_ns == 0 && clocks_same_host(c, i);
}

static void clocks_read_chrony(struct clocks *c, int phase)
{
	struct cks_chrony *ch = &c->clock.chrony[phase];
	int rc = cks_chrony_read(ch, cks_chrony_socket());
	c->clock.chrony_at_ns[phase] = (int64_t)clk_realtime_ns() -
				       (int64_t)(clk_monotonic_ns() - ch->read_mono_ns);
	if (rc < 0)
		log_info("Builder: no chrony state at %s of run %u (%s); no chrony bound for this host",
			 peerclock_phase_name(phase), c->run_id, ch->reason);
	else if (!ch->synchronised)
		log_info("Builder: chrony not synchronised at %s of run %u (leap status %s)",
			 peerclock_phase_name(phase), c->run_id, ch->leap);
	else if (!c->quiet)
		log_info("Builder: chrony at %s of run %u: bound %" PRId64 " ns (system time %.9f s, root delay %.9f s, root dispersion %.9f s)",
			 peerclock_phase_name(phase), c->run_id, cks_chrony_bound_ns(ch),
			 ch->offset_s, ch->root_delay_s, ch->root_dispersion_s);
}

/* Works out peer i's estimate now, records it, and tells the output
 * module how to correct source i's timestamps. */
/* --role hub: each builder gets a source's clock as it applies it, when
 * either one's estimate (peer i's) changed. */
static void clocks_tell_builders(struct clocks *c, uint32_t i, int64_t now)
{
	uint32_t first_builder = c->count - c->table->builders;
	if (i >= c->sources && i < first_builder)
		return;   /* a reader's clock corrects nobody's timestamps */
	struct ctl_msg m = { .type = CTL_CLOCK };
	for (uint32_t s = 0; s < c->sources; s++)
		for (uint32_t k = first_builder; k < c->count; k++) {
			struct peer *bp = clocks_table_peer(c, k);
			if ((s != i && k != i) || !c->peers[s].applied_set ||
			    !c->peers[k].applied_set || bp->conn == NULL)
				continue;
			clockfan_message(&m.u.clock, (uint16_t)s, &c->peers[s].applied,
					 &c->peers[k].applied, now);
			msgconn_send(bp->conn, &m);
		}
}

static void clocks_apply(struct clocks *c, uint32_t i)
{
	if (c->finished)
		return;
	struct clocks_peer *p = &c->peers[i];
	struct output_clock oc = { .bound_ns = OUTPUT_UNBOUNDED };
	int64_t now = (int64_t)clk_realtime_ns();
	struct ivl_estimate e = peerclock_estimate(p->clock, &c->clock, now);
	bool hub = c->table->builders > 0;
	if (!hub && (i >= c->sources || c->out == NULL))
		return;
	if (clocks_same_clock(c, i)) {
		oc.bound_ns = 0;
	} else if (e.basis != IVL_BASIS_NONE) {
		oc.at_ns = now;
		oc.drift_ppm = peerclock_drift_ppm(p->clock);
		if (c->correction) {
			oc.offset_ns = e.offset_ns;
			oc.bound_ns = e.bound_ns;
		} else {
			/* Left uncorrected, a latency is off by the whole offset. */
			oc.bound_ns = peerclock_sat_add(peerclock_abs(e.offset_ns), (uint64_t)e.bound_ns);
		}
	}
	if (hub) {
		p->applied = oc;
		p->applied_set = true;
		clocks_tell_builders(c, i, now);
		return;
	}
	output_set_clock(c->out, (uint16_t)i, &oc);
}

static void clocks_on_timer(evutil_socket_t fd, short what, void *arg);

static void clocks_snapshot(struct clocks *c, uint32_t i, int phase)
{
	peerclock_snapshot(c->peers[i].clock, &c->clock, phase, (int64_t)clk_realtime_ns());
}

struct clocks *clocks_create(const struct clocks_config *cfg)
{
	struct clocks *c = calloc(1, sizeof *c);
	if (c == NULL)
		goto fail;
	c->table = cfg->peers;
	c->base = cfg->base;
	c->ready = cfg->ready;
	c->ready_arg = cfg->ready_arg;
	c->out = cfg->out;
	c->sources = cfg->peers->sources;
	c->run_id = cfg->run_id;
	c->quiet = cfg->quiet;
	c->probe_period_ns = cfg->probe_period_ns != 0 ? cfg->probe_period_ns : CLOCKS_PROBE_PERIOD_NS;
	c->count = peer_count(cfg->peers);
	c->peers = calloc(c->count, sizeof *c->peers);
	c->ev_timer = evtimer_new(cfg->base, clocks_on_timer, c);
	if (c->peers == NULL || c->ev_timer == NULL)
		goto fail;
	c->correction = cfg->correction;
	c->clock.injected_ns = clk_offset_ns();
	net_host_name(c->host, sizeof c->host);
	for (uint32_t i = 0; i < c->count; i++) {
		c->peers[i].owner = c;
		c->peers[i].index = i;
		c->peers[i].clock = peerclock_create();
		if (c->peers[i].clock == NULL)
			goto fail;
	}
	cks_chrony_parse(&c->clock.chrony[PEERCLOCK_END], NULL);
	clocks_read_chrony(c, PEERCLOCK_START);
	return c;
fail:
	log_error("Run %u: no memory for the clock state of %u peers", cfg->run_id,
		  peer_count(cfg->peers));
	clocks_destroy(c);
	return NULL;
}

void clocks_destroy(struct clocks *c)
{
	if (c == NULL)
		return;
	if (c->ev_timer != NULL)
		event_free(c->ev_timer);
	for (uint32_t i = 0; c->peers != NULL && i < c->count; i++) {
		prb_prober_free(c->peers[i].prober);
		peerclock_destroy(c->peers[i].clock);
	}
	free(c->peers);
	free(c);
}

/* ---- exchanges ------------------------------------------------------- */

static void clocks_close_done(struct clocks *c);
static void clocks_set_ready(struct clocks *c, uint32_t i);
/* True when every connected peer answered the last PING of its final
 * burst. */
static bool clocks_closed(const struct clocks *c)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct clocks_peer *p = &c->peers[i];
		if (clocks_table_peer(c, i)->conn != NULL && p->last_pong_sequence < p->close_sequence)
			return false;
	}
	return true;
}

static void clocks_ping(struct clocks *c, uint32_t i, struct peer *bp)
{
	struct clocks_peer *p = &c->peers[i];
	struct ctl_msg *m = &c->ping;
	if (p->prober != NULL) {
		if (prb_prober_send(p->prober, p->sequence + 1) == 0) {
			p->sequence++;
			p->pings++;
		}
		return;
	}
	m->type = CTL_PING;
	m->u.ping.sequence = p->sequence + 1;
	/* t1 as late as possible: the time until the bytes leave adds to the
	 * delay, which the bound covers. */
	m->u.ping.t1_ns = clk_realtime_ns();
	if (msgconn_send(bp->conn, m) == 0) {
		p->sequence++;
		p->pings++;
	}
}

/* Wakes the pump at `at` (monotonic) unless it wakes earlier already. */
static void clocks_arm(struct clocks *c, uint64_t at)
{
	if (c->timer_at_ns != 0 && c->timer_at_ns <= at && evtimer_pending(c->ev_timer, NULL))
		return;
	uint64_t now = clk_monotonic_ns();
	uint64_t wait = at > now ? at - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u / 1000u) };
	c->timer_at_ns = at;
	evtimer_add(c->ev_timer, &tv);
}

/* Sends every PING that is due and sleeps until the next one. */
static void clocks_pump(struct clocks *c)
{
	uint64_t now = clk_monotonic_ns(), next = UINT64_MAX;
	for (uint32_t i = 0; i < c->count; i++) {
		struct clocks_peer *p = &c->peers[i];
		struct peer *bp = clocks_table_peer(c, i);
		if (!p->ready && p->joined_ns != 0 && now - p->joined_ns >= CLOCKS_READY_TIMEOUT_NS) {
			log_warn("%s %u: first clock exchanges not answered within %u ms; starting without",
				 ctl_role_title(bp->role), bp->id, CLOCKS_READY_TIMEOUT_NS / 1000000u);
			clocks_set_ready(c, i);
		}
		if (!p->ready && p->joined_ns != 0 && p->joined_ns + CLOCKS_READY_TIMEOUT_NS < next)
			next = p->joined_ns + CLOCKS_READY_TIMEOUT_NS;
		/* Until its first STATS says where its probe socket is, the
		 * PINGs go on the control connection: the first burst must not
		 * wait, the sources start 2 ms after the last peer joins. */
		if (bp->conn == NULL || p->next_ping_ns == 0)
			continue;
		if (p->next_ping_ns <= now) {
			clocks_ping(c, i, bp);
			if (p->burst_left > 0)
				p->burst_left--;
			if (p->burst_left > 0)
				p->next_ping_ns = now + CLOCKS_BURST_GAP_NS;
			else
				p->next_ping_ns = c->closing ? 0
						  : now + (p->prober != NULL ? c->probe_period_ns
									     : CLOCKS_PERIOD_NS);
		}
		if (p->next_ping_ns != 0 && p->next_ping_ns < next)
			next = p->next_ping_ns;
	}
	if (c->closing) {
		if (now >= c->close_deadline_ns) {
			log_warn("Run %u: not every peer answered the final clock exchanges within %u ms; keeping the estimates so far",
				 c->run_id, CLOCKS_CLOSE_TIMEOUT_NS / 1000000u);
			clocks_close_done(c);
			return;
		}
		if (c->close_deadline_ns < next)
			next = c->close_deadline_ns;
	}
	if (next == UINT64_MAX)
		return;
	c->timer_at_ns = 0;
	clocks_arm(c, next);
}

static void clocks_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	clocks_pump(arg);
}

void clocks_peer_joined(struct clocks *c, struct peer *bp)
{
	if (c->finished || bp->conn == NULL)
		return;
	struct clocks_peer *p = &c->peers[clocks_index(c, bp)];
	p->local = net_fd_is_local(msgconn_fd(bp->conn));
	p->burst_left = CLOCKS_BURST;
	p->next_ping_ns = clk_monotonic_ns();
	p->joined_ns = p->next_ping_ns;
	clocks_pump(c);
}

bool clocks_ready(const struct clocks *c)
{
	if (c == NULL)
		return true;
	for (uint32_t s = 0; s < c->sources; s++)
		if (clocks_table_peer(c, s)->conn != NULL && !c->peers[s].ready)
			return false;
	return true;
}

/* Marks peer i ready, and starts the run if it was the last. */
static void clocks_set_ready(struct clocks *c, uint32_t i)
{
	if (c->peers[i].ready)
		return;
	c->peers[i].ready = true;
	if (i < c->sources && clocks_ready(c))
		c->ready(c->ready_arg);
}

/* One answered exchange, from a PONG or a UDP probe. */
static void clocks_exchange(struct clocks *c, uint32_t i, const struct prb_exchange *x)
{
	struct clocks_peer *p = &c->peers[i];
	const struct peer *bp = clocks_table_peer(c, i);
	if (x->sequence > p->last_pong_sequence)
		p->last_pong_sequence = x->sequence;
	p->pongs++;
	int64_t quiet = peerclock_best_delay(p->clock);
	int rc = peerclock_add_exchange(p->clock, x);
	if (rc == 0 && p->prober != NULL && p->burst_left == 0 && !c->closing) {
		/* A delay well above the window's best means a busy moment on
		 * the path: try again soon rather than a period later, a few
		 * times, so a quiet exchange is found while the load lasts. */
		int64_t d = peerclock_latest_delay(p->clock);
		if (quiet >= 0 && d > 2 * quiet && p->retries < CLOCKS_RETRIES) {
			uint64_t soon = clk_monotonic_ns() + CLOCKS_BURST_GAP_NS;
			p->retries++;
			p->retried++;
			if (p->next_ping_ns == 0 || soon < p->next_ping_ns) {
				p->next_ping_ns = soon;
				clocks_arm(c, soon);
			}
		} else if (quiet < 0 || d <= 2 * quiet) {
			p->retries = 0;
		}
	}
	if (rc == 0) {
		clocks_apply(c, i);
	} else {
		log_debug("%s %u: clock exchange %" PRIu64 " refused (%s)", ctl_role_title(bp->role), bp->id,
			  x->sequence, strerror(-rc));
	}
	if (!peerclock_snapshot_at(p->clock, PEERCLOCK_START).valid && p->pongs >= CLOCKS_BURST)
		clocks_snapshot(c, i, PEERCLOCK_START);
	if (p->prober != NULL ? p->probe_answers >= CLOCKS_BURST : p->pongs >= CLOCKS_BURST)
		clocks_set_ready(c, i);
	if (c->closing && clocks_closed(c))
		clocks_close_done(c);
}

void clocks_on_pong(struct clocks *c, struct peer *bp, const struct ctl_pong *pong, uint64_t rx_ns)
{
	if (c->finished)
		return;
	uint32_t i = clocks_index(c, bp);
	struct clocks_peer *p = &c->peers[i];
	if (pong->sequence == 0 || pong->sequence > p->sequence ||
	    pong->sequence <= p->last_pong_sequence) {
		p->pongs_unmatched++;
		return;
	}
	struct prb_exchange x = { .sequence = pong->sequence,
				  /* Clock readings above INT64_MAX come out
				   * negative and are refused. */
				  .t1_ns = (int64_t)pong->t1_ns, .t2_ns = (int64_t)pong->t2_ns,
				  .t3_ns = (int64_t)pong->t3_ns, .t4_ns = (int64_t)rx_ns };
	clocks_exchange(c, i, &x);
}

/* A UDP probe exchange of one peer completed. */
static void clocks_on_probe(const struct prb_exchange *x, void *arg)
{
	struct clocks_peer *p = arg;
	if (p->owner->finished)
		return;
	/* An answer from the peer's event loop: it is not stopped or hung,
	 * which the PONGs on the control connection used to show. */
	clocks_table_peer(p->owner, p->index)->last_heard_ns = clk_monotonic_ns();
	p->probe_answers++;
	clocks_exchange(p->owner, p->index, x);
}

/* The peer's first STATS says where its probe socket is; without one, or
 * when no socket of ours can reach it, the PINGs go on the control
 * connection. */
static void clocks_start_prober(struct clocks *c, uint32_t i, struct peer *bp,
			     const struct ctl_group *g)
{
	struct clocks_peer *p = &c->peers[i];
	uint64_t port = 0, token = 0;
	if (p->prober != NULL || bp->conn == NULL || !ctl_group_get(g, CNT_PROBE(udp_port), &port) ||
	    !ctl_group_get(g, CNT_PROBE(token), &token) || port == 0 || port > 65535)
		return;
	char what[48];
	snprintf(what, sizeof what, "%s %u", ctl_role_title(bp->role), bp->id);
	p->prober = prb_prober_start(c->base, msgconn_fd(bp->conn), (uint16_t)port, token,
				     what, clocks_on_probe, p);
	/* The first burst again, kernel-stamped: the PINGs so far were only
	 * to have some estimate without waiting. */
	if (p->prober != NULL && !c->closing) {
		p->burst_left = CLOCKS_BURST;
		p->next_ping_ns = clk_monotonic_ns();
	}
}

void clocks_on_report(struct clocks *c, struct peer *bp, const struct ctl_report *r, bool final)
{
	if (c->finished)
		return;
	uint32_t i = clocks_index(c, bp);
	struct clocks_peer *p = &c->peers[i];
	peerclock_take_clock(p->clock, r);
	if (!p->stats_seen) {
		clocks_start_prober(c, i, bp, ctl_report_find(r, CNT_GROUP_PROBE));
		p->stats_seen = true;
		clocks_pump(c);
	}
	peerclock_take_chrony(p->clock, r, final ? PEERCLOCK_END : PEERCLOCK_START, (int64_t)clk_realtime_ns());
	peerclock_update_drift(p->clock, &c->clock);
	clocks_apply(c, i);
}

bool clocks_close(struct clocks *c, void (*done)(void *arg), void *arg)
{
	if (c->finished)
		return false;
	if (c->closing)
		return true;
	uint64_t now = clk_monotonic_ns();
	bool any = false;
	for (uint32_t i = 0; i < c->count; i++) {
		struct clocks_peer *p = &c->peers[i];
		if (clocks_table_peer(c, i)->conn == NULL)
			continue;
		p->burst_left = CLOCKS_BURST;
		p->next_ping_ns = now;
		p->close_sequence = p->sequence + CLOCKS_BURST;
		any = true;
	}
	if (!any)
		return false;
	c->closing = true;
	c->done = done;
	c->done_arg = arg;
	c->close_deadline_ns = now + CLOCKS_CLOSE_TIMEOUT_NS;
	clocks_pump(c);
	return true;
}

static void clocks_close_done(struct clocks *c)
{
	void (*done)(void *arg) = c->done;
	c->closing = false;
	c->done = NULL;
	evtimer_del(c->ev_timer);
	if (done != NULL)
		done(c->done_arg);
}

void clocks_finish(struct clocks *c)
{
	if (c->finished)
		return;
	c->closing = false;
	c->done = NULL;
	evtimer_del(c->ev_timer);
	/* Exchanges whose FOLLOWUP never came still count, with the peer's
	 * user-space t3. */
	for (uint32_t i = 0; i < c->count; i++)
		prb_prober_flush(c->peers[i].prober);
	clocks_read_chrony(c, PEERCLOCK_END);
	for (uint32_t i = 0; i < c->count; i++) {
		struct peerclock *pc = c->peers[i].clock;
		peerclock_update_drift(pc, &c->clock);
		clocks_snapshot(c, i, PEERCLOCK_END);
		const struct peer *bp = clocks_table_peer(c, i);
		struct peerclock_snapshot s = peerclock_snapshot_at(pc, PEERCLOCK_END);
		if (peerclock_overall(pc, &c->clock) == CKS_INCONSISTENT)
			log_warn("%s %u on %s: in-band clock offset %" PRId64 " +/- %" PRId64
				 " ns disagrees with chrony's bounds of both hosts",
				 ctl_role_title(bp->role), bp->id, bp->host, s.offset_ns, s.bound_ns);
	}
	c->finished = true;
}

/* ---- what the report reads ------------------------------------------ */

void clocks_view(const struct clocks *c, struct clocks_view *v)
{
	*v = (struct clocks_view){
		.host = c->host,
		.clock = &c->clock,
		.out = c->out,
		.correction = c->correction,
		.all_sources_same_clock = true,
		.sources = c->sources,
		.count = c->count,
	};
	for (uint32_t s = 0; s < c->sources; s++)
		if (!clocks_same_clock(c, s))
			v->all_sources_same_clock = false;
}

void clocks_peer_view(const struct clocks *c, uint32_t i, struct clocks_peer_view *v)
{
	const struct clocks_peer *p = &c->peers[i];
	memset(v, 0, sizeof *v);
	v->peer = clocks_table_peer(c, i);
	v->same_host = clocks_same_host(c, i);
	v->same_clock = clocks_same_clock(c, i);
	v->udp = p->prober != NULL;
	if (p->prober != NULL)
		prb_prober_stats(p->prober, &v->probe);
	v->pings = p->pings;
	v->pongs = p->pongs;
	v->pongs_unmatched = p->pongs_unmatched;
	v->retried = p->retried;
	peerclock_view(p->clock, &v->clock);
	for (int k = 0; k < PEERCLOCK_PHASES; k++)
		v->verdict[k] = peerclock_verdict(p->clock, &c->clock, k);
	v->overall = peerclock_overall(p->clock, &c->clock);
}

bool clocks_peer_estimate(const struct clocks *c, const struct peer *p, int64_t *offset_ns,
		       int64_t *bound_ns)
{
	if (c == NULL)
		return false;
	return peerclock_inband(c->peers[clocks_index(c, p)].clock, (int64_t)clk_realtime_ns(), offset_ns,
			   bound_ns);
}
