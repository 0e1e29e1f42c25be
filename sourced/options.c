#include "options.h"

#include <stdio.h>

const char src_usage_synopsis[] =
	"--id N --run R --seed S --events N --payload BYTES --rate EVENTS_PER_S\n"
	"--connect HOST:PORT --control HOST:PORT [options]";

const char src_usage_description[] =
	"A readout sector: generates its event fragments deterministically and sends\n"
	"them to its reader over TCP, then reports its counters to the builder.";

const char src_usage_example[] =
	"  sourced --id 0 --run 1 --seed 42 --events 100000 --payload 256 --rate 10000 \\\n"
	"          --connect 127.0.0.1:7000 --control 127.0.0.1:6999\n";

bool src_parse_stall(const char *arg, enum src_stall *kind, uint64_t *after)
{
	static const char *const names[] = { "dribble", "blackhole" };
	size_t k;
	if (!opt_kind_at(arg, names, 2, &k, after))
		return false;
	*kind = k == 0 ? SRC_STALL_DRIBBLE : SRC_STALL_BLACKHOLE;
	return true;
}

bool src_parse_inject(const char *arg, enum src_inject *kind, uint64_t *after)
{
	static const char *const names[] = { "crc", "magic", "version", "flags",
					     "length", "run", "oldrun", "truncate", "noend" };
	static const enum src_inject kinds[] = { SRC_INJECT_CRC, SRC_INJECT_MAGIC,
						 SRC_INJECT_VERSION, SRC_INJECT_FLAGS,
						 SRC_INJECT_LENGTH, SRC_INJECT_RUN, SRC_INJECT_OLD_RUN,
						 SRC_INJECT_TRUNCATE, SRC_INJECT_NOEND };
	size_t k;
	if (!opt_kind_at(arg, names, sizeof names / sizeof names[0], &k, after))
		return false;
	*kind = kinds[k];
	return true;
}

static bool src_take_inject(const char *flag, const char *arg, void *opts)
{
	struct src_options *o = opts;
	if (src_parse_inject(arg, &o->inject, &o->inject_after))
		return true;
	opt_error(flag, "expected KIND@N with KIND one of crc, magic, version, flags, length, run, truncate, noend, got '%s'", arg);
	return false;
}

static bool src_take_stall(const char *flag, const char *arg, void *opts)
{
	struct src_options *o = opts;
	if (src_parse_stall(arg, &o->stall, &o->stall_after))
		return true;
	opt_error(flag, "expected KIND@N with KIND dribble or blackhole, got '%s'", arg);
	return false;
}

#define O struct src_options

const struct opt_spec src_option_specs[] = {
	OPT_UINT("id", "N", O, id, 0, 65535, .fixed = true, .required = true, .group = "Run",
		 .help = "source ID (0 .. S-1)"),
	OPT_UINT("run", "R", O, run_id, 0, UINT32_MAX, .required = true, .help = "run number"),
	OPT_UINT("seed", "S", O, seed, 0, UINT64_MAX,
		 .help = "seed of the deterministic payloads and faults"),
	OPT_UINT("events", "N", O, events, 0, UINT64_MAX / 2, .required = true,
		 .help = "number of event IDs to generate"),
	OPT_UINT("first-event", "N", O, first_event, 0, UINT64_MAX / 2, .def = "0",
		 .help = "first event ID (default {default})"),
	OPT_UINT("payload", "BYTES", O, payload_bytes, 0, 1048576, .required = true,
		 .help = "payload bytes per fragment (0 .. 1048576)"),
	OPT_UINT("rate", "EVENTS_PER_S", O, rate, 0, 1000000000, .required = true,
		 .help = "paced rate; 0 sends as fast as the reader takes them"),
	OPT_UINT("missing-every", "N", O, faults.missing_every, 0, UINT64_MAX,
		 .group = "Faults (spec section 2; 0 disables)",
		 .help = "omit fragments whose key % N == 0"),
	OPT_UINT("duplicate-every", "N", O, faults.duplicate_every, 0, UINT64_MAX,
		 .help = "send some fragments twice"),
	OPT_UINT("delay-every", "N", O, faults.delay_every, 0, UINT64_MAX,
		 .help = "hold some fragments back ..."),
	OPT_UINT("delay-ms", "D", O, faults.delay_ms, 0, 3600000,
		 .help = "... for D ms while later ones go on"),
	OPT_FLAG("reorder", O, faults.reorder, .help = "send event IDs in swapped pairs"),
	OPT_STRING("replay", "RUN_DIR", O, replay_dir, .group = "Replay",
		   .help = "send this source's fragments as a run recorded them in\n"
			   "RUN_DIR's event files (payloads as recorded, new\n"
			   "timestamps, this run's number), paced by --rate; an\n"
			   "event ID the recording lacks is omitted. --payload is\n"
			   "the largest recorded payload allowed"),
	OPT_HOSTPORT("connect", "HOST:PORT", O, data_host, data_port, 1, .fixed = true, .required = true,
		     .group = "Connections", .help = "the reader's data port"),
	OPT_HOSTPORT("control", "HOST:PORT", O, control_host, control_port, 1, .fixed = true, .required = true,
		     .help = "the builder's control port"),
	DAEMON_OPT_CONNECT_TIMEOUT(O),
	DAEMON_OPT_METRICS_LISTEN(O, .fixed = true),
	OPT_CUSTOM("inject", "KIND@N", src_take_inject, .group = "Testing",
		   .help = "after N good frames send a bad one and stop; KIND is\n"
			   "crc, magic, version, flags, length, run, oldrun (a\n"
			   "frame of the run before, as a stale one), truncate or noend"),
	OPT_FLAG("dribble", O, dribble, .help = "write one byte per system call"),
	OPT_CUSTOM("stall", "KIND@N", src_take_stall,
		   .help = "after N frames the data stream stops delivering while\n"
			   "the control link goes on: KIND dribble sends the next\n"
			   "frame one byte per 10 ms and never finishes it,\n"
			   "blackhole sends nothing more and keeps the connection open"),
	OPT_UINT("batch-bytes", "B", O, batch_bytes, 64, 64u << 20, .def = "262144",
		 .group = "Tuning", .help = "send buffer, frames per write (default {default})"),
	OPT_UINT("max-delayed", "N", O, max_delayed, 1, 1u << 24, .def = "65536",
		 .help = "delayed fragments held at once (default {default})"),
	OPT_UINT("pace-tick-us", "T", O, pace_tick_us, 1, 1000000, .def = "200",
		 .help = "a paced source wakes every T us, on a grid common to\n"
			 "every source of the run, and sends what is due (default {default})"),
};
const size_t src_option_count = sizeof src_option_specs / sizeof src_option_specs[0];

bool src_options_check(void *opts, const struct daemon_options *d)
{
	(void)d;
	const struct src_options *o = opts;
	if (o->faults.delay_every != 0 && o->faults.delay_ms == 0) {
		fprintf(stderr, "sourced: --delay-every needs --delay-ms\n");
		return false;
	}
	if (o->replay_dir[0] != '\0' && (o->faults.missing_every || o->faults.duplicate_every ||
					   o->faults.delay_every || o->faults.reorder)) {
		fprintf(stderr, "sourced: --replay sends what was recorded: it takes none of "
				"--missing-every, --duplicate-every, --delay-every, --reorder\n");
		return false;
	}
	return true;
}
