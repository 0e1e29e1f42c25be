/* sourced: one readout sector of the event builder. Parses options and
 * wires the source to the event loop; see source.c. */
#include "sys/clock.h"
#include "io/daemon.h"
#include "sys/auth.h"
#include "sys/log.h"
#include "io/net.h"
#include "sys/opt.h"
#include "source.h"

#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
"Usage: sourced --id N --run R --seed S --events N --payload BYTES --rate EVENTS_PER_S\n"
"               --connect HOST:PORT --control HOST:PORT [options]\n"
"A readout sector: generates its event fragments deterministically and sends\n"
"them to its reader over TCP, then reports its counters to the builder.\n"
"\n"
"Run:\n"
"  --id N                  source ID (0 .. S-1)\n"
"  --run R                 run number\n"
"  --seed S                seed of the deterministic payloads and faults\n"
"  --events N              number of event IDs to generate\n"
"  --first-event N         first event ID (default 0)\n"
"  --payload BYTES         payload bytes per fragment (0 .. 1048576)\n"
"  --rate EVENTS_PER_S     paced rate; 0 sends as fast as the reader takes them\n"
"Faults (spec section 2; 0 disables):\n"
"  --missing-every N       omit fragments whose key %% N == 0\n"
"  --duplicate-every N     send some fragments twice\n"
"  --delay-every N         hold some fragments back ...\n"
"  --delay-ms D            ... for D ms while later ones go on\n"
"  --reorder               send event IDs in swapped pairs\n"
"Connections:\n"
"  --connect HOST:PORT     the reader's data port\n"
"  --control HOST:PORT     the builder's control port\n"
"  --connect-timeout-ms T  keep retrying connections, and greetings refused\n"
"                          busy or cut, this long (default 10000)\n"
"  --metrics-listen HOST:PORT  serve /metrics (Prometheus) and /status (JSON)\n"
"Testing:\n"
"  --inject KIND@N         after N good frames send a bad one and stop; KIND is\n"
"                          crc, magic, version, flags, length, run, truncate or noend\n"
"  --dribble               write one byte per system call\n"
"  --stall KIND@N          after N frames the data stream stops delivering while\n"
"                          the control link goes on: KIND dribble sends the next\n"
"                          frame one byte per 10 ms and never finishes it,\n"
"                          blackhole sends nothing more and keeps the connection open\n"
"  --clock-offset-ns N     add N ns to every clock reading (an unsynchronised host)\n"
"Security:\n"
"  --run-key-file PATH     secret shared by every daemon of the run (16+ bytes);\n"
"                          without it only peers on this host are accepted\n"
"Other:\n"
"  --batch-bytes B         send buffer, frames per write (default 262144)\n"
"  --max-delayed N         delayed fragments held at once (default 65536)\n"
"  --pace-tick-us T        a paced source wakes every T us, on a grid common to\n"
"                          every source of the run, and sends what is due (default 200)\n"
"  --quiet                 log warnings and errors only\n"
"  --help, --version\n"
"\n"
"Example:\n"
"  sourced --id 0 --run 1 --seed 42 --events 100000 --payload 256 --rate 10000 \\\n"
"          --connect 127.0.0.1:7000 --control 127.0.0.1:6999\n");
}

enum {
	OPT_ID = 256, OPT_RUN, OPT_SEED, OPT_EVENTS, OPT_FIRST, OPT_PAYLOAD, OPT_RATE, OPT_MISSING,
	OPT_DUPLICATE, OPT_DELAY_EVERY, OPT_DELAY_MS, OPT_REORDER, OPT_CONNECT, OPT_CONTROL,
	OPT_CONNECT_TIMEOUT, OPT_METRICS_LISTEN, OPT_INJECT, OPT_DRIBBLE, OPT_BATCH, OPT_MAX_DELAYED, OPT_PACE_TICK,
	OPT_STALL,
};

static const struct option long_options[] = {
	{ "id", required_argument, NULL, OPT_ID },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "events", required_argument, NULL, OPT_EVENTS },
	{ "first-event", required_argument, NULL, OPT_FIRST },
	{ "payload", required_argument, NULL, OPT_PAYLOAD },
	{ "rate", required_argument, NULL, OPT_RATE },
	{ "missing-every", required_argument, NULL, OPT_MISSING },
	{ "duplicate-every", required_argument, NULL, OPT_DUPLICATE },
	{ "delay-every", required_argument, NULL, OPT_DELAY_EVERY },
	{ "delay-ms", required_argument, NULL, OPT_DELAY_MS },
	{ "reorder", no_argument, NULL, OPT_REORDER },
	{ "connect", required_argument, NULL, OPT_CONNECT },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "connect-timeout-ms", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "inject", required_argument, NULL, OPT_INJECT },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "dribble", no_argument, NULL, OPT_DRIBBLE },
	{ "stall", required_argument, NULL, OPT_STALL },
	{ "batch-bytes", required_argument, NULL, OPT_BATCH },
	{ "max-delayed", required_argument, NULL, OPT_MAX_DELAYED },
	{ "pace-tick-us", required_argument, NULL, OPT_PACE_TICK },
	DAEMON_LONG_OPTIONS,
	{ NULL, 0, NULL, 0 },
};

