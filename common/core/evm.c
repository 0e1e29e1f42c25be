#include "core/evm.h"

#include "wire/control.h"

#include <errno.h>
#include <stdlib.h>

/* The control messages bound a plan by these limits (wire/control.h): a
 * routing or assign the codec lets through must be one the manager and
 * the readers' tables can take. */
_Static_assert(CTL_MAX_RAILS == EVM_MAX_LANES, "a HELLO's rails bound is the manager's lanes bound");
_Static_assert(CTL_MAX_BUILDERS == EVM_MAX_BUILDERS, "routing's builders bound is the manager's");
_Static_assert(CTL_MAX_BATCH == EVM_MAX_BATCH, "routing's batch bound is the manager's");
_Static_assert(CTL_MAX_WINDOW_BATCHES == EVM_MAX_WINDOW_BATCHES,
	       "routing's window bound is the manager's");

/* A builder's books at the manager. */
struct evm_builder {
	uint64_t assigned;
	uint64_t decided;
	uint64_t decided_below;
	uint64_t lost;
	uint64_t batches;
	uint64_t busy_spells;
	uint64_t last_token_ns;
	uint64_t pace_mark_ns;       /* start of the pace measurement under way */
	uint64_t pace_mark_decided;
	uint64_t decided_per_s;      /* 0: not measured yet */
	uint32_t slots;
	uint32_t lanes;              /* 0 read as 1 */
	bool joined;
	bool dead;
	bool busy;
};

/* One live (or recently retired) batch: its IDs follow from its index. */
struct evm_entry {
	uint16_t builder;
	uint8_t lost;
};

struct evm {
	struct evm_config cfg;
	uint64_t end;             /* first_event + events */
	uint64_t next;            /* index of the next batch to assign */
	uint64_t tail;            /* index of the oldest live batch; == next: none */
	uint64_t last;            /* one past the index of the run's last batch */
	uint64_t records;
	uint64_t lost;
	uint32_t cursor;          /* manager: the builder round-robin tries first */
	uint32_t alive;
	struct evm_builder *builders;   /* [builders] */
	struct evm_entry *ring;         /* [window_batches], batch k at k mod window */
};

bool evm_plan_valid(const struct evm_plan *p)
{
	if (p->builders < 1 || p->builders > EVM_MAX_BUILDERS)
		return false;
	if (p->batch < 1 || p->batch > EVM_MAX_BATCH)
		return false;
	if (p->window_batches < 1 || p->window_batches > EVM_MAX_WINDOW_BATCHES)
		return false;
	/* The index arithmetic goes up to end + batch. */
	return p->events >= 1 && p->events <= UINT64_MAX - p->first_event - p->batch;
}

/* The first ID of batch k, clamped to the run: the run's first ID for a
 * batch below it, its end for one past it. */
static uint64_t plan_first(const struct evm_plan *p, uint64_t k)
{
	uint64_t end = p->first_event + p->events;
	if (k > end / p->batch)
		return end;
	uint64_t lo = k * p->batch;
	if (lo < p->first_event)
		return p->first_event;
	return lo > end ? end : lo;
}

void evm_plan_batch(const struct evm_plan *p, uint64_t k, uint64_t *first, uint32_t *count)
{
	*first = plan_first(p, k);
	*count = k == UINT64_MAX ? 0 : (uint32_t)(plan_first(p, k + 1) - *first);
}

uint32_t evm_static_builder(uint64_t event_id, uint32_t batch, uint32_t builders)
{
	return (uint32_t)((event_id / batch) % builders);
}

const char *evm_mode_name(enum evm_mode mode)
{
	return mode == EVM_STATIC ? "static" : "manager";
}

const char *evm_next_name(enum evm_next what)
{
	switch (what) {
	case EVM_ASSIGNED: return "assigned";
	case EVM_WAIT_TOKENS: return "waiting for tokens";
	case EVM_WAIT_WINDOW: return "waiting for the window";
	case EVM_NO_BUILDERS: return "no builders";
	case EVM_ALL_ASSIGNED: return "all assigned";
	}
	return "unknown";
}

static uint64_t evm_batch_first(const struct evm *m, uint64_t k)
{
	return plan_first(&m->cfg.plan, k);
}

static uint64_t evm_batch_end(const struct evm *m, uint64_t k)
{
	return plan_first(&m->cfg.plan, k + 1);
}

