/* The builder core's events: correlation, dedup, timeouts, the window, the
 * skip rule and the end of the run (builder.h). */
#include "core/builder.h"
#include "core/builder_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/saturate.h"
#include "wire/crc.h"

const char *bld_expiry_reason_name(enum bld_expiry_reason reason)
{
	switch (reason) {
	case BLD_EXPIRED_TIMEOUT:
		return "timeout";
	case BLD_EXPIRED_WINDOW:
		return "window";
	case BLD_EXPIRED_END_OF_RUN:
		return "end_of_run";
	case BLD_EXPIRED_SKIPPED:
		return "skipped";
	}
	return "unknown";
}

static bool bld_is_retired(uint8_t state)
{
	return state == BLD_ID_COMPLETE || state == BLD_ID_EXPIRED ||
	       state == BLD_ID_UNOBSERVED;
}

struct bld *bld_create(const struct bld_config *config, const struct bld_sink *sink)
{
	if (config == NULL || config->sources < 1 || config->sources > BLD_MAX_SOURCES ||
	    config->window < 1 || config->window > BLD_MAX_WINDOW || config->filter_modulo < 1) {
		errno = EINVAL;
		return NULL;
	}
	struct bld *b = calloc(1, sizeof(*b));
	if (b == NULL)
		goto out_nomem;
	b->cfg = *config;
	if (sink != NULL)
		b->sink = *sink;
	b->window = config->window;
	b->span = 2u * b->window;
	/* Reserving the top 2 x window relative IDs keeps base + span from
	 * overflowing; no run gets near 2^64 IDs. */
	b->rel_limit = UINT64_MAX - b->span;
	if (config->events != 0 && config->events < b->rel_limit)
		b->rel_limit = config->events;
	b->head = BLD_NIL;
	b->tail = BLD_NIL;
	b->present_words = (config->sources + 63u) / 64u;

	size_t w = config->window, s = config->sources;
	b->states = calloc(2 * w, 1);
	b->slots = calloc(w, sizeof(*b->slots));
	b->frags = calloc(w * s, sizeof(*b->frags));
	b->present = calloc(w * b->present_words, sizeof(*b->present));
	b->missing = calloc(s, sizeof(*b->missing));
	b->unique_from = calloc(s, sizeof(*b->unique_from));
	b->next_from = calloc(s * RAILS_MAX, sizeof(*b->next_from));
	b->lanes = malloc(s);
	if (b->states == NULL || b->slots == NULL || b->frags == NULL || b->present == NULL ||
	    b->missing == NULL || b->unique_from == NULL || b->next_from == NULL || b->lanes == NULL)
		goto out_nomem;
	memset(b->lanes, 1, s);
	b->lane_span = config->lane_span != 0 ? config->lane_span : 1;
	return b;

out_nomem:
	bld_destroy(b);
	errno = ENOMEM;
	return NULL;
}

void bld_destroy(struct bld *b)
{
	if (b == NULL)
		return;
	free(b->states);
	free(b->slots);
	free(b->frags);
	free(b->present);
	free(b->missing);
	free(b->unique_from);
	free(b->next_from);
	free(b->lanes);
	free(b);
}

static void bld_link_tail(struct bld *b, uint32_t si)
{
	struct bld_slot *s = &b->slots[si];
	s->prev = b->tail;
	s->next = BLD_NIL;
	if (b->tail == BLD_NIL)
		b->head = si;
	else
		b->slots[b->tail].next = si;
	b->tail = si;
}

static void bld_unlink(struct bld *b, uint32_t si)
{
	struct bld_slot *s = &b->slots[si];
	if (s->prev == BLD_NIL)
		b->head = s->next;
	else
		b->slots[s->prev].next = s->next;
	if (s->next == BLD_NIL)
		b->tail = s->prev;
	else
		b->slots[s->next].prev = s->prev;
}

/* Takes a pending event off the books; the caller has reported it. */
static void bld_retire(struct bld *b, uint32_t si, uint8_t state)
{
	uint64_t rel = b->slots[si].rel_id;
	bld_unlink(b, si);
	*bld_state(b, rel) = state;
	b->pending--;
	/* The oldest pending retiring moves the bound up for free; any other
	 * retirement leaves it a valid, if looser, bound. */
	if (rel == b->oldest_hint)
		b->oldest_hint = rel + 1;
}

