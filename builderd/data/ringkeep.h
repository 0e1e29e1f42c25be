/* The records of a reader's shared-memory ring that the recorder keeps in
 * place until their events are written (--record-keep in-place,
 * docs/RECORDING.md "What a builder holds"): which ones, oldest first
 * (core/pins.h), so that the link hands back to the reader only the bytes
 * before the oldest one still referred to, and copies that one into its
 * cell when the reader needs the room sooner. Private to builderd. */
#ifndef ES_BD_RINGKEEP_H
#define ES_BD_RINGKEEP_H

#include "data/ingest.h"

#include "core/pins.h"
#include "io/shmring.h"

#include <stdbool.h>
#include <stdint.h>

struct ringkeep {
	struct ingest *ing;
	struct pins pins;
};

/* Room for window x the reader's sources records: one per window cell.
 * -ENOMEM. */
int ringkeep_init(struct ringkeep *k, struct ingest *g, uint32_t records);
void ringkeep_free(struct ringkeep *k);
bool ringkeep_on(const struct ringkeep *k);

/* The record at ring position at (rec its bytes) was taken; kept: whether
 * the recorder keeps it in place. A full queue has it copied instead. */
void ringkeep_took(struct ringkeep *k, uint64_t at, const struct ingest_in_place *kept,
		   const void *rec);

/* Hands ring's records back to the reader up to position upto (what was
 * read), or to the oldest one still referred to. Kept records may span at
 * most a quarter of the ring, so that the reader always has room for its
 * largest record and the slack it waits for (io/shmring.h's
 * shr_wait_space): the oldest beyond that are copied out first. true when
 * more went back. */
bool ringkeep_release(struct ringkeep *k, struct shr_ring *ring, uint64_t upto);

/* Every record still referred to copied out: the ring is going. */
void ringkeep_own_all(struct ringkeep *k);

#endif
