/* The faults a source commits on purpose, for the tests of every error
 * path downstream (--inject: one bad frame, then the stream ends; --stall:
 * the stream stops delivering while the control link lives on). The seed's
 * faults (omitted, duplicated, delayed fragments) are core/gen's; these are
 * the ones the options ask for. */
#ifndef ES_SOURCED_FAULTS_H
#define ES_SOURCED_FAULTS_H

#include "options.h"
#include "report.h"
#include "stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* Whether the bad frame of --inject is due: inject_after good frames are
 * on the wire. */
bool fault_inject_due(const struct src_options *o, const struct src_counters *c);

/* Encodes the bad frame of o->inject (not SRC_INJECT_NONE or _NOEND) at
 * frame, whose room is that of a fragment, and returns its length. Pure:
 * the frame is that of event first_event, payload from the seed. */
size_t fault_encode_bad(const struct src_options *o, uint64_t sequence, uint64_t timestamp_ns,
			uint8_t *frame);

/* Appends the bad frame to the stream and counts it. */
void fault_inject(struct src_stream *st, const struct src_options *o, struct src_counters *c);

/* Whether --stall is due: stall_after frames are on the wire. */
bool fault_stall_due(const struct src_options *o, const struct src_counters *c);

struct fault_stall;

/* --stall from now on: the data stream delivers no complete frame again.
 * With dribble and a next fragment (has_next, event_id), that fragment goes
 * out a byte per 10 ms, never its last; blackhole sends nothing more. The
 * connection stays open. NULL when nothing is to be dribbled (or no memory
 * for the timer: the stall is then a blackhole). */
struct fault_stall *fault_stall_start(struct event_base *base, const struct src_options *o,
				    struct src_stream *st, const struct src_counters *c,
				    bool has_next, uint64_t event_id);

/* NULL is allowed. */
void fault_stall_free(struct fault_stall *stall);

#endif
