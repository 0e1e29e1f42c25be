/* sourced --replay RUN_DIR: the fragments a run recorded
 * (docs/event-file-format.md), this source's, sent again in place of
 * generated ones. Every closed event file under RUN_DIR (every builder's)
 * is mapped and verified whole at the start, and a damaged or open one is
 * refused by name before anything is sent; then the records are walked in
 * ascending event ID across the files, each asked for once. Nothing is
 * allocated once open. */
#ifndef ES_SOURCED_REPLAY_H
#define ES_SOURCED_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct src_replay;

/* What the recording holds, counted at the start. */
struct replay_summary {
	unsigned int files;
	uint64_t records;          /* event records in them */
	uint64_t fragments;        /* of them, this source's fragments */
	uint64_t first_event, last_event;   /* IDs of this source's fragments */
};

/* Maps and verifies RUN_DIR's event files. Fails (-errno, *error naming
 * the file and the problem) on no event file, a damaged or unclosed one,
 * or a payload of this source longer than max_payload_bytes. */
int replay_open(struct src_replay **out, const char *run_dir, uint16_t source,
		uint32_t max_payload_bytes, char *error, size_t error_size);

void replay_summary(const struct src_replay *r, struct replay_summary *out);

/* This source's recorded payload of event_id: true with *payload and *len,
 * or false when the recording has no fragment of it. IDs are asked in
 * ascending order; records of IDs passed over are skipped. */
bool replay_fragment(struct src_replay *r, uint64_t event_id, const uint8_t **payload,
		     uint32_t *len);

void replay_close(struct src_replay *r);

#endif
