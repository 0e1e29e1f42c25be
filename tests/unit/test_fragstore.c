/* Unit tests of common/core/fragstore.c, the fragments kept until their
 * event is written: bad sizes refused, a frame that does not fit refused and
 * nothing copied, holds and their release; and with the builder core's
 * on_unique (core/builder.h): every fragment of each completed event is in
 * its slot's cells, byte for byte, when on_complete runs, duplicates and
 * late fragments never reach the store, and a held slot is seen before a
 * later event would overwrite it. Frames kept in place (fragstore_put_ref):
 * read from where they lie, referred to until released, cleared, replaced
 * or copied, and a copy that outlives its original; and the queue of such
 * frames a link keeps (core/pins.h): in order, bounded, wrapping. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "core/builder.h"
#include "core/fragstore.h"
#include "core/pins.h"

START_TEST(test_bad_sizes_and_frames)
{
	errno = 0;
	ck_assert_ptr_null(fragstore_create(0, 4, 64));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(fragstore_create(4, 0, 64));
	ck_assert_ptr_null(fragstore_create(4, 4, 0));
	ck_assert_ptr_null(fragstore_create(UINT32_MAX, UINT16_MAX, UINT32_MAX));
	struct fragstore *s = fragstore_create(8, 2, 64);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(fragstore_bytes(s), 8u * 2u * (64u + 16u) + 8u * 4u + 8u);
	uint8_t frame[65];
	memset(frame, 0xab, sizeof frame);
	ck_assert(!fragstore_put(s, 0, 0, frame, 65, 1));     /* larger than a cell */
	ck_assert(!fragstore_put(s, 8, 0, frame, 10, 1));     /* no such slot */
	ck_assert(!fragstore_put(s, 0, 2, frame, 10, 1));     /* no such source */
	ck_assert(!fragstore_put(s, 0, 0, frame, 0, 1));      /* no frame */
	uint32_t len, crc;
	ck_assert_ptr_null(fragstore_frame(s, 0, 0, &len, &crc));
	ck_assert(fragstore_put(s, 3, 1, frame, 64, 77));
	const uint8_t *got = fragstore_frame(s, 3, 1, &len, &crc);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(len, 64);
	ck_assert_uint_eq(crc, 77);
	ck_assert_mem_eq(got, frame, 64);
	ck_assert_ptr_null(fragstore_frame(s, 3, 0, &len, &crc));
	fragstore_destroy(s);
	fragstore_destroy(NULL);
}
END_TEST

START_TEST(test_holds_and_release)
{
	struct fragstore *s = fragstore_create(130, 1, 16);
	uint8_t frame[16] = { 1, 2, 3 };
	ck_assert(fragstore_put(s, 129, 0, frame, 16, 0));
	ck_assert(!fragstore_held(s, 129));
	fragstore_hold(s, 129);
	fragstore_hold(s, 129);    /* once */
	fragstore_hold(s, 0);
	fragstore_hold(s, 200);    /* out of range: nothing */
	ck_assert(fragstore_held(s, 129) && fragstore_held(s, 0) && !fragstore_held(s, 64));
	ck_assert_uint_eq(fragstore_held_peak(s), 2);
	ck_assert_uint_eq(fragstore_release_all(s), 2);
	ck_assert(!fragstore_held(s, 129) && !fragstore_held(s, 0));
	uint32_t len, crc;
	ck_assert_ptr_null(fragstore_frame(s, 129, 0, &len, &crc));   /* released: cleared */
	ck_assert_uint_eq(fragstore_release_all(s), 0);
	ck_assert_uint_eq(fragstore_held_peak(s), 2);
	fragstore_destroy(s);
}
END_TEST

/* A core of 3 sources and a window of 4 feeding a store through on_unique. */
#define SOURCES 3u
#define WINDOW 4u

struct pairing {
	struct fragstore *store;
	const uint8_t *frame;      /* the frame bld_add is taking */
	uint32_t frame_bytes;
	uint32_t uniques;
	uint32_t complete;
	uint32_t held_seen;        /* on_unique found its slot held */
	uint32_t wrong;            /* a completed event's cells not its frames */
};

