#include "clocks.h"

#include "clk.h"
#include "clocksync.h"
#include "ctl.h"
#include "hist.h"
#include "interval.h"
#include "log.h"
#include "msgconn.h"
#include "net.h"
#include "output.h"
#include "probe.h"
#include "run_state.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BDC_START, BDC_END, BDC_PHASES };

static const char *const bdc_phase_name[BDC_PHASES] = { "start", "end" };

/* The in-band estimate at one moment, and what was made of it with
 * chrony's interval. */
struct bdc_snapshot {
	bool valid;
	int64_t offset_ns;
	int64_t bound_ns;
	int64_t at_ns;             /* builder clock */
	struct ivl inband;         /* every in-band sample's interval intersected */
	bool chrony_valid;
	struct ivl chrony;         /* chrony's interval for the offset then */
	struct ivl_estimate applied;
};

/* Estimates kept per peer for metrics.json: one per exchange and report,
 * so at one exchange per 10 ms and a few early ones, 16-20 s of a run;
 * later ones are only counted (and still checked against the injected
 * offsets). */
#define BDC_HISTORY 2048u

struct bdc_record {
	int64_t at_ns;             /* builder clock */
	int64_t offset_ns;
	int64_t bound_ns;
	uint8_t basis;             /* enum ivl_basis */
};

struct bdc_peer {
	struct bdc *owner;
	uint32_t index;
	struct cks_estimator est;
	bool stats_seen;           /* its first STATS arrived: probe port known */
	bool ready;                /* first burst answered, or given up on */
	uint64_t joined_ns;        /* monotonic */
	uint64_t probe_answers;    /* exchanges completed over the probe socket */
	unsigned retries;          /* early exchanges since the last quiet one */
	uint64_t window_disjoint;  /* estimates whose samples did not all overlap */
	uint64_t retried;          /* early exchanges in all */
	struct prb_prober *prober; /* UDP probes; NULL: PINGs on the control link */
	uint64_t stamps[4][3];     /* accepted exchanges by stamp origin, t1..t4 */
	uint64_t next_ping_ns;     /* monotonic; 0 when none is planned */
	unsigned burst_left;       /* pings of the current burst still to send */
	uint64_t sequence;         /* of the last PING sent */
	uint64_t last_pong_sequence;
	uint64_t close_sequence;   /* the final burst is answered at this PONG */
	uint64_t pings;
	uint64_t pongs;
	uint64_t pongs_unmatched;  /* PONGs answering no PING of ours */
	bool clock_seen;           /* its "clock" group arrived */
	int64_t injected_ns;       /* its --clock-offset-ns */
	bool chrony_seen[BDC_PHASES];
	struct cks_chrony chrony[BDC_PHASES];
	bool drift_from_chrony;
	struct bdc_snapshot snap[BDC_PHASES];
	int64_t chrony_at_ns[BDC_PHASES]; /* builder clock from which its bound holds */
	struct bdc_record *history;       /* [BDC_HISTORY] */
	uint32_t recorded;
	uint64_t estimates;               /* estimates made, recorded or not */
	uint64_t by_basis[IVL_BASIS_UNION + 1];
	/* Each estimate against the injected offsets, the true offset where
	 * both daemons share a kernel clock (the virtual cluster). */
	uint64_t inside_injected;
	int64_t worst_margin_ns;          /* min of bound - |offset - injected| */
	bool last_valid;
	struct ivl_estimate last;         /* the latest estimate */
};

struct bdc {
	struct bd *run;
	struct event *ev_timer;
	uint32_t count;            /* sources, then readers */
	struct bdc_peer *peers;
	char host[CTL_MAX_TEXT];
	int64_t injected_ns;
	struct cks_chrony chrony[BDC_PHASES];
	int64_t chrony_at_ns[BDC_PHASES];
	bool correction;
	bool closing;
	bool finished;
	void (*done)(struct bd *b);
	uint64_t close_deadline_ns;
	uint64_t timer_at_ns;      /* monotonic; when the pump wakes next */
	struct ctl_msg ping;       /* a control message is large: one, reused */
};

static uint64_t bdc_abs(int64_t v)
{
	return v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
}

static int64_t bdc_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r = a + b;
	return r < a || r > INT64_MAX ? INT64_MAX : (int64_t)r;
}

static uint32_t bdc_index(const struct bdc *c, const struct bd_peer *p)
{
	return p->role == CTL_ROLE_SOURCE ? p->id : c->run->opt.sources + p->id;
}

static struct bd_peer *bdc_bd_peer(const struct bdc *c, uint32_t i)
{
	const struct bd *b = c->run;
	return i < b->opt.sources ? &b->source_peers[i] : &b->reader_peers[i - b->opt.sources];
}

static const char *bdc_title(const struct bd_peer *p)
{
	return p->role == CTL_ROLE_SOURCE ? "Source" : "Reader";
}

/* Same host name: taken to mean the same kernel clock, so the true offset
 * is the difference of the injected offsets. */
static bool bdc_same_host(const struct bdc *c, uint32_t i)
{
	const struct bd_peer *bp = bdc_bd_peer(c, i);
	return bp->connected && strcmp(bp->host, c->host) == 0;
}

/* The rule of docs/CLOCKS.md: same host and nothing injected on either
 * side. Until the peer's "clock" group arrives it is not known. */
static bool bdc_same_clock(const struct bdc *c, uint32_t i)
{
	const struct bdc_peer *p = &c->peers[i];
	return p->clock_seen && p->injected_ns == 0 && c->injected_ns == 0 && bdc_same_host(c, i);
}

static void bdc_read_chrony(struct bdc *c, int phase)
{
	struct cks_chrony *ch = &c->chrony[phase];
	int rc = cks_chrony_read(ch, cks_chrony_socket());
	c->chrony_at_ns[phase] = (int64_t)clk_realtime_ns() -
				 (int64_t)(clk_monotonic_ns() - ch->read_mono_ns);
	if (rc < 0)
		log_info("Builder: no chrony state at %s of run %u (%s); no chrony bound for this host",
			 bdc_phase_name[phase], c->run->opt.run_id, ch->reason);
	else if (!ch->synchronised)
		log_info("Builder: chrony not synchronised at %s of run %u (leap status %s)",
			 bdc_phase_name[phase], c->run->opt.run_id, ch->leap);
	else if (!c->run->opt.quiet)
		log_info("Builder: chrony at %s of run %u: bound %" PRId64 " ns (system time %.9f s, root delay %.9f s, root dispersion %.9f s)",
			 bdc_phase_name[phase], c->run->opt.run_id, cks_chrony_bound_ns(ch),
			 ch->offset_s, ch->root_delay_s, ch->root_dispersion_s);
}

