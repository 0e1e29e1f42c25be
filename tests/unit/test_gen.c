/* Generator conformance: every gen-related vector of tests/data/vectors.json
 * (mix64, salts, key, payload, faults, filter, run), plus the properties the
 * vectors do not pin down (N = 0, reorder order, no write past a payload). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/crc.h"
#include "core/gen.h"
#include "vectors.h"

typedef bool (*gen_predicate)(const struct gen_faults *f, uint64_t seed, uint32_t run,
			      uint64_t event, uint16_t source);

static uint64_t salt_by_name(const char *name)
{
	if (strcmp(name, "payload") == 0)
		return GEN_SALT_PAYLOAD;
	if (strcmp(name, "missing") == 0)
		return GEN_SALT_MISSING;
	if (strcmp(name, "duplicate") == 0)
		return GEN_SALT_DUPLICATE;
	if (strcmp(name, "delay") == 0)
		return GEN_SALT_DELAY;
	ck_abort_msg("Vector names unknown salt %s", name);
	return 0;
}

/* The spec defines each salt as 8 ASCII bytes read big-endian. */
static uint64_t salt_from_ascii(const char *s)
{
	uint64_t v = 0;
	int i;

	ck_assert_uint_eq(strlen(s), 8);
	for (i = 0; i < 8; i++)
		v = v << 8 | (uint8_t)s[i];
	return v;
}

START_TEST(test_mix64_vectors)
{
	const struct vec_mix64 *v = &vec_mix64[_i];

	ck_assert_uint_eq(gen_mix64(v->in), v->out);
}
END_TEST

START_TEST(test_salts)
{
	ck_assert_uint_eq(GEN_SALT_PAYLOAD, vec_salts.payload);
	ck_assert_uint_eq(GEN_SALT_MISSING, vec_salts.missing);
	ck_assert_uint_eq(GEN_SALT_DUPLICATE, vec_salts.duplicate);
	ck_assert_uint_eq(GEN_SALT_DELAY, vec_salts.delay);
	ck_assert_uint_eq(GEN_SALT_PAYLOAD, salt_from_ascii("payload!"));
	ck_assert_uint_eq(GEN_SALT_MISSING, salt_from_ascii("missing!"));
	ck_assert_uint_eq(GEN_SALT_DUPLICATE, salt_from_ascii("duplicat"));
	ck_assert_uint_eq(GEN_SALT_DELAY, salt_from_ascii("delay!!!"));
}
END_TEST

START_TEST(test_key_vectors)
{
	const struct vec_key *v = &vec_key[_i];

	ck_assert_uint_eq(gen_key(v->seed, salt_by_name(v->salt), (uint32_t)v->run, v->event,
				  (uint16_t)v->source),
			  v->key);
}
END_TEST

/* The whole vector, at every alignment, with guard bytes on both sides. */
START_TEST(test_payload_vectors)
{
	const struct vec_payload *v = &vec_payload[_i];
	uint8_t buf[8 + 256 + 8];
	size_t off;

	ck_assert_uint_eq(v->length, v->bytes_len);
	ck_assert_uint_le(v->length, 256);
	for (off = 0; off < 8; off++) {
		memset(buf, 0xa5, sizeof(buf));
		gen_payload(buf + 8 + off, v->length, v->seed, (uint32_t)v->run, v->event,
			    (uint16_t)v->source);
		ck_assert_mem_eq(buf + 8 + off, v->bytes, v->length);
		ck_assert_uint_eq(buf[8 + off - 1], 0xa5);
		ck_assert_uint_eq(buf[8 + off + v->length], 0xa5);
	}
}
END_TEST

/* "Cut to the payload length": every shorter length is a prefix, which
 * walks the partial last word through all 8 cases. Each length gets an
 * exactly sized heap block so AddressSanitizer and valgrind see any
 * overrun. */
