/* A guard against SIGBUS from shared mappings. A segment cut short while
 * mapped (ftruncate by a confused or hostile process) turns the next access
 * to the lost pages into SIGBUS. Every guarded mapping is registered here;
 * the handler maps private zero pages over the lost part, so the access
 * completes on zeros instead of killing the daemon, and marks the mapping,
 * whose owner then reports the truncation at its next check. A SIGBUS
 * outside every guarded mapping does what it would have done without the
 * guard. The registry is process-wide; not thread-safe (one event loop). */
#ifndef ES_IO_SHMGUARD_H
#define ES_IO_SHMGUARD_H

#include <stdbool.h>
#include <stddef.h>

/* Mappings guarded at once; past it a mapping goes unguarded. */
#define SHG_MAX_GUARDED 64

/* Guards bytes at map (installing the handler on first use): the slot, or
 * -1 when every slot is taken. */
int shg_guard(void *map, size_t bytes);

/* Ends the guard of a slot before its mapping is unmapped; -1 is allowed. */
void shg_unguard(int slot);

/* Whether the mapping of slot lost pages since it was guarded (false for
 * -1). */
bool shg_truncated(int slot);

#endif
