#include "core/fragstore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fragstore_cell {
	const uint8_t *ref;        /* the frame where it arrived; NULL: in the cell */
	uint32_t frame_bytes;      /* 0: no frame from this source */
	uint32_t payload_crc;
};

struct fragstore {
	uint32_t window;
	uint16_t sources;
	uint32_t cell_bytes;
	uint8_t *bytes;                  /* [window][sources][cell_bytes] */
	struct fragstore_cell *cells;    /* [window][sources] */
	uint64_t *held_bits;             /* [window / 64 rounded up] */
	uint32_t *held;                  /* [window], the held slots in order */
	uint32_t held_count;
	uint32_t held_peak;
};

struct fragstore *fragstore_create(uint32_t window, uint16_t sources, uint32_t cell_bytes)
{
	size_t cells;
	size_t bytes;
	if (window == 0 || sources == 0 || cell_bytes == 0 ||
	    __builtin_mul_overflow((size_t)window, (size_t)sources, &cells) ||
	    __builtin_mul_overflow(cells, (size_t)cell_bytes, &bytes)) {
		errno = EINVAL;
		return NULL;
	}
	struct fragstore *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->window = window;
	s->sources = sources;
	s->cell_bytes = cell_bytes;
	/* Not cleared: a cell is read only after its frame was put (its
	 * length says so), and untouched pages stay unmapped. */
	s->bytes = malloc(bytes);
	s->cells = calloc(cells, sizeof *s->cells);
	s->held_bits = calloc((window + 63u) / 64u, sizeof *s->held_bits);
	s->held = calloc(window, sizeof *s->held);
	if (s->bytes == NULL || s->cells == NULL || s->held_bits == NULL || s->held == NULL) {
		fragstore_destroy(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

void fragstore_destroy(struct fragstore *s)
{
	if (s == NULL)
		return;
	free(s->bytes);
	free(s->cells);
	free(s->held_bits);
	free(s->held);
	free(s);
}

uint64_t fragstore_bytes(const struct fragstore *s)
{
	uint64_t cells = (uint64_t)s->window * s->sources;
	return cells * (s->cell_bytes + sizeof(struct fragstore_cell)) +
	       (uint64_t)s->window * sizeof *s->held + (s->window + 63u) / 64u * 8u;
}

uint32_t fragstore_cell_bytes(const struct fragstore *s)
{
	return s->cell_bytes;
}

/* A frame of frame_bytes for a cell that exists and holds it. */
static bool fragstore_fits(const struct fragstore *s, uint32_t slot, uint16_t src,
			   uint32_t frame_bytes)
{
	return slot < s->window && src < s->sources && frame_bytes > 0 && frame_bytes <= s->cell_bytes;
}

bool fragstore_put(struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame,
		   uint32_t frame_bytes, uint32_t payload_crc)
{
	if (!fragstore_fits(s, slot, src, frame_bytes))
		return false;
	size_t at = (size_t)slot * s->sources + src;
	memcpy(s->bytes + at * s->cell_bytes, frame, frame_bytes);
	s->cells[at] = (struct fragstore_cell){ NULL, frame_bytes, payload_crc };
	return true;
}

bool fragstore_put_ref(struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame,
		       uint32_t frame_bytes, uint32_t payload_crc)
{
	if (!fragstore_fits(s, slot, src, frame_bytes))
		return false;
	s->cells[(size_t)slot * s->sources + src] = (struct fragstore_cell){ frame, frame_bytes, payload_crc };
	return true;
}

bool fragstore_refers(const struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame)
{
	return slot < s->window && src < s->sources && frame != NULL &&
	       s->cells[(size_t)slot * s->sources + src].ref == frame;
}

void fragstore_own(struct fragstore *s, uint32_t slot, uint16_t src)
{
	if (slot >= s->window || src >= s->sources)
		return;
	size_t at = (size_t)slot * s->sources + src;
	struct fragstore_cell *c = &s->cells[at];
	if (c->ref == NULL)
		return;
	memcpy(s->bytes + at * s->cell_bytes, c->ref, c->frame_bytes);
	c->ref = NULL;
}

const uint8_t *fragstore_frame(const struct fragstore *s, uint32_t slot, uint16_t src,
			       uint32_t *frame_bytes, uint32_t *payload_crc)
{
	if (slot >= s->window || src >= s->sources)
		return NULL;
	size_t at = (size_t)slot * s->sources + src;
	if (s->cells[at].frame_bytes == 0)
		return NULL;
	*frame_bytes = s->cells[at].frame_bytes;
	*payload_crc = s->cells[at].payload_crc;
	return s->cells[at].ref != NULL ? s->cells[at].ref : s->bytes + at * s->cell_bytes;
}

void fragstore_clear(struct fragstore *s, uint32_t slot)
{
	if (slot < s->window)
		memset(&s->cells[(size_t)slot * s->sources], 0, s->sources * sizeof *s->cells);
}

void fragstore_hold(struct fragstore *s, uint32_t slot)
{
	if (slot >= s->window || fragstore_held(s, slot))
		return;
	s->held_bits[slot / 64u] |= UINT64_C(1) << (slot % 64u);
	s->held[s->held_count++] = slot;
	if (s->held_count > s->held_peak)
		s->held_peak = s->held_count;
}

bool fragstore_held(const struct fragstore *s, uint32_t slot)
{
	return slot < s->window && (s->held_bits[slot / 64u] >> (slot % 64u)) & 1u;
}

uint32_t fragstore_release_all(struct fragstore *s)
{
	uint32_t n = s->held_count;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = s->held[i];
		s->held_bits[slot / 64u] &= ~(UINT64_C(1) << (slot % 64u));
		fragstore_clear(s, slot);
	}
	s->held_count = 0;
	return n;
}

uint32_t fragstore_held_peak(const struct fragstore *s)
{
	return s->held_peak;
}