static void bld_complete(struct bld *b, uint32_t si)
{
	const struct bld_slot *s = &b->slots[si];
	const struct bld_frag *f = &b->frags[(size_t)si * b->cfg.sources];
	/* crc(A||B) from crc(A), crc(B) and len(B): the event's CRC without
	 * touching a payload again. crc of the empty prefix is 0. */
	uint32_t crc = f[0].payload_crc;
	uint64_t bytes = f[0].payload_len;
	for (uint32_t src = 1; src < b->cfg.sources; src++) {
		crc = crc_combine_cached(&b->shift, crc, f[src].payload_crc, f[src].payload_len);
		bytes += f[src].payload_len;
	}
	struct bld_event ev = {
		.run_id = b->cfg.run_id,
		.event_id = b->cfg.first_event + s->rel_id,
		.filter_crc = crc,
		.bytes = bytes,
		.earliest_timestamp_ns = s->earliest_ts_ns,
		.earliest_source = s->earliest_source,
		.slot = si,
		.accepted = crc % b->cfg.filter_modulo == 0,
	};
	b->c.events_complete++;
	if (ev.accepted)
		b->c.events_accepted++;
	else
		b->c.events_filtered++;
	bld_retire(b, si, BLD_ID_COMPLETE);
	if (b->sink.on_complete != NULL)
		b->sink.on_complete(b->sink.ctx, &ev);
}

static void bld_expire_slot(struct bld *b, uint32_t si, enum bld_expiry_reason reason)
{
	const struct bld_slot *s = &b->slots[si];
	const uint64_t *bits = &b->present[(size_t)si * b->present_words];
	uint16_t n = 0;
	for (uint32_t word = 0; word < b->present_words; word++) {
		uint64_t absent = ~bits[word];
		while (absent != 0) {
			uint32_t src = word * 64u + (uint32_t)__builtin_ctzll(absent);
			if (src >= b->cfg.sources)
				break;
			b->missing[n++] = (uint16_t)src;
			absent &= absent - 1;
		}
	}
	struct bld_expired ex = {
		.run_id = b->cfg.run_id,
		.event_id = b->cfg.first_event + s->rel_id,
		.reason = reason,
		.present = s->present,
		.slot = si,
		.missing_count = n,
		.missing = b->missing,
	};
	uint64_t *by_reason[] = {
		[BLD_EXPIRED_TIMEOUT] = &b->c.events_expired_timeout,
		[BLD_EXPIRED_WINDOW] = &b->c.events_expired_window,
		[BLD_EXPIRED_END_OF_RUN] = &b->c.events_expired_end_of_run,
		[BLD_EXPIRED_SKIPPED] = &b->c.events_expired_skipped,
	};
	b->c.events_expired++;
	b->c.frags_in_expired += s->present;
	(*by_reason[reason])++;
	bld_retire(b, si, BLD_ID_EXPIRED);
	if (b->sink.on_expired != NULL)
		b->sink.on_expired(b->sink.ctx, &ex);
}

/* Moves base over IDs already decided. Amortised O(1): every ID is passed
 * once, and it stops within the window since nothing beyond it is seen. */
static void bld_settle(struct bld *b)
{
	while (bld_is_retired(*bld_state(b, b->base))) {
		/* base + window enters the tracked range on the entry that
		 * held base - window, which is now forgotten. */
		*bld_state(b, b->base + b->window) = BLD_ID_UNSEEN;
		b->base++;
	}
}

/* Slides base up to `to` for a fragment that ran a window ahead: what falls
 * below it is decided now. Bounded by 3 x window steps however far the jump,
 * since IDs never tracked are counted, not visited. */
