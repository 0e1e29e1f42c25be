/* sourced's options: what a source is told (plain data), and the table,
 * declared once, that --help, the man page and the parsing come from (see
 * sys/opt.h). */
#ifndef ES_SOURCED_OPTIONS_H
#define ES_SOURCED_OPTIONS_H

#include "core/gen.h"
#include "io/daemon.h"
#include "sys/opt.h"

#include <stdbool.h>
#include <stdint.h>

/* A deliberately broken frame, for the tests of every reader error path. */
enum src_inject {
	SRC_INJECT_NONE,
	SRC_INJECT_CRC,       /* a payload byte flipped after the CRC */
	SRC_INJECT_MAGIC,
	SRC_INJECT_VERSION,
	SRC_INJECT_FLAGS,
	SRC_INJECT_LENGTH,    /* payload_len over 1 MiB, header only */
	SRC_INJECT_RUN,       /* a valid frame of run + 1 */
	SRC_INJECT_OLD_RUN,   /* a valid frame of run - 1: a stale one, after the run before */
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
	char replay_dir[4096];          /* --replay: a recorded run's directory; "" = generate */
	bool quiet;
};

/* Parses "crc@100"-style --inject values (options.c). */
bool src_parse_inject(const char *arg, enum src_inject *kind, uint64_t *after);

/* Parses "dribble@300"-style --stall values (options.c). */
bool src_parse_stall(const char *arg, enum src_stall *kind, uint64_t *after);

extern const struct opt_spec src_option_specs[];
extern const size_t src_option_count;
extern const char src_usage_synopsis[], src_usage_description[], src_usage_example[];

/* What no single option can check: --delay-every needs --delay-ms;
 * --replay sends what was recorded and takes none of the seed's faults. */
bool src_options_check(void *opts, const struct daemon_options *d);

#endif
