/* Unit tests of common/core/builder (builder_events.c, builder_lanes.c),
 * driven with a fake clock: correlation,
 * dedup, timeouts, the window, the admission limit, the filter and the
 * conservation equations, plus the spec's run vector through the real core.
 * Randomised tests log their seed; ES_TEST_SEED repeats a run. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/builder.h"
#include "wire/crc.h"
#include "core/gen.h"

#include "seeded.h"

/* ---- What the callbacks saw, per event ID ---- */

enum rec_kind { REC_NONE, REC_ACCEPTED, REC_FILTERED, REC_EXPIRED };

struct rec_event {
	uint8_t kind;
	uint8_t reason;
	unsigned calls;            /* must end at most 1: one outcome per ID */
	uint16_t present;
	uint16_t missing_count;
	uint32_t crc;
	uint64_t bytes;
	uint64_t earliest_ts_ns;
	uint16_t earliest_source;
};

struct recorder {
	uint32_t run_id;
	uint64_t first;
	uint64_t n;
	uint16_t sources;
	struct rec_event *ev;
	uint64_t *order;           /* event IDs in callback order */
	uint64_t norder;
	uint64_t completes;
	uint64_t expires;
	uint64_t foreign;          /* callbacks for IDs outside [first, first + n) or another run */
	uint64_t unordered_end;    /* end_of_run expiries out of ID order */
	uint64_t last_end_id;
	bool any_end;
	struct bld_expired last_expired;
	uint16_t last_missing[BLD_MAX_SOURCES];
	/* Optional test-side knowledge the callbacks check against. */
	const uint8_t *unique;     /* n x sources: 1 once bld_add said UNIQUE */
	const uint64_t *created;   /* n: arrival of the first unique fragment */
	uint64_t timeout_ns;
	uint64_t now_ns;
	uint64_t current_id;       /* ID of the fragment being added */
	uint32_t window;
	uint64_t bad_missing;
	uint64_t bad_timeout;
	uint64_t bad_window;
	/* Payload source to verify filter CRCs directly, by event index
	 * (ID - first); NULL skips it. */
	uint32_t (*direct_crc)(uint64_t index, uint16_t sources, uint64_t *bytes);
	uint64_t bad_crc;
};

static struct recorder rec;

static void rec_setup(void)
{
	memset(&rec, 0, sizeof(rec));
}

static void rec_teardown(void)
{
	free(rec.ev);
	free(rec.order);
	memset(&rec, 0, sizeof(rec));
}

static void rec_start(uint32_t run_id, uint64_t first, uint64_t n, uint16_t sources)
{
	rec.run_id = run_id;
	rec.first = first;
	rec.n = n;
	rec.sources = sources;
	rec.ev = calloc(n, sizeof(*rec.ev));
	rec.order = calloc(n + 1, sizeof(*rec.order));
	ck_assert_ptr_nonnull(rec.ev);
	ck_assert_ptr_nonnull(rec.order);
}

static struct rec_event *rec_slot(uint32_t run_id, uint64_t event_id)
{
	if (run_id != rec.run_id || event_id < rec.first || event_id - rec.first >= rec.n) {
		rec.foreign++;
		return NULL;
	}
	struct rec_event *r = &rec.ev[event_id - rec.first];
	r->calls++;
	if (rec.norder <= rec.n)
		rec.order[rec.norder++] = event_id;
	return r;
}

static void rec_on_complete(void *ctx, const struct bld_event *e)
{
	(void)ctx;
	rec.completes++;
	struct rec_event *r = rec_slot(e->run_id, e->event_id);
	if (r == NULL)
		return;
	r->kind = e->accepted ? REC_ACCEPTED : REC_FILTERED;
	r->crc = e->filter_crc;
	r->bytes = e->bytes;
	r->earliest_ts_ns = e->earliest_timestamp_ns;
	r->earliest_source = e->earliest_source;
	if (rec.direct_crc != NULL) {
		uint64_t bytes;
		uint32_t crc = rec.direct_crc(e->event_id - rec.first, rec.sources, &bytes);
		if (crc != e->filter_crc || bytes != e->bytes)
			rec.bad_crc++;
	}
}

static void rec_on_expired(void *ctx, const struct bld_expired *x)
{
	(void)ctx;
	rec.expires++;
	rec.last_expired = *x;
	memcpy(rec.last_missing, x->missing, x->missing_count * sizeof(*x->missing));
	rec.last_expired.missing = rec.last_missing;
	if (x->reason == BLD_EXPIRED_END_OF_RUN) {
		if (rec.any_end && x->event_id <= rec.last_end_id)
			rec.unordered_end++;
		rec.any_end = true;
		rec.last_end_id = x->event_id;
	}
	struct rec_event *r = rec_slot(x->run_id, x->event_id);
	if (r == NULL)
		return;
	r->kind = REC_EXPIRED;
	r->reason = (uint8_t)x->reason;
	r->present = x->present;
	r->missing_count = x->missing_count;
	if (x->present + x->missing_count != rec.sources)
		rec.bad_missing++;
	for (uint16_t i = 1; i < x->missing_count; i++)
		if (x->missing[i - 1] >= x->missing[i])
			rec.bad_missing++;
	uint64_t idx = x->event_id - rec.first;
	if (rec.unique != NULL) {
		/* The missing list is exactly the sources never accepted. */
		uint16_t k = 0;
		for (uint16_t s = 0; s < rec.sources; s++) {
			bool have = rec.unique[idx * rec.sources + s];
			bool listed = k < x->missing_count && x->missing[k] == s;
			if (listed)
				k++;
			if (have == listed)
				rec.bad_missing++;
		}
	}
	if (x->reason == BLD_EXPIRED_TIMEOUT && rec.created != NULL &&
	    (rec.timeout_ns == 0 || rec.created[idx] + rec.timeout_ns > rec.now_ns))
		rec.bad_timeout++;
	/* A slide only pushes out IDs more than a window below the newcomer
	 * (checked where the test tells the window and the newcomer). */
	if (x->reason == BLD_EXPIRED_WINDOW && rec.window != 0 &&
	    x->event_id + rec.window > rec.current_id)
		rec.bad_window++;
}

static const struct bld_sink rec_sink = {
	.on_complete = rec_on_complete,
	.on_expired = rec_on_expired,
	.ctx = NULL,
};

/* ---- Helpers ---- */

static struct bld_config make_config(uint16_t sources, uint32_t window, uint64_t timeout_ns,
				     uint32_t modulo, uint64_t first, uint64_t events)
{
	return (struct bld_config){
		.run_id = 1,
		.sources = sources,
		.window = window,
		.timeout_ns = timeout_ns,
		.filter_modulo = modulo,
		.first_event = first,
		.events = events,
	};
}

static struct bld *make_builder(uint16_t sources, uint32_t window, uint64_t timeout_ns,
				uint32_t modulo, uint64_t first, uint64_t events)
{
	struct bld_config cfg = make_config(sources, window, timeout_ns, modulo, first, events);
	struct bld *b = bld_create(&cfg, &rec_sink);
	ck_assert_ptr_nonnull(b);
	return b;
}

/* A fragment whose payload CRC stands in for a payload of 8 bytes. */
static struct bld_fragment frag(uint16_t source, uint64_t event, uint64_t ts)
{
	return (struct bld_fragment){
		.run_id = 1,
		.source_id = source,
		.event_id = event,
		.timestamp_ns = ts,
		.payload_len = 8,
		.payload_crc = (uint32_t)(event * 2654435761u + source),
	};
}

static enum bld_outcome add(struct bld *b, uint16_t source, uint64_t event, uint64_t now)
{
	struct bld_fragment f = frag(source, event, 1000 + source);
	rec.current_id = event;
	rec.now_ns = now;
	return bld_add(b, &f, now);
}