static void bld_slide(struct bld *b, uint64_t to)
{
	uint64_t from = b->base;
	uint64_t tracked_end = to - from > b->window ? from + b->window : to;
	for (uint64_t rel = from; rel < tracked_end; rel++) {
		uint8_t *st = bld_state(b, rel);
		if (*st == BLD_ID_PENDING) {
			bld_expire_slot(b, (uint32_t)(rel % b->window), BLD_EXPIRED_WINDOW);
		} else if (*st == BLD_ID_UNSEEN) {
			*st = BLD_ID_UNOBSERVED;
			b->c.events_unobserved++;
		}
	}
	/* Beyond the old window nothing was ever seen. */
	if (to > tracked_end)
		b->c.events_unobserved += to - tracked_end;

	/* The state range becomes [to - window, to + window). Entries of IDs
	 * entering it held IDs now forgotten: those below `to` were never
	 * seen (counted above), the rest are open. */
	uint64_t reset_from = from + b->window;
	if (to >= b->window && to - b->window > reset_from)
		reset_from = to - b->window;
	for (uint64_t rel = reset_from; rel < to + b->window; rel++)
		*bld_state(b, rel) = rel < to ? BLD_ID_UNOBSERVED : BLD_ID_UNSEEN;
	b->base = to;
	b->c.window_slides++;
}

/* An ID at base still unseen while a later one has arrived is waited for
 * as long as an incomplete event would be, then counted as never observed
 * (bld_expire). Without that, an ID every source omitted would hold base,
 * and with it the admission limit, for ever. */
static void bld_watch_base(struct bld *b, uint64_t now_ns)
{
	bool waiting = *bld_state(b, b->base) == BLD_ID_UNSEEN && b->seen_any &&
		       b->highest > b->base;
	if (!waiting)
		b->base_waiting = false;
	else if (!b->base_waiting) {
		b->base_waiting = true;
		b->base_waiting_since_ns = now_ns;
	}
}

/* Opens the event of ID rel in slot si with its first fragment f: pending,
 * linked last in the timeout order. Returns the time it is stamped with,
 * never before the last one seen, so the timeout order stays the age order
 * whatever a caller's clock does. */
static uint64_t bld_open_event(struct bld *b, uint32_t si, uint64_t rel,
			       const struct bld_fragment *f, uint64_t now_ns)
{
	struct bld_slot *s = &b->slots[si];
	if (now_ns < b->last_now_ns)
		now_ns = b->last_now_ns;
	b->last_now_ns = now_ns;
	s->rel_id = rel;
	s->created_ns = now_ns;
	s->present = 0;
	s->earliest_ts_ns = f->timestamp_ns;
	s->earliest_source = f->source_id;
	memset(&b->present[(size_t)si * b->present_words], 0,
	       b->present_words * sizeof(*b->present));
	bld_link_tail(b, si);
	if (b->pending == 0 || rel < b->oldest_hint)
		b->oldest_hint = rel;
	b->pending++;
	*bld_state(b, rel) = BLD_ID_PENDING;
	if (!b->seen_any || rel > b->highest)
		b->highest = rel;
	b->seen_any = true;
	b->c.events_created++;
	return now_ns;
}

/* Keeps a unique fragment's figures in its event's slot: its payload's
 * length and CRC, the earliest timestamp (ties to the lower source), and
 * its source's progress on its lane. */
static void bld_keep_fragment(struct bld *b, uint32_t si, uint64_t rel,
			      const struct bld_fragment *f)
{
	struct bld_slot *s = &b->slots[si];
	b->frags[(size_t)si * b->cfg.sources + f->source_id] = (struct bld_frag){
		.payload_len = f->payload_len,
		.payload_crc = f->payload_crc,
	};
	if (f->timestamp_ns < s->earliest_ts_ns ||
	    (f->timestamp_ns == s->earliest_ts_ns && f->source_id < s->earliest_source)) {
		s->earliest_ts_ns = f->timestamp_ns;
		s->earliest_source = f->source_id;
	}
	b->c.frags_unique++;
	b->unique_from[f->source_id]++;
	uint64_t *progress = bld_progress(b, f->source_id, rel);
	if (rel >= *progress)
		*progress = rel + 1;
}

enum bld_outcome bld_add(struct bld *b, const struct bld_fragment *f, uint64_t now_ns)
{
	b->c.frags_received++;
	if (f->run_id != b->cfg.run_id || f->source_id >= b->cfg.sources ||
	    f->event_id < b->cfg.first_event || f->event_id - b->cfg.first_event >= b->rel_limit) {
		b->c.frags_invalid++;
		return BLD_INVALID;
	}
	uint64_t rel = f->event_id - b->cfg.first_event;
	if (b->finished)
		goto late;