static void frame_of(uint8_t *dst, uint64_t event, uint16_t src, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		dst[i] = (uint8_t)(event * 31u + src * 7u + i);
}

static void pair_on_unique(void *ctx, uint32_t slot, const struct bld_fragment *f)
{
	struct pairing *p = ctx;
	p->uniques++;
	if (fragstore_held(p->store, slot)) {
		p->held_seen++;
		fragstore_release_all(p->store);   /* as a writer's flush would */
	}
	ck_assert(fragstore_put(p->store, slot, f->source_id, p->frame, p->frame_bytes, f->payload_crc));
}

static void pair_on_complete(void *ctx, const struct bld_event *e)
{
	struct pairing *p = ctx;
	p->complete++;
	for (uint16_t src = 0; src < SOURCES; src++) {
		uint32_t len, crc;
		const uint8_t *got = fragstore_frame(p->store, e->slot, src, &len, &crc);
		uint8_t want[64];
		frame_of(want, e->event_id, src, 20u + src);
		if (got == NULL || len != 20u + src || memcmp(got, want, len) != 0 || crc != src)
			p->wrong++;
	}
	fragstore_hold(p->store, e->slot);
}

START_TEST(test_core_and_store_together)
{
	struct pairing p = { .store = fragstore_create(WINDOW, SOURCES, 64) };
	struct bld_config cfg = { .run_id = 1, .sources = SOURCES, .window = WINDOW,
				  .filter_modulo = 1, .first_event = 0, .events = 0 };
	struct bld_sink sink = { .on_complete = pair_on_complete, .on_unique = pair_on_unique, .ctx = &p };
	struct bld *b = bld_create(&cfg, &sink);
	ck_assert_ptr_nonnull(b);
	uint8_t frame[64];
	uint64_t now = 1;
	/* 20 events, sources in turn, a duplicate of each first fragment. */
	for (uint64_t ev = 0; ev < 20; ev++) {
		for (uint16_t src = 0; src < SOURCES; src++) {
			frame_of(frame, ev, src, 20u + src);
			p.frame = frame;
			p.frame_bytes = 20u + src;
			struct bld_fragment f = { .run_id = 1, .source_id = src, .event_id = ev,
						  .timestamp_ns = now, .payload_len = 20u + src - 0u,
						  .payload_crc = src };
			ck_assert_int_eq(bld_add(b, &f, now++), BLD_UNIQUE);
			if (src == 0)
				ck_assert_int_eq(bld_add(b, &f, now++), BLD_DUPLICATE);
		}
	}
	ck_assert_uint_eq(p.uniques, 20u * SOURCES);
	ck_assert_uint_eq(p.complete, 20);
	ck_assert_uint_eq(p.wrong, 0);
	/* Nothing written between: the first event to reuse a held slot
	 * found it held and released all, once per window's worth. */
	ck_assert_uint_eq(p.held_seen, (20 - WINDOW) / WINDOW);
	bld_destroy(b);
	fragstore_destroy(p.store);
}
END_TEST

