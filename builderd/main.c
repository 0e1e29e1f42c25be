/* builderd: the event builder and the run's control hub. Parses options and
 * wires the run to the event loop; see run.c. */
#include "core/builder.h"
#include "sys/clock.h"
#include "io/daemon.h"
#include "wire/frame.h"
#include "sys/auth.h"
#include "sys/log.h"
#include "io/net.h"
#include "sys/opt.h"
#include "run.h"
#include "io/shmlink.h"
#include "io/shmring.h"

#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
"Usage: builderd --run R --sources S --readers N --listen HOST:PORT\n"
"                --control-listen HOST:PORT --out DIR [options]\n"
"The event builder: assembles each event from one fragment per source,\n"
"filters and records it, gathers every daemon's final counters and checks\n"
"the conservation equations. Exits 0 only when every equation balances and\n"
"no error occurred, 1 for a failed run, 2 for a usage error.\n"
"\n"
"Run:\n"
"  --run R                 run number\n"
"  --sources S             number of sources (IDs 0 .. S-1)\n"
"  --readers N             number of readers (IDs 0 .. N-1)\n"
"  --first-event N         lowest event ID of the run (default 0)\n"
"  --events N              number of event IDs, when known (default: from the sources)\n"
"Connections:\n"
"  --listen HOST:PORT      data port for the readers (port 0: any free port)\n"
"  --control-listen HOST:PORT  control port for every daemon\n"
"  --port-file PATH        write 'data PORT' and 'control PORT' there once listening\n"
"  --metrics-listen HOST:PORT  serve /metrics (Prometheus) and /status (JSON)\n"
"  --peer-timeout-ms T     a peer not connected after T ms ends the run with an\n"
"                          error; no progress for T ms gives up by name the sources\n"
"                          that have not ended and ends the run once the readers\n"
"                          have reported, or --stall-timeout-ms later (default 10000)\n"
"  --handshake-timeout-ms T  drop a connection whose greeting is not done\n"
"                          T ms after its accept (default 5000)\n"
"  --stall-timeout-ms T    a peer silent this long (it answers clock probes every\n"
"                          200 ms) is given up as stalled (default 2000)\n"
"  --shm-listen NAME       readers on this host may forward through shared-memory\n"
"                          rings (readoutd --builder shm://NAME); one ring per\n"
"                          reader, /dev/shm/es-NAME-r<id>, removed once attached\n"
"  --shm-capacity BYTES    bytes of each ring (default 4Mi); rounded up to a power\n"
"                          of two that holds two frames of --max-fragment\n"
"Building:\n"
"  --max-inflight W        window of event IDs in flight (default 4096)\n"
"  --timeout-ms T          an incomplete event expires T ms after its first\n"
"                          fragment (default 1000; 0 = never)\n"
"  --skip-timeout-ms T     sooner, T ms after its first fragment, for the\n"
"                          oldest undecided event once every source it lacks\n"
"                          has sent later events: they skipped it (default\n"
"                          100; 0 = wait for --timeout-ms). Keep T above any\n"
"                          delay a source puts on single fragments\n"
"  --no-admission          do not limit readers with credits (for comparison)\n"
"  --filter-modulo M       accept an event when its CRC %% M == 0 (default 1)\n"
"  --filter-cost-us U      spend U us of CPU per complete event (default 0)\n"
"  --max-fragment BYTES    largest payload accepted (default 1048576)\n"
"Output:\n"
"  --out DIR               events.jsonl, expired.jsonl and metrics.json go here\n"
"  --flush-every N         at most N records per write (default 256)\n"
"  --batch-bytes B         bytes read per call per reader (default 262144)\n"
"  --socket-buffer B       kernel buffers of reader connections (default: autotuned)\n"
"Security:\n"
"  --run-key-file PATH     secret shared by every daemon of the run (16+ bytes);\n"
"                          without it only peers on this host are accepted\n"
"Other:\n"
"  --clock-offset-ns N     add N ns to every clock reading (an unsynchronised host)\n"
"  --no-clock-correction   measure peers' clock offsets but do not apply them to\n"
"                          latencies; metrics.json shows the error left in\n"
"  --quiet                 log warnings and errors only\n"
"  --help, --version\n"
"Environment:\n"
"  ES_CHRONY_SOCKET=PATH   chronyd command socket for this host's chrony reads\n"
"                          (chronyc -h PATH; every daemon honours it)\n"
"\n"
"Example:\n"
"  builderd --run 1 --sources 4 --readers 2 --listen 127.0.0.1:7100 \\\n"
"           --control-listen 127.0.0.1:6999 --out runs/1\n");
}

