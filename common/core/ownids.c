#include "core/ownids.h"

#include <errno.h>
#include <stdlib.h>

struct ownids_run {
	uint64_t first;    /* global */
	uint64_t local;    /* local ID of first */
	uint64_t count;
};

struct ownids {
	struct ownids_run *runs;   /* ring of capacity, oldest at head */
	uint32_t capacity;
	uint32_t head;
	uint32_t n;
	uint64_t next_local;
	uint64_t end;              /* global end of the newest run */
	uint64_t forgotten_end;    /* global end of the newest forgotten run */
};

const char *ownids_verdict_name(enum ownids_verdict v)
{
	switch (v) {
	case OWNIDS_MINE:
		return "mine";
	case OWNIDS_OTHER:
		return "other";
	case OWNIDS_FORGOTTEN:
		return "forgotten";
	case OWNIDS_AHEAD:
		return "ahead";
	}
	return "unknown";
}

struct ownids *ownids_create(uint32_t capacity)
{
	if (capacity == 0 || capacity > OWNIDS_MAX_CAPACITY) {
		errno = EINVAL;
		return NULL;
	}
	struct ownids *o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	o->runs = calloc(capacity, sizeof *o->runs);
	if (o->runs == NULL) {
		free(o);
		errno = ENOMEM;
		return NULL;
	}
	o->capacity = capacity;
	return o;
}

void ownids_destroy(struct ownids *o)
{
	if (o == NULL)
		return;
	free(o->runs);
	free(o);
}

/* The i-th run remembered, oldest first. */
static const struct ownids_run *ownids_at(const struct ownids *o, uint32_t i)
{
	return &o->runs[(o->head + i) % o->capacity];
}

int ownids_add(struct ownids *o, uint64_t first, uint32_t count)
{
	if (count == 0 || (o->n > 0 && first < o->end) || first > UINT64_MAX - count)
		return -EINVAL;
	if (o->n == o->capacity) {
		const struct ownids_run *old = ownids_at(o, 0);
		o->forgotten_end = old->first + old->count;
		o->head = (o->head + 1) % o->capacity;
		o->n--;
	}
	struct ownids_run *r = &o->runs[(o->head + o->n) % o->capacity];
	*r = (struct ownids_run){ .first = first, .local = o->next_local, .count = count };
	o->n++;
	o->next_local += count;
	o->end = first + count;
	return 0;
}

enum ownids_verdict ownids_to_local(const struct ownids *o, uint64_t global, uint64_t *local)
{
	if (o->n == 0 || global >= o->end)
		return global < o->forgotten_end ? OWNIDS_FORGOTTEN : OWNIDS_AHEAD;
	if (global < o->forgotten_end)
		return OWNIDS_FORGOTTEN;
	/* The last run whose first is at or below global. */
	uint32_t lo = 0, hi = o->n;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ownids_at(o, mid)->first <= global)
			lo = mid;
		else
			hi = mid;
	}
	const struct ownids_run *r = ownids_at(o, lo);
	if (global < r->first || global - r->first >= r->count)
		return OWNIDS_OTHER;
	*local = r->local + (global - r->first);
	return OWNIDS_MINE;
}

bool ownids_to_global(const struct ownids *o, uint64_t local, uint64_t *global)
{
	if (o->n == 0 || local >= o->next_local || local < ownids_at(o, 0)->local)
		return false;
	uint32_t lo = 0, hi = o->n;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ownids_at(o, mid)->local <= local)
			lo = mid;
		else
			hi = mid;
	}
	const struct ownids_run *r = ownids_at(o, lo);
	*global = r->first + (local - r->local);
	return true;
}

uint64_t ownids_count(const struct ownids *o)
{
	return o->next_local;
}

uint64_t ownids_end(const struct ownids *o)
{
	return o->end;
}

uint32_t ownids_runs(const struct ownids *o)
{
	return o->n;
}

size_t ownids_memory_bytes(const struct ownids *o)
{
	return sizeof *o + (size_t)o->capacity * sizeof *o->runs;
}