START_TEST(test_payload_prefixes)
{
	const struct vec_payload *v = &vec_payload[_i];
	size_t len;

	for (len = 0; len <= v->length; len++) {
		uint8_t *p = malloc(len ? len : 1);

		ck_assert_ptr_nonnull(p);
		gen_payload(p, len, v->seed, (uint32_t)v->run, v->event, (uint16_t)v->source);
		ck_assert_mem_eq(p, v->bytes, len);
		free(p);
	}
}
END_TEST

static bool vec_fault_has_hit(const struct vec_faults *v, uint64_t event, uint64_t source)
{
	size_t i;

	for (i = 0; i < v->n_hits; i++)
		if (v->hits[i][0] == event && v->hits[i][1] == source)
			return true;
	return false;
}

/* Checks that pred hits exactly v's hits over v's whole event x source
 * range; except lists hits the caller expects to be removed. */
static void check_fault_hits(const struct vec_faults *v, const struct gen_faults *f,
			     gen_predicate pred, const struct vec_faults *except)
{
	uint64_t e, s;
	size_t i, hits = 0, expected = 0;

	ck_assert_uint_eq(v->n_events, 2);
	ck_assert_uint_eq(v->n_sources, 2);
	/* A listed hit outside the range would never be compared. */
	for (i = 0; i < v->n_hits; i++) {
		ck_assert_uint_ge(v->hits[i][0], v->events[0]);
		ck_assert_uint_le(v->hits[i][0], v->events[1]);
		ck_assert_uint_ge(v->hits[i][1], v->sources[0]);
		ck_assert_uint_le(v->hits[i][1], v->sources[1]);
	}
	for (e = v->events[0]; e <= v->events[1]; e++) {
		for (s = v->sources[0]; s <= v->sources[1]; s++) {
			bool want = vec_fault_has_hit(v, e, s) &&
				    !(except && vec_fault_has_hit(except, e, s));
			bool got = pred(f, v->seed, (uint32_t)v->run, e, (uint16_t)s);

			ck_assert_msg(got == want, "%s every %llu: (event %llu, source %llu) %s",
				      v->kind, (unsigned long long)v->every,
				      (unsigned long long)e, (unsigned long long)s,
				      want ? "missed" : "hit but not in the vector");
			hits += got;
			expected += want;
		}
	}
	ck_assert_uint_eq(hits, expected);
}

/* The 'duplicate' vectors are the raw predicate key % N == 0, computed with
 * the missing fault disabled: they list fragments that the 'missing'
 * vector of the same seed and N omits, e.g. (event 0, source 3) at N = 3.
 * So they are checked with missing_every = 0; test_duplicate_not_omitted
 * covers the "and not omitted" half. */
START_TEST(test_fault_vectors)
{
	const struct vec_faults *v = &vec_faults[_i];
	struct gen_faults f = { 0 };
	gen_predicate pred;

	ck_assert_uint_gt(v->every, 0);
	if (strcmp(v->kind, "missing") == 0) {
		f.missing_every = v->every;
		pred = gen_is_omitted;
	} else if (strcmp(v->kind, "duplicate") == 0) {
		f.duplicate_every = v->every;
		pred = gen_is_duplicated;
	} else if (strcmp(v->kind, "delay") == 0) {
		f.delay_every = v->every;
		f.delay_ms = 5;
		pred = gen_is_delayed;
	} else {
		ck_abort_msg("Vector %d has unknown fault kind %s", _i, v->kind);
		return;
	}
	check_fault_hits(v, &f, pred, NULL);
}
END_TEST

static const struct vec_faults *vec_fault_twin(const struct vec_faults *v, const char *kind)
{
	size_t i;

	for (i = 0; i < VEC_FAULTS_COUNT; i++) {
		const struct vec_faults *w = &vec_faults[i];

		if (strcmp(w->kind, kind) == 0 && w->seed == v->seed && w->run == v->run &&
		    w->every == v->every && w->events[0] == v->events[0] &&
		    w->events[1] == v->events[1] && w->sources[0] == v->sources[0] &&
		    w->sources[1] == v->sources[1])
			return w;
	}
	return NULL;
}