static struct evm_entry *evm_entry(const struct evm *m, uint64_t k)
{
	return &m->ring[k % m->cfg.plan.window_batches];
}

static uint64_t evm_in_flight(const struct evm_builder *b)
{
	return b->assigned - b->decided - b->lost;
}

static uint32_t evm_tokens_of(const struct evm_builder *b)
{
	if (!b->joined || b->dead)
		return 0;
	return b->slots - (uint32_t)evm_in_flight(b);
}

/* The most b may hold now (manager mode): its slots, or what it decides in
 * backlog_ns per lane at its pace; before its pace is known, and never
 * less, one batch it builds and one arriving on each lane, so that no lane
 * waits for an assignment, and no more, so that a builder slower than
 * backlog_ns per batch (large events on a slow link) is not handed a
 * backlog whose last fragments come seconds after its first. */
static uint64_t evm_cap_of(const struct evm *m, const struct evm_builder *b)
{
	uint64_t lanes = b->lanes > 1 ? b->lanes : 1u;
	uint64_t floor = (uint64_t)m->cfg.low_water + lanes * m->cfg.plan.batch;
	if (m->cfg.backlog_ns == 0 || m->cfg.mode != EVM_MANAGER || floor >= b->slots)
		return b->slots;
	if (b->decided_per_s == 0)
		return floor;
	/* decided_per_s <= 2^32 events/s and backlog_ns < 2^32 ns in use;
	 * saturate anyway rather than wrap. */
	uint64_t per_ms = b->decided_per_s / 1000u + 1u;
	uint64_t ms = lanes * (m->cfg.backlog_ns / 1000000u + 1u);
	uint64_t cap = per_ms > UINT64_MAX / ms ? UINT64_MAX : per_ms * ms;
	if (cap < floor)
		return floor;
	return cap > b->slots ? b->slots : cap;
}

/* b is free again once it may be given this much: more than high_water,
 * or, when its cap is too small for that, what its cap leaves beside
 * low_water's reserve; never less than low_water, so that a free builder
 * always has the tokens for a whole batch. */
static uint64_t evm_free_mark(const struct evm *m, const struct evm_builder *b)
{
	uint64_t cap = evm_cap_of(m, b), low = m->cfg.low_water;
	uint64_t mark = (uint64_t)m->cfg.high_water + 1u;
	if (cap < low + mark)
		mark = cap > 2u * low ? cap - low : low;
	return mark;
}

/* What b may still be given before it reaches its cap. */
static uint64_t evm_room_of(const struct evm *m, const struct evm_builder *b)
{
	if (!b->joined || b->dead)
		return 0;
	uint64_t cap = evm_cap_of(m, b), held = evm_in_flight(b);
	return held >= cap ? 0 : cap - held;
}

/* A token says how far b got: its pace, once enough time has passed since
 * the last measurement, smoothed so that one slow spell does not starve it. */
static void evm_measure_pace(struct evm_builder *b, uint64_t decided, uint64_t now_ns)
{
	uint64_t span = now_ns - b->pace_mark_ns;
	if (now_ns < b->pace_mark_ns || span < EVM_PACE_INTERVAL_NS)
		return;
	uint64_t grown = decided - b->pace_mark_decided;
	uint64_t sample = grown > UINT64_MAX / 1000000000u ? UINT64_MAX / 4u :
			  grown * 1000000000u / span;
	b->decided_per_s = b->decided_per_s == 0 ? sample : (3u * (b->decided_per_s / 4u)) + sample / 4u;
	if (b->decided_per_s == 0)
		b->decided_per_s = 1;   /* measured: slow, not unknown */
	b->pace_mark_ns = now_ns;
	b->pace_mark_decided = decided;
}

struct evm *evm_create(const struct evm_config *config)
{
	const struct evm_plan *p = &config->plan;
	if (!evm_plan_valid(p) || (config->mode != EVM_MANAGER && config->mode != EVM_STATIC) ||
	    config->low_water < p->batch || config->high_water <= config->low_water) {
		errno = EINVAL;
		return NULL;
	}
	struct evm *m = calloc(1, sizeof *m);
	if (m == NULL)
		goto fail;
	m->cfg = *config;
	m->end = p->first_event + p->events;
	m->next = m->tail = p->first_event / p->batch;
	m->last = (m->end - 1) / p->batch + 1;
	/* Round-robin starts where the formula would, so that with tokens to
	 * spare the manager's records are the static ones. */
	m->cursor = (uint32_t)(m->next % p->builders);
	m->alive = p->builders;
	m->builders = calloc(p->builders, sizeof *m->builders);
	m->ring = calloc(p->window_batches, sizeof *m->ring);
	if (m->builders == NULL || m->ring == NULL)
		goto fail;
	return m;
fail:
	evm_destroy(m);
	errno = ENOMEM;
	return NULL;
}