/* chrony's drift bound for the pair where both hosts are synchronised, at
 * start or end; the larger when both; the default otherwise. */
static void bdc_update_drift(struct bdc *c, uint32_t i)
{
	struct bdc_peer *p = &c->peers[i];
	double drift = 0.0;
	bool found = false;
	for (int k = 0; k < BDC_PHASES; k++) {
		if (cks_chrony_bound_ns(&p->chrony[k]) < 0 || cks_chrony_bound_ns(&c->chrony[k]) < 0)
			continue;
		double d = cks_drift_ppm_from_chrony(&p->chrony[k], &c->chrony[k]);
		if (!found || d > drift)
			drift = d;
		found = true;
	}
	p->drift_from_chrony = found && cks_set_drift_ppm(&p->est, drift) == 0;
	if (!p->drift_from_chrony)
		cks_set_drift_ppm(&p->est, CKS_DEFAULT_DRIFT_PPM);
}

/* The latest phase whose chrony read of this host gave a bound. */
static int bdc_chrony_phase(const struct cks_chrony *ch, const bool *seen)
{
	for (int k = BDC_PHASES - 1; k >= 0; k--)
		if ((seen == NULL || seen[k]) && cks_chrony_bound_ns(&ch[k]) >= 0)
			return k;
	return -1;
}

/* Drift since a chrony read: its bound held then. */
static int64_t bdc_widen(double drift_ppm, int64_t now, int64_t at)
{
	double w = ceil(drift_ppm * (double)bdc_abs(now - at) / 1e6);
	return w < 9.2e18 ? (int64_t)w : INT64_MAX;
}

/* chrony's interval for peer i's offset at now: each host within its
 * chrony bound (|System time| + root dispersion + root delay / 2) of the
 * common reference when it was read, widened by drift since; centred on
 * the difference of the declared injected offsets, the part of the two
 * clocks that chrony does not discipline. false when either host has no
 * bound or the peer's injected offset is not known yet. */
static bool bdc_chrony_interval(const struct bdc *c, uint32_t i, int64_t now, struct ivl *out)
{
	const struct bdc_peer *p = &c->peers[i];
	int kp = bdc_chrony_phase(p->chrony, p->chrony_seen);
	int kb = bdc_chrony_phase(c->chrony, NULL);
	if (kp < 0 || kb < 0 || !p->clock_seen)
		return false;
	double drift = p->est.drift_ppm;
	int64_t half = bdc_sat_add((uint64_t)cks_chrony_bound_ns(&p->chrony[kp]),
				   (uint64_t)cks_chrony_bound_ns(&c->chrony[kb]));
	half = bdc_sat_add((uint64_t)half, (uint64_t)bdc_widen(drift, now, p->chrony_at_ns[kp]));
	half = bdc_sat_add((uint64_t)half, (uint64_t)bdc_widen(drift, now, c->chrony_at_ns[kb]));
	*out = ivl_around(p->injected_ns - c->injected_ns, half);
	return true;
}

/* In band and chrony combined at now (interval.h); basis NONE when
 * neither is known. */
static struct ivl_estimate bdc_combined(struct bdc *c, uint32_t i, int64_t now,
					struct bdc_snapshot *s)
{
	struct bdc_snapshot local;
	if (s == NULL)
		s = &local;
	s->at_ns = now;
	s->valid = cks_estimate(&c->peers[i].est, now, &s->offset_ns, &s->bound_ns) == 0;
	if (s->valid && cks_estimate_range(&c->peers[i].est, now, &s->inband.lo, &s->inband.hi) ==
			    -ERANGE)
		/* Samples that cannot all be true: the drift bound is too
		 * tight or a sample lies; the best one alone is used. */
		c->peers[i].window_disjoint++;
	s->chrony_valid = bdc_chrony_interval(c, i, now, &s->chrony);
	/* chrony narrows an in-band interval but is not applied alone: it is
	 * not measured on the builder's own path, and a host steered to a
	 * wrong reference would pass unnoticed until the first exchange. */
	s->applied = ivl_combine(s->valid, s->inband,
				 s->valid && s->chrony_valid, s->chrony);
	return s->applied;
}

/* Keeps estimate e of peer i for metrics.json and checks it against the
 * injected offsets. */
static void bdc_record(struct bdc *c, uint32_t i, int64_t now, const struct ivl_estimate *e)
{
	struct bdc_peer *p = &c->peers[i];
	if (e->basis == IVL_BASIS_NONE)
		return;
	p->last = *e;
	p->last_valid = true;
	p->estimates++;
	p->by_basis[e->basis]++;
	if (p->history != NULL && p->recorded < BDC_HISTORY)
		p->history[p->recorded++] = (struct bdc_record){ now, e->offset_ns, e->bound_ns,
								 (uint8_t)e->basis };
	if (p->clock_seen) {
		int64_t truth = p->injected_ns - c->injected_ns;
		int64_t margin = e->bound_ns - (int64_t)bdc_abs(e->offset_ns - truth);
		if (p->estimates == 1 || margin < p->worst_margin_ns)
			p->worst_margin_ns = margin;
		p->inside_injected += margin >= 0;
	}
}

/* Works out peer i's estimate now, records it, and tells the output
 * module how to correct source i's timestamps. */
static void bdc_apply(struct bdc *c, uint32_t i)
{
	struct bd *b = c->run;
	if (c->finished)
		return;
	struct bdc_peer *p = &c->peers[i];
	struct out_clock oc = { .bound_ns = OUT_UNBOUNDED };
	int64_t now = (int64_t)clk_realtime_ns();
	struct ivl_estimate e = bdc_combined(c, i, now, NULL);
	bdc_record(c, i, now, &e);
	if (i >= b->opt.sources || b->out == NULL)
		return;
	if (bdc_same_clock(c, i)) {
		oc.bound_ns = 0;
	} else if (e.basis != IVL_BASIS_NONE) {
		oc.at_ns = now;
		oc.drift_ppm = p->est.drift_ppm;
		if (c->correction) {
			oc.offset_ns = e.offset_ns;
			oc.bound_ns = e.bound_ns;
		} else {
			/* Left uncorrected, a latency is off by the whole offset. */
			oc.bound_ns = bdc_sat_add(bdc_abs(e.offset_ns), (uint64_t)e.bound_ns);
		}
	}
	out_set_clock(b->out, (uint16_t)i, &oc);
}

