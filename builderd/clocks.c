#include "clocks.h"

#include "sys/clock.h"
#include "core/clockoffset.h"
#include "wire/control.h"
#include "core/hist.h"
#include "sys/log.h"
#include "metrics.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "output.h"
#include "run_state.h"
#include "wire/text.h"

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

/* The in-band estimate at one moment. */
struct bdc_snapshot {
	bool valid;
	int64_t offset_ns;
	int64_t bound_ns;
	int64_t at_ns;             /* builder clock */
};

struct bdc_peer {
	struct cks_estimator est;
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
};

struct bdc {
	struct bd *run;
	struct event *ev_timer;
	uint32_t count;            /* sources, then readers */
	struct bdc_peer *peers;
	char host[CTL_MAX_TEXT];
	int64_t injected_ns;
	struct cks_chrony chrony[BDC_PHASES];
	bool correction;
	bool closing;
	bool finished;
	void (*done)(struct bd *b);
	uint64_t close_deadline_ns;
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
	if (cks_chrony_read(ch, cks_chrony_socket()) < 0)
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

/* Tells the output module how to correct source i's timestamps now. */
static void bdc_apply(struct bdc *c, uint32_t i)
{
	struct bd *b = c->run;
	if (i >= b->opt.sources || b->out == NULL || c->finished)
		return;
	struct bdc_peer *p = &c->peers[i];
	struct out_clock oc = { .bound_ns = OUT_UNBOUNDED };
	int64_t now = (int64_t)clk_realtime_ns(), offset, bound;
	if (bdc_same_clock(c, i)) {
		oc.bound_ns = 0;
	} else if (cks_estimate(&p->est, now, &offset, &bound) == 0) {
		oc.at_ns = now;
		oc.drift_ppm = p->est.drift_ppm;
		if (c->correction) {
			oc.offset_ns = offset;
			oc.bound_ns = bound;
		} else {
			/* Left uncorrected, a latency is off by the whole offset. */
			oc.bound_ns = bdc_sat_add(bdc_abs(offset), (uint64_t)bound);
		}
	}
	out_set_clock(b->out, (uint16_t)i, &oc);
}

static void bdc_on_timer(evutil_socket_t fd, short what, void *arg);

static void bdc_snapshot(struct bdc *c, uint32_t i, int phase)
{
	struct bdc_snapshot *s = &c->peers[i].snap[phase];
	s->at_ns = (int64_t)clk_realtime_ns();
	s->valid = cks_estimate(&c->peers[i].est, s->at_ns, &s->offset_ns, &s->bound_ns) == 0;
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
	free(c->peers);
	free(c);
}

/* ---- exchanges ------------------------------------------------------- */

static void bdc_close_done(struct bdc *c);
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

/* Sends every PING that is due and sleeps until the next one. */
static void bdc_pump(struct bdc *c)
{
	uint64_t now = clk_monotonic_ns(), next = UINT64_MAX;
	for (uint32_t i = 0; i < c->count; i++) {
		struct bdc_peer *p = &c->peers[i];
		struct bd_peer *bp = bdc_bd_peer(c, i);
		if (bp->conn == NULL || p->next_ping_ns == 0)
			continue;
		if (p->next_ping_ns <= now) {
			bdc_ping(c, i, bp);
			if (p->burst_left > 0)
				p->burst_left--;
			if (p->burst_left > 0)
				p->next_ping_ns = now + BDC_BURST_GAP_NS;
			else
				p->next_ping_ns = c->closing ? 0 : now + BDC_PERIOD_NS;
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
	uint64_t wait = next > now ? next - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u / 1000u) };
	evtimer_add(c->ev_timer, &tv);
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
	bdc_pump(c);
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
	p->last_pong_sequence = pong->sequence;
	p->pongs++;
	/* Clock readings above INT64_MAX come out negative and are refused. */
	int rc = cks_add_sample(&p->est, (int64_t)pong->t1_ns, (int64_t)pong->t2_ns,
				(int64_t)pong->t3_ns, (int64_t)rx_ns);
	if (rc == 0)
		bdc_apply(c, i);
	else
		log_debug("%s %u: clock exchange %" PRIu64 " refused (%s)", ctl_role_title(bp->role), bp->id,
			  pong->sequence, strerror(-rc));
	if (!p->snap[BDC_START].valid && p->pongs >= BDC_BURST)
		bdc_snapshot(c, i, BDC_START);
	if (c->closing && bdc_closed(c))
		bdc_close_done(c);
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
	g = ctl_report_find(r, CKS_CHRONY_GROUP);
	if (g != NULL && !p->chrony_seen[phase]) {
		cks_chrony_decode(&p->chrony[phase], g);
		p->chrony_seen[phase] = true;
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
	if (!s->valid)
		return CKS_UNKNOWN;
	return cks_check_consistent(s->offset_ns, s->bound_ns, cks_chrony_bound_ns(&p->chrony[phase]),
				    cks_chrony_bound_ns(&c->chrony[phase]));
}

/* Inconsistent when either phase is; consistent when one is and none is
 * inconsistent; unknown otherwise. */
static enum cks_verdict bdc_overall(const struct bdc *c, uint32_t i)
{
	enum cks_verdict v = CKS_UNKNOWN;
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

static bool bdc_all_sources_same_clock(const struct bdc *c)
{
	for (uint32_t s = 0; s < c->run->opt.sources; s++)
		if (!bdc_same_clock(c, s))
			return false;
	return true;
}

static json_t *bdc_json_inband(const struct bdc_peer *p, const struct bdc_snapshot *best)
{
	json_t *o = json_object();
	SET(o, "offset_ns", best != NULL ? json_integer(best->offset_ns) : NULL);
	SET(o, "bound_ns", best != NULL ? json_integer(best->bound_ns) : NULL);
	SET(o, "drift_ppm", metrics_json_real(p->est.drift_ppm, 3));
	SET(o, "drift_from", metrics_json_text(p->drift_from_chrony ? "chrony" : "default"));
	SET(o, "best_delay_ns", bdc_json_bound(bdc_best_delay(&p->est)));
	SET(o, "start", bdc_json_snapshot(&p->snap[BDC_START]));
	SET(o, "end", bdc_json_snapshot(&p->snap[BDC_END]));
	SET(o, "pings", metrics_json_u64(p->pings));
	SET(o, "pongs", metrics_json_u64(p->pongs));
	SET(o, "accepted", metrics_json_u64(p->est.accepted));
	SET(o, "rejected", metrics_json_u64(p->est.rejected));
	SET(o, "evicted", metrics_json_u64(p->est.evicted));
	SET(o, "unmatched", metrics_json_u64(p->pongs_unmatched));
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

	if (i < c->run->opt.sources && c->run->out != NULL) {
		struct out_uncertainty u = out_source_uncertainty(c->run->out, (uint16_t)i);
		const char *how = same_clock ? "same clock: offset 0, uncertainty 0"
			       : c->correction ? "in-band offset subtracted"
					       : "not corrected (--no-clock-correction)";
		json_t *lat = json_object();
		SET(lat, "correction", metrics_json_text(how));
		SET(lat, "applied_offset_ns",
		    json_integer(same_clock || !c->correction || best == NULL ? 0 : best->offset_ns));
		SET(lat, "would_correct_ns", json_integer(same_clock || best == NULL ? 0 : best->offset_ns));
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
	return c->correction ? "in-band clock offsets applied"
			     : "not corrected (--no-clock-correction): includes the offsets left in";
}

void bdc_latency_json(const struct bdc *c, json_t *latency)
{
	const struct out *o = c->run->out;
	const struct hist *lat = out_latency(o);
	struct out_uncertainty u = out_uncertainty(o);
	int64_t unc = u.unbounded ? -1 : u.max_ns;
	static const struct {
		const char *name;
		double q;
	} pct[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };

	SET(latency, "uncertainty_ns", bdc_json_bound(unc));
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

void bdc_print_latency_uncertainty(const struct bdc *c, FILE *f)
{
	struct out_uncertainty u = out_uncertainty(c->run->out);
	char d[TEXT_DURATION_BYTES];
	if (u.unbounded > 0) {
		fprintf(f, " (+/- unknown: %" PRIu64 " samples had no clock estimate)", u.unbounded);
		return;
	}
	fputs(" (+/- ", f);
	fputs(text_duration(d, u.max_ns), f);
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
	char d[TEXT_DURATION_BYTES];
	for (uint32_t i = 0; i < c->count; i++) {
		same += bdc_same_clock(c, i);
		chrony_peers += cks_chrony_bound_ns(&c->peers[i].chrony[BDC_END]) >= 0;
	}
	fprintf(f, "clocks: %u of %u peers on the builder's clock", same, c->count);
	int64_t hb = cks_chrony_bound_ns(&c->chrony[BDC_END]);
	if (hb >= 0) {
		fputs("; chrony bound of the builder host ", f);
		fputs(text_duration(d, hb), f);
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
			fputs(text_duration(d, best->offset_ns), f);
			fputs(" +/- ", f);
			fputs(text_duration(d, best->bound_ns), f);
			fprintf(f, " (in band, %" PRIu64 " exchanges)", p->est.accepted);
		}
		int64_t pb = cks_chrony_bound_ns(&p->chrony[BDC_END]);
		if (pb >= 0) {
			fputs(", chrony bound ", f);
			fputs(text_duration(d, pb), f);
		} else {
			fputs(", no chrony bound", f);
		}
		if (v == CKS_INCONSISTENT)
			fputs("; DISAGREES with chrony beyond both bounds", f);
		if (!c->correction && i < c->run->opt.sources && best != NULL && !bdc_same_clock(c, i)) {
			fputs("; not corrected: its latencies are off by ", f);
			fputs(text_duration(d, -best->offset_ns), f);
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