/* The seed's equations; events_generated = UINT64_MAX skips the ID one. */
static void check_equations(const struct bld *b, uint16_t sources, uint64_t events_generated)
{
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->frags_received,
			  c->frags_unique + c->frags_duplicate + c->frags_late + c->frags_invalid);
	ck_assert_uint_eq(c->frags_unique, (uint64_t)sources * c->events_complete + c->frags_in_expired);
	ck_assert_uint_eq(c->events_complete, c->events_accepted + c->events_filtered);
	ck_assert_uint_eq(c->events_expired, c->events_expired_timeout + c->events_expired_window +
						     c->events_expired_end_of_run +
						     c->events_expired_skipped);
	ck_assert_uint_eq(c->events_created, c->events_complete + c->events_expired + bld_pending(b));
	if (events_generated != UINT64_MAX)
		ck_assert_uint_eq(events_generated,
				  c->events_complete + c->events_expired + c->events_unobserved);
	ck_assert_uint_eq(rec.completes, c->events_complete);
	ck_assert_uint_eq(rec.expires, c->events_expired);
	ck_assert_uint_eq(rec.foreign, 0);
	ck_assert_uint_eq(rec.unordered_end, 0);
	ck_assert_uint_eq(rec.bad_missing, 0);
	ck_assert_uint_eq(rec.bad_timeout, 0);
	ck_assert_uint_eq(rec.bad_window, 0);
	ck_assert_uint_eq(rec.bad_crc, 0);
	for (uint64_t i = 0; i < rec.n; i++)
		REQUIRE(rec.ev[i].calls <= 1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- Tests ---- */

START_TEST(test_create_rejects_bad_config)
{
	struct bld_config bad[] = {
		make_config(0, 8, 0, 1, 0, 0),
		make_config(BLD_MAX_SOURCES + 1, 8, 0, 1, 0, 0),
		make_config(2, 0, 0, 1, 0, 0),
		make_config(2, BLD_MAX_WINDOW + 1, 0, 1, 0, 0),
		make_config(2, 8, 0, 0, 0, 0),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_ptr_null(bld_create(&bad[i], &rec_sink));
		ck_assert_int_eq(errno, EINVAL);
	}
	errno = 0;
	ck_assert_ptr_null(bld_create(NULL, &rec_sink));
	ck_assert_int_eq(errno, EINVAL);

	/* The extremes are accepted, and a sink is optional. */
	struct bld_config edge = make_config(BLD_MAX_SOURCES, 1, 0, 1, 0, 0);
	struct bld *b = bld_create(&edge, NULL);
	ck_assert_ptr_nonnull(b);
	struct bld_fragment f = frag(BLD_MAX_SOURCES - 1, 0, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
	bld_finish(b, 1);
	ck_assert_uint_eq(bld_counters(b)->events_expired_end_of_run, 1);
	bld_destroy(b);
	bld_destroy(NULL);

	ck_assert_str_eq(bld_expiry_reason_name(BLD_EXPIRED_TIMEOUT), "timeout");
	ck_assert_str_eq(bld_expiry_reason_name(BLD_EXPIRED_WINDOW), "window");
	ck_assert_str_eq(bld_expiry_reason_name(BLD_EXPIRED_END_OF_RUN), "end_of_run");
}
END_TEST

START_TEST(test_in_order)
{
	enum { S = 3, N = 50 };
	rec_start(1, 0, N, S);
	struct bld *b = make_builder(S, 8, 1000, 1, 0, N);
	for (uint64_t e = 0; e < N; e++) {
		for (uint16_t s = 0; s < S; s++) {
			ck_assert_int_eq(add(b, s, e, e * 10 + s), BLD_UNIQUE);
			ck_assert_uint_eq(bld_pending(b), s + 1 < S ? 1 : 0);
		}
		ck_assert_uint_eq(rec.ev[e].kind, REC_ACCEPTED);
		ck_assert_uint_eq(rec.ev[e].bytes, 8 * S);
		ck_assert_uint_eq(rec.ev[e].earliest_ts_ns, 1000);
		ck_assert_uint_eq(rec.ev[e].earliest_source, 0);
		ck_assert_uint_eq(bld_admission_limit(b), e + 1 + 8);
		ck_assert_uint_eq(bld_decided_below(b), e + 1);
	}
	for (uint64_t i = 0; i < N; i++)
		ck_assert_uint_eq(rec.order[i], i);
	bld_finish(b, N);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->events_complete, N);
	ck_assert_uint_eq(c->events_accepted, N);
	ck_assert_uint_eq(c->events_created, N);
	ck_assert_uint_eq(c->frags_unique, N * S);
	ck_assert_uint_eq(c->events_expired, 0);
	ck_assert_uint_eq(c->events_unobserved, 0);
	ck_assert_uint_eq(c->window_slides, 0);
	check_equations(b, S, N);
	bld_destroy(b);
}
END_TEST

static bool next_permutation(uint16_t *a, size_t n)
{
	size_t i = n - 1;
	while (i > 0 && a[i - 1] >= a[i])
		i--;
	if (i == 0)
		return false;
	size_t j = n - 1;
	while (a[j] <= a[i - 1])
		j--;
	uint16_t t = a[i - 1];
	a[i - 1] = a[j];
	a[j] = t;
	for (size_t l = i, r = n - 1; l < r; l++, r--) {
		t = a[l];
		a[l] = a[r];
		a[r] = t;
	}
	return true;
}

START_TEST(test_source_permutations)
{
	enum { S = 5, N = 120 };
	uint64_t rng = test_seed;
	uint8_t payload[S][40];
	uint32_t len[S];
	rec_start(1, 0, N, S);
	struct bld *b = make_builder(S, 2, 0, 1, 0, N);
	uint16_t perm[S] = { 0, 1, 2, 3, 4 };
	uint64_t e = 0;
	do {
		/* Real payloads and timestamps with ties, so the CRC and the
		 * earliest source must not depend on arrival order. */
		uint8_t all[S * 40];
		size_t off = 0;
		uint64_t ts[S], best_ts = UINT64_MAX;
		uint16_t best_src = 0;
		for (uint16_t s = 0; s < S; s++) {
			len[s] = (uint32_t)rng_below(&rng, 41);
			for (uint32_t i = 0; i < len[s]; i++)
				payload[s][i] = (uint8_t)rng_next(&rng);
			memcpy(all + off, payload[s], len[s]);
			off += len[s];
			ts[s] = 100 + rng_below(&rng, 4);
			if (ts[s] < best_ts) {
				best_ts = ts[s];
				best_src = s;
			}
		}
		for (size_t k = 0; k < S; k++) {
			uint16_t s = perm[k];
			struct bld_fragment f = {
				.run_id = 1, .source_id = s, .event_id = e, .timestamp_ns = ts[s],
				.payload_len = len[s], .payload_crc = crc_update(0, payload[s], len[s]),
			};
			ck_assert_int_eq(bld_add(b, &f, e), BLD_UNIQUE);
			ck_assert_uint_eq(rec.ev[e].kind == REC_NONE, k + 1 < S);
		}
		ck_assert_uint_eq(rec.ev[e].kind, REC_ACCEPTED);
		ck_assert_uint_eq(rec.ev[e].crc, crc_update(0, all, off));
		ck_assert_uint_eq(rec.ev[e].bytes, off);
		ck_assert_uint_eq(rec.ev[e].earliest_ts_ns, best_ts);
		ck_assert_uint_eq(rec.ev[e].earliest_source, best_src);
		e++;
	} while (next_permutation(perm, S));
	ck_assert_uint_eq(e, N);
	bld_finish(b, N);
	ck_assert_uint_eq(bld_counters(b)->events_complete, N);
	check_equations(b, S, N);
	bld_destroy(b);
}
END_TEST

START_TEST(test_duplicates)
{
	enum { S = 3, W = 4 };
	rec_start(1, 0, 100, S);
	struct bld *b = make_builder(S, W, 0, 1, 0, 100);
	/* Pending. */
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 0, 1), BLD_DUPLICATE);
	ck_assert_int_eq(add(b, 1, 0, 2), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 0, 3), BLD_DUPLICATE);
	ck_assert_int_eq(add(b, 0, 0, 4), BLD_DUPLICATE);
	ck_assert_uint_eq(bld_pending(b), 1);
	ck_assert_int_eq(add(b, 2, 0, 5), BLD_UNIQUE);
	ck_assert_uint_eq(rec.ev[0].kind, REC_ACCEPTED);
	/* Retired complete: every source is a duplicate now. */
	for (uint16_t s = 0; s < S; s++)
		ck_assert_int_eq(add(b, s, 0, 6), BLD_DUPLICATE);
	/* Still recognised while it is within a window below base. */
	for (uint64_t e = 1; e < W; e++)
		for (uint16_t s = 0; s < S; s++)
			ck_assert_int_eq(add(b, s, e, 10 + e), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 0, 20), BLD_DUPLICATE);
	/* One more and event 0 is forgotten: late, not a duplicate. */
	for (uint16_t s = 0; s < S; s++)
		ck_assert_int_eq(add(b, s, W, 30), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 0, 31), BLD_LATE);
	ck_assert_int_eq(add(b, 1, 1, 32), BLD_DUPLICATE);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->frags_duplicate, 3 + 3 + 1 + 1);
	ck_assert_uint_eq(c->frags_late, 1);
	ck_assert_uint_eq(c->events_complete, W + 1);
	ck_assert_uint_eq(c->events_created, W + 1);
	bld_finish(b, W + 1);
	check_equations(b, S, W + 1);
	bld_destroy(b);
}
END_TEST

START_TEST(test_late_after_timeout)
{
	enum { S = 3 };
	rec_start(1, 0, 10, S);
	struct bld *b = make_builder(S, 8, 100, 1, 0, 10);
	ck_assert_uint_eq(bld_next_deadline_ns(b), UINT64_MAX);
	ck_assert_int_eq(add(b, 1, 0, 50), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 150);
	rec.now_ns = 149;
	bld_expire(b, 149);
	ck_assert_uint_eq(bld_pending(b), 1);
	ck_assert_uint_eq(rec.expires, 0);
	rec.now_ns = 150;
	bld_expire(b, 150);
	ck_assert_uint_eq(bld_pending(b), 0);
	ck_assert_uint_eq(rec.expires, 1);
	ck_assert_uint_eq(rec.last_expired.event_id, 0);
	ck_assert_int_eq(rec.last_expired.reason, BLD_EXPIRED_TIMEOUT);
	ck_assert_uint_eq(rec.last_expired.present, 1);
	ck_assert_uint_eq(rec.last_expired.missing_count, 2);
	ck_assert_uint_eq(rec.last_missing[0], 0);
	ck_assert_uint_eq(rec.last_missing[1], 2);
	ck_assert_uint_eq(bld_next_deadline_ns(b), UINT64_MAX);
	/* The missing ones come too late; so does a copy of the one it held. */
	ck_assert_int_eq(add(b, 0, 0, 200), BLD_LATE);
	ck_assert_int_eq(add(b, 2, 0, 201), BLD_LATE);
	ck_assert_int_eq(add(b, 1, 0, 202), BLD_LATE);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->frags_late, 3);
	ck_assert_uint_eq(c->events_expired_timeout, 1);
	ck_assert_uint_eq(c->frags_in_expired, 1);
	/* Base moved past the expired event. */
	ck_assert_uint_eq(bld_admission_limit(b), 1 + 8);
	bld_finish(b, 1);
	check_equations(b, S, 1);
	bld_destroy(b);
}
END_TEST