static void bdc_on_timer(evutil_socket_t fd, short what, void *arg);

static void bdc_snapshot(struct bdc *c, uint32_t i, int phase)
{
	bdc_combined(c, i, (int64_t)clk_realtime_ns(), &c->peers[i].snap[phase]);
}

struct bdc *bdc_create(struct bd *b)
{
	struct bdc *c = calloc(1, sizeof *c);
	if (c == NULL)
		goto fail;
	c->run = b;
	c->count = (uint32_t)b->opt.sources + b->opt.readers;
	c->peers = calloc(c->count, sizeof *c->peers);
	c->ev_timer = evtimer_new(b->base, bdc_on_timer, c);
	if (c->peers == NULL || c->ev_timer == NULL)
		goto fail;
	c->correction = !b->opt.no_clock_correction;
	c->injected_ns = clk_offset_ns();
	net_host_name(c->host, sizeof c->host);
	for (uint32_t i = 0; i < c->count; i++) {
		c->peers[i].owner = c;
		c->peers[i].index = i;
		c->peers[i].history = calloc(BDC_HISTORY, sizeof *c->peers[i].history);
		if (c->peers[i].history == NULL)
			goto fail;
		cks_reset(&c->peers[i].est);
		cks_chrony_parse(&c->peers[i].chrony[BDC_START], NULL);
		cks_chrony_parse(&c->peers[i].chrony[BDC_END], NULL);
	}
	cks_chrony_parse(&c->chrony[BDC_END], NULL);
	bdc_read_chrony(c, BDC_START);
	return c;
fail:
	log_error("Run %u: no memory for the clock state of %u peers", b->opt.run_id,
		  (uint32_t)b->opt.sources + b->opt.readers);
	bdc_destroy(c);
	return NULL;
}

void bdc_destroy(struct bdc *c)
{
	if (c == NULL)
		return;
	if (c->ev_timer != NULL)
		event_free(c->ev_timer);
	for (uint32_t i = 0; c->peers != NULL && i < c->count; i++) {
		prb_prober_free(c->peers[i].prober);
		free(c->peers[i].history);
	}
	free(c->peers);
	free(c);
}

/* ---- exchanges ------------------------------------------------------- */

static void bdc_close_done(struct bdc *c);
static int64_t bdc_best_delay(const struct cks_estimator *e);
static void bdc_set_ready(struct bdc *c, uint32_t i);
static enum cks_verdict bdc_overall(const struct bdc *c, uint32_t i);

/* True when every connected peer answered the last PING of its final
 * burst. */
static bool bdc_closed(const struct bdc *c)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct bdc_peer *p = &c->peers[i];
		if (bdc_bd_peer(c, i)->conn != NULL && p->last_pong_sequence < p->close_sequence)
			return false;
	}
	return true;
}

static void bdc_ping(struct bdc *c, uint32_t i, struct bd_peer *bp)
{
	struct bdc_peer *p = &c->peers[i];
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
static void bdc_arm(struct bdc *c, uint64_t at)
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
static void bdc_pump(struct bdc *c)
{
	uint64_t now = clk_monotonic_ns(), next = UINT64_MAX;
	for (uint32_t i = 0; i < c->count; i++) {
		struct bdc_peer *p = &c->peers[i];
		struct bd_peer *bp = bdc_bd_peer(c, i);
		if (!p->ready && p->joined_ns != 0 && now - p->joined_ns >= BDC_READY_TIMEOUT_NS) {
			log_warn("%s %u: first clock exchanges not answered within %u ms; starting without",
				 bdc_title(bp), bp->id, BDC_READY_TIMEOUT_NS / 1000000u);
			bdc_set_ready(c, i);
		}
		if (!p->ready && p->joined_ns != 0 && p->joined_ns + BDC_READY_TIMEOUT_NS < next)
			next = p->joined_ns + BDC_READY_TIMEOUT_NS;
		/* Until its first STATS says where its probe socket is, the
		 * PINGs go on the control connection: the first burst must not
		 * wait, the sources start 2 ms after the last peer joins. */
		if (bp->conn == NULL || p->next_ping_ns == 0)
			continue;
		if (p->next_ping_ns <= now) {
			bdc_ping(c, i, bp);
			if (p->burst_left > 0)
				p->burst_left--;
			if (p->burst_left > 0)
				p->next_ping_ns = now + BDC_BURST_GAP_NS;
			else
				p->next_ping_ns = c->closing ? 0
						  : now + (p->prober != NULL ? BDC_PROBE_PERIOD_NS
									     : BDC_PERIOD_NS);
		}
		if (p->next_ping_ns != 0 && p->next_ping_ns < next)
			next = p->next_ping_ns;
	}
	if (c->closing) {
		if (now >= c->close_deadline_ns) {
			log_warn("Run %u: not every peer answered the final clock exchanges within %u ms; keeping the estimates so far",
				 c->run->opt.run_id, BDC_CLOSE_TIMEOUT_NS / 1000000u);
			bdc_close_done(c);
			return;
		}
		if (c->close_deadline_ns < next)
			next = c->close_deadline_ns;
	}
	if (next == UINT64_MAX)
		return;
	c->timer_at_ns = 0;
	bdc_arm(c, next);
}

static void bdc_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	bdc_pump(arg);
}

void bdc_peer_joined(struct bdc *c, struct bd_peer *bp)
{
	if (c->finished || bp->conn == NULL)
		return;
	struct bdc_peer *p = &c->peers[bdc_index(c, bp)];
	p->burst_left = BDC_BURST;
	p->next_ping_ns = clk_monotonic_ns();
	p->joined_ns = p->next_ping_ns;
	bdc_pump(c);
}

bool bdc_ready(const struct bdc *c)
{
	if (c == NULL)
		return true;
	for (uint32_t s = 0; s < c->run->opt.sources; s++)
		if (bdc_bd_peer(c, s)->conn != NULL && !c->peers[s].ready)
			return false;
	return true;
}

