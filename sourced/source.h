/* One readout sector: generates its fragments deterministically, applies the
 * seed's faults, paces them and streams them to its reader in batches; then
 * reports its counters to the builder. */
#ifndef ES_SOURCE_H
#define ES_SOURCE_H

#include "core/gen.h"

#include <stdbool.h>
#include <stdint.h>

struct event_base;

/* A deliberately broken frame, for the tests of every reader error path. */
enum src_inject {
	SRC_INJECT_NONE,
	SRC_INJECT_CRC,       /* a payload byte flipped after the CRC */
	SRC_INJECT_MAGIC,
	SRC_INJECT_VERSION,
	SRC_INJECT_FLAGS,
	SRC_INJECT_LENGTH,    /* payload_len over 1 MiB, header only */
	SRC_INJECT_RUN,       /* a valid frame of run + 1 */
	SRC_INJECT_TRUNCATE,  /* half a frame, then close */
	SRC_INJECT_NOEND,     /* close without an END frame */
};

/* A data stream that stops delivering while the control link lives on, for
 * the tests of the reader's inactivity limit and the builder's watchdog. */
enum src_stall {
	SRC_STALL_NONE,
	SRC_STALL_DRIBBLE,    /* the next frame one byte per 10 ms, never finished */
	SRC_STALL_BLACKHOLE,  /* nothing more, the connection left open */
};

struct src_options {
	uint32_t id;
	uint32_t run_id;
	uint64_t seed;
	uint64_t events;
	uint64_t first_event;
	uint32_t payload_bytes;
	uint64_t rate;                  /* events/s; 0 = as fast as the reader takes them */
	struct gen_faults faults;
	char data_host[256];
	uint16_t data_port;
	char control_host[256];
	uint16_t control_port;
	char metrics_host[256];         /* --metrics-listen; "" = off */
	uint16_t metrics_port;
	uint64_t connect_timeout_ms;
	enum src_inject inject;
	uint64_t inject_after;          /* good data frames before the bad one */
	bool dribble;                   /* one byte per write() */
	enum src_stall stall;
	uint64_t stall_after;           /* frames on the wire before the stall */
	uint32_t batch_bytes;           /* send buffer: frames per write() */
	uint32_t max_delayed;           /* delayed fragments held at once */
	uint32_t pace_tick_us;          /* paced sources wake on this grid */
	bool quiet;
};

/* Parses "crc@100"-style --inject values. */
bool src_parse_inject(const char *arg, enum src_inject *kind, uint64_t *after);

/* Parses "dribble@300"-style --stall values. */
bool src_parse_stall(const char *arg, enum src_stall *kind, uint64_t *after);

struct src;

struct src *src_create(struct event_base *base, const struct src_options *opt);
void src_destroy(struct src *s);

/* Stops generating: what is not yet sent counts as abandoned. */
void src_stop(struct src *s);

/* The daemon's exit status once the loop has ended. */
int src_exit_status(const struct src *s);

#endif
