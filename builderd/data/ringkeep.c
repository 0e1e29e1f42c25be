#include "data/ringkeep.h"

#include <errno.h>

int ringkeep_init(struct ringkeep *k, struct ingest *g, uint32_t records)
{
	k->ing = g;
	return pins_init(&k->pins, records > 0 ? records : 1);
}

void ringkeep_free(struct ringkeep *k)
{
	pins_free(&k->pins);
}

bool ringkeep_on(const struct ringkeep *k)
{
	return k->pins.queue != NULL;
}

static struct ingest_in_place ringkeep_kept(const struct pin *p)
{
	return (struct ingest_in_place){ .kept = true, .slot = p->slot, .src = p->src };
}

void ringkeep_took(struct ringkeep *k, uint64_t at, const struct ingest_in_place *kept,
		   const void *rec)
{
	if (kept->kept && !pins_push(&k->pins, at, kept->slot, kept->src, rec))
		ingest_own(k->ing, kept);
}

bool ringkeep_release(struct ringkeep *k, struct shr_ring *ring, uint64_t upto)
{
	uint64_t span = shr_capacity(ring) / 4;
	for (const struct pin *p; (p = pins_oldest(&k->pins)) != NULL; pins_pop(&k->pins)) {
		struct ingest_in_place kept = ringkeep_kept(p);
		if (ingest_refers(k->ing, &kept, p->frame)) {
			if (upto - p->at <= span) {
				upto = p->at;
				break;
			}
			ingest_own(k->ing, &kept);
		}
	}
	uint64_t before = shr_released_position(ring);
	shr_release_to(ring, upto);
	return shr_released_position(ring) != before;
}

void ringkeep_own_all(struct ringkeep *k)
{
	for (const struct pin *p; (p = pins_oldest(&k->pins)) != NULL; pins_pop(&k->pins)) {
		struct ingest_in_place kept = ringkeep_kept(p);
		if (ingest_refers(k->ing, &kept, p->frame))
			ingest_own(k->ing, &kept);
	}
}