/* With missing at the same N, the duplicate hits are the vector's minus the
 * missing vector's, and the two overlap, so the exclusion is exercised. */
START_TEST(test_duplicate_not_omitted)
{
	size_t i, checked = 0;

	for (i = 0; i < VEC_FAULTS_COUNT; i++) {
		const struct vec_faults *dup = &vec_faults[i];
		const struct vec_faults *miss;
		struct gen_faults f = { 0 };
		size_t j, overlap = 0;

		if (strcmp(dup->kind, "duplicate") != 0)
			continue;
		miss = vec_fault_twin(dup, "missing");
		ck_assert_msg(miss != NULL, "No missing vector beside duplicate vector %zu", i);
		for (j = 0; j < dup->n_hits; j++)
			overlap += vec_fault_has_hit(miss, dup->hits[j][0], dup->hits[j][1]);
		ck_assert_uint_gt(overlap, 0);
		f.missing_every = dup->every;
		f.duplicate_every = dup->every;
		check_fault_hits(dup, &f, gen_is_duplicated, miss);
		checked++;
	}
	ck_assert_uint_gt(checked, 0);
}
END_TEST

START_TEST(test_faults_zero_disables)
{
	const struct gen_faults off = { 0 };
	struct gen_faults all = { .missing_every = 1, .duplicate_every = 1, .delay_every = 1 };
	struct gen_faults dup_only = { .duplicate_every = 1 };
	uint64_t e;
	uint16_t s;

	for (e = 0; e < 500; e++) {
		for (s = 0; s < 8; s++) {
			ck_assert(!gen_is_omitted(&off, 3, 9, e, s));
			ck_assert(!gen_is_duplicated(&off, 3, 9, e, s));
			ck_assert(!gen_is_delayed(&off, 3, 9, e, s));
			/* N = 1 hits everything, but omitted wins over duplicated. */
			ck_assert(gen_is_omitted(&all, 3, 9, e, s));
			ck_assert(!gen_is_duplicated(&all, 3, 9, e, s));
			ck_assert(gen_is_delayed(&all, 3, 9, e, s));
			ck_assert(gen_is_duplicated(&dup_only, 3, 9, e, s));
		}
	}
}
END_TEST

START_TEST(test_event_order_plain)
{
	uint64_t i;

	for (i = 0; i < 9; i++)
		ck_assert_uint_eq(gen_event_at(100, 9, i, false), 100 + i);
}
END_TEST

START_TEST(test_event_order_examples)
{
	static const uint64_t even[] = { 11, 10, 13, 12, 15, 14 };
	static const uint64_t odd[] = { 11, 10, 13, 12, 14 };
	uint64_t i;

	for (i = 0; i < 6; i++)
		ck_assert_uint_eq(gen_event_at(10, 6, i, true), even[i]);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(gen_event_at(10, 5, i, true), odd[i]);
	ck_assert_uint_eq(gen_event_at(10, 1, 0, true), 10);
}
END_TEST

/* For every count up to 40 and firsts near 0 and near 2^64: a permutation of
 * first .. first+count-1 in which pairs are swapped and an unpaired last ID
 * goes last. */
START_TEST(test_event_order_permutation)
{
	static const uint64_t firsts[] = { 0, 1, 1000, UINT64_MAX - 64 };
	size_t k;
	uint64_t count, i;

	for (k = 0; k < sizeof(firsts) / sizeof(firsts[0]); k++) {
		uint64_t first = firsts[k];

		for (count = 0; count <= 40; count++) {
			bool seen[40] = { false };

			for (i = 0; i < count; i++) {
				uint64_t id = gen_event_at(first, count, i, true);

				ck_assert_uint_ge(id, first);
				ck_assert_uint_lt(id - first, count);
				ck_assert(!seen[id - first]);
				seen[id - first] = true;
				if (count % 2 == 1 && i == count - 1)
					ck_assert_uint_eq(id, first + i);
				else if (i % 2 == 0)
					ck_assert_uint_eq(id, first + i + 1);
				else
					ck_assert_uint_eq(id, first + i - 1);
			}
		}
	}
}
END_TEST