START_TEST(test_timeout_only_old)
{
	enum { S = 2, N = 40 };
	const uint64_t T = 1000;
	uint64_t created[N];
	rec_start(1, 0, N, S);
	rec.created = created;
	rec.timeout_ns = T;
	struct bld *b = make_builder(S, 64, T, 1, 0, N);
	/* Created out of ID order: expiry follows arrival, not ID. */
	uint64_t rng = test_seed;
	uint64_t ids[N];
	for (uint64_t i = 0; i < N; i++)
		ids[i] = i;
	for (uint64_t i = N - 1; i > 0; i--) {
		uint64_t j = rng_below(&rng, i + 1), t = ids[i];
		ids[i] = ids[j];
		ids[j] = t;
	}
	for (uint64_t i = 0; i < N; i++) {
		created[ids[i]] = 100 * i;
		ck_assert_int_eq(add(b, 0, ids[i], 100 * i), BLD_UNIQUE);
	}
	/* Completing one in the middle of the FIFO unlinks it. */
	ck_assert_int_eq(add(b, 1, ids[N / 2], 100 * N), BLD_UNIQUE);
	ck_assert_uint_eq(bld_pending(b), N - 1);
	ck_assert_uint_eq(bld_next_deadline_ns(b), T);

	/* At 100 x 15 + T: the first 16 in arrival order, minus none completed. */
	rec.now_ns = 1500 + T;
	bld_expire(b, rec.now_ns);
	ck_assert_uint_eq(rec.expires, 16);
	for (uint64_t i = 0; i < 16; i++)
		ck_assert_uint_eq(rec.order[1 + i], ids[i]);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 1600 + T);
	/* The completed one is skipped. */
	rec.now_ns = 100 * (N / 2) + T;
	bld_expire(b, rec.now_ns);
	ck_assert_uint_eq(rec.expires, N / 2);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 100 * (N / 2 + 1) + T);
	ck_assert_uint_eq(rec.ev[ids[N / 2]].kind, REC_ACCEPTED);
	rec.now_ns = UINT64_MAX;
	bld_expire(b, UINT64_MAX);
	ck_assert_uint_eq(bld_pending(b), 0);
	ck_assert_uint_eq(rec.expires, N - 1);
	ck_assert_uint_eq(bld_counters(b)->events_expired_timeout, N - 1);
	bld_finish(b, N);
	check_equations(b, S, N);
	bld_destroy(b);
}
END_TEST

START_TEST(test_timeout_cost)
{
	/* Many pending, none due: each bld_expire must look at the head only.
	 * A scan would cost 10^5 x 10^5 steps here and take seconds. */
	enum { S = 2, N = 100000, CALLS = 100000 };
	rec_start(1, 0, N, S);
	struct bld *b = make_builder(S, 1u << 17, 1000000, 1, 0, N);
	for (uint64_t e = 0; e < N; e++)
		REQUIRE(add(b, 0, e, e) == BLD_UNIQUE);
	double t0 = now_s();
	for (uint64_t i = 0; i < CALLS; i++)
		bld_expire(b, N + i);
	double dt = now_s() - t0;
	ck_assert_uint_eq(bld_pending(b), N);
	ck_assert_msg(dt < 0.5, "%d bld_expire calls took %.3f s", CALLS, dt);
	/* Expiring some costs only those. */
	rec.now_ns = 1000000 + 999;
	bld_expire(b, rec.now_ns);
	ck_assert_uint_eq(rec.expires, 1000);
	ck_assert_uint_eq(bld_oldest_pending(b), 1000);
	bld_finish(b, N);
	check_equations(b, S, N);
	bld_destroy(b);
}
END_TEST

START_TEST(test_window_eviction)
{
	enum { S = 2, W = 4, N = 1005 };
	rec_start(1, 0, N, S);
	rec.window = W;
	struct bld *b = make_builder(S, W, 0, 1, 0, 0);
	const struct bld_counters *c = bld_counters(b);
	for (uint64_t e = 0; e < W; e++)
		ck_assert_int_eq(add(b, 0, e, e), BLD_UNIQUE);
	ck_assert_uint_eq(c->window_slides, 0);
	/* W ahead of base 0: slides to 1, pushing event 0 out. */
	ck_assert_int_eq(add(b, 0, W, 10), BLD_UNIQUE);
	ck_assert_uint_eq(c->window_slides, 1);
	ck_assert_uint_eq(rec.expires, 1);
	ck_assert_uint_eq(rec.last_expired.event_id, 0);
	ck_assert_int_eq(rec.last_expired.reason, BLD_EXPIRED_WINDOW);
	ck_assert_uint_eq(rec.last_expired.missing_count, 1);
	ck_assert_uint_eq(rec.last_missing[0], 1);
	ck_assert_int_eq(add(b, 1, 0, 11), BLD_LATE);
	ck_assert_uint_eq(bld_oldest_pending(b), 1);

	/* Event 10 slides base to 7: 1..4 expire in ID order, 5 and 6 were
	 * never seen. */
	ck_assert_int_eq(add(b, 0, 10, 12), BLD_UNIQUE);
	ck_assert_uint_eq(c->window_slides, 2);
	ck_assert_uint_eq(c->events_expired_window, 5);
	for (uint64_t i = 0; i < 5; i++)
		ck_assert_uint_eq(rec.order[i], i);
	ck_assert_uint_eq(c->events_unobserved, 2);
	ck_assert_int_eq(add(b, 1, 5, 13), BLD_LATE);
	ck_assert_int_eq(add(b, 1, 6, 13), BLD_LATE);
	/* 7 .. 9 are open again. */
	ck_assert_int_eq(add(b, 1, 9, 14), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), 9);

	/* A jump far beyond: the tracked IDs are visited, the rest counted. */
	ck_assert_int_eq(add(b, 0, 1000, 15), BLD_UNIQUE);
	ck_assert_uint_eq(c->window_slides, 3);
	/* 9 and 10 pending -> window; 7, 8 unseen; 11 .. 996 never tracked. */
	ck_assert_uint_eq(c->events_expired_window, 7);
	ck_assert_uint_eq(c->events_unobserved, 2 + 2 + 986);
	ck_assert_uint_eq(bld_oldest_pending(b), 1000);
	/* Base is 997, unseen: the limit counts from the lowest undecided ID. */
	ck_assert_uint_eq(bld_admission_limit(b), 997 + W);
	ck_assert_uint_eq(bld_decided_below(b), 997);
	ck_assert_int_eq(add(b, 0, 995, 16), BLD_LATE);   /* unobserved, remembered */
	ck_assert_int_eq(add(b, 0, 500, 16), BLD_LATE);   /* forgotten */
	ck_assert_int_eq(add(b, 0, 998, 17), BLD_UNIQUE); /* still in the window */
	ck_assert_int_eq(add(b, 1, 998, 18), BLD_UNIQUE);
	ck_assert_uint_eq(rec.ev[998].kind, REC_ACCEPTED);

	/* Finish: 1000 expires end_of_run; 997, 999, 1001 .. 1004 never seen. */
	bld_finish(b, N);
	ck_assert_uint_eq(c->events_expired_end_of_run, 1);
	ck_assert_uint_eq(c->events_unobserved, 990 + 2 + 4);
	ck_assert_uint_eq(bld_pending(b), 0);
	check_equations(b, S, N);
	bld_destroy(b);
}
END_TEST

START_TEST(test_jump_beyond_large_window)
{
	/* A jump of more than one window with a larger window: arithmetic
	 * must match visiting every ID. */
	enum { S = 1, W = 1000 };
	rec_start(1, 0, 100000, S);
	rec.window = W;
	struct bld *b = make_builder(S, W, 0, 1, 0, 0);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_int_eq(add(b, 0, 5, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 50000, 1), BLD_UNIQUE);
	/* 0..4 and 6..49000 unobserved; 5 complete. */
	ck_assert_uint_eq(c->events_unobserved, 49001 - 1);
	ck_assert_uint_eq(bld_admission_limit(b), 49001 + W);
	ck_assert_int_eq(add(b, 0, 49001, 2), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 49000, 2), BLD_LATE);
	ck_assert_int_eq(add(b, 0, 48001, 2), BLD_LATE);
	bld_finish(b, 50001);
	ck_assert_uint_eq(c->events_unobserved, 49000 + 998);
	check_equations(b, S, 50001);
	bld_destroy(b);
}
END_TEST

