/* Frames kept in place: a link whose frames stay put until it hands their
 * bytes back (a shared-memory ring's records) lets the fragment store refer
 * to them instead of copying them (core/fragstore.h). Here are those frames
 * in arrival order, each with where it starts in the link's stream and the
 * window cell that may refer to it, so the link hands back everything
 * before the oldest one still referred to, and copies that one into its
 * cell when it needs the room sooner.
 *
 * Memory, all allocated by pins_init(): capacity x 24 bytes. A cell refers
 * to one frame at a time, so window x the link's sources is enough. Pure:
 * no I/O, no allocation after init. */
#ifndef ES_CORE_PINS_H
#define ES_CORE_PINS_H

#include <stdbool.h>
#include <stdint.h>

struct pin {
	uint64_t at;        /* where its frame's place starts in the link's stream */
	const void *frame;  /* its bytes */
	uint32_t slot;
	uint16_t src;
};

struct pins {
	struct pin *queue;
	uint32_t capacity, head, count;
};

/* -ENOMEM, -EINVAL for a capacity of 0. */
int pins_init(struct pins *p, uint32_t capacity);
void pins_free(struct pins *p);

/* false when full: the caller copies the frame into its cell instead. */
bool pins_push(struct pins *p, uint64_t at, uint32_t slot, uint16_t src, const void *frame);

/* The oldest frame still in the queue, or NULL. */
const struct pin *pins_oldest(const struct pins *p);
void pins_pop(struct pins *p);

static inline uint32_t pins_count(const struct pins *p)
{
	return p->count;
}

#endif
