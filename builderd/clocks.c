#include "clocks.h"

#include "sys/clock.h"
#include "core/clockoffset.h"
#include "io/chronyc.h"
#include "wire/control.h"
#include "core/hist.h"
#include "sys/log.h"
#include "metrics_json.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "core/interval.h"
#include "output.h"
#include "io/probe.h"
#include "peers.h"
#include "wire/text.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BDC_START, BDC_END, BDC_PHASES };

#define BDC_SAME_CLOCK_RULE \
	"a peer shares the builder's clock when its control connection comes from an address of " \
	"the builder's own network stack (loopback or an address of one of its interfaces) and " \
	"neither was started with a non-zero --clock-offset-ns; the host name a peer sends is " \
	"not trusted for this"

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
	bool local;                /* its control connection is from our own addresses */
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
	struct peer_table *table;  /* the hub's peers, whose connections carry the exchanges */
	struct event_base *base;   /* for the probe sockets */
	void (*ready)(void *arg);  /* every source measured: the hub may start */
	void *ready_arg;
	struct out *out;           /* where source offsets are applied */
	uint16_t sources;
	uint32_t run_id;
	bool quiet;
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
	void (*done)(void *arg);
	void *done_arg;
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
	return peer_index(c->table, p);
}

static struct bd_peer *bdc_bd_peer(const struct bdc *c, uint32_t i)
{
	return peer_at(c->table, i);
}

/* Same host: the peer's control connection came from an address of the
 * builder's own network stack (net_fd_is_local, decided when it joined),
 * taken to mean the same kernel clock, so the true offset is the
 * difference of the injected offsets. The HELLO's host name is the peer's
 * say and is never trusted for this (docs/CLOCKS.md). */
static bool bdc_same_host(const struct bdc *c, uint32_t i)
{
	return bdc_bd_peer(c, i)->connected && c->peers[i].local;
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
			 bdc_phase_name[phase], c->run_id, ch->reason);
	else if (!ch->synchronised)
		log_info("Builder: chrony not synchronised at %s of run %u (leap status %s)",
			 bdc_phase_name[phase], c->run_id, ch->leap);
	else if (!c->quiet)
		log_info("Builder: chrony at %s of run %u: bound %" PRId64 " ns (system time %.9f s, root delay %.9f s, root dispersion %.9f s)",
			 bdc_phase_name[phase], c->run_id, cks_chrony_bound_ns(ch),
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
	if (c->finished)
		return;
	struct bdc_peer *p = &c->peers[i];
	struct out_clock oc = { .bound_ns = OUT_UNBOUNDED };
	int64_t now = (int64_t)clk_realtime_ns();
	struct ivl_estimate e = bdc_combined(c, i, now, NULL);
	bdc_record(c, i, now, &e);
	if (i >= c->sources || c->out == NULL)
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
	out_set_clock(c->out, (uint16_t)i, &oc);
}

static void bdc_on_timer(evutil_socket_t fd, short what, void *arg);

static void bdc_snapshot(struct bdc *c, uint32_t i, int phase)
{
	bdc_combined(c, i, (int64_t)clk_realtime_ns(), &c->peers[i].snap[phase]);
}

struct bdc *bdc_create(const struct bdc_config *cfg)
{
	struct bdc *c = calloc(1, sizeof *c);
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
	c->count = peer_count(cfg->peers);
	c->peers = calloc(c->count, sizeof *c->peers);
	c->ev_timer = evtimer_new(cfg->base, bdc_on_timer, c);
	if (c->peers == NULL || c->ev_timer == NULL)
		goto fail;
	c->correction = cfg->correction;
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
	log_error("Run %u: no memory for the clock state of %u peers", cfg->run_id,
		  peer_count(cfg->peers));
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
				 ctl_role_title(bp->role), bp->id, BDC_READY_TIMEOUT_NS / 1000000u);
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
				 c->run_id, BDC_CLOSE_TIMEOUT_NS / 1000000u);
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
	p->local = net_fd_is_local(msgconn_fd(bp->conn));
	p->burst_left = BDC_BURST;
	p->next_ping_ns = clk_monotonic_ns();
	p->joined_ns = p->next_ping_ns;
	bdc_pump(c);
}