START_TEST(test_admission_limit)
{
	enum { S = 2, W = 8 };
	const uint64_t F = 100, T = 50;
	rec_start(1, F, 100, S);
	rec.window = W;
	struct bld *b = make_builder(S, W, T, 1, F, 100);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(bld_oldest_pending(b), UINT64_MAX);
	ck_assert_uint_eq(bld_admission_limit(b), F + W);
	ck_assert_uint_eq(bld_decided_below(b), F);
	ck_assert_int_eq(add(b, 0, F, 0), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), F);
	ck_assert_uint_eq(bld_admission_limit(b), F + W);
	ck_assert_int_eq(add(b, 0, F + 3, 1), BLD_UNIQUE);
	ck_assert_uint_eq(bld_admission_limit(b), F + W);
	/* F completes; F+1 is not seen yet, so the limit waits for it rather
	 * than jumping to the oldest pending F+3. */
	ck_assert_int_eq(add(b, 1, F, 2), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), F + 3);
	ck_assert_uint_eq(bld_admission_limit(b), F + 1 + W);
	ck_assert_int_eq(add(b, 1, F + 3, 3), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), UINT64_MAX);
	ck_assert_uint_eq(bld_admission_limit(b), F + 1 + W);
	/* F+1 has been unseen at base since t=2, with F+3 seen: it is given
	 * up a timeout later, and F+2 right behind it with it. */
	ck_assert_uint_eq(bld_next_deadline_ns(b), 2 + T);
	bld_expire(b, 2 + T - 1);
	ck_assert_uint_eq(bld_admission_limit(b), F + 1 + W);
	bld_expire(b, 2 + T);
	ck_assert_uint_eq(c->ids_given_up, 2);
	ck_assert_uint_eq(c->events_unobserved, 2);
	ck_assert_uint_eq(bld_admission_limit(b), F + 4 + W);
	ck_assert_uint_eq(bld_next_deadline_ns(b), UINT64_MAX);
	ck_assert_int_eq(add(b, 0, F + 2, 60), BLD_LATE);
	/* An ID below a pending one arriving never pulls the limit back. */
	ck_assert_int_eq(add(b, 0, F + 6, 61), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, F + 5, 62), BLD_UNIQUE);
	ck_assert_uint_eq(bld_admission_limit(b), F + 4 + W);
	ck_assert_uint_eq(bld_oldest_pending(b), F + 5);
	bld_finish(b, 100);
	check_equations(b, S, 100);
	bld_destroy(b);
}
END_TEST

static struct bld *make_skipping_builder(uint16_t sources, uint32_t window, uint64_t timeout_ns,
					 uint64_t skip_ns, uint64_t events)
{
	struct bld_config cfg = make_config(sources, window, timeout_ns, 1, 0, events);
	cfg.skip_timeout_ns = skip_ns;
	struct bld *b = bld_create(&cfg, &rec_sink);
	ck_assert_ptr_nonnull(b);
	return b;
}

START_TEST(test_skipped_by_a_source_that_went_past)
{
	enum { S = 3, W = 8 };
	const uint64_t T = 1000, K = 100;
	rec_start(1, 0, 20, S);
	struct bld *b = make_skipping_builder(S, W, T, K, 20);
	const struct bld_counters *c = bld_counters(b);
	/* Event 0 lacks source 2, which has not sent anything yet: nothing
	 * says it skipped 0, so only the full timeout could end it. */
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 0, 1), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), T);
	bld_expire(b, K + 10);
	ck_assert_uint_eq(c->events_expired, 0);
	/* Source 2 sends 1: it went past 0, which is expired as skipped
	 * (created at 0, so due at K) with source 2 missing. */
	ck_assert_int_eq(add(b, 2, 1, 200), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), K);
	bld_expire(b, 200);
	ck_assert_uint_eq(c->events_expired_skipped, 1);
	ck_assert_uint_eq(rec.last_expired.event_id, 0);
	ck_assert_int_eq(rec.last_expired.reason, BLD_EXPIRED_SKIPPED);
	ck_assert_uint_eq(rec.last_expired.missing_count, 1);
	ck_assert_uint_eq(rec.last_expired.missing[0], 2);
	ck_assert_str_eq(bld_expiry_reason_name(BLD_EXPIRED_SKIPPED), "skipped");
	ck_assert_uint_eq(bld_admission_limit(b), 1 + W);
	/* Its fragment, held back and sent after all, is late. */
	ck_assert_int_eq(add(b, 2, 0, 210), BLD_LATE);
	/* Event 1 is base now, created at 200 and lacking 0 and 1, which
	 * have not gone past it: it waits. */
	bld_expire(b, 200 + K);
	ck_assert_uint_eq(c->events_expired, 1);
	/* Only one of the two goes past: still waiting. */
	ck_assert_int_eq(add(b, 0, 2, 220), BLD_UNIQUE);
	bld_expire(b, 200 + K);
	ck_assert_uint_eq(c->events_expired, 1);
	/* Both past: skipped at 200 + K exactly, not a tick before. */
	ck_assert_int_eq(add(b, 1, 3, 230), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 200 + K);
	bld_expire(b, 200 + K - 1);
	ck_assert_uint_eq(c->events_expired, 1);
	bld_expire(b, 200 + K);
	ck_assert_uint_eq(c->events_expired_skipped, 2);
	ck_assert_uint_eq(rec.last_expired.event_id, 1);
	ck_assert_uint_eq(rec.last_expired.missing_count, 2);
	/* Event 2 (source 0 at 220) lacks 1 and 2; 1 is past it, 2 is not. */
	bld_expire(b, 500);
	ck_assert_uint_eq(c->events_expired, 2);
	ck_assert_uint_eq(bld_oldest_pending(b), 2);
	/* Event 3 completes behind base; that does not decide base... */
	ck_assert_int_eq(add(b, 0, 3, 510), BLD_UNIQUE);
	ck_assert_uint_eq(c->events_expired, 2);
	ck_assert_int_eq(add(b, 2, 3, 520), BLD_UNIQUE);
	ck_assert_uint_eq(c->events_complete, 1);
	/* ...but source 2 has now gone past event 2 as well: skipped. */
	bld_expire(b, 520);
	ck_assert_uint_eq(c->events_expired_skipped, 3);
	ck_assert_uint_eq(bld_admission_limit(b), 4 + W);
	check_equations(b, S, UINT64_MAX);
	bld_destroy(b);
}
END_TEST

START_TEST(test_id_nobody_sent_is_skipped_once_all_went_past)
{
	enum { S = 2, W = 8 };
	const uint64_t T = 1000, K = 100;
	rec_start(1, 0, 20, S);
	struct bld *b = make_skipping_builder(S, W, T, K, 20);
	const struct bld_counters *c = bld_counters(b);
	/* Nobody sends 0 or 1; source 0 sends 2 at t=5. Base 0 is unseen
	 * with a later ID seen, but source 1 has sent nothing. */
	ck_assert_int_eq(add(b, 0, 2, 5), BLD_UNIQUE);
	bld_expire(b, 5 + K);
	ck_assert_uint_eq(c->ids_given_up, 0);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 5 + T);
	ck_assert_int_eq(add(b, 1, 2, 50), BLD_UNIQUE);
	ck_assert_uint_eq(c->events_complete, 1);
	/* Both went past 0 and 1: given up at 5 + K, counted as never
	 * observed, and the limit moves over them and the complete 2. */
	ck_assert_uint_eq(bld_next_deadline_ns(b), 5 + K);
	bld_expire(b, 5 + K);
	ck_assert_uint_eq(c->ids_given_up, 2);
	ck_assert_uint_eq(c->events_unobserved, 2);
	ck_assert_uint_eq(bld_admission_limit(b), 3 + W);
	ck_assert_int_eq(add(b, 1, 0, 120), BLD_LATE);
	check_equations(b, S, UINT64_MAX);
	bld_destroy(b);
}
END_TEST

START_TEST(test_skip_timeout_zero_waits_for_the_timeout)
{
	enum { S = 2, W = 8 };
	const uint64_t T = 1000;
	rec_start(1, 0, 20, S);
	struct bld *b = make_skipping_builder(S, W, T, 0, 20);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 1, 1), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 1, 2), BLD_UNIQUE);
	bld_expire(b, T - 1);
	ck_assert_uint_eq(c->events_expired, 0);
	bld_expire(b, T);
	ck_assert_uint_eq(c->events_expired_timeout, 1);
	ck_assert_uint_eq(c->events_expired_skipped, 0);
	check_equations(b, S, UINT64_MAX);
	bld_destroy(b);
}
END_TEST


/* Two lanes of two IDs each: lane 0 carries 0, 1, 4, 5, ..., lane 1 2, 3,
 * 6, 7, ... */
static struct bld *make_laned_builder(uint16_t sources, uint32_t lanes, uint64_t timeout_ns,
				      uint64_t skip_ns)
{
	struct bld_config cfg = make_config(sources, 8, timeout_ns, 1, 0, 40);
	cfg.skip_timeout_ns = skip_ns;
	cfg.lane_span = 2;
	struct bld *b = bld_create(&cfg, &rec_sink);
	ck_assert_ptr_nonnull(b);
	for (uint16_t src = 0; src < sources; src++)
		ck_assert_int_eq(bld_set_source_lanes(b, src, lanes), 0);
	return b;
}

START_TEST(test_lanes_later_id_on_the_other_lane_does_not_skip)
{
	enum { S = 2 };
	const uint64_t T = 100000, K = 100;
	rec_start(1, 0, 40, S);
	struct bld *b = make_laned_builder(S, 2, T, K);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(bld_lane_of(b, 1, 1), 0);
	ck_assert_uint_eq(bld_lane_of(b, 1, 2), 1);
	ck_assert_uint_eq(bld_lane_of(b, 1, 5), 0);
	ck_assert_uint_eq(bld_lane_of(b, 1, 7), 1);
	/* Event 0 lacks source 1, whose lane 1 ran ahead to 2 and 3: that
	 * says nothing of lane 0, which carries 0. */
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 2, 1), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 3, 2), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), T);
	bld_expire(b, 10 * K);
	ck_assert_uint_eq(c->events_expired, 0);
	ck_assert_uint_eq(bld_admission_limit(b), 8);
	/* Source 1 sends 1 on lane 0: it went past 0 there, so 0 is skipped. */
	ck_assert_int_eq(add(b, 1, 1, 10 * K), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), K);
	bld_expire(b, 10 * K);
	ck_assert_uint_eq(c->events_expired_skipped, 1);
	ck_assert_uint_eq(rec.last_expired.event_id, 0);
	ck_assert_uint_eq(rec.last_expired.missing[0], 1);
	bld_finish(b, 40);
	check_equations(b, S, 40);
	bld_destroy(b);
}
END_TEST

