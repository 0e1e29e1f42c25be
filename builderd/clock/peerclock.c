#include "clock/peerclock.h"
#include "wire/counters.h"

#include "wire/control.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static const char *const peerclock_phase_names[PEERCLOCK_PHASES] = { "start", "end" };

struct peerclock {
	struct cks_estimator est;
	uint64_t stamps[4][3];     /* accepted exchanges by stamp origin, t1..t4 */
	bool clock_seen;           /* its "clock" group arrived */
	int64_t injected_ns;       /* its --clock-offset-ns */
	bool chrony_seen[PEERCLOCK_PHASES];
	struct cks_chrony chrony[PEERCLOCK_PHASES];
	int64_t chrony_at_ns[PEERCLOCK_PHASES]; /* builder clock from which its bound holds */
	bool drift_from_chrony;
	struct peerclock_snapshot snap[PEERCLOCK_PHASES];
	uint64_t window_disjoint;  /* estimates whose samples did not all overlap */
	struct peerclock_record *history;      /* [PEERCLOCK_HISTORY] */
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

const char *peerclock_phase_name(int phase)
{
	return phase >= 0 && phase < PEERCLOCK_PHASES ? peerclock_phase_names[phase] : "?";
}

uint64_t peerclock_abs(int64_t v)
{
	return v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
}

int64_t peerclock_sat_add(uint64_t a, uint64_t b)
{
	uint64_t r = a + b;
	return r < a || r > INT64_MAX ? INT64_MAX : (int64_t)r;
}

struct peerclock *peerclock_create(void)
{
	struct peerclock *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->history = calloc(PEERCLOCK_HISTORY, sizeof *p->history);
	if (p->history == NULL) {
		free(p);
		return NULL;
	}
	cks_reset(&p->est);
	cks_chrony_parse(&p->chrony[PEERCLOCK_START], NULL);
	cks_chrony_parse(&p->chrony[PEERCLOCK_END], NULL);
	return p;
}

void peerclock_destroy(struct peerclock *p)
{
	if (p == NULL)
		return;
	free(p->history);
	free(p);
}

int peerclock_add_exchange(struct peerclock *p, const struct prb_exchange *x)
{
	int rc = cks_add_sample(&p->est, x->t1_ns, x->t2_ns, x->t3_ns, x->t4_ns);
	if (rc == 0)
		for (int k = 0; k < 4; k++)
			p->stamps[k][x->stamp[k]]++;
	return rc;
}

int64_t peerclock_best_delay(const struct peerclock *p)
{
	const struct cks_estimator *e = &p->est;
	int64_t best = -1;
	for (unsigned k = 0; k < e->count; k++)
		if (best < 0 || e->samples[k].delay_ns < best)
			best = e->samples[k].delay_ns;
	return best;
}

int64_t peerclock_latest_delay(const struct peerclock *p)
{
	if (p->est.count == 0)
		return -1;
	return p->est.samples[(p->est.next + CKS_WINDOW - 1) % CKS_WINDOW].delay_ns;
}

void peerclock_take_clock(struct peerclock *p, const struct ctl_report *r)
{
	const struct ctl_group *g = ctl_report_find(r, CNT_GROUP_CLOCK);
	uint64_t mag = 0, negative = 0;
	if (ctl_group_get(g, CNT_CLOCK(injected_offset_ns), &mag)) {
		ctl_group_get(g, CNT_CLOCK(injected_offset_negative), &negative);
		p->injected_ns = negative ? (int64_t)(0 - mag) : (int64_t)mag;
		p->clock_seen = true;
	}
}

void peerclock_take_chrony(struct peerclock *p, const struct ctl_report *r, int phase, int64_t now)
{
	const struct ctl_group *g = ctl_report_find(r, CKS_CHRONY_GROUP);
	if (g == NULL || p->chrony_seen[phase])
		return;
	cks_chrony_decode(&p->chrony[phase], g);
	p->chrony_seen[phase] = true;
	/* The bound held when the peer read it, read_age_ns before it sent
	 * this (the one-way transit, microseconds, is left out: times the
	 * drift bound it is below a nanosecond). */
	p->chrony_at_ns[phase] = now - (int64_t)p->chrony[phase].read_age_ns;
}

void peerclock_update_drift(struct peerclock *p, const struct peerclock_host *h)
{
	double drift = 0.0;
	bool found = false;
	for (int k = 0; k < PEERCLOCK_PHASES; k++) {
		if (cks_chrony_bound_ns(&p->chrony[k]) < 0 || cks_chrony_bound_ns(&h->chrony[k]) < 0)
			continue;
		double d = cks_drift_ppm_from_chrony(&p->chrony[k], &h->chrony[k]);
		if (!found || d > drift)
			drift = d;
		found = true;
	}
	p->drift_from_chrony = found && cks_set_drift_ppm(&p->est, drift) == 0;
	if (!p->drift_from_chrony)
		cks_set_drift_ppm(&p->est, CKS_DEFAULT_DRIFT_PPM);
}

double peerclock_drift_ppm(const struct peerclock *p)
{
	return p->est.drift_ppm;
}

/* The latest phase whose chrony read of this host gave a bound. */
static int peerclock_chrony_phase(const struct cks_chrony *ch, const bool *seen)
{
	for (int k = PEERCLOCK_PHASES - 1; k >= 0; k--)
		if ((seen == NULL || seen[k]) && cks_chrony_bound_ns(&ch[k]) >= 0)
			return k;
	return -1;
}

/* Drift since a chrony read: its bound held then. */
static int64_t peerclock_widen(double drift_ppm, int64_t now, int64_t at)
{
	double w = ceil(drift_ppm * (double)peerclock_abs(now - at) / 1e6);
	return w < 9.2e18 ? (int64_t)w : INT64_MAX;
}

/* chrony's interval for the peer's offset at now: each host within its
 * chrony bound (|System time| + root dispersion + root delay / 2) of the
 * common reference when it was read, widened by drift since; centred on
 * the difference of the declared injected offsets, the part of the two
 * clocks that chrony does not discipline. false when either host has no
 * bound or the peer's injected offset is not known yet. */
static bool peerclock_chrony_interval(const struct peerclock *p, const struct peerclock_host *h, int64_t now,
				 struct ivl *out)
{
	int kp = peerclock_chrony_phase(p->chrony, p->chrony_seen);
	int kb = peerclock_chrony_phase(h->chrony, NULL);
	if (kp < 0 || kb < 0 || !p->clock_seen)
		return false;
	double drift = p->est.drift_ppm;
	int64_t half = peerclock_sat_add((uint64_t)cks_chrony_bound_ns(&p->chrony[kp]),
				    (uint64_t)cks_chrony_bound_ns(&h->chrony[kb]));
	half = peerclock_sat_add((uint64_t)half, (uint64_t)peerclock_widen(drift, now, p->chrony_at_ns[kp]));
	half = peerclock_sat_add((uint64_t)half, (uint64_t)peerclock_widen(drift, now, h->chrony_at_ns[kb]));
	*out = ivl_around(p->injected_ns - h->injected_ns, half);
	return true;
}

/* In band and chrony combined at now (interval.h) into *s; basis NONE
 * when neither is known. */
static struct ivl_estimate peerclock_combined(struct peerclock *p, const struct peerclock_host *h, int64_t now,
					 struct peerclock_snapshot *s)
{
	s->at_ns = now;
	s->valid = cks_estimate(&p->est, now, &s->offset_ns, &s->bound_ns) == 0;
	if (s->valid && cks_estimate_range(&p->est, now, &s->inband.lo, &s->inband.hi) == -ERANGE)
		/* Samples that cannot all be true: the drift bound is too
		 * tight or a sample lies; the best one alone is used. */
		p->window_disjoint++;
	s->chrony_valid = peerclock_chrony_interval(p, h, now, &s->chrony);
	/* chrony narrows an in-band interval but is not applied alone: it is
	 * not measured on the builder's own path, and a host steered to a
	 * wrong reference would pass unnoticed until the first exchange. */
	s->applied = ivl_combine(s->valid, s->inband,
				 s->valid && s->chrony_valid, s->chrony);
	return s->applied;
}

/* Keeps estimate e for metrics.json and checks it against the injected
 * offsets. */
static void peerclock_record(struct peerclock *p, const struct peerclock_host *h, int64_t now,
			const struct ivl_estimate *e)
{
	if (e->basis == IVL_BASIS_NONE)
		return;
	p->last = *e;
	p->last_valid = true;
	p->estimates++;
	p->by_basis[e->basis]++;
	if (p->recorded < PEERCLOCK_HISTORY)
		p->history[p->recorded++] = (struct peerclock_record){ now, e->offset_ns, e->bound_ns,
								  (uint8_t)e->basis };
	if (p->clock_seen) {
		int64_t truth = p->injected_ns - h->injected_ns;
		int64_t margin = e->bound_ns - (int64_t)peerclock_abs(e->offset_ns - truth);
		if (p->estimates == 1 || margin < p->worst_margin_ns)
			p->worst_margin_ns = margin;
		p->inside_injected += margin >= 0;
	}
}

struct ivl_estimate peerclock_estimate(struct peerclock *p, const struct peerclock_host *h, int64_t now)
{
	struct peerclock_snapshot s;
	struct ivl_estimate e = peerclock_combined(p, h, now, &s);
	peerclock_record(p, h, now, &e);
	return e;
}

void peerclock_snapshot(struct peerclock *p, const struct peerclock_host *h, int phase, int64_t now)
{
	peerclock_combined(p, h, now, &p->snap[phase]);
}

struct peerclock_snapshot peerclock_snapshot_at(const struct peerclock *p, int phase)
{
	return p->snap[phase];
}

bool peerclock_inband(const struct peerclock *p, int64_t now, int64_t *offset_ns, int64_t *bound_ns)
{
	return cks_estimate(&p->est, now, offset_ns, bound_ns) == 0;
}

bool peerclock_injected(const struct peerclock *p, int64_t *injected_ns)
{
	if (p->clock_seen)
		*injected_ns = p->injected_ns;
	return p->clock_seen;
}

enum cks_verdict peerclock_verdict(const struct peerclock *p, const struct peerclock_host *h, int phase)
{
	const struct peerclock_snapshot *s = &p->snap[phase];
	if (!s->valid || !p->clock_seen)
		return CKS_UNKNOWN;
	/* chrony disciplines the hosts' clocks; the declared injections are
	 * on top of them. */
	return cks_check_consistent(s->offset_ns - (p->injected_ns - h->injected_ns), s->bound_ns,
				    cks_chrony_bound_ns(&p->chrony[phase]),
				    cks_chrony_bound_ns(&h->chrony[phase]));
}

enum cks_verdict peerclock_overall(const struct peerclock *p, const struct peerclock_host *h)
{
	enum cks_verdict v = CKS_UNKNOWN;
	/* Any estimate made of disjoint intervals. */
	if (p->by_basis[IVL_BASIS_UNION] > 0)
		return CKS_INCONSISTENT;
	for (int k = 0; k < PEERCLOCK_PHASES; k++) {
		enum cks_verdict vk = peerclock_verdict(p, h, k);
		if (vk == CKS_INCONSISTENT)
			return vk;
		if (vk == CKS_CONSISTENT)
			v = vk;
	}
	return v;
}

/* How the accepted exchanges were stamped: "kernel" when every one of the
 * four stamps of every exchange came from the kernel, "user space" when
 * none did, "mixed" otherwise; "none" before any exchange. */
static const char *peerclock_stamps_summary(const struct peerclock *p)
{
	uint64_t user = 0, all = 0;
	for (int k = 0; k < 4; k++)
		for (int o = 0; o < 3; o++) {
			all += p->stamps[k][o];
			user += o == PRB_STAMP_USER ? p->stamps[k][o] : 0;
		}
	return all == 0 ? "none" : user == 0 ? "kernel" : user == all ? "user space" : "mixed";
}

void peerclock_view(const struct peerclock *p, struct peerclock_view *v)
{
	*v = (struct peerclock_view){
		.clock_seen = p->clock_seen,
		.injected_ns = p->injected_ns,
		.drift_ppm = p->est.drift_ppm,
		.drift_from_chrony = p->drift_from_chrony,
		.best_delay_ns = peerclock_best_delay(p),
		.accepted = p->est.accepted,
		.rejected = p->est.rejected,
		.evicted = p->est.evicted,
		.stamps_summary = peerclock_stamps_summary(p),
		.estimates = p->estimates,
		.window_disjoint = p->window_disjoint,
		.inside_injected = p->inside_injected,
		.worst_margin_ns = p->worst_margin_ns,
		.last_valid = p->last_valid,
		.last = p->last,
		.history = p->history,
		.recorded = p->recorded,
	};
	for (int k = 0; k < PEERCLOCK_PHASES; k++) {
		v->snap[k] = p->snap[k];
		v->chrony[k] = p->chrony[k];
	}
	for (int k = 0; k < 4; k++)
		for (int o = 0; o < 3; o++)
			v->stamps[k][o] = p->stamps[k][o];
	for (int b = 0; b <= IVL_BASIS_UNION; b++)
		v->by_basis[b] = p->by_basis[b];
}

const struct peerclock_snapshot *peerclock_view_best(const struct peerclock_view *v)
{
	if (v->snap[PEERCLOCK_END].valid)
		return &v->snap[PEERCLOCK_END];
	return v->snap[PEERCLOCK_START].valid ? &v->snap[PEERCLOCK_START] : NULL;
}