void evm_destroy(struct evm *m)
{
	if (m == NULL)
		return;
	free(m->builders);
	free(m->ring);
	free(m);
}

int evm_set_lanes(struct evm *m, uint32_t b, uint32_t lanes)
{
	if (b >= m->cfg.plan.builders)
		return -ENOENT;
	if (lanes < 1 || lanes > EVM_MAX_LANES)
		return -EINVAL;
	m->builders[b].lanes = lanes;
	return 0;
}

int evm_join(struct evm *m, uint32_t b, uint32_t slots, uint64_t now_ns)
{
	if (b >= m->cfg.plan.builders)
		return -ENOENT;
	struct evm_builder *s = &m->builders[b];
	if (s->joined || s->dead)
		return -EALREADY;
	if (slots <= m->cfg.high_water)
		return -EINVAL;
	s->joined = true;
	s->slots = slots;
	s->last_token_ns = now_ns;
	s->pace_mark_ns = now_ns;
	return 0;
}

/* Retires the oldest live batches that are decided or lost. Amortised O(1)
 * per batch. */
static void evm_retire(struct evm *m)
{
	while (m->tail < m->next) {
		const struct evm_entry *e = evm_entry(m, m->tail);
		if (!e->lost && m->builders[e->builder].decided_below < evm_batch_end(m, m->tail))
			break;
		m->tail++;
	}
}

int evm_tokens(struct evm *m, uint32_t b, uint64_t decided, uint64_t decided_below,
	       uint64_t now_ns)
{
	if (b >= m->cfg.plan.builders)
		return -ENOENT;
	struct evm_builder *s = &m->builders[b];
	if (s->dead)
		return -ESRCH;
	if (!s->joined)
		return -ENOTCONN;
	if (decided < s->decided || decided_below < s->decided_below)
		return -EINVAL;
	if (decided > s->assigned || decided_below > evm_batch_first(m, m->next))
		return -ERANGE;
	/* Idle time is not slowness: the pace is measured only while it had
	 * events to decide. */
	if (evm_in_flight(s) == 0)
		s->pace_mark_ns = now_ns, s->pace_mark_decided = decided;
	else
		evm_measure_pace(s, decided, now_ns);
	s->decided = decided;
	s->decided_below = decided_below;
	s->last_token_ns = now_ns;
	if (s->busy && evm_room_of(m, s) >= evm_free_mark(m, s))
		s->busy = false;
	evm_retire(m);
	return 0;
}

/* Batch m->next goes to builder b; lost when b is dead (static only). */
static void evm_assign(struct evm *m, uint32_t b, struct evm_assignment *out)
{
	struct evm_builder *s = &m->builders[b];
	uint64_t first = evm_batch_first(m, m->next);
	uint32_t count = (uint32_t)(evm_batch_end(m, m->next) - first);
	*evm_entry(m, m->next) = (struct evm_entry){ .builder = (uint16_t)b, .lost = s->dead };
	m->next++;
	m->records++;
	s->assigned += count;
	s->batches++;
	if (s->dead) {
		s->lost += count;
		m->lost += count;
		evm_retire(m);
	} else if (!s->busy && evm_room_of(m, s) < m->cfg.low_water) {
		s->busy = true;
		s->busy_spells++;
	}
	*out = (struct evm_assignment){ .first = first, .count = count, .builder = b };
}