/* Marks peer i ready, and starts the run if it was the last. */
static void bdc_set_ready(struct bdc *c, uint32_t i)
{
	if (c->peers[i].ready)
		return;
	c->peers[i].ready = true;
	if (i < c->run->opt.sources && bdc_ready(c))
		bd_maybe_start(c->run);
}

/* One answered exchange, from a PONG or a UDP probe. */
static void bdc_exchange(struct bdc *c, uint32_t i, const struct prb_exchange *x)
{
	struct bdc_peer *p = &c->peers[i];
	const struct bd_peer *bp = bdc_bd_peer(c, i);
	if (x->sequence > p->last_pong_sequence)
		p->last_pong_sequence = x->sequence;
	p->pongs++;
	int64_t quiet = bdc_best_delay(&p->est);
	int rc = cks_add_sample(&p->est, x->t1_ns, x->t2_ns, x->t3_ns, x->t4_ns);
	if (rc == 0 && p->prober != NULL && p->burst_left == 0 && !c->closing) {
		/* A delay well above the window's best means a busy moment on
		 * the path: try again soon rather than a period later, a few
		 * times, so a quiet exchange is found while the load lasts. */
		int64_t d = p->est.samples[(p->est.next + CKS_WINDOW - 1) % CKS_WINDOW].delay_ns;
		if (quiet >= 0 && d > 2 * quiet && p->retries < BDC_RETRIES) {
			uint64_t soon = clk_monotonic_ns() + BDC_BURST_GAP_NS;
			p->retries++;
			p->retried++;
			if (p->next_ping_ns == 0 || soon < p->next_ping_ns) {
				p->next_ping_ns = soon;
				bdc_arm(c, soon);
			}
		} else if (quiet < 0 || d <= 2 * quiet) {
			p->retries = 0;
		}
	}
	if (rc == 0) {
		for (int k = 0; k < 4; k++)
			p->stamps[k][x->stamp[k]]++;
		bdc_apply(c, i);
	} else {
		log_debug("%s %u: clock exchange %" PRIu64 " refused (%s)", bdc_title(bp), bp->id,
			  x->sequence, strerror(-rc));
	}
	if (!p->snap[BDC_START].valid && p->pongs >= BDC_BURST)
		bdc_snapshot(c, i, BDC_START);
	if (p->prober != NULL ? p->probe_answers >= BDC_BURST : p->pongs >= BDC_BURST)
		bdc_set_ready(c, i);
	if (c->closing && bdc_closed(c))
		bdc_close_done(c);
}

void bdc_on_pong(struct bdc *c, struct bd_peer *bp, const struct ctl_pong *pong, uint64_t rx_ns)
{
	if (c->finished)
		return;
	uint32_t i = bdc_index(c, bp);
	struct bdc_peer *p = &c->peers[i];
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
	bdc_exchange(c, i, &x);
}

/* A UDP probe exchange of one peer completed. */
static void bdc_on_probe(const struct prb_exchange *x, void *arg)
{
	struct bdc_peer *p = arg;
	if (p->owner->finished)
		return;
	/* An answer from the peer's event loop: it is not stopped or hung,
	 * which the PONGs on the control connection used to show. */
	bdc_bd_peer(p->owner, p->index)->last_heard_ns = clk_monotonic_ns();
	p->probe_answers++;
	bdc_exchange(p->owner, p->index, x);
}

/* The peer's first STATS says where its probe socket is; without one, or
 * when no socket of ours can reach it, the PINGs go on the control
 * connection. */
static void bdc_start_prober(struct bdc *c, uint32_t i, struct bd_peer *bp,
			     const struct ctl_group *g)
{
	struct bdc_peer *p = &c->peers[i];
	uint64_t port = 0, token = 0;
	if (p->prober != NULL || bp->conn == NULL || !ctl_group_get(g, "udp_port", &port) ||
	    !ctl_group_get(g, "token", &token) || port == 0 || port > 65535)
		return;
	char what[48];
	snprintf(what, sizeof what, "%s %u", bdc_title(bp), bp->id);
	p->prober = prb_prober_start(c->run->base, msgconn_fd(bp->conn), (uint16_t)port, token,
				     what, bdc_on_probe, p);
	/* The first burst again, kernel-stamped: the PINGs so far were only
	 * to have some estimate without waiting. */
	if (p->prober != NULL && !c->closing) {
		p->burst_left = BDC_BURST;
		p->next_ping_ns = clk_monotonic_ns();
	}
}

void bdc_on_report(struct bdc *c, struct bd_peer *bp, const struct ctl_report *r, bool final)
{
	if (c->finished)
		return;
	uint32_t i = bdc_index(c, bp);
	struct bdc_peer *p = &c->peers[i];
	int phase = final ? BDC_END : BDC_START;
	const struct ctl_group *g = ctl_report_find(r, "clock");
	uint64_t mag = 0, negative = 0;
	if (ctl_group_get(g, "injected_offset_ns", &mag)) {
		ctl_group_get(g, "injected_offset_negative", &negative);
		p->injected_ns = negative ? (int64_t)(0 - mag) : (int64_t)mag;
		p->clock_seen = true;
	}
	if (!p->stats_seen) {
		bdc_start_prober(c, i, bp, ctl_report_find(r, PRB_GROUP));
		p->stats_seen = true;
		bdc_pump(c);
	}
	g = ctl_report_find(r, CKS_CHRONY_GROUP);
	if (g != NULL && !p->chrony_seen[phase]) {
		cks_chrony_decode(&p->chrony[phase], g);
		p->chrony_seen[phase] = true;
		/* The bound held when the peer read it, read_age_ns before it
		 * sent this (the one-way transit, microseconds, is left out:
		 * times the drift bound it is below a nanosecond). */
		p->chrony_at_ns[phase] = (int64_t)clk_realtime_ns() - (int64_t)p->chrony[phase].read_age_ns;
	}
	bdc_update_drift(c, i);
	bdc_apply(c, i);
}

bool bdc_close(struct bdc *c, void (*done)(struct bd *b))
{
	if (c->finished)
		return false;
	if (c->closing)
		return true;
	uint64_t now = clk_monotonic_ns();
	bool any = false;
	for (uint32_t i = 0; i < c->count; i++) {
		struct bdc_peer *p = &c->peers[i];
		if (bdc_bd_peer(c, i)->conn == NULL)
			continue;
		p->burst_left = BDC_BURST;
		p->next_ping_ns = now;
		p->close_sequence = p->sequence + BDC_BURST;
		any = true;
	}
	if (!any)
		return false;
	c->closing = true;
	c->done = done;
	c->close_deadline_ns = now + BDC_CLOSE_TIMEOUT_NS;
	bdc_pump(c);
	return true;
}

