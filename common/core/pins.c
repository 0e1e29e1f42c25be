#include "core/pins.h"

#include <errno.h>
#include <stdlib.h>

int pins_init(struct pins *p, uint32_t capacity)
{
	*p = (struct pins){ 0 };
	if (capacity == 0)
		return -EINVAL;
	p->queue = calloc(capacity, sizeof *p->queue);
	if (p->queue == NULL)
		return -ENOMEM;
	p->capacity = capacity;
	return 0;
}

void pins_free(struct pins *p)
{
	free(p->queue);
	*p = (struct pins){ 0 };
}

bool pins_push(struct pins *p, uint64_t at, uint32_t slot, uint16_t src, const void *frame)
{
	if (p->count == p->capacity)
		return false;
	uint32_t i = p->head + p->count;
	if (i >= p->capacity)
		i -= p->capacity;
	p->queue[i] = (struct pin){ at, frame, slot, src };
	p->count++;
	return true;
}

const struct pin *pins_oldest(const struct pins *p)
{
	return p->count > 0 ? &p->queue[p->head] : NULL;
}

void pins_pop(struct pins *p)
{
	if (p->count == 0)
		return;
	p->head = p->head + 1 == p->capacity ? 0 : p->head + 1;
	p->count--;
}