START_TEST(test_frames_kept_in_place)
{
	struct fragstore *s = fragstore_create(4, 2, 64);
	ck_assert_ptr_nonnull(s);
	uint8_t ring[2][64], big[65] = { 0 };
	memset(ring[0], 0x11, sizeof ring[0]);
	memset(ring[1], 0x22, sizeof ring[1]);
	ck_assert(!fragstore_put_ref(s, 0, 0, big, 65, 1));   /* larger than a cell */
	ck_assert(!fragstore_put_ref(s, 4, 0, ring[0], 8, 1)); /* no such slot */
	ck_assert(fragstore_put_ref(s, 1, 0, ring[0], 40, 5));
	ck_assert(fragstore_put_ref(s, 1, 1, ring[1], 64, 6));
	uint32_t len, crc;
	/* Read from where it lies, not from a copy. */
	ck_assert_ptr_eq(fragstore_frame(s, 1, 0, &len, &crc), ring[0]);
	ck_assert_uint_eq(len, 40);
	ck_assert_uint_eq(crc, 5);
	ck_assert(fragstore_refers(s, 1, 0, ring[0]));
	ck_assert(!fragstore_refers(s, 1, 0, ring[1]));
	ck_assert(!fragstore_refers(s, 1, 0, NULL));
	ck_assert(!fragstore_refers(s, 9, 0, ring[0]));
	/* Copied into the cell: it no longer refers to the ring, whose bytes
	 * may change, and the cell keeps them as they were. */
	fragstore_own(s, 1, 0);
	ck_assert(!fragstore_refers(s, 1, 0, ring[0]));
	memset(ring[0], 0x99, sizeof ring[0]);
	const uint8_t *got = fragstore_frame(s, 1, 0, &len, &crc);
	ck_assert_ptr_ne(got, ring[0]);
	ck_assert_uint_eq(len, 40);
	for (uint32_t i = 0; i < len; i++)
		ck_assert_uint_eq(got[i], 0x11);
	fragstore_own(s, 1, 0);     /* a copy already: nothing changes */
	ck_assert_ptr_eq(fragstore_frame(s, 1, 0, &len, &crc), got);
	/* Held and released: no longer referred to. */
	fragstore_hold(s, 1);
	ck_assert(fragstore_refers(s, 1, 1, ring[1]));
	ck_assert_uint_eq(fragstore_release_all(s), 1);
	ck_assert(!fragstore_refers(s, 1, 1, ring[1]));
	/* Cleared, or given another frame: the same. */
	ck_assert(fragstore_put_ref(s, 2, 0, ring[0], 8, 1));
	fragstore_clear(s, 2);
	ck_assert(!fragstore_refers(s, 2, 0, ring[0]));
	ck_assert(fragstore_put_ref(s, 3, 0, ring[0], 8, 1));
	ck_assert(fragstore_put(s, 3, 0, ring[1], 8, 1));
	ck_assert(!fragstore_refers(s, 3, 0, ring[0]));
	fragstore_destroy(s);
}
END_TEST

START_TEST(test_pins_in_order)
{
	struct pins p;
	ck_assert_int_eq(pins_init(&p, 0), -EINVAL);
	ck_assert_int_eq(pins_init(&p, 3), 0);
	ck_assert_ptr_null(pins_oldest(&p));
	pins_pop(&p);    /* empty: nothing */
	int frames[5];
	for (uint32_t round = 0; round < 4; round++) {
		/* Filled to its bound, then refused; emptied oldest first,
		 * each round starting further round the queue. */
		for (uint32_t i = 0; i < 3; i++)
			ck_assert(pins_push(&p, 100 * round + i, i, (uint16_t)round, &frames[i]));
		ck_assert(!pins_push(&p, 999, 9, 9, &frames[4]));
		ck_assert_uint_eq(pins_count(&p), 3);
		for (uint32_t i = 0; i < 3 - round % 2; i++) {
			const struct pin *o = pins_oldest(&p);
			ck_assert_ptr_nonnull(o);
			ck_assert_uint_eq(o->at, 100 * round + i);
			ck_assert_uint_eq(o->slot, i);
			ck_assert_uint_eq(o->src, round);
			ck_assert_ptr_eq(o->frame, &frames[i]);
			pins_pop(&p);
		}
		if (round % 2) {
			ck_assert_uint_eq(pins_oldest(&p)->at, 100 * round + 2);
			pins_pop(&p);
		}
		ck_assert_uint_eq(pins_count(&p), 0);
		ck_assert(pins_push(&p, 1, 1, 1, &frames[0]));
		pins_pop(&p);
	}
	pins_free(&p);
	ck_assert_ptr_null(p.queue);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fragstore");
	TCase *tc = tcase_create("store");
	tcase_add_test(tc, test_bad_sizes_and_frames);
	tcase_add_test(tc, test_holds_and_release);
	tcase_add_test(tc, test_core_and_store_together);
	tcase_add_test(tc, test_frames_kept_in_place);
	tcase_add_test(tc, test_pins_in_order);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