static void bdc_close_done(struct bdc *c)
{
	void (*done)(struct bd *b) = c->done;
	c->closing = false;
	c->done = NULL;
	evtimer_del(c->ev_timer);
	if (done != NULL)
		done(c->run);
}

void bdc_finish(struct bdc *c)
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
	bdc_read_chrony(c, BDC_END);
	for (uint32_t i = 0; i < c->count; i++) {
		bdc_update_drift(c, i);
		bdc_snapshot(c, i, BDC_END);
		const struct bd_peer *bp = bdc_bd_peer(c, i);
		const struct bdc_snapshot *s = &c->peers[i].snap[BDC_END];
		if (bdc_overall(c, i) == CKS_INCONSISTENT)
			log_warn("%s %u on %s: in-band clock offset %" PRId64 " +/- %" PRId64
				 " ns disagrees with chrony's bounds of both hosts",
				 bdc_title(bp), bp->id, bp->host, s->offset_ns, s->bound_ns);
	}
	c->finished = true;
}

/* ---- report ---------------------------------------------------------- */

static const char *bdc_verdict_name(enum cks_verdict v)
{
	return v == CKS_CONSISTENT ? "consistent" : v == CKS_INCONSISTENT ? "inconsistent" : "unknown";
}

/* The in-band estimate that describes the run: the final one, else the
 * one after the first burst. */
static const struct bdc_snapshot *bdc_best_snapshot(const struct bdc_peer *p)
{
	if (p->snap[BDC_END].valid)
		return &p->snap[BDC_END];
	return p->snap[BDC_START].valid ? &p->snap[BDC_START] : NULL;
}

/* Whether the in-band estimate of one phase agrees with chrony: the two
 * hosts are within the sum of their chrony bounds of each other. */
static enum cks_verdict bdc_verdict(const struct bdc *c, uint32_t i, int phase)
{
	const struct bdc_peer *p = &c->peers[i];
	const struct bdc_snapshot *s = &p->snap[phase];
	if (!s->valid || !p->clock_seen)
		return CKS_UNKNOWN;
	/* chrony disciplines the hosts' clocks; the declared injections are
	 * on top of them. */
	return cks_check_consistent(s->offset_ns - (p->injected_ns - c->injected_ns), s->bound_ns,
				    cks_chrony_bound_ns(&p->chrony[phase]),
				    cks_chrony_bound_ns(&c->chrony[phase]));
}

/* Inconsistent when either phase is; consistent when one is and none is
 * inconsistent; unknown otherwise. */
static enum cks_verdict bdc_overall(const struct bdc *c, uint32_t i)
{
	enum cks_verdict v = CKS_UNKNOWN;
	/* Any estimate made of disjoint intervals. */
	if (c->peers[i].by_basis[IVL_BASIS_UNION] > 0)
		return CKS_INCONSISTENT;
	for (int k = 0; k < BDC_PHASES; k++) {
		enum cks_verdict vk = bdc_verdict(c, i, k);
		if (vk == CKS_INCONSISTENT)
			return vk;
		if (vk == CKS_CONSISTENT)
			v = vk;
	}
	return v;
}

static void bdc_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch > 0x7e)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void bdc_json_bound(FILE *f, int64_t bound)
{
	if (bound < 0)
		fputs("null", f);
	else
		fprintf(f, "%" PRId64, bound);
}

static void bdc_json_chrony(FILE *f, const struct cks_chrony *ch)
{
	if (!ch->available) {
		fputs("{\"available\": false, \"bound_ns\": null, \"reason\": ", f);
		bdc_json_string(f, ch->reason);
		fputc('}', f);
		return;
	}
	fprintf(f, "{\"available\": true, \"synchronised\": %s, \"stratum\": %d, \"leap\": ",
		ch->synchronised ? "true" : "false", ch->stratum);
	bdc_json_string(f, ch->leap);
	fprintf(f, ", \"system_time_ns\": %.0f, \"root_delay_ns\": %.0f, \"root_dispersion_ns\": %.0f"
		   ", \"skew_ppm\": %.3f, \"residual_freq_ppm\": %.3f, \"update_interval_s\": %.1f"
		   ", \"bound_ns\": ",
		ch->offset_s * 1e9, ch->root_delay_s * 1e9, ch->root_dispersion_s * 1e9, ch->skew_ppm,
		ch->residual_freq_ppm, ch->update_interval_s);
	bdc_json_bound(f, cks_chrony_bound_ns(ch));
	fputc('}', f);
}

static void bdc_json_snapshot(FILE *f, const struct bdc_snapshot *s)
{
	if (!s->valid)
		fputs("null", f);
	else
		fprintf(f, "{\"offset_ns\": %" PRId64 ", \"bound_ns\": %" PRId64 "}", s->offset_ns,
			s->bound_ns);
}

/* Smallest delay among the samples still in the window. */
static int64_t bdc_best_delay(const struct cks_estimator *e)
{
	int64_t best = -1;
	for (unsigned k = 0; k < e->count; k++)
		if (best < 0 || e->samples[k].delay_ns < best)
			best = e->samples[k].delay_ns;
	return best;
}

/* How the accepted exchanges of p were stamped: "kernel" when every one
 * of the four stamps of every exchange came from the kernel, "user space"
 * when none did, "mixed" otherwise; "none" before any exchange. */
static const char *bdc_stamps_summary(const struct bdc_peer *p)
{
	uint64_t user = 0, all = 0;
	for (int k = 0; k < 4; k++)
		for (int o = 0; o < 3; o++) {
			all += p->stamps[k][o];
			user += o == PRB_STAMP_USER ? p->stamps[k][o] : 0;
		}
	return all == 0 ? "none" : user == 0 ? "kernel" : user == all ? "user space" : "mixed";
}