START_TEST(test_lanes_later_id_on_the_same_lane_skips)
{
	enum { S = 2 };
	const uint64_t T = 100000, K = 100;
	rec_start(1, 0, 40, S);
	struct bld *b = make_laned_builder(S, 2, T, K);
	const struct bld_counters *c = bld_counters(b);
	/* 4 is on lane 0 as 0 is: source 1 sending it skipped 0. */
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 4, 1), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), K);
	bld_expire(b, K);
	ck_assert_uint_eq(c->events_expired_skipped, 1);
	/* Base 1, nobody sent it yet; 2 and 3 (lane 1) and 4 are seen. An ID
	 * nobody sent is given up when every source passed it on its lane:
	 * source 0 has not sent anything past 1 on lane 0. */
	ck_assert_int_eq(add(b, 0, 2, 2 * K), BLD_UNIQUE);
	bld_expire(b, 4 * K);
	ck_assert_uint_eq(c->ids_given_up, 0);
	ck_assert_int_eq(add(b, 0, 5, 4 * K), BLD_UNIQUE);
	bld_expire(b, 4 * K);
	ck_assert_uint_eq(c->ids_given_up, 1);
	ck_assert_uint_eq(c->events_unobserved, 1);
	bld_finish(b, 40);
	check_equations(b, S, 40);
	bld_destroy(b);
}
END_TEST

START_TEST(test_lanes_one_is_the_plain_rule)
{
	enum { S = 2 };
	const uint64_t T = 100000, K = 100;
	rec_start(1, 0, 40, S);
	struct bld *b = make_laned_builder(S, 1, T, K);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(bld_lane_of(b, 1, 2), 0);
	/* The same fragments as on two lanes: with one, 2 skips 0. */
	ck_assert_int_eq(add(b, 0, 0, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 2, 1), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), K);
	bld_expire(b, K);
	ck_assert_uint_eq(c->events_expired_skipped, 1);
	bld_finish(b, 40);
	check_equations(b, S, 40);
	bld_destroy(b);
}
END_TEST

START_TEST(test_lanes_offset_and_bad_counts)
{
	/* One builder: lanes of RAILS_SPAN_EVENTS global IDs, the offset the
	 * run's first ID, so a lane is (global ID / 64) mod lanes. */
	struct bld_config cfg = make_config(3, 8, 0, 1, 100, 0);
	cfg.lane_span = 64;
	cfg.lane_offset = 100;
	struct bld *b = bld_create(&cfg, &rec_sink);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(bld_set_source_lanes(b, 0, 3), 0);
	ck_assert_uint_eq(bld_lane_of(b, 0, 100), 1);
	ck_assert_uint_eq(bld_lane_of(b, 0, 127), 1);
	ck_assert_uint_eq(bld_lane_of(b, 0, 128), 2);
	ck_assert_uint_eq(bld_lane_of(b, 0, 192), 0);
	ck_assert_uint_eq(bld_lane_of(b, 0, 99), 0);
	ck_assert_uint_eq(bld_lane_of(b, 1, 128), 0);
	ck_assert_uint_eq(bld_lane_of(b, 3, 128), 0);
	ck_assert_int_eq(bld_set_source_lanes(b, 0, 0), -EINVAL);
	ck_assert_int_eq(bld_set_source_lanes(b, 0, 5), -EINVAL);
	ck_assert_int_eq(bld_set_source_lanes(b, 3, 2), -EINVAL);
	ck_assert_int_eq(bld_set_source_lanes(b, 2, 4), 0);
	/* A builder of several learns its batch later: local ID L is in its
	 * batch L / batch, the k-th on lane k mod lanes. */
	bld_set_lane_span(b, 8, 0);
	ck_assert_uint_eq(bld_lane_of(b, 2, 100 + 7), 0);
	ck_assert_uint_eq(bld_lane_of(b, 2, 100 + 8), 1);
	ck_assert_uint_eq(bld_lane_of(b, 2, 100 + 31), 3);
	ck_assert_uint_eq(bld_lane_of(b, 2, 100 + 32), 0);
	bld_set_lane_span(b, 0, 0);
	ck_assert_uint_eq(bld_lane_of(b, 2, 100 + 5), 1);
	bld_destroy(b);
}
END_TEST

START_TEST(test_oldest_pending_hint)
{
	/* Base stuck on an ID never seen while later events come and go: the
	 * answer must stay exact. */
	enum { S = 2, W = 64 };
	rec_start(1, 0, 200, S);
	struct bld *b = make_builder(S, W, 0, 1, 0, 200);
	for (uint64_t e = 1; e < 60; e++) {
		ck_assert_int_eq(add(b, 0, e, e), BLD_UNIQUE);
		ck_assert_uint_eq(bld_oldest_pending(b), e < 3 ? e : 3);
		if (e % 3 != 0)
			ck_assert_int_eq(add(b, 1, e, e), BLD_UNIQUE);
	}
	ck_assert_uint_eq(bld_oldest_pending(b), 3);
	ck_assert_int_eq(add(b, 0, 2, 100), BLD_DUPLICATE);
	ck_assert_int_eq(add(b, 0, 0, 100), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), 0);
	ck_assert_int_eq(add(b, 1, 0, 101), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), 3);
	ck_assert_int_eq(add(b, 1, 3, 102), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), 6);
	ck_assert_int_eq(add(b, 1, 57, 103), BLD_UNIQUE);
	ck_assert_uint_eq(bld_oldest_pending(b), 6);
	bld_finish(b, 60);
	ck_assert_uint_eq(bld_oldest_pending(b), UINT64_MAX);
	check_equations(b, S, 60);
	bld_destroy(b);
}
END_TEST