enum {
	OPT_RUN = 256, OPT_SOURCES, OPT_READERS, OPT_FIRST, OPT_EVENTS, OPT_LISTEN, OPT_CONTROL_LISTEN,
	OPT_PORT_FILE, OPT_METRICS_LISTEN, OPT_PEER_TIMEOUT, OPT_HANDSHAKE_TIMEOUT, OPT_STALL_TIMEOUT, OPT_MAX_INFLIGHT, OPT_TIMEOUT, OPT_SKIP_TIMEOUT,
	OPT_NO_ADMISSION, OPT_FILTER_MODULO, OPT_FILTER_COST, OPT_MAX_FRAGMENT, OPT_OUT,
	OPT_SHM_LISTEN, OPT_SHM_CAPACITY,
	OPT_FLUSH_EVERY, OPT_BATCH, OPT_SOCKET_BUFFER, OPT_NO_CLOCK_CORRECTION,
};

static const struct option long_options[] = {
	{ "run", required_argument, NULL, OPT_RUN },
	{ "sources", required_argument, NULL, OPT_SOURCES },
	{ "readers", required_argument, NULL, OPT_READERS },
	{ "first-event", required_argument, NULL, OPT_FIRST },
	{ "events", required_argument, NULL, OPT_EVENTS },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "control-listen", required_argument, NULL, OPT_CONTROL_LISTEN },
	{ "port-file", required_argument, NULL, OPT_PORT_FILE },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "peer-timeout-ms", required_argument, NULL, OPT_PEER_TIMEOUT },
	{ "handshake-timeout-ms", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
	{ "stall-timeout-ms", required_argument, NULL, OPT_STALL_TIMEOUT },
	{ "max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT },
	{ "skip-timeout-ms", required_argument, NULL, OPT_SKIP_TIMEOUT },
	{ "no-admission", no_argument, NULL, OPT_NO_ADMISSION },
	{ "filter-modulo", required_argument, NULL, OPT_FILTER_MODULO },
	{ "filter-cost-us", required_argument, NULL, OPT_FILTER_COST },
	{ "max-fragment", required_argument, NULL, OPT_MAX_FRAGMENT },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "flush-every", required_argument, NULL, OPT_FLUSH_EVERY },
	{ "batch-bytes", required_argument, NULL, OPT_BATCH },
	{ "socket-buffer", required_argument, NULL, OPT_SOCKET_BUFFER },
	{ "shm-listen", required_argument, NULL, OPT_SHM_LISTEN },
	{ "shm-capacity", required_argument, NULL, OPT_SHM_CAPACITY },
	{ "no-clock-correction", no_argument, NULL, OPT_NO_CLOCK_CORRECTION },
	DAEMON_LONG_OPTIONS,
	{ NULL, 0, NULL, 0 },
};