static void bdc_json_stamps(FILE *f, const struct bdc_peer *p)
{
	static const char *const name[4] = { "t1", "t2", "t3", "t4" };
	struct prb_prober_stats st = { 0 };
	if (p->prober != NULL)
		prb_prober_stats(p->prober, &st);
	fprintf(f, "{\"transport\": \"%s\", \"summary\": \"%s\"",
		p->prober != NULL ? "udp" : "control connection", bdc_stamps_summary(p));
	for (int k = 0; k < 4; k++)
		fprintf(f, ", \"%s\": {\"kernel software\": %" PRIu64 ", \"hardware\": %" PRIu64
			   ", \"user space\": %" PRIu64 "}",
			name[k], p->stamps[k][PRB_STAMP_SOFTWARE], p->stamps[k][PRB_STAMP_HARDWARE],
			p->stamps[k][PRB_STAMP_USER]);
	fprintf(f, ", \"followups\": %" PRIu64 ", \"no_followup\": %" PRIu64 ", \"lost\": %" PRIu64
		   ", \"refused\": %" PRIu64 "}",
		st.followups, st.no_followup, st.lost, st.refused);
}

static bool bdc_all_sources_same_clock(const struct bdc *c)
{
	for (uint32_t s = 0; s < c->run->opt.sources; s++)
		if (!bdc_same_clock(c, s))
			return false;
	return true;
}

static void bdc_json_ivl(FILE *f, bool valid, struct ivl v)
{
	if (valid)
		fprintf(f, "{\"lo_ns\": %" PRId64 ", \"hi_ns\": %" PRId64 "}", v.lo, v.hi);
	else
		fputs("null", f);
}

/* The estimate applied at the end of the run (else after the first
 * burst), its two intervals, and every estimate made during the run. */
static void bdc_json_applied(const struct bdc *c, FILE *f, uint32_t i)
{
	const struct bdc_peer *p = &c->peers[i];
	const struct bdc_snapshot *s = p->snap[BDC_END].applied.basis != IVL_BASIS_NONE
					       ? &p->snap[BDC_END]
					       : &p->snap[BDC_START];
	fputs(",\n       \"applied\": ", f);
	if (s->applied.basis == IVL_BASIS_NONE) {
		fputs("null", f);
	} else {
		fprintf(f, "{\"offset_ns\": %" PRId64 ", \"bound_ns\": %" PRId64 ", \"basis\": ",
			s->applied.offset_ns, s->applied.bound_ns);
		bdc_json_string(f, ivl_basis_name(s->applied.basis));
		fprintf(f, ", \"at\": \"%s\", \"inband\": ", s == &p->snap[BDC_END] ? "end" : "start");
		bdc_json_ivl(f, s->valid, s->inband);
		fputs(", \"chrony\": ", f);
		bdc_json_ivl(f, s->chrony_valid, s->chrony);
		fputc('}', f);
	}
	fprintf(f, ",\n       \"estimates\": {\"count\": %" PRIu64 ", \"recorded\": %u"
		   ", \"window_disjoint\": %" PRIu64 ", \"by_basis\": {",
		p->estimates, p->recorded, p->window_disjoint);
	for (int k = IVL_BASIS_INBAND; k <= IVL_BASIS_UNION; k++)
		fprintf(f, "%s\"%s\": %" PRIu64, k == IVL_BASIS_INBAND ? "" : ", ",
			ivl_basis_name((enum ivl_basis)k), p->by_basis[k]);
	fputs("}, \"against_injected\": ", f);
	if (p->clock_seen && p->estimates > 0)
		fprintf(f, "{\"expected_offset_ns\": %" PRId64 ", \"inside\": %" PRIu64
			   ", \"outside\": %" PRIu64 ", \"worst_margin_ns\": %" PRId64 "}",
			p->injected_ns - c->injected_ns, p->inside_injected,
			p->estimates - p->inside_injected, p->worst_margin_ns);
	else
		fputs("null", f);
	fputs(",\n         \"history_fields\": [\"at_ns\", \"offset_ns\", \"bound_ns\", \"basis\"], \"history\": [", f);
	for (uint32_t k = 0; k < p->recorded; k++) {
		const struct bdc_record *r = &p->history[k];
		fprintf(f, "%s[%" PRId64 ", %" PRId64 ", %" PRId64 ", \"%s\"]",
			k == 0 ? "" : k % 4 == 0 ? ",\n           " : ", ", r->at_ns, r->offset_ns,
			r->bound_ns, ivl_basis_name((enum ivl_basis)r->basis));
	}
	fputs("]}", f);
}