START_TEST(test_invalid)
{
	enum { S = 3 };
	rec_start(1, 1000, 50, S);
	struct bld *b = make_builder(S, 8, 0, 1, 1000, 50);
	struct bld_fragment f = frag(0, 1000, 0);
	f.run_id = 2;
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(S, 1000, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(UINT16_MAX, 1000, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, 999, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, 1050, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, UINT64_MAX, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, 0, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	/* Nothing moved: the edges of the run are valid. */
	ck_assert_uint_eq(bld_pending(b), 0);
	ck_assert_uint_eq(bld_counters(b)->window_slides, 0);
	f = frag(S - 1, 1000, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
	f = frag(0, 1049, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->frags_invalid, 7);
	ck_assert_uint_eq(c->frags_received, 9);
	bld_finish(b, 50);
	check_equations(b, S, 50);
	bld_destroy(b);

	/* events = 0: any ID from first_event on is valid. */
	rec_teardown();
	rec_start(1, 0, 1, S);
	b = make_builder(S, 8, 0, 1, 5, 0);
	f = frag(0, 4, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, (uint64_t)1 << 40, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
	bld_destroy(b);
}
END_TEST

START_TEST(test_high_ids)
{
	/* IDs near 2^64 keep their arithmetic: limits saturate, not wrap. */
	enum { S = 1, W = 16 };
	const uint64_t F = UINT64_MAX - 1000;
	rec_start(1, F, 1001, S);
	rec.window = W;
	struct bld *b = make_builder(S, W, 0, 1, F, 0);
	ck_assert_uint_eq(bld_admission_limit(b), F + W);
	ck_assert_int_eq(add(b, 0, F + 100, 0), BLD_UNIQUE);
	ck_assert_uint_eq(bld_counters(b)->events_unobserved, 100 - W + 1);
	ck_assert_int_eq(add(b, 0, UINT64_MAX, 0), BLD_UNIQUE);
	ck_assert_uint_eq(bld_admission_limit(b), UINT64_MAX);
	ck_assert_uint_eq(bld_counters(b)->events_complete, 2);
	bld_finish(b, 1001);
	check_equations(b, S, 1001);
	bld_destroy(b);

	/* Relative IDs in the top 2 x window are refused: the ring arithmetic
	 * needs that headroom. */
	rec_teardown();
	rec_start(1, 0, 1, S);
	b = make_builder(S, W, 0, 1, 0, 0);
	struct bld_fragment f = frag(0, UINT64_MAX, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, UINT64_MAX - 2 * W, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_INVALID);
	f = frag(0, UINT64_MAX - 2 * W - 1, 0);
	ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
	ck_assert_uint_eq(bld_admission_limit(b), UINT64_MAX - 2 * W - 1 + 1);   /* base slid to it - W + 1 */
	bld_destroy(b);
}
END_TEST

static uint8_t filter_payload[200][4][200];
static uint32_t filter_len[200][4];

static uint32_t filter_direct_crc(uint64_t event, uint16_t sources, uint64_t *bytes)
{
	uint32_t crc = 0;
	*bytes = 0;
	for (uint16_t s = 0; s < sources; s++) {
		crc = crc_update(crc, filter_payload[event][s], filter_len[event][s]);
		*bytes += filter_len[event][s];
	}
	return crc;
}

START_TEST(test_filter_modulo)
{
	enum { S = 4, N = 200 };
	static const uint32_t modulos[] = { 1, 2, 3, 7 };
	uint64_t rng = test_seed ^ 0xF11;
	for (uint64_t e = 0; e < N; e++)
		for (uint16_t s = 0; s < S; s++) {
			/* Include empty payloads: they must fold in as nothing. */
			filter_len[e][s] = (uint32_t)rng_below(&rng, 8) == 0 ? 0 : (uint32_t)rng_below(&rng, 200);
			for (uint32_t i = 0; i < filter_len[e][s]; i++)
				filter_payload[e][s][i] = (uint8_t)rng_next(&rng);
		}
	for (size_t m = 0; m < sizeof(modulos) / sizeof(modulos[0]); m++) {
		rec_teardown();
		rec_start(1, 0, N, S);
		rec.direct_crc = filter_direct_crc;
		struct bld *b = make_builder(S, 16, 0, modulos[m], 0, N);
		uint64_t want_accepted = 0;
		for (uint64_t e = 0; e < N; e++) {
			uint16_t order[S] = { 0, 1, 2, 3 };
			for (uint16_t i = S - 1; i > 0; i--) {
				uint16_t j = (uint16_t)rng_below(&rng, i + 1u), t = order[i];
				order[i] = order[j];
				order[j] = t;
			}
			for (uint16_t i = 0; i < S; i++) {
				uint16_t s = order[i];
				struct bld_fragment f = {
					.run_id = 1, .source_id = s, .event_id = e, .timestamp_ns = 1,
					.payload_len = filter_len[e][s],
					.payload_crc = crc_update(0, filter_payload[e][s], filter_len[e][s]),
				};
				ck_assert_int_eq(bld_add(b, &f, e), BLD_UNIQUE);
			}
			uint64_t bytes;
			uint32_t crc = filter_direct_crc(e, S, &bytes);
			bool accept = crc % modulos[m] == 0;
			want_accepted += accept;
			ck_assert_uint_eq(rec.ev[e].crc, crc);
			ck_assert_uint_eq(rec.ev[e].kind, accept ? REC_ACCEPTED : REC_FILTERED);
		}
		const struct bld_counters *c = bld_counters(b);
		ck_assert_uint_eq(c->events_accepted, want_accepted);
		ck_assert_uint_eq(c->events_filtered, N - want_accepted);
		if (modulos[m] == 1)
			ck_assert_uint_eq(want_accepted, N);
		else
			ck_assert_uint_lt(want_accepted, N);
		bld_finish(b, N);
		check_equations(b, S, N);
		bld_destroy(b);
	}
}
END_TEST

/* ---- The spec's run and filter vectors ---- */

enum { RUN_S = 4, RUN_N = 200, RUN_LEN = 64 };
static const uint64_t run_seed = 7;
static const uint32_t run_id = 1;

static const struct {
	uint64_t event;
	uint32_t crc;
} run_accepted[] = {
	{ 10, 1102343988u },  { 14, 3780295047u },  { 19, 3253265988u },  { 26, 2631050472u },
	{ 29, 1583724633u },  { 30, 2535003954u },  { 32, 1440795687u },  { 41, 1860951675u },
	{ 46, 3690317823u },  { 52, 2779457391u },  { 56, 3131278236u },  { 64, 2049243789u },
	{ 68, 540782202u },   { 72, 2850217149u },  { 73, 4079230770u },  { 82, 3122555157u },
	{ 85, 3569761791u },  { 86, 2903422722u },  { 91, 2567504820u },  { 92, 3625869831u },
	{ 95, 3061284555u },  { 96, 3591425706u },  { 98, 3759597822u },  { 102, 985851369u },
	{ 105, 4246483023u }, { 113, 1520182251u }, { 114, 1549727706u }, { 117, 2122804869u },
	{ 122, 2588944239u }, { 124, 961782693u },  { 132, 832624305u },  { 133, 3369510747u },
	{ 134, 726106119u },  { 147, 957737778u },  { 149, 1247644512u }, { 150, 2088076530u },
	{ 156, 2086269447u }, { 160, 2700346026u }, { 167, 2368039002u }, { 168, 2591850984u },
	{ 170, 337612977u },  { 174, 1702744482u }, { 187, 1136278245u }, { 189, 3002838897u },
	{ 190, 1348954716u }, { 191, 1751870415u }, { 197, 2948735616u }, { 198, 3618217617u },
};

static uint32_t run_direct_crc(uint64_t event, uint16_t sources, uint64_t *bytes)
{
	uint8_t payload[RUN_LEN];
	uint32_t crc = 0;
	for (uint16_t s = 0; s < sources; s++) {
		gen_payload(payload, RUN_LEN, run_seed, run_id, event, s);
		crc = crc_update(crc, payload, RUN_LEN);
	}
	*bytes = (uint64_t)sources * RUN_LEN;
	return crc;
}

START_TEST(test_run_vector)
{
	/* The window matters not: a large one holds every incomplete event to
	 * the end, a small one pushes them out as the run goes on. */
	static const uint32_t windows[] = { 256, 8, 1 };
	const struct gen_faults faults = { .missing_every = 11 };
	ck_assert_uint_eq(sizeof(run_accepted) / sizeof(run_accepted[0]), 48);
	for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
		rec_teardown();
		rec_start(run_id, 0, RUN_N, RUN_S);
		rec.direct_crc = run_direct_crc;
		rec.window = windows[w];
		struct bld_config cfg = make_config(RUN_S, windows[w], 0, 3, 0, RUN_N);
		cfg.run_id = run_id;
		struct bld *b = bld_create(&cfg, &rec_sink);
		ck_assert_ptr_nonnull(b);
		uint64_t sent = 0, complete_want = 0;
		for (uint64_t e = 0; e < RUN_N; e++) {
			bool all = true;
			for (uint16_t s = 0; s < RUN_S; s++) {
				if (gen_is_omitted(&faults, run_seed, run_id, e, s)) {
					all = false;
					continue;
				}
				uint8_t payload[RUN_LEN];
				gen_payload(payload, RUN_LEN, run_seed, run_id, e, s);
				struct bld_fragment f = {
					.run_id = run_id, .source_id = s, .event_id = e,
					.timestamp_ns = e, .payload_len = RUN_LEN,
					.payload_crc = crc_update(0, payload, RUN_LEN),
				};
				rec.current_id = e;
				ck_assert_int_eq(bld_add(b, &f, e), BLD_UNIQUE);
				sent++;
			}
			complete_want += all;
		}
		bld_finish(b, RUN_N);
		const struct bld_counters *c = bld_counters(b);
		ck_assert_uint_eq(c->events_accepted, 48);
		ck_assert_uint_eq(c->events_complete, complete_want);
		ck_assert_uint_eq(c->frags_unique, sent);
		size_t k = 0;
		for (uint64_t e = 0; e < RUN_N; e++) {
			if (rec.ev[e].kind != REC_ACCEPTED)
				continue;
			ck_assert_uint_lt(k, 48);
			ck_assert_uint_eq(e, run_accepted[k].event);
			ck_assert_uint_eq(rec.ev[e].crc, run_accepted[k].crc);
			ck_assert_uint_eq(rec.ev[e].bytes, RUN_S * RUN_LEN);
			k++;
		}
		ck_assert_uint_eq(k, 48);
		check_equations(b, RUN_S, RUN_N);
		bld_destroy(b);
	}
}
END_TEST

START_TEST(test_filter_vector)
{
	/* seed 7, run 1, event 12, 4 sources of 64 bytes: crc 1092708647,
	 * accepted with modulo 1, filtered with modulo 3. */
	static const uint32_t modulos[] = { 1, 3 };
	for (size_t m = 0; m < 2; m++) {
		rec_teardown();
		rec_start(run_id, 12, 1, RUN_S);
		struct bld_config cfg = make_config(RUN_S, 4, 0, modulos[m], 12, 1);
		struct bld *b = bld_create(&cfg, &rec_sink);
		ck_assert_ptr_nonnull(b);
		for (uint16_t s = RUN_S; s-- > 0;) {
			uint8_t payload[RUN_LEN];
			gen_payload(payload, RUN_LEN, run_seed, run_id, 12, s);
			struct bld_fragment f = {
				.run_id = run_id, .source_id = s, .event_id = 12,
				.payload_len = RUN_LEN, .payload_crc = crc_update(0, payload, RUN_LEN),
			};
			ck_assert_int_eq(bld_add(b, &f, 0), BLD_UNIQUE);
		}
		ck_assert_uint_eq(rec.ev[0].crc, 1092708647u);
		ck_assert_uint_eq(rec.ev[0].kind, modulos[m] == 1 ? REC_ACCEPTED : REC_FILTERED);
		bld_destroy(b);
	}
}
END_TEST

START_TEST(test_finish)
{
	enum { S = 3, W = 16 };
	rec_start(1, 0, 100, S);
	struct bld *b = make_builder(S, W, 0, 1, 0, 0);
	/* Pending 2, 7 and 5 (in that arrival order), complete 3, nothing else. */
	ck_assert_int_eq(add(b, 1, 2, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 7, 1), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 2, 7, 1), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 5, 2), BLD_UNIQUE);
	for (uint16_t s = 0; s < S; s++)
		ck_assert_int_eq(add(b, s, 3, 3), BLD_UNIQUE);
	bld_finish(b, 100);
	const struct bld_counters *c = bld_counters(b);
	ck_assert_uint_eq(c->events_expired_end_of_run, 3);
	/* ID order, whatever the arrival order. */
	ck_assert_uint_eq(rec.order[1], 2);
	ck_assert_uint_eq(rec.order[2], 5);
	ck_assert_uint_eq(rec.order[3], 7);
	ck_assert_uint_eq(rec.ev[7].missing_count, 1);
	ck_assert_uint_eq(rec.last_missing[0], 1);
	ck_assert_uint_eq(c->frags_in_expired, 4);
	ck_assert_uint_eq(c->events_unobserved, 96);
	check_equations(b, S, 100);
	/* Idempotent, and the run is closed to new fragments. */
	bld_finish(b, 100);
	ck_assert_uint_eq(c->events_unobserved, 96);
	ck_assert_int_eq(add(b, 0, 50, 10), BLD_LATE);
	ck_assert_int_eq(add(b, 0, 3, 10), BLD_LATE);
	ck_assert_int_eq(add(b, S, 3, 10), BLD_INVALID);
	ck_assert_uint_eq(bld_pending(b), 0);
	check_equations(b, S, 100);
	bld_destroy(b);

	/* Fewer generated than the window holds: only those count. */
	rec_teardown();
	rec_start(1, 0, 10, S);
	b = make_builder(S, W, 0, 1, 0, 0);
	ck_assert_int_eq(add(b, 0, 1, 0), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 6, 0), BLD_UNIQUE);
	bld_finish(b, 4);
	ck_assert_uint_eq(bld_counters(b)->events_unobserved, 3);
	/* A pending ID beyond what the sources reported still expires. */
	ck_assert_uint_eq(bld_counters(b)->events_expired_end_of_run, 2);
	ck_assert_uint_eq(bld_pending(b), 0);
	check_equations(b, S, 5);
	bld_destroy(b);
}
END_TEST