	if (rel < b->base) {
		/* Retired: only a complete event knows every source was there;
		 * an expired one kept no record of which ones it held. */
		if (b->base - rel <= b->window && *bld_state(b, rel) == BLD_ID_COMPLETE)
			goto duplicate;
		goto late;
	}
	if (rel - b->base >= b->window) {
		bld_slide(b, rel - b->window + 1);
		bld_settle(b);
		bld_watch_base(b, now_ns);
	}

	uint8_t *st = bld_state(b, rel);
	uint32_t si = (uint32_t)(rel % b->window);
	struct bld_slot *s = &b->slots[si];
	uint64_t *bits = &b->present[(size_t)si * b->present_words];
	uint64_t mask = UINT64_C(1) << (f->source_id % 64u);
	if (*st == BLD_ID_UNSEEN) {
		now_ns = bld_open_event(b, si, rel, f, now_ns);
	} else if (*st == BLD_ID_COMPLETE) {
		goto duplicate;
	} else if (*st != BLD_ID_PENDING) {
		goto late;
	} else if (bits[f->source_id / 64u] & mask) {
		goto duplicate;
	}

	bits[f->source_id / 64u] |= mask;
	bld_keep_fragment(b, si, rel, f);
	if (b->sink.on_unique != NULL)
		b->sink.on_unique(b->sink.ctx, si, f);
	if (++s->present == b->cfg.sources) {
		bld_complete(b, si);
		bld_settle(b);
	}
	bld_watch_base(b, now_ns);
	return BLD_UNIQUE;

duplicate:
	b->c.frags_duplicate++;
	return BLD_DUPLICATE;
late:
	b->c.frags_late++;
	return BLD_LATE;
}

/* Counts the unseen ID at base as never observed and moves base on. IDs
 * right behind it that are unseen too were unseen as long: base_waiting
 * stays set, with the same start, for them. */
static void bld_give_up_base(struct bld *b)
{
	*bld_state(b, b->base) = BLD_ID_UNOBSERVED;
	b->c.events_unobserved++;
	b->c.ids_given_up++;
	bld_settle(b);
	if (!(*bld_state(b, b->base) == BLD_ID_UNSEEN && b->highest > b->base))
		b->base_waiting = false;
}

/* Sources send in ID order (reordering only neighbours, or delaying a
 * fragment for a while), so a source that sent later IDs and not this one
 * skipped it. Only base is looked at: it is what holds the admission limit,
 * and an incomplete event behind it is looked at when it gets there. */
static void bld_expire_skipped(struct bld *b, uint64_t now_ns)
{
	for (;;) {
		uint8_t *st = bld_state(b, b->base);
		if (*st == BLD_ID_PENDING) {
			uint32_t si = (uint32_t)(b->base % b->window);
			if (sat_add_u64(b->slots[si].created_ns, b->cfg.skip_timeout_ns) > now_ns ||
			    !bld_absent_sources_passed(b, b->base,
							&b->present[(size_t)si * b->present_words]))
				return;
			bld_expire_slot(b, si, BLD_EXPIRED_SKIPPED);
			bld_settle(b);
			bld_watch_base(b, now_ns);
		} else if (b->base_waiting) {
			if (sat_add_u64(b->base_waiting_since_ns, b->cfg.skip_timeout_ns) > now_ns ||
			    !bld_absent_sources_passed(b, b->base, NULL))
				return;
			bld_give_up_base(b);
		} else {
			return;
		}
	}
}

/* An event or ID at base is timed out as anywhere else. */
static void bld_expire_timeouts(struct bld *b, uint64_t now_ns)
{
	bool any = false;
	while (b->head != BLD_NIL &&
	       sat_add_u64(b->slots[b->head].created_ns, b->cfg.timeout_ns) <= now_ns) {
		bld_expire_slot(b, b->head, BLD_EXPIRED_TIMEOUT);
		any = true;
	}
	if (any) {
		bld_settle(b);
		bld_watch_base(b, now_ns);
	}
	/* IDs unseen at base for a timeout are given up; those right behind
	 * it were unseen as long and go with it. */
	while (b->base_waiting && sat_add_u64(b->base_waiting_since_ns, b->cfg.timeout_ns) <= now_ns)
		bld_give_up_base(b);
}

void bld_expire(struct bld *b, uint64_t now_ns)
{
	if (b->cfg.timeout_ns != 0)
		bld_expire_timeouts(b, now_ns);
	if (b->cfg.skip_timeout_ns != 0)
		bld_expire_skipped(b, now_ns);
}

