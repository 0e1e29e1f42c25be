/* The fragment store: a built event's fragments kept, as the wire frames
 * they arrived as, until the event is written (docs/RECORDING.md, "What a
 * builder holds"). One cell of cell_bytes per window slot and source, the
 * slot being the builder core's (core/builder.h): a pending event's
 * fragments are in its slot's cells, and no other event can use that slot
 * while it is pending. A completed event handed to a writer holds its slot
 * until the writer's batch is written; a new fragment for a held slot
 * must wait for that write (fragstore_held says so, the caller writes).
 *
 * Memory, all allocated by fragstore_create(): window x sources x
 * (cell_bytes + 16) bytes for the cells and their lengths and CRCs, plus
 * 4 x window bytes for the held list and window / 8 for its bitmap. The
 * frame is copied once, into its cell, and writers read it from there; or,
 * where its bytes stay put until written (a shared-memory ring's record),
 * the cell refers to them instead, and the frame is copied into the cell
 * only if they must be handed back before the write (fragstore_own).
 * Pure: no I/O, no allocation after create. */
#ifndef ES_CORE_FRAGSTORE_H
#define ES_CORE_FRAGSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fragstore;

/* NULL with errno set: EINVAL for a zero size or one whose product
 * overflows, ENOMEM. */
struct fragstore *fragstore_create(uint32_t window, uint16_t sources, uint32_t cell_bytes);
void fragstore_destroy(struct fragstore *s);

/* The memory it holds by construction (the bound of the comment above). */
uint64_t fragstore_bytes(const struct fragstore *s);
uint32_t fragstore_cell_bytes(const struct fragstore *s);

/* Copies one frame (header and payload, frame_bytes long) of source src
 * into slot's cell. false, nothing copied, when it does not fit the cell
 * or slot/src is out of range; the caller names the loss. The slot must
 * not be held. */
bool fragstore_put(struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame,
		   uint32_t frame_bytes, uint32_t payload_crc);

/* The same frame kept where it is: the cell refers to frame's bytes, which
 * the caller keeps unchanged until the cell no longer refers to them
 * (fragstore_refers) or it made the cell a copy (fragstore_own). */
bool fragstore_put_ref(struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame,
		       uint32_t frame_bytes, uint32_t payload_crc);

/* Whether slot's cell of src still refers to frame's bytes: false once the
 * slot was released, cleared, given another frame or made a copy. */
bool fragstore_refers(const struct fragstore *s, uint32_t slot, uint16_t src, const uint8_t *frame);

/* The frame the cell refers to copied into it: its bytes may go. */
void fragstore_own(struct fragstore *s, uint32_t slot, uint16_t src);

/* Source src's frame in slot: its bytes (NULL when the slot's event never
 * had one from src), *frame_bytes and *payload_crc. */
const uint8_t *fragstore_frame(const struct fragstore *s, uint32_t slot, uint16_t src,
			       uint32_t *frame_bytes, uint32_t *payload_crc);

/* Forgets slot's frames: the next event in the slot starts empty. */
void fragstore_clear(struct fragstore *s, uint32_t slot);

/* A completed event's slot is held from when it is handed on until its
 * write is over: its cells must not change. */
void fragstore_hold(struct fragstore *s, uint32_t slot);
bool fragstore_held(const struct fragstore *s, uint32_t slot);

/* Every held slot released (after a write), each cleared; the count. */
uint32_t fragstore_release_all(struct fragstore *s);

/* Slots held at most at once since create. */
uint32_t fragstore_held_peak(const struct fragstore *s);

#endif