START_TEST(test_many_sources)
{
	/* A present bitmap of several words: missing lists stay ascending and
	 * exact across word edges. */
	enum { S = 130 };
	rec_start(1, 0, 4, S);
	struct bld *b = make_builder(S, 4, 0, 1, 0, 4);
	for (uint16_t s = 0; s < S; s++)
		if (s != 0 && s != 63 && s != 64 && s != 127 && s != 129)
			ck_assert_int_eq(add(b, s, 0, 0), BLD_UNIQUE);
	for (uint16_t s = S; s-- > 0;)
		ck_assert_int_eq(add(b, s, 1, 1), BLD_UNIQUE);
	ck_assert_uint_eq(rec.ev[1].kind, REC_ACCEPTED);
	bld_finish(b, 2);
	ck_assert_uint_eq(rec.last_expired.event_id, 0);
	ck_assert_uint_eq(rec.last_expired.present, S - 5);
	ck_assert_uint_eq(rec.last_expired.missing_count, 5);
	static const uint16_t want[] = { 0, 63, 64, 127, 129 };
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(rec.last_missing[i], want[i]);
	check_equations(b, S, 2);
	bld_destroy(b);
}
END_TEST

START_TEST(test_clock_step_back)
{
	/* A caller clock that steps back must not unsort the timeout FIFO: the
	 * later arrival counts as arriving with the one before it. */
	enum { S = 2 };
	rec_start(1, 0, 3, S);
	struct bld *b = make_builder(S, 4, 100, 1, 0, 3);
	ck_assert_int_eq(add(b, 0, 0, 1000), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 1, 500), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 0, 2, 1000), BLD_UNIQUE);
	ck_assert_int_eq(add(b, 1, 0, 1000), BLD_UNIQUE);
	ck_assert_uint_eq(bld_next_deadline_ns(b), 1100);
	bld_expire(b, 1099);
	ck_assert_uint_eq(bld_pending(b), 2);
	bld_expire(b, 1100);
	ck_assert_uint_eq(bld_pending(b), 0);
	ck_assert_uint_eq(bld_counters(b)->events_expired_timeout, 2);
	bld_destroy(b);
}
END_TEST

START_TEST(test_add_allocates_nothing)
{
	enum { S = 4, N = 20000 };
	rec_start(1, 0, N, S);
	struct bld *b = make_builder(S, 64, 50, 1, 0, N);
	uint64_t rng = test_seed;
	struct mallinfo2 before = mallinfo2();
	for (uint64_t i = 0; i < N * S; i++) {
		struct bld_fragment f = frag((uint16_t)rng_below(&rng, S), i / S + rng_below(&rng, 8), i);
		bld_add(b, &f, i);
		if (i % 64 == 0)
			bld_expire(b, i);
	}
	struct mallinfo2 after = mallinfo2();
	ck_assert_uint_eq(after.uordblks, before.uordblks);
	ck_assert_uint_eq(after.hblkhd, before.hblkhd);
	bld_destroy(b);
}
END_TEST

/* ---- Randomised stress ---- */

struct stress_frag {
	uint64_t key;      /* sort key: position plus a bounded random delay */
	uint64_t event;
	uint16_t source;
	uint8_t kind;      /* 0 original, 1 copy, 2 invalid */
};