enum evm_next evm_next(struct evm *m, struct evm_assignment *out)
{
	const struct evm_plan *p = &m->cfg.plan;
	if (m->next >= m->last)
		return EVM_ALL_ASSIGNED;
	if (m->cfg.mode == EVM_MANAGER && m->alive == 0)
		return EVM_NO_BUILDERS;
	if (m->next - m->tail >= p->window_batches)
		return EVM_WAIT_WINDOW;
	uint32_t count = (uint32_t)(evm_batch_end(m, m->next) - evm_batch_first(m, m->next));
	if (m->cfg.mode == EVM_STATIC) {
		uint32_t b = (uint32_t)(m->next % p->builders);
		const struct evm_builder *s = &m->builders[b];
		if (!s->dead && (!s->joined || evm_tokens_of(s) < count))
			return EVM_WAIT_TOKENS;
		evm_assign(m, b, out);
		return EVM_ASSIGNED;
	}
	for (uint32_t i = 0; i < p->builders; i++) {
		uint32_t b = (m->cursor + i) % p->builders;
		const struct evm_builder *s = &m->builders[b];
		/* A free builder holds at least low_water >= batch >= count tokens. */
		if (s->joined && !s->dead && !s->busy && evm_room_of(m, s) < m->cfg.low_water) {
			/* Its pace fell since it went free: its cap shrank. */
			m->builders[b].busy = true;
			m->builders[b].busy_spells++;
			continue;
		}
		if (s->joined && !s->dead && !s->busy) {
			m->cursor = (b + 1) % p->builders;
			evm_assign(m, b, out);
			return EVM_ASSIGNED;
		}
	}
	return EVM_WAIT_TOKENS;
}

int evm_dead(struct evm *m, uint32_t b, struct evm_loss *loss)
{
	if (b >= m->cfg.plan.builders)
		return -ENOENT;
	struct evm_builder *s = &m->builders[b];
	if (s->dead)
		return -EALREADY;
	struct evm_loss l = { .events = evm_in_flight(s), .lowest = UINT64_MAX };
	s->dead = true;
	s->busy = false;
	s->lost += l.events;
	m->lost += l.events;
	m->alive--;
	for (uint64_t k = m->tail; k < m->next; k++) {
		struct evm_entry *e = evm_entry(m, k);
		uint64_t end = evm_batch_end(m, k);
		if (e->builder != b || e->lost || s->decided_below >= end)
			continue;
		uint64_t first = evm_batch_first(m, k);
		e->lost = 1;
		l.batches++;
		if (l.lowest == UINT64_MAX)
			l.lowest = s->decided_below > first ? s->decided_below : first;
		l.end = end;
	}
	evm_retire(m);
	if (loss != NULL)
		*loss = l;
	return 0;
}

enum evm_lookup evm_owner(const struct evm *m, uint64_t event_id, struct evm_assignment *out)
{
	if (event_id < m->cfg.plan.first_event || event_id >= m->end)
		return EVM_OUTSIDE;
	if (event_id >= evm_batch_first(m, m->next))
		return EVM_UNASSIGNED;
	if (event_id < evm_batch_first(m, m->tail))
		return EVM_RETIRED;
	uint64_t k = event_id / m->cfg.plan.batch;
	uint64_t first = evm_batch_first(m, k);
	*out = (struct evm_assignment){
		.first = first,
		.count = (uint32_t)(evm_batch_end(m, k) - first),
		.builder = evm_entry(m, k)->builder,
	};
	return EVM_OWNED;
}

bool evm_builder_view(const struct evm *m, uint32_t b, struct evm_builder_view *v)
{
	if (b >= m->cfg.plan.builders)
		return false;
	const struct evm_builder *s = &m->builders[b];
	*v = (struct evm_builder_view){
		.joined = s->joined,
		.dead = s->dead,
		.busy = s->busy,
		.slots = s->slots,
		.tokens = evm_tokens_of(s),
		.decided_per_s = s->decided_per_s,
		.cap = s->joined && !s->dead ? evm_cap_of(m, s) : 0,
		.in_flight = evm_in_flight(s),
		.assigned = s->assigned,
		.decided = s->decided,
		.decided_below = s->decided_below,
		.lost = s->lost,
		.batches = s->batches,
		.busy_spells = s->busy_spells,
		.last_token_ns = s->last_token_ns,
	};
	return true;
}

struct evm_totals evm_totals(const struct evm *m)
{
	return (struct evm_totals){
		.assigned_end = evm_batch_first(m, m->next),
		.retired_below = evm_batch_first(m, m->tail),
		.live_batches = m->next - m->tail,
		.records = m->records,
		.lost = m->lost,
		.alive = m->alive,
	};
}

size_t evm_memory_bytes(const struct evm *m)
{
	return sizeof *m + m->cfg.plan.builders * sizeof *m->builders +
	       m->cfg.plan.window_batches * sizeof *m->ring;
}
