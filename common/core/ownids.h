/* A builder's own numbering of the event IDs the hub assigned it
 * (docs/BUILDERS.md, "The builders"): its k-th assigned ID is local ID k,
 * so the builder core, with its window of consecutive IDs, works on the
 * builder's own events only, while records and the books carry the global
 * ID. Pure: no I/O, no clock, nothing allocated after ownids_create().
 *
 * The builder's assignments arrive in ID order, each a run of consecutive
 * global IDs [first, first + count), and are kept in a ring of `capacity`
 * runs, the newest ones; when it is full the oldest run is forgotten. A
 * global ID is then
 *   - mine, at local ID L, when it lies in a run remembered;
 *   - another builder's, when it lies below the newest run's end and at or
 *     past the end of the newest forgotten run, but in none of mine (every
 *     ID below the last assignment is assigned to exactly one builder);
 *   - forgotten, below the end of the newest forgotten run: it may have
 *     been mine or not, and is too old to matter (the caller sizes the ring
 *     so that a forgotten ID of its own is one its core would call late);
 *   - ahead, at or past the newest run's end: nobody told us yet.
 * The caller decides "not yet assigned" from the hub's assigned_end
 * (core/route), which an ID between my last run and it is another's.
 * Lookups are binary searches over the runs remembered, O(log capacity).
 * Memory: 24 bytes per run. */
#ifndef ES_CORE_OWNIDS_H
#define ES_CORE_OWNIDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OWNIDS_MAX_CAPACITY (1u << 24)

enum ownids_verdict {
	OWNIDS_MINE,       /* *local set */
	OWNIDS_OTHER,      /* assigned to another builder */
	OWNIDS_FORGOTTEN,  /* below what the ring remembers */
	OWNIDS_AHEAD,      /* past every run given so far */
};

/* "mine", "other", "forgotten", "ahead". */
const char *ownids_verdict_name(enum ownids_verdict v);

struct ownids;

/* A map remembering capacity (1 .. OWNIDS_MAX_CAPACITY) runs. NULL with
 * errno EINVAL or ENOMEM. */
struct ownids *ownids_create(uint32_t capacity);
void ownids_destroy(struct ownids *o);

/* The next run of mine: global IDs [first, first + count) become local IDs
 * [ownids_count(), ownids_count() + count). -EINVAL: count 0, first below
 * the end of the previous run, or first + count past 2^64. Nothing changes
 * on an error. */
int ownids_add(struct ownids *o, uint64_t first, uint32_t count);

/* What global is (above). */
enum ownids_verdict ownids_to_local(const struct ownids *o, uint64_t global, uint64_t *local);

/* The global ID of local ID local; false when it is not remembered (forgotten,
 * or not given yet). */
bool ownids_to_global(const struct ownids *o, uint64_t local, uint64_t *global);

/* Local IDs given so far: the IDs assigned to this builder in all. */
uint64_t ownids_count(const struct ownids *o);

/* One past the last global ID of the newest run; 0 before any. */
uint64_t ownids_end(const struct ownids *o);

/* Runs remembered now, and the bytes ownids_create() allocated. */
uint32_t ownids_runs(const struct ownids *o);
size_t ownids_memory_bytes(const struct ownids *o);

#endif