static bool parse_options(int argc, char **argv, struct bd_options *o)
{
	bool have_run = false, have_sources = false, have_readers = false, have_listen = false;
	bool have_control = false, have_out = false;
	struct daemon_options d = { .role = "builderd", .usage = usage };
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
		case OPT_RUN: ok = have_run = opt_u32("--run", optarg, 0, UINT32_MAX, &o->run_id); break;
		case OPT_SOURCES:
			ok = have_sources = opt_u32("--sources", optarg, 1, BLD_MAX_SOURCES, &u32);
			o->sources = (uint16_t)u32;
			break;
		case OPT_READERS: ok = have_readers = opt_u32("--readers", optarg, 1, 1024, &o->readers); break;
		case OPT_FIRST: ok = opt_u64("--first-event", optarg, 0, UINT64_MAX / 2, &o->first_event); break;
		case OPT_EVENTS: ok = opt_u64("--events", optarg, 0, UINT64_MAX / 2, &o->events); break;
		case OPT_LISTEN:
			ok = have_listen = opt_hostport("--listen", optarg, o->listen_host,
							sizeof o->listen_host, &o->listen_port, true);
			break;
		case OPT_CONTROL_LISTEN:
			ok = have_control = opt_hostport("--control-listen", optarg, o->control_host,
							 sizeof o->control_host, &o->control_port, true);
			break;
		case OPT_PORT_FILE: snprintf(o->port_file, sizeof o->port_file, "%s", optarg); break;
		case OPT_METRICS_LISTEN:
			ok = opt_hostport("--metrics-listen", optarg, o->metrics_host,
					  sizeof o->metrics_host, &o->metrics_port, true);
			break;
		case OPT_PEER_TIMEOUT: ok = opt_u64("--peer-timeout-ms", optarg, 1, 86400000, &o->peer_timeout_ms); break;
		case OPT_HANDSHAKE_TIMEOUT: ok = opt_u64("--handshake-timeout-ms", optarg, 1, 86400000, &o->handshake_timeout_ms); break;
		case OPT_STALL_TIMEOUT: ok = opt_u64("--stall-timeout-ms", optarg, 500, 86400000, &o->stall_timeout_ms); break;
		case OPT_MAX_INFLIGHT: ok = opt_u32("--max-inflight", optarg, 1, BLD_MAX_WINDOW, &o->max_inflight); break;
		case OPT_TIMEOUT: ok = opt_u64("--timeout-ms", optarg, 0, 86400000, &o->timeout_ms); break;
		case OPT_SKIP_TIMEOUT: ok = opt_u64("--skip-timeout-ms", optarg, 0, 86400000, &o->skip_timeout_ms); break;
		case OPT_NO_ADMISSION: o->no_admission = true; break;
		case OPT_FILTER_MODULO: ok = opt_u32("--filter-modulo", optarg, 1, UINT32_MAX, &o->filter_modulo); break;
		case OPT_FILTER_COST: ok = opt_u32("--filter-cost-us", optarg, 0, 1000000, &o->filter_cost_us); break;
		case OPT_MAX_FRAGMENT: ok = opt_u32("--max-fragment", optarg, 0, FRM_MAX_PAYLOAD_BYTES, &o->max_fragment_bytes); break;
		case OPT_OUT: have_out = true; snprintf(o->out_dir, sizeof o->out_dir, "%s", optarg); break;
		case OPT_FLUSH_EVERY: ok = opt_u32("--flush-every", optarg, 1, 1u << 20, &o->flush_every); break;
		case OPT_BATCH: ok = opt_u32("--batch-bytes", optarg, 4096, 64u << 20, &o->batch_bytes); break;
		case OPT_SOCKET_BUFFER: ok = opt_u32("--socket-buffer", optarg, 1024, 64u << 20, &o->socket_buffer_bytes); break;
		case OPT_SHM_LISTEN:
			ok = shl_name_valid(optarg);
			if (!ok)
				opt_error("--shm-listen", "expected a NAME of 1 to %u letters, digits, '.', '_' or '-' (not starting with '.'), got '%s'",
					  SHL_NAME_MAX, optarg);
			snprintf(o->shm_name, sizeof o->shm_name, "%s", optarg);
			break;
		case OPT_SHM_CAPACITY: ok = opt_u64("--shm-capacity", optarg, SHR_MIN_CAPACITY_BYTES, SHR_MAX_CAPACITY_BYTES, &o->shm_capacity_bytes); break;
		case OPT_NO_CLOCK_CORRECTION: o->no_clock_correction = true; break;
		default: usage(stderr); return false;
		}
		if (!ok)
			return false;
	}
	const char *missing = !have_run ? "--run" : !have_sources ? "--sources"
		: !have_readers ? "--readers" : !have_listen ? "--listen"
		: !have_control ? "--control-listen" : !have_out ? "--out" : NULL;
	if (!daemon_options_complete(&d, argc, argv, missing))
		return false;
	o->quiet = d.quiet;
	if (o->readers > o->sources) {
		fprintf(stderr, "builderd: --readers %u exceeds --sources %u: every reader serves at least one source\n",
			o->readers, o->sources);
		return false;
	}
	if (o->shm_capacity_bytes != 0 && o->shm_name[0] == '\0') {
		fprintf(stderr, "builderd: --shm-capacity needs --shm-listen NAME\n");
		return false;
	}
	if (!daemon_apply_common(d.run_key_file, d.clock_offset_ns))
		return false;
	if (!daemon_listen_allowed(&d, "--listen", o->listen_host))
		return false;
	if (!daemon_listen_allowed(&d, "--control-listen", o->control_host))
		return false;
	return true;
}

static void stop_run(void *arg, const char *why)
{
	bd_stop(arg, why);
}

int main(int argc, char **argv)
{
	struct bd_options o = {
		.max_inflight = 4096,
		.timeout_ms = 1000,
		.skip_timeout_ms = 100,
		.filter_modulo = 1,
		.flush_every = 256,
		.max_fragment_bytes = FRM_MAX_PAYLOAD_BYTES,
		.batch_bytes = 262144,
		.peer_timeout_ms = 10000,
		.handshake_timeout_ms = 5000,
		.stall_timeout_ms = 2000,
	};
	if (!parse_options(argc, argv, &o))
		return 2;
	daemon_start_log("builderd", -1, o.quiet);
	struct event_base *base = daemon_base_new();
	struct bd *run = base ? bd_create(base, &o) : NULL;
	if (run == NULL) {
		log_error("Run %u could not start", o.run_id);
		if (base)
			event_base_free(base);
		return 1;
	}
	daemon_run(base, stop_run, run);
	int status = bd_exit_status(run);
	bd_destroy(run);
	event_base_free(base);
	return status;
}