static void bdc_json_peer(const struct bdc *c, FILE *f, uint32_t i)
{
	const struct bdc_peer *p = &c->peers[i];
	const struct bd_peer *bp = bdc_bd_peer(c, i);
	const struct bdc_snapshot *best = bdc_best_snapshot(p);
	bool same_host = bdc_same_host(c, i);
	fprintf(f, "\n      {\"peer\": \"%s.%u\", \"role\": \"%s\", \"id\": %u, \"host\": ",
		ctl_role_name(bp->role), bp->id, ctl_role_name(bp->role), bp->id);
	bdc_json_string(f, bp->host);
	fprintf(f, ", \"same_host\": %s, \"same_clock\": %s, \"injected_offset_ns\": ",
		same_host ? "true" : "false", bdc_same_clock(c, i) ? "true" : "false");
	if (p->clock_seen)
		fprintf(f, "%" PRId64, p->injected_ns);
	else
		fputs("null", f);

	/* On one host the truth is known: the difference of the injections. */
	fputs(",\n       \"expected_offset_ns\": ", f);
	if (same_host && p->clock_seen) {
		int64_t expected = p->injected_ns - c->injected_ns;
		fprintf(f, "%" PRId64, expected);
		if (best != NULL) {
			int64_t error = best->offset_ns - expected;
			fprintf(f, ", \"error_ns\": %" PRId64 ", \"within_bound\": %s", error,
				bdc_abs(error) <= (uint64_t)best->bound_ns ? "true" : "false");
		}
	} else {
		fputs("null", f);
	}

	bdc_json_applied(c, f, i);
	fputs(",\n       \"inband\": {\"offset_ns\": ", f);
	if (best != NULL)
		fprintf(f, "%" PRId64 ", \"bound_ns\": %" PRId64, best->offset_ns, best->bound_ns);
	else
		fputs("null, \"bound_ns\": null", f);
	fprintf(f, ", \"drift_ppm\": %.3f, \"drift_from\": \"%s\", \"best_delay_ns\": ",
		p->est.drift_ppm, p->drift_from_chrony ? "chrony" : "default");
	bdc_json_bound(f, bdc_best_delay(&p->est));
	fputs(",\n                  \"stamps\": ", f);
	bdc_json_stamps(f, p);
	fputs(",\n                  \"start\": ", f);
	bdc_json_snapshot(f, &p->snap[BDC_START]);
	fputs(", \"end\": ", f);
	bdc_json_snapshot(f, &p->snap[BDC_END]);
	fprintf(f, ",\n                  \"pings\": %" PRIu64 ", \"pongs\": %" PRIu64
		   ", \"accepted\": %" PRIu64 ", \"rejected\": %" PRIu64 ", \"evicted\": %" PRIu64
		   ", \"unmatched\": %" PRIu64 ", \"retried\": %" PRIu64 "}",
		p->pings, p->pongs, p->est.accepted, p->est.rejected, p->est.evicted,
		p->pongs_unmatched, p->retried);

	for (int k = 0; k < BDC_PHASES; k++) {
		fprintf(f, ",\n       \"chrony_%s\": ", bdc_phase_name[k]);
		bdc_json_chrony(f, &p->chrony[k]);
	}
	int64_t pb = cks_chrony_bound_ns(&p->chrony[BDC_END]);
	int64_t hb = cks_chrony_bound_ns(&c->chrony[BDC_END]);
	fputs(",\n       \"chrony_pair_bound_ns\": ", f);
	bdc_json_bound(f, pb < 0 || hb < 0 ? -1 : bdc_sat_add((uint64_t)pb, (uint64_t)hb));
	enum cks_verdict v = bdc_overall(c, i);
	fprintf(f, ", \"agreement\": {\"start\": \"%s\", \"end\": \"%s\"}, \"consistent\": %s",
		bdc_verdict_name(bdc_verdict(c, i, BDC_START)),
		bdc_verdict_name(bdc_verdict(c, i, BDC_END)),
		v == CKS_CONSISTENT ? "true" : v == CKS_INCONSISTENT ? "false" : "null");

	if (i < c->run->opt.sources && c->run->out != NULL) {
		struct out_uncertainty u = out_source_uncertainty(c->run->out, (uint16_t)i);
		const char *how = bdc_same_clock(c, i) ? "same clock: offset 0, uncertainty 0"
				  : c->correction ? "estimated offset subtracted"
						  : "not corrected (--no-clock-correction)";
		fputs(",\n       \"latency\": {\"correction\": ", f);
		bdc_json_string(f, how);
		fprintf(f, ", \"applied_offset_ns\": %" PRId64 ", \"would_correct_ns\": %" PRId64
			   ", \"earliest_in_events\": %" PRIu64 ", \"max_uncertainty_ns\": ",
			bdc_same_clock(c, i) || !c->correction || !p->last_valid ? 0 : p->last.offset_ns,
			bdc_same_clock(c, i) || !p->last_valid ? 0 : p->last.offset_ns,
			u.bounded + u.unbounded);
		bdc_json_bound(f, u.unbounded ? -1 : u.max_ns);
		fprintf(f, ", \"unbounded_events\": %" PRIu64 "}", u.unbounded);
	}
	fputc('}', f);
}

void bdc_write_json(const struct bdc *c, FILE *f)
{
	fprintf(f, "  \"clocks\": {\"correction\": %s, \"default_drift_ppm\": %.0f,\n"
		   "    \"same_clock_rule\": \"a peer shares the builder's clock when its HELLO host name equals the builder's and neither was started with a non-zero --clock-offset-ns\",\n"
		   "    \"builder\": {\"host\": ",
		c->correction ? "true" : "false", CKS_DEFAULT_DRIFT_PPM);
	bdc_json_string(f, c->host);
	fprintf(f, ", \"injected_offset_ns\": %" PRId64, c->injected_ns);
	for (int k = 0; k < BDC_PHASES; k++) {
		fprintf(f, ",\n                \"chrony_%s\": ", bdc_phase_name[k]);
		bdc_json_chrony(f, &c->chrony[k]);
	}
	fputs("},\n    \"peers\": [", f);
	for (uint32_t i = 0; i < c->count; i++) {
		bdc_json_peer(c, f, i);
		if (i + 1 < c->count)
			fputc(',', f);
	}
	fputs("\n    ],\n    \"inconsistent_peers\": [", f);
	bool first = true;
	for (uint32_t i = 0; i < c->count; i++) {
		if (bdc_overall(c, i) != CKS_INCONSISTENT)
			continue;
		const struct bd_peer *bp = bdc_bd_peer(c, i);
		fprintf(f, "%s\"%s.%u\"", first ? "" : ", ", ctl_role_name(bp->role), bp->id);
		first = false;
	}
	fputs("]},\n", f);
}

/* Which clocks the latencies were measured with, for "uncertainty". */
static const char *bdc_latency_basis(const struct bdc *c, const struct out_uncertainty *u)
{
	if (u->unbounded > 0)
		return "unknown: some events came from sources with no clock estimate yet";
	if (bdc_all_sources_same_clock(c))
		return "same clock";
	return c->correction ? "clock offsets applied (in band, intersected with chrony's bound where both are known)"
			     : "not corrected (--no-clock-correction): includes the offsets left in";
}