/* Filter checksum of one event: CRC over the payloads in source order. */
static uint32_t event_crc(uint64_t seed, uint32_t run, uint64_t event, uint16_t sources,
			  size_t payload_bytes, uint8_t *scratch)
{
	uint16_t s;

	for (s = 0; s < sources; s++)
		gen_payload(scratch + s * payload_bytes, payload_bytes, seed, run, event, s);
	return crc_update(0, scratch, (size_t)sources * payload_bytes);
}

START_TEST(test_filter_vector)
{
	const struct vec_filter *v = &vec_filter;
	uint8_t *buf = malloc(v->sources * v->length);
	uint32_t crc;

	ck_assert_ptr_nonnull(buf);
	crc = event_crc(v->seed, (uint32_t)v->run, v->event, (uint16_t)v->sources, v->length, buf);
	free(buf);
	ck_assert_uint_eq(crc, v->crc);
	ck_assert(v->accepted_modulo_3 == (crc % 3 == 0));
	ck_assert(v->accepted_modulo_1 == (crc % 1 == 0));
}
END_TEST

/* The run vector end to end: which events are complete (no source omitted
 * a fragment), their CRCs, and which pass the filter, compared as a list. */
START_TEST(test_run_vector)
{
	const struct vec_run *v = &vec_run;
	struct gen_faults f = { .missing_every = v->missing_every };
	uint8_t *buf = malloc(v->sources * v->payload);
	size_t n = 0;
	uint64_t e;

	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(v->n_accepted, v->accepted_count);
	ck_assert_uint_gt(v->filter_modulo, 1);
	for (e = v->first_event; e < v->first_event + v->events; e++) {
		bool complete = true;
		uint32_t crc;
		uint16_t s;

		for (s = 0; s < v->sources; s++)
			complete &= !gen_is_omitted(&f, v->seed, (uint32_t)v->run, e, s);
		if (!complete)
			continue;
		crc = event_crc(v->seed, (uint32_t)v->run, e, (uint16_t)v->sources, v->payload, buf);
		if (crc % v->filter_modulo != 0)
			continue;
		ck_assert_msg(n < v->n_accepted, "Event %llu accepted beyond the vector's list",
			      (unsigned long long)e);
		ck_assert_uint_eq(e, v->accepted[n].event);
		ck_assert_uint_eq(crc, v->accepted[n].crc);
		n++;
	}
	free(buf);
	ck_assert_uint_eq(n, v->n_accepted);
}
END_TEST

static Suite *gen_suite(void)
{
	Suite *s = suite_create("gen");
	TCase *tc;

	tc = tcase_create("vectors");
	tcase_add_loop_test(tc, test_mix64_vectors, 0, VEC_MIX64_COUNT);
	tcase_add_test(tc, test_salts);
	tcase_add_loop_test(tc, test_key_vectors, 0, VEC_KEY_COUNT);
	tcase_add_loop_test(tc, test_payload_vectors, 0, VEC_PAYLOAD_COUNT);
	tcase_add_loop_test(tc, test_payload_prefixes, 0, VEC_PAYLOAD_COUNT);
	tcase_add_loop_test(tc, test_fault_vectors, 0, VEC_FAULTS_COUNT);
	tcase_add_test(tc, test_filter_vector);
	tcase_add_test(tc, test_run_vector);
	suite_add_tcase(s, tc);

	tc = tcase_create("faults");
	tcase_add_test(tc, test_duplicate_not_omitted);
	tcase_add_test(tc, test_faults_zero_disables);
	suite_add_tcase(s, tc);

	tc = tcase_create("order");
	tcase_add_test(tc, test_event_order_plain);
	tcase_add_test(tc, test_event_order_examples);
	tcase_add_test(tc, test_event_order_permutation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(gen_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