bool bdc_ready(const struct bdc *c)
{
	if (c == NULL)
		return true;
	for (uint32_t s = 0; s < c->sources; s++)
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
	if (i < c->sources && bdc_ready(c))
		c->ready(c->ready_arg);
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
		log_debug("%s %u: clock exchange %" PRIu64 " refused (%s)", ctl_role_title(bp->role), bp->id,
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
	snprintf(what, sizeof what, "%s %u", ctl_role_title(bp->role), bp->id);
	p->prober = prb_prober_start(c->base, msgconn_fd(bp->conn), (uint16_t)port, token,
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

bool bdc_close(struct bdc *c, void (*done)(void *arg), void *arg)
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
	c->done_arg = arg;
	c->close_deadline_ns = now + BDC_CLOSE_TIMEOUT_NS;
	bdc_pump(c);
	return true;
}

static void bdc_close_done(struct bdc *c)
{
	void (*done)(void *arg) = c->done;
	c->closing = false;
	c->done = NULL;
	evtimer_del(c->ev_timer);
	if (done != NULL)
		done(c->done_arg);
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
				 ctl_role_title(bp->role), bp->id, bp->host, s->offset_ns, s->bound_ns);
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

#define SET(obj, key, value) metrics_json_set((obj), (key), (value))

/* A bound in ns, or null when unknown (negative). */
static json_t *bdc_json_bound(int64_t bound)
{
	return bound < 0 ? json_null() : json_integer(bound);
}

/* A double that is a whole number of ns, as an integer. */
static json_t *bdc_json_whole(double v)
{
	if (!isfinite(v) || fabs(v) > 9.2e18)
		return json_null();
	return json_integer((json_int_t)llround(v));
}

static json_t *bdc_json_chrony(const struct cks_chrony *ch)
{
	json_t *o = json_object();
	if (!ch->available) {
		SET(o, "available", json_false());
		SET(o, "bound_ns", json_null());
		SET(o, "reason", metrics_json_text(ch->reason));
		return o;
	}
	SET(o, "available", json_true());
	SET(o, "synchronised", json_boolean(ch->synchronised));
	SET(o, "stratum", json_integer(ch->stratum));
	SET(o, "leap", metrics_json_text(ch->leap));
	SET(o, "system_time_ns", bdc_json_whole(ch->offset_s * 1e9));
	SET(o, "root_delay_ns", bdc_json_whole(ch->root_delay_s * 1e9));
	SET(o, "root_dispersion_ns", bdc_json_whole(ch->root_dispersion_s * 1e9));
	SET(o, "skew_ppm", metrics_json_real(ch->skew_ppm, 3));
	SET(o, "residual_freq_ppm", metrics_json_real(ch->residual_freq_ppm, 3));
	SET(o, "update_interval_s", metrics_json_real(ch->update_interval_s, 1));
	SET(o, "bound_ns", bdc_json_bound(cks_chrony_bound_ns(ch)));
	return o;
}

static json_t *bdc_json_snapshot(const struct bdc_snapshot *s)
{
	if (!s->valid)
		return json_null();
	json_t *o = json_object();
	SET(o, "offset_ns", json_integer(s->offset_ns));
	SET(o, "bound_ns", json_integer(s->bound_ns));
	return o;
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

static json_t *bdc_json_stamps(const struct bdc_peer *p)
{
	static const char *const name[4] = { "t1", "t2", "t3", "t4" };
	struct prb_prober_stats st = { 0 };
	if (p->prober != NULL)
		prb_prober_stats(p->prober, &st);
	json_t *o = json_object();
	SET(o, "transport", metrics_json_text(p->prober != NULL ? "udp" : "control connection"));
	SET(o, "summary", metrics_json_text(bdc_stamps_summary(p)));
	for (int k = 0; k < 4; k++) {
		json_t *t = json_object();
		SET(t, "kernel software", metrics_json_u64(p->stamps[k][PRB_STAMP_SOFTWARE]));
		SET(t, "hardware", metrics_json_u64(p->stamps[k][PRB_STAMP_HARDWARE]));
		SET(t, "user space", metrics_json_u64(p->stamps[k][PRB_STAMP_USER]));
		SET(o, name[k], t);
	}
	SET(o, "followups", metrics_json_u64(st.followups));
	SET(o, "no_followup", metrics_json_u64(st.no_followup));
	SET(o, "lost", metrics_json_u64(st.lost));
	SET(o, "refused", metrics_json_u64(st.refused));
	return o;
}

static bool bdc_all_sources_same_clock(const struct bdc *c)
{
	for (uint32_t s = 0; s < c->sources; s++)
		if (!bdc_same_clock(c, s))
			return false;
	return true;
}

static json_t *bdc_json_ivl(bool valid, struct ivl v)
{
	if (!valid)
		return json_null();
	json_t *o = json_object();
	SET(o, "lo_ns", json_integer(v.lo));
	SET(o, "hi_ns", json_integer(v.hi));
	return o;
}

/* The estimate applied at the end of the run (else after the first
 * burst), its two intervals, and every estimate made during the run:
 * the keys "applied" and "estimates" of a peer's object. */
static void bdc_json_applied(const struct bdc *c, json_t *peer, uint32_t i)
{
	const struct bdc_peer *p = &c->peers[i];
	const struct bdc_snapshot *s = p->snap[BDC_END].applied.basis != IVL_BASIS_NONE
					       ? &p->snap[BDC_END]
					       : &p->snap[BDC_START];
	json_t *applied = json_null();
	if (s->applied.basis != IVL_BASIS_NONE) {
		applied = json_object();
		SET(applied, "offset_ns", json_integer(s->applied.offset_ns));
		SET(applied, "bound_ns", json_integer(s->applied.bound_ns));
		SET(applied, "basis", metrics_json_text(ivl_basis_name(s->applied.basis)));
		SET(applied, "at", metrics_json_text(s == &p->snap[BDC_END] ? "end" : "start"));
		SET(applied, "inband", bdc_json_ivl(s->valid, s->inband));
		SET(applied, "chrony", bdc_json_ivl(s->chrony_valid, s->chrony));
	}
	SET(peer, "applied", applied);

	json_t *est = json_object(), *by_basis = json_object(), *history = json_array();
	SET(est, "count", metrics_json_u64(p->estimates));
	SET(est, "recorded", metrics_json_u64(p->recorded));
	SET(est, "window_disjoint", metrics_json_u64(p->window_disjoint));
	for (int k = IVL_BASIS_INBAND; k <= IVL_BASIS_UNION; k++)
		SET(by_basis, ivl_basis_name((enum ivl_basis)k), metrics_json_u64(p->by_basis[k]));
	SET(est, "by_basis", by_basis);
	json_t *against = json_null();
	if (p->clock_seen && p->estimates > 0) {
		against = json_object();
		SET(against, "expected_offset_ns", json_integer(p->injected_ns - c->injected_ns));
		SET(against, "inside", metrics_json_u64(p->inside_injected));
		SET(against, "outside", metrics_json_u64(p->estimates - p->inside_injected));
		SET(against, "worst_margin_ns", json_integer(p->worst_margin_ns));
	}
	SET(est, "against_injected", against);
	json_t *fields = json_array();
	static const char *const field[] = { "at_ns", "offset_ns", "bound_ns", "basis" };
	for (size_t k = 0; k < sizeof field / sizeof field[0]; k++)
		json_array_append_new(fields, json_string(field[k]));
	SET(est, "history_fields", fields);
	for (uint32_t k = 0; k < p->recorded; k++) {
		const struct bdc_record *r = &p->history[k];
		json_t *row = json_array();
		json_array_append_new(row, json_integer(r->at_ns));
		json_array_append_new(row, json_integer(r->offset_ns));
		json_array_append_new(row, json_integer(r->bound_ns));
		json_array_append_new(row, json_string(ivl_basis_name((enum ivl_basis)r->basis)));
		json_array_append_new(history, row);
	}
	SET(est, "history", history);
	SET(peer, "estimates", est);
}

static json_t *bdc_json_inband(const struct bdc_peer *p, const struct bdc_snapshot *best)
{
	json_t *o = json_object();
	SET(o, "offset_ns", best != NULL ? json_integer(best->offset_ns) : NULL);
	SET(o, "bound_ns", best != NULL ? json_integer(best->bound_ns) : NULL);
	SET(o, "drift_ppm", metrics_json_real(p->est.drift_ppm, 3));
	SET(o, "drift_from", metrics_json_text(p->drift_from_chrony ? "chrony" : "default"));
	SET(o, "best_delay_ns", bdc_json_bound(bdc_best_delay(&p->est)));
	SET(o, "stamps", bdc_json_stamps(p));
	SET(o, "start", bdc_json_snapshot(&p->snap[BDC_START]));
	SET(o, "end", bdc_json_snapshot(&p->snap[BDC_END]));
	SET(o, "pings", metrics_json_u64(p->pings));
	SET(o, "pongs", metrics_json_u64(p->pongs));
	SET(o, "accepted", metrics_json_u64(p->est.accepted));
	SET(o, "rejected", metrics_json_u64(p->est.rejected));
	SET(o, "evicted", metrics_json_u64(p->est.evicted));
	SET(o, "unmatched", metrics_json_u64(p->pongs_unmatched));
	SET(o, "retried", metrics_json_u64(p->retried));
	return o;
}

static json_t *bdc_json_peer(const struct bdc *c, uint32_t i)
{
	const struct bdc_peer *p = &c->peers[i];
	const struct bd_peer *bp = bdc_bd_peer(c, i);
	const struct bdc_snapshot *best = bdc_best_snapshot(p);
	bool same_host = bdc_same_host(c, i);
	bool same_clock = bdc_same_clock(c, i);
	char name[48];
	json_t *o = json_object();
	snprintf(name, sizeof name, "%s.%u", ctl_role_name(bp->role), bp->id);
	SET(o, "peer", metrics_json_text(name));
	SET(o, "role", metrics_json_text(ctl_role_name(bp->role)));
	SET(o, "id", metrics_json_u64(bp->id));
	SET(o, "host", metrics_json_text(bp->host));
	SET(o, "same_host", json_boolean(same_host));
	SET(o, "same_clock", json_boolean(same_clock));
	SET(o, "injected_offset_ns", p->clock_seen ? json_integer(p->injected_ns) : NULL);

	/* On one host the truth is known: the difference of the injections. */
	if (same_host && p->clock_seen) {
		int64_t expected = p->injected_ns - c->injected_ns;
		SET(o, "expected_offset_ns", json_integer(expected));
		if (best != NULL) {
			int64_t error = best->offset_ns - expected;
			SET(o, "error_ns", json_integer(error));
			SET(o, "within_bound", json_boolean(bdc_abs(error) <= (uint64_t)best->bound_ns));
		}
	} else {
		SET(o, "expected_offset_ns", NULL);
	}
	bdc_json_applied(c, o, i);
	SET(o, "inband", bdc_json_inband(p, best));
	for (int k = 0; k < BDC_PHASES; k++) {
		snprintf(name, sizeof name, "chrony_%s", bdc_phase_name[k]);
		SET(o, name, bdc_json_chrony(&p->chrony[k]));
	}
	int64_t pb = cks_chrony_bound_ns(&p->chrony[BDC_END]);
	int64_t hb = cks_chrony_bound_ns(&c->chrony[BDC_END]);
	SET(o, "chrony_pair_bound_ns",
	    bdc_json_bound(pb < 0 || hb < 0 ? -1 : bdc_sat_add((uint64_t)pb, (uint64_t)hb)));
	json_t *agreement = json_object();
	SET(agreement, "start", metrics_json_text(bdc_verdict_name(bdc_verdict(c, i, BDC_START))));
	SET(agreement, "end", metrics_json_text(bdc_verdict_name(bdc_verdict(c, i, BDC_END))));
	SET(o, "agreement", agreement);
	enum cks_verdict v = bdc_overall(c, i);
	SET(o, "consistent", v == CKS_UNKNOWN ? NULL : json_boolean(v == CKS_CONSISTENT));

	if (i < c->sources && c->out != NULL) {
		struct out_uncertainty u = out_source_uncertainty(c->out, (uint16_t)i);
		const char *how = same_clock ? "same clock: offset 0, uncertainty 0"
			       : c->correction ? "estimated offset subtracted"
					       : "not corrected (--no-clock-correction)";
		int64_t applied = same_clock || !p->last_valid ? 0 : p->last.offset_ns;
		json_t *lat = json_object();
		SET(lat, "correction", metrics_json_text(how));
		SET(lat, "applied_offset_ns", json_integer(c->correction ? applied : 0));
		SET(lat, "would_correct_ns", json_integer(applied));
		SET(lat, "earliest_in_events", metrics_json_u64(u.bounded + u.unbounded));
		SET(lat, "max_uncertainty_ns", bdc_json_bound(u.unbounded ? -1 : u.max_ns));
		SET(lat, "unbounded_events", metrics_json_u64(u.unbounded));
		SET(o, "latency", lat);
	}
	return o;
}

json_t *bdc_json(const struct bdc *c)
{
	json_t *o = json_object(), *builder = json_object(), *peers = json_array();
	json_t *inconsistent = json_array();
	char name[48];
	SET(o, "correction", json_boolean(c->correction));
	SET(o, "default_drift_ppm", bdc_json_whole(CKS_DEFAULT_DRIFT_PPM));
	SET(o, "same_clock_rule", metrics_json_text(BDC_SAME_CLOCK_RULE));
	SET(builder, "host", metrics_json_text(c->host));
	SET(builder, "injected_offset_ns", json_integer(c->injected_ns));
	for (int k = 0; k < BDC_PHASES; k++) {
		snprintf(name, sizeof name, "chrony_%s", bdc_phase_name[k]);
		SET(builder, name, bdc_json_chrony(&c->chrony[k]));
	}
	SET(o, "builder", builder);
	for (uint32_t i = 0; i < c->count; i++) {
		json_array_append_new(peers, bdc_json_peer(c, i));
		if (bdc_overall(c, i) != CKS_INCONSISTENT)
			continue;
		const struct bd_peer *bp = bdc_bd_peer(c, i);
		snprintf(name, sizeof name, "%s.%u", ctl_role_name(bp->role), bp->id);
		json_array_append_new(inconsistent, metrics_json_text(name));
	}
	SET(o, "peers", peers);
	SET(o, "inconsistent_peers", inconsistent);
	return o;
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

void bdc_latency_json(const struct bdc *c, json_t *latency)
{
	const struct out *o = c->out;
	const struct hist *lat = out_latency(o);
	struct out_uncertainty u = out_uncertainty(o);
	int64_t unc = u.unbounded ? -1 : u.max_ns;
	static const struct {
		const char *name;
		double q;
	} pct[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };

	const struct hist *uh = out_uncertainty_hist(o);
	SET(latency, "uncertainty_ns", bdc_json_bound(unc));
	/* What is typical besides the bound that holds for every percentile:
	 * the per-record uncertainty's own percentiles (histogram upper edges,
	 * within 6.25 %), over the records whose uncertainty is known. */
	json_t *dist = json_null();
	if (uh->samples > 0) {
		dist = json_object();
		SET(dist, "p50_ns", metrics_json_u64(hist_quantile(uh, 0.5)));
		SET(dist, "p90_ns", metrics_json_u64(hist_quantile(uh, 0.9)));
		SET(dist, "p99_ns", metrics_json_u64(hist_quantile(uh, 0.99)));
		SET(dist, "max_ns", metrics_json_u64(uh->max));
		SET(dist, "min_ns", metrics_json_u64(uh->min));
		SET(dist, "records", metrics_json_u64(uh->samples));
	}
	SET(latency, "uncertainty_distribution", dist);
	SET(latency, "uncertainty_basis", metrics_json_text(bdc_latency_basis(c, &u)));
	SET(latency, "clock_corrected", json_boolean(c->correction));
	SET(latency, "unbounded_samples", metrics_json_u64(u.unbounded));
	json_t *with = json_object();
	for (size_t k = 0; k <= sizeof pct / sizeof pct[0]; k++) {
		bool max = k == sizeof pct / sizeof pct[0];
		json_t *v = json_object();
		SET(v, "value_ns", metrics_json_u64(max ? lat->max : hist_quantile(lat, pct[k].q)));
		SET(v, "uncertainty_ns", bdc_json_bound(unc));
		SET(with, max ? "max" : pct[k].name, v);
	}
	SET(latency, "with_uncertainty", with);
	SET(latency, "definition", metrics_json_text("builder record write time minus (earliest source timestamp of the event minus that source's clock offset), on the builder's clock; each value is within uncertainty_ns of the true latency (docs/CLOCKS.md)"));
}

#undef SET

static void bdc_put_duration(FILE *f, int64_t ns)
{
	char d[TEXT_DURATION_BYTES];
	fputs(text_duration(d, ns), f);
}

void bdc_print_latency_uncertainty(const struct bdc *c, FILE *f)
{
	struct out_uncertainty u = out_uncertainty(c->out);
	if (u.unbounded > 0) {
		fprintf(f, " (+/- unknown: %" PRIu64 " samples had no clock estimate)", u.unbounded);
		return;
	}
	fputs(" (+/- ", f);
	bdc_put_duration(f, u.max_ns);
	const struct hist *uh = out_uncertainty_hist(c->out);
	if (u.max_ns > 0 && uh->samples > 0) {
		fputs(" max, median ", f);
		bdc_put_duration(f, (int64_t)hist_quantile(uh, 0.5));
		fputs(", p99 ", f);
		bdc_put_duration(f, (int64_t)hist_quantile(uh, 0.99));
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
		bdc_put_duration(f, hb);
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
		char host[4 * CTL_MAX_TEXT];
		text_log_escape(host, sizeof host, bp->host, strlen(bp->host));
		fprintf(f, "  %s %u on %s: offset ", ctl_role_name(bp->role), bp->id, host);
		if (best == NULL) {
			fputs("not measured", f);
		} else {
			fputs(best->offset_ns < 0 ? "" : "+", f);
			bdc_put_duration(f, best->offset_ns);
			fputs(" +/- ", f);
			bdc_put_duration(f, best->bound_ns);
			fprintf(f, " (in band, %" PRIu64 " exchanges, %s stamps)", p->est.accepted,
				bdc_stamps_summary(p));
		}
		int64_t pb = cks_chrony_bound_ns(&p->chrony[BDC_END]);
		if (pb >= 0) {
			fputs(", chrony bound ", f);
			bdc_put_duration(f, pb);
		} else {
			fputs(", no chrony bound", f);
		}
		if (p->last_valid) {
			fputs("; applied ", f);
			fputs(p->last.offset_ns < 0 ? "" : "+", f);
			bdc_put_duration(f, p->last.offset_ns);
			fputs(" +/- ", f);
			bdc_put_duration(f, p->last.bound_ns);
			fprintf(f, " (%s)", ivl_basis_name(p->last.basis));
		}
		if (p->by_basis[IVL_BASIS_UNION] > 0)
			fprintf(f, "; INCONSISTENT: in band and chrony disjoint in %" PRIu64 " of %" PRIu64
				   " estimates, their union applied", p->by_basis[IVL_BASIS_UNION],
				p->estimates);
		else if (v == CKS_INCONSISTENT)
			fputs("; DISAGREES with chrony beyond both bounds", f);
		if (!c->correction && i < c->sources && best != NULL && !bdc_same_clock(c, i)) {
			fputs("; not corrected: its latencies are off by ", f);
			bdc_put_duration(f, -best->offset_ns);
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