static uint64_t earlier(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t bld_next_deadline_ns(const struct bld *b)
{
	uint64_t deadline = UINT64_MAX;
	if (b->cfg.timeout_ns != 0) {
		if (b->head != BLD_NIL)
			deadline = sat_add_u64(b->slots[b->head].created_ns, b->cfg.timeout_ns);
		if (b->base_waiting)
			deadline = earlier(deadline, sat_add_u64(b->base_waiting_since_ns, b->cfg.timeout_ns));
	}
	if (b->cfg.skip_timeout_ns != 0) {
		const uint8_t st = b->states[b->base % b->span];
		uint32_t si = (uint32_t)(b->base % b->window);
		if (st == BLD_ID_PENDING &&
		    bld_absent_sources_passed(b, b->base, &b->present[(size_t)si * b->present_words]))
			deadline = earlier(deadline, sat_add_u64(b->slots[si].created_ns, b->cfg.skip_timeout_ns));
		else if (b->base_waiting && bld_absent_sources_passed(b, b->base, NULL))
			deadline = earlier(deadline, sat_add_u64(b->base_waiting_since_ns, b->cfg.skip_timeout_ns));
	}
	return deadline;
}

/* Relative ID of the oldest pending event; pending must be non-zero. */
static uint64_t bld_oldest_rel(const struct bld *b)
{
	uint64_t from = b->oldest_hint > b->base ? b->oldest_hint : b->base;
	uint64_t end = b->base + b->window;
	/* The state ring is contiguous in at most two pieces; memchr over
	 * bytes is fast enough to scan a large window at the rate this is
	 * asked (about once a millisecond). */
	while (from < end) {
		uint64_t idx = from % b->span;
		uint64_t len = end - from;
		if (len > b->span - idx)
			len = b->span - idx;
		const uint8_t *hit = memchr(&b->states[idx], BLD_ID_PENDING, len);
		if (hit != NULL)
			return from + (uint64_t)(hit - &b->states[idx]);
		from += len;
	}
	return UINT64_MAX;
}

uint64_t bld_oldest_pending(const struct bld *b)
{
	if (b->pending == 0)
		return UINT64_MAX;
	return b->cfg.first_event + bld_oldest_rel(b);
}

uint64_t bld_admission_limit(const struct bld *b)
{
	return sat_add_u64(b->cfg.first_event, sat_add_u64(b->base, b->window));
}

uint64_t bld_decided_below(const struct bld *b)
{
	return sat_add_u64(b->cfg.first_event, b->base);
}

uint32_t bld_pending(const struct bld *b)
{
	return b->pending;
}

void bld_finish(struct bld *b, uint64_t events_generated)
{
	if (b->finished)
		return;
	b->finished = true;
	/* In ID order, so expired.jsonl ends sorted. */
	uint64_t end = b->base + b->window;
	for (uint64_t rel = b->base; rel < end; rel++) {
		if (b->pending == 0 && rel >= events_generated)
			break;
		uint8_t *st = bld_state(b, rel);
		if (*st == BLD_ID_PENDING) {
			bld_expire_slot(b, (uint32_t)(rel % b->window), BLD_EXPIRED_END_OF_RUN);
		} else if (*st == BLD_ID_UNSEEN && rel < events_generated) {
			*st = BLD_ID_UNOBSERVED;
			b->c.events_unobserved++;
		}
	}
	if (events_generated > end)
		b->c.events_unobserved += events_generated - end;
}

const struct bld_counters *bld_counters(const struct bld *b)
{
	return &b->c;
}

uint64_t bld_unique_from(const struct bld *b, uint16_t source)
{
	return source < b->cfg.sources ? b->unique_from[source] : 0;
}

size_t bld_memory_bytes(const struct bld *b)
{
	size_t w = b->window, s = b->cfg.sources;
	return sizeof(*b) + 2 * w + w * sizeof(*b->slots) + w * s * sizeof(*b->frags) +
	       w * b->present_words * sizeof(*b->present) +
	       s * (sizeof(*b->missing) + sizeof(*b->unique_from) +
		    RAILS_MAX * sizeof(*b->next_from) + sizeof(*b->lanes));
}