static int cmp_stress(const void *a, const void *b)
{
	const struct stress_frag *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* One round's test-side view of the run. */
struct stress {
	uint64_t seed;
	uint32_t run;
	uint16_t sources;
	uint32_t window;
	uint64_t timeout;
	uint64_t first;
	uint64_t n;
	uint8_t *unique;   /* n x sources: bld_add said UNIQUE */
	uint64_t *created; /* n: arrival of the first unique fragment */
	bool *is_created;
	bool *sent_any;
	uint64_t highest;
	uint64_t last_limit;     /* admission limit at the last check */
	bool seen;
};

static struct stress st;

static uint32_t stress_len(uint64_t event, uint16_t source)
{
	return (uint32_t)(gen_key(st.seed, 1, st.run, event, source) % 33);
}

static uint32_t stress_direct_crc(uint64_t event, uint16_t sources, uint64_t *bytes)
{
	uint8_t payload[64];
	uint32_t crc = 0;
	*bytes = 0;
	for (uint16_t s = 0; s < sources; s++) {
		uint32_t len = stress_len(event, s);
		gen_payload(payload, len, st.seed, st.run, event, s);
		crc = crc_update(crc, payload, len);
		*bytes += len;
	}
	return crc;
}

/* Pending count, oldest pending, admission limit and deadline against the
 * test's own books. */
static void stress_check_pending(const struct bld *b, unsigned round)
{
	uint64_t pending = 0, oldest = UINT64_MAX, oldest_created = UINT64_MAX;
	for (uint64_t e = 0; e < st.n; e++) {
		if (!st.is_created[e] || rec.ev[e].calls != 0)
			continue;
		pending++;
		if (oldest == UINT64_MAX)
			oldest = e;
		if (st.created[e] < oldest_created)
			oldest_created = st.created[e];
	}
	if (bld_pending(b) != pending)
		ck_abort_msg("round %u: pending %u want %" PRIu64 " (seed %" PRIu64 ")", round,
			     bld_pending(b), pending, test_seed);
	/* The limit counts from the lowest undecided ID: never beyond the
	 * oldest pending one, never backwards. */
	uint64_t limit = bld_admission_limit(b);
	REQUIRE(limit >= st.last_limit);
	st.last_limit = limit;
	if (pending == 0) {
		REQUIRE(bld_oldest_pending(b) == UINT64_MAX);
		REQUIRE(limit <= st.first + (st.seen ? st.highest + 1 : 0) + st.window);
		if (st.timeout == 0)
			REQUIRE(bld_next_deadline_ns(b) == UINT64_MAX);
	} else {
		REQUIRE(bld_oldest_pending(b) == st.first + oldest);
		REQUIRE(limit <= st.first + oldest + st.window);
		REQUIRE(bld_next_deadline_ns(b) <=
			(st.timeout == 0 ? UINT64_MAX : oldest_created + st.timeout));
	}
}

static void stress_round(uint64_t *rng, unsigned round)
{
	uint16_t S = (uint16_t)(1 + rng_below(rng, 8));
	uint32_t W = rng_below(rng, 4) == 0 ? (uint32_t)(1 + rng_below(rng, 4))
					     : (uint32_t)(8 + rng_below(rng, 200));
	uint64_t timeout = rng_below(rng, 4) == 0 ? 0 : 50 + rng_below(rng, 5000);
	uint32_t modulo = (uint32_t)(1 + rng_below(rng, 4));
	uint64_t first = rng_below(rng, 2) ? 0 : rng_below(rng, 1000000);
	uint64_t N = 2000 + rng_below(rng, 3000);
	bool known = rng_below(rng, 2);
	unsigned omit_pct = (unsigned)rng_below(rng, 12);
	unsigned dup_pct = (unsigned)rng_below(rng, 12);
	/* Reordering distance, in fragment positions. */
	uint64_t spread = 1 + rng_below(rng, (uint64_t)S * (W + 8) * 2);
	uint64_t step_max = 1 + rng_below(rng, 40);

	free(st.unique);
	free(st.created);
	free(st.is_created);
	free(st.sent_any);
	memset(&st, 0, sizeof(st));
	st.seed = rng_next(rng);
	st.run = (uint32_t)(1 + rng_below(rng, 1000));
	st.sources = S;
	st.window = W;
	st.timeout = timeout;
	st.first = first;
	st.n = N;
	st.unique = calloc((size_t)N * S, 1);
	st.created = calloc(N, sizeof(*st.created));
	st.is_created = calloc(N, sizeof(*st.is_created));
	st.sent_any = calloc(N, sizeof(*st.sent_any));
	size_t cap = (size_t)N * S * 2 + N + 16, n = 0;
	struct stress_frag *fr = calloc(cap, sizeof(*fr));
	ck_assert(fr && st.unique && st.created && st.is_created && st.sent_any);

	/* Positions 64 apart leave room for the tie-breaking low bits. */
	uint64_t pos = 0;
	for (uint64_t e = 0; e < N; e++) {
		bool drop_event = rng_below(rng, 100) < 2;
		for (uint16_t s = 0; s < S; s++) {
			pos++;
			if (drop_event || rng_below(rng, 100) < omit_pct)
				continue;
			st.sent_any[e] = true;
			fr[n++] = (struct stress_frag){ (pos + rng_below(rng, spread)) * 64 + 1, e, s, 0 };
			if (rng_below(rng, 100) < dup_pct)
				fr[n++] = (struct stress_frag){ (pos + rng_below(rng, 2 * spread)) * 64 + 2,
								e, s, 1 };
		}
		if (rng_below(rng, 200) == 0)
			fr[n++] = (struct stress_frag){ pos * 64 + 3, e, (uint16_t)rng_below(rng, 4), 2 };
	}
	REQUIRE(n <= cap);
	qsort(fr, n, sizeof(*fr), cmp_stress);

	rec_teardown();
	rec_start(st.run, first, N, S);
	rec.unique = st.unique;
	rec.created = st.created;
	rec.timeout_ns = timeout;
	rec.window = W;
	rec.direct_crc = stress_direct_crc;

	struct bld_config cfg = make_config(S, W, timeout, modulo, first, known ? N : 0);
	cfg.run_id = st.run;
	struct bld *b = bld_create(&cfg, &rec_sink);
	ck_assert_ptr_nonnull(b);

	uint64_t now = 1 + rng_below(rng, 1000000);
	uint64_t outcomes[4] = { 0 };
	for (size_t i = 0; i < n; i++) {
		const struct stress_frag *sf = &fr[i];
		now += rng_below(rng, step_max);
		struct bld_fragment f = {
			.run_id = st.run, .source_id = sf->source, .event_id = first + sf->event,
			.timestamp_ns = rng_next(rng) % 1000, .payload_len = stress_len(sf->event, sf->source),
		};
		uint8_t payload[64];
		gen_payload(payload, f.payload_len, st.seed, st.run, sf->event, sf->source);
		f.payload_crc = crc_update(0, payload, f.payload_len);
		rec.now_ns = now;
		if (sf->kind == 2) {
			switch (sf->source) {
			case 0:
				f.run_id++;
				break;
			case 1:
				f.source_id = S;
				break;
			case 2:
				/* Past the run, or (unknown length) wrapped below it. */
				f.event_id = known ? first + N + sf->event : first - 1;
				break;
			default:
				if (first == 0)
					f.run_id--;
				else
					f.event_id = first - 1;
				break;
			}
			rec.current_id = f.event_id;
			enum bld_outcome out = bld_add(b, &f, now);
			outcomes[out]++;
			REQUIRE(out == BLD_INVALID);
			continue;
		}

		/* What the test knows before: the event's fate and this source. */
		const struct rec_event *r = &rec.ev[sf->event];
		uint8_t *u = &st.unique[sf->event * S + sf->source];
		bool had_source = *u;
		bool retired = r->calls != 0;
		uint8_t kind = r->kind;
		bool pending = st.is_created[sf->event] && !retired;
		rec.current_id = f.event_id;
		enum bld_outcome out = bld_add(b, &f, now);
		outcomes[out]++;
		REQUIRE(out != BLD_INVALID);
		if (had_source)
			REQUIRE(out != BLD_UNIQUE);
		if (pending && !had_source)
			if (out != BLD_UNIQUE)
				ck_abort_msg("round %u: event %" PRIu64 " pending, source %u got %d (seed %" PRIu64 ")",
					     round, sf->event, sf->source, out, test_seed);
		if (retired && kind == REC_EXPIRED)
			REQUIRE(out == BLD_LATE);
		if (retired && kind != REC_EXPIRED)
			REQUIRE(out == BLD_DUPLICATE || out == BLD_LATE);
		if (!retired && !st.is_created[sf->event])
			REQUIRE(out == BLD_UNIQUE || out == BLD_LATE);
		if (out == BLD_UNIQUE) {
			*u = 1;
			if (!st.is_created[sf->event]) {
				st.is_created[sf->event] = true;
				st.created[sf->event] = now;
				if (!st.seen || sf->event > st.highest)
					st.highest = sf->event;
				st.seen = true;
			}
		}

		if (timeout != 0 && rng_below(rng, 16) == 0) {
			bld_expire(b, now);
			REQUIRE(bld_next_deadline_ns(b) > now);
		}
		if (i % 127 == 0)
			stress_check_pending(b, round);
	}
	stress_check_pending(b, round);
	bld_finish(b, N);
	REQUIRE(bld_pending(b) == 0);
	check_equations(b, S, N);
	const struct bld_counters *c = bld_counters(b);
	REQUIRE(outcomes[BLD_UNIQUE] == c->frags_unique);
	REQUIRE(outcomes[BLD_DUPLICATE] == c->frags_duplicate);
	REQUIRE(outcomes[BLD_LATE] == c->frags_late);
	REQUIRE(outcomes[BLD_INVALID] == c->frags_invalid);
	REQUIRE(c->frags_received == n);

	/* Every ID ends in exactly one outcome, and what it reported matches
	 * what it was given. */
	uint64_t silent = 0;
	for (uint64_t e = 0; e < N; e++) {
		const struct rec_event *r = &rec.ev[e];
		unsigned got = 0;
		for (uint16_t s = 0; s < S; s++)
			got += st.unique[e * S + s];
		if (r->calls == 0) {
			silent++;
			REQUIRE(got == 0);
		} else if (r->kind == REC_EXPIRED) {
			REQUIRE(r->present == got);
			REQUIRE(got >= 1);
		} else {
			REQUIRE(got == S);
			REQUIRE((r->kind == REC_ACCEPTED) == (r->crc % modulo == 0));
		}
		if (!st.sent_any[e])
			REQUIRE(r->calls == 0);
	}
	REQUIRE(silent == c->events_unobserved);
	if (getenv("ES_TEST_VERBOSE") != NULL)
		printf("round %u: S %u W %u timeout %" PRIu64 " N %" PRIu64 ": complete %" PRIu64
		       " timeout %" PRIu64 " window %" PRIu64 " end %" PRIu64 " unobserved %" PRIu64
		       " dup %" PRIu64 " late %" PRIu64 " invalid %" PRIu64 " slides %" PRIu64 "\n",
		       round, S, W, timeout, N, c->events_complete, c->events_expired_timeout,
		       c->events_expired_window, c->events_expired_end_of_run, c->events_unobserved,
		       c->frags_duplicate, c->frags_late, c->frags_invalid, c->window_slides);
	bld_destroy(b);
	free(fr);
}

static void stress_teardown(void)
{
	free(st.unique);
	free(st.created);
	free(st.is_created);
	free(st.sent_any);
	memset(&st, 0, sizeof(st));
	rec_teardown();
}

START_TEST(test_stress)
{
	uint64_t rng = test_seed ^ 0x57E55;
	for (unsigned round = 0; round < 16; round++)
		stress_round(&rng, round);
	stress_teardown();
}
END_TEST

static Suite *builder_suite(void)
{
	Suite *s = suite_create("builder");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, rec_setup, rec_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_rejects_bad_config);
	tcase_add_test(tc, test_in_order);
	tcase_add_test(tc, test_source_permutations);
	tcase_add_test(tc, test_duplicates);
	tcase_add_test(tc, test_late_after_timeout);
	tcase_add_test(tc, test_timeout_only_old);
	tcase_add_test(tc, test_timeout_cost);
	tcase_add_test(tc, test_window_eviction);
	tcase_add_test(tc, test_jump_beyond_large_window);
	tcase_add_test(tc, test_admission_limit);
	tcase_add_test(tc, test_skipped_by_a_source_that_went_past);
	tcase_add_test(tc, test_id_nobody_sent_is_skipped_once_all_went_past);
	tcase_add_test(tc, test_skip_timeout_zero_waits_for_the_timeout);
	tcase_add_test(tc, test_lanes_later_id_on_the_other_lane_does_not_skip);
	tcase_add_test(tc, test_lanes_later_id_on_the_same_lane_skips);
	tcase_add_test(tc, test_lanes_one_is_the_plain_rule);
	tcase_add_test(tc, test_lanes_offset_and_bad_counts);
	tcase_add_test(tc, test_oldest_pending_hint);
	tcase_add_test(tc, test_invalid);
	tcase_add_test(tc, test_high_ids);
	tcase_add_test(tc, test_filter_modulo);
	tcase_add_test(tc, test_run_vector);
	tcase_add_test(tc, test_filter_vector);
	tcase_add_test(tc, test_finish);
	tcase_add_test(tc, test_many_sources);
	tcase_add_test(tc, test_clock_step_back);
	tcase_add_test(tc, test_add_allocates_nothing);
	tcase_add_test(tc, test_stress);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *env = getenv("ES_TEST_SEED");
	test_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	printf("test_builder: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", test_seed);
	fflush(stdout);

	SRunner *sr = srunner_create(builder_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