void bdc_write_latency_json(const struct bdc *c, FILE *f)
{
	const struct out *o = c->run->out;
	const struct hist *lat = out_latency(o);
	struct out_uncertainty u = out_uncertainty(o);
	int64_t unc = u.unbounded ? -1 : u.max_ns;
	static const struct {
		const char *name;
		double q;
	} pct[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };

	const struct hist *uh = out_uncertainty_hist(o);
	fputs("    \"uncertainty_ns\": ", f);
	bdc_json_bound(f, unc);
	/* What is typical besides the bound that holds for every percentile:
	 * the per-record uncertainty's own percentiles (histogram upper edges,
	 * within 6.25 %), over the records whose uncertainty is known. */
	fputs(",\n    \"uncertainty_distribution\": ", f);
	if (uh->samples == 0)
		fputs("null", f);
	else
		fprintf(f, "{\"p50_ns\": %" PRIu64 ", \"p90_ns\": %" PRIu64 ", \"p99_ns\": %" PRIu64
			   ", \"max_ns\": %" PRIu64 ", \"min_ns\": %" PRIu64 ", \"records\": %" PRIu64 "}",
			hist_quantile(uh, 0.5), hist_quantile(uh, 0.9), hist_quantile(uh, 0.99), uh->max,
			uh->min, uh->samples);
	fputs(",\n    \"uncertainty_basis\": ", f);
	bdc_json_string(f, bdc_latency_basis(c, &u));
	fprintf(f, ", \"clock_corrected\": %s, \"unbounded_samples\": %" PRIu64 ",\n    \"with_uncertainty\": {",
		c->correction ? "true" : "false", u.unbounded);
	for (size_t k = 0; k < sizeof pct / sizeof pct[0]; k++) {
		fprintf(f, "\"%s\": {\"value_ns\": %" PRIu64 ", \"uncertainty_ns\": ", pct[k].name,
			hist_quantile(lat, pct[k].q));
		bdc_json_bound(f, unc);
		fputs("}, ", f);
	}
	fprintf(f, "\"max\": {\"value_ns\": %" PRIu64 ", \"uncertainty_ns\": ", lat->max);
	bdc_json_bound(f, unc);
	fputs("}},\n", f);
	fputs("    \"definition\": \"builder record write time minus (earliest source timestamp of the event minus that source's clock offset), on the builder's clock; each value is within uncertainty_ns of the true latency (docs/CLOCKS.md)\",\n",
	      f);
}

static void bdc_print_duration(FILE *f, int64_t ns)
{
	uint64_t a = bdc_abs(ns);
	const char *sign = ns < 0 ? "-" : "";
	if (a < 10000)
		fprintf(f, "%s%" PRIu64 " ns", sign, a);
	else if (a < 10000000)
		fprintf(f, "%s%.1f us", sign, (double)a / 1e3);
	else
		fprintf(f, "%s%.2f ms", sign, (double)a / 1e6);
}

void bdc_print_latency_uncertainty(const struct bdc *c, FILE *f)
{
	struct out_uncertainty u = out_uncertainty(c->run->out);
	if (u.unbounded > 0) {
		fprintf(f, " (+/- unknown: %" PRIu64 " samples had no clock estimate)", u.unbounded);
		return;
	}
	fputs(" (+/- ", f);
	bdc_print_duration(f, u.max_ns);
	const struct hist *uh = out_uncertainty_hist(c->run->out);
	if (u.max_ns > 0 && uh->samples > 0) {
		fputs(" max, median ", f);
		bdc_print_duration(f, (int64_t)hist_quantile(uh, 0.5));
		fputs(", p99 ", f);
		bdc_print_duration(f, (int64_t)hist_quantile(uh, 0.99));
	}
	if (bdc_all_sources_same_clock(c))
		fputs(", same clock)", f);
	else if (c->correction)
		fputs(", clock-corrected)", f);
	else
		fputs(", NOT clock-corrected)", f);
}

void bdc_print_summary(const struct bdc *c, FILE *f)
{
	uint32_t same = 0, chrony_peers = 0;
	for (uint32_t i = 0; i < c->count; i++) {
		same += bdc_same_clock(c, i);
		chrony_peers += cks_chrony_bound_ns(&c->peers[i].chrony[BDC_END]) >= 0;
	}
	fprintf(f, "clocks: %u of %u peers on the builder's clock", same, c->count);
	int64_t hb = cks_chrony_bound_ns(&c->chrony[BDC_END]);
	if (hb >= 0) {
		fputs("; chrony bound of the builder host ", f);
		bdc_print_duration(f, hb);
	} else {
		fprintf(f, "; chrony on the builder host: %s",
			c->chrony[BDC_END].available ? "not synchronised" : c->chrony[BDC_END].reason);
	}
	fprintf(f, "; %u of %u peers report a chrony bound\n", chrony_peers, c->count);
	for (uint32_t i = 0; i < c->count; i++) {
		const struct bdc_peer *p = &c->peers[i];
		const struct bd_peer *bp = bdc_bd_peer(c, i);
		const struct bdc_snapshot *best = bdc_best_snapshot(p);
		enum cks_verdict v = bdc_overall(c, i);
		if (!bp->connected || (bdc_same_clock(c, i) && v != CKS_INCONSISTENT))
			continue;
		fprintf(f, "  %s %u on %s: offset ", ctl_role_name(bp->role), bp->id, bp->host);
		if (best == NULL) {
			fputs("not measured", f);
		} else {
			fputs(best->offset_ns < 0 ? "" : "+", f);
			bdc_print_duration(f, best->offset_ns);
			fputs(" +/- ", f);
			bdc_print_duration(f, best->bound_ns);
			fprintf(f, " (in band, %" PRIu64 " exchanges, %s stamps)", p->est.accepted,
				bdc_stamps_summary(p));
		}
		int64_t pb = cks_chrony_bound_ns(&p->chrony[BDC_END]);
		if (pb >= 0) {
			fputs(", chrony bound ", f);
			bdc_print_duration(f, pb);
		} else {
			fputs(", no chrony bound", f);
		}
		if (p->last_valid) {
			fputs("; applied ", f);
			fputs(p->last.offset_ns < 0 ? "" : "+", f);
			bdc_print_duration(f, p->last.offset_ns);
			fputs(" +/- ", f);
			bdc_print_duration(f, p->last.bound_ns);
			fprintf(f, " (%s)", ivl_basis_name(p->last.basis));
		}
		if (p->by_basis[IVL_BASIS_UNION] > 0)
			fprintf(f, "; INCONSISTENT: in band and chrony disjoint in %" PRIu64 " of %" PRIu64
				   " estimates, their union applied", p->by_basis[IVL_BASIS_UNION],
				p->estimates);
		else if (v == CKS_INCONSISTENT)
			fputs("; DISAGREES with chrony beyond both bounds", f);
		if (!c->correction && i < c->run->opt.sources && best != NULL && !bdc_same_clock(c, i)) {
			fputs("; not corrected: its latencies are off by ", f);
			bdc_print_duration(f, -best->offset_ns);
		}
		fputc('\n', f);
	}
}

bool bdc_peer_estimate(const struct bdc *c, const struct bd_peer *p, int64_t *offset_ns,
		       int64_t *bound_ns)
{
	if (c == NULL)
		return false;
	return cks_estimate(&c->peers[bdc_index(c, p)].est, (int64_t)clk_realtime_ns(), offset_ns,
			    bound_ns) == 0;
}