static bool parse_options(int argc, char **argv, struct src_options *o)
{
	bool have_id = false, have_run = false, have_events = false, have_payload = false;
	bool have_rate = false, have_connect = false, have_control = false;
	struct daemon_options d = { .role = "sourced", .usage = usage };
	uint32_t u32;
	int c;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		enum daemon_option_result common = daemon_take_option(&d, c, optarg);
		if (common == DAEMON_OPTION_BAD)
			return false;
		if (common == DAEMON_OPTION_TAKEN)
			continue;
		bool ok = true;
		switch (c) {
		case OPT_ID: ok = have_id = opt_u32("--id", optarg, 0, 65535, &o->id); break;
		case OPT_RUN: ok = have_run = opt_u32("--run", optarg, 0, UINT32_MAX, &o->run_id); break;
		case OPT_SEED: ok = opt_u64("--seed", optarg, 0, UINT64_MAX, &o->seed); break;
		case OPT_EVENTS: ok = have_events = opt_u64("--events", optarg, 0, UINT64_MAX / 2, &o->events); break;
		case OPT_FIRST: ok = opt_u64("--first-event", optarg, 0, UINT64_MAX / 2, &o->first_event); break;
		case OPT_PAYLOAD: ok = have_payload = opt_u32("--payload", optarg, 0, 1048576, &o->payload_bytes); break;
		case OPT_RATE: ok = have_rate = opt_u64("--rate", optarg, 0, 1000000000, &o->rate); break;
		case OPT_MISSING: ok = opt_u64("--missing-every", optarg, 0, UINT64_MAX, &o->faults.missing_every); break;
		case OPT_DUPLICATE: ok = opt_u64("--duplicate-every", optarg, 0, UINT64_MAX, &o->faults.duplicate_every); break;
		case OPT_DELAY_EVERY: ok = opt_u64("--delay-every", optarg, 0, UINT64_MAX, &o->faults.delay_every); break;
		case OPT_DELAY_MS: ok = opt_u32("--delay-ms", optarg, 0, 3600000, &o->faults.delay_ms); break;
		case OPT_REORDER: o->faults.reorder = true; break;
		case OPT_CONNECT:
			ok = have_connect = opt_hostport("--connect", optarg, o->data_host,
							 sizeof o->data_host, &o->data_port, false);
			break;
		case OPT_CONTROL:
			ok = have_control = opt_hostport("--control", optarg, o->control_host,
							 sizeof o->control_host, &o->control_port, false);
			break;
		case OPT_CONNECT_TIMEOUT: ok = opt_u64("--connect-timeout-ms", optarg, 1, 86400000, &o->connect_timeout_ms); break;
		case OPT_METRICS_LISTEN:
			ok = opt_hostport("--metrics-listen", optarg, o->metrics_host,
					  sizeof o->metrics_host, &o->metrics_port, true);
			break;
		case OPT_INJECT:
			ok = src_parse_inject(optarg, &o->inject, &o->inject_after);
			if (!ok)
				opt_error("--inject", "expected KIND@N with KIND one of crc, magic, version, flags, length, run, truncate, noend, got '%s'", optarg);
			break;
		case OPT_DRIBBLE: o->dribble = true; break;
		case OPT_STALL:
			ok = src_parse_stall(optarg, &o->stall, &o->stall_after);
			if (!ok)
				opt_error("--stall", "expected KIND@N with KIND dribble or blackhole, got '%s'", optarg);
			break;
		case OPT_BATCH: ok = opt_u32("--batch-bytes", optarg, 64, 64u << 20, &o->batch_bytes); break;
		case OPT_PACE_TICK: ok = opt_u32("--pace-tick-us", optarg, 1, 1000000, &o->pace_tick_us); break;
		case OPT_MAX_DELAYED: ok = opt_u32("--max-delayed", optarg, 1, 1u << 24, &u32); o->max_delayed = u32; break;
		default: usage(stderr); return false;
		}
		if (!ok)
			return false;
	}
	const char *missing = !have_id ? "--id" : !have_run ? "--run" : !have_events ? "--events"
		: !have_payload ? "--payload" : !have_rate ? "--rate" : !have_connect ? "--connect"
		: !have_control ? "--control" : NULL;
	if (!daemon_options_complete(&d, argc, argv, missing))
		return false;
	o->quiet = d.quiet;
	if ((o->faults.delay_every != 0) != (o->faults.delay_ms != 0) && o->faults.delay_every != 0) {
		fprintf(stderr, "sourced: --delay-every needs --delay-ms\n");
		return false;
	}
	if (!daemon_apply_common(d.run_key_file, d.clock_offset_ns))
		return false;
	return true;
}

static void stop_source(void *arg, const char *why)
{
	(void)why;
	src_stop(arg);
}

int main(int argc, char **argv)
{
	struct src_options o = {
		.connect_timeout_ms = 10000,
		.batch_bytes = 262144,
		.max_delayed = 65536,
		.pace_tick_us = 200,
	};
	if (!parse_options(argc, argv, &o))
		return 2;
	daemon_start_log("sourced", (int)o.id, o.quiet);
	/* Paced sources sleep tens of microseconds: the default 50 us of timer
	 * slack would be most of the tick. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	struct event_base *base = daemon_base_new();
	struct src *source = base ? src_create(base, &o) : NULL;
	if (source == NULL) {
		log_error("Cannot allocate the source's buffers");
		return 1;
	}
	daemon_run(base, stop_source, source);
	int status = src_exit_status(source);
	src_destroy(source);
	event_base_free(base);
	return status;
}
