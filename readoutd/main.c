/* readoutd: a reader of the event builder. Parses options and wires the
 * reader to the event loop; see lifecycle.c. */
#include "sys/clock.h"
#include "io/daemon.h"
#include "wire/frame.h"
#include "sys/auth.h"
#include "sys/log.h"
#include "io/net.h"
#include "sys/opt.h"
#include "reader.h"
#include "io/shmlink.h"

#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
"Usage: readoutd --id N --run R --listen HOST:PORT --sources LIST\n"
"                --builder tcp://HOST:PORT|shm://NAME --control HOST:PORT [options]\n"
"A reader: accepts its sources' data connections, verifies every frame and\n"
"forwards verified frames to the builder in batches (over TCP, or through a\n"
"shared-memory ring on the builder's host), holding fragments at or beyond\n"
"the builder's admission limit.\n"
"\n"
"Run:\n"
"  --id N                  reader ID (0 .. readers-1)\n"
"  --run R                 run number; frames of another run are refused\n"
"  --sources LIST          source IDs served, e.g. 0,1 or 0-3\n"
"Connections:\n"
"  --listen HOST:PORT      data port for the sources (port 0: any free port)\n"
"  --port-file PATH        write 'data PORT' there once listening\n"
"  --metrics-listen HOST:PORT  serve /metrics (Prometheus) and /status (JSON)\n"
"  --builder tcp://HOST:PORT  the builder's data port\n"
"  --builder shm://NAME    the builder's shared-memory rings (its --shm-listen\n"
"                          NAME); only on the builder's host\n"
"  --control HOST:PORT     the builder's control port\n"
"  --connect-timeout-ms T  keep retrying connections, and greetings refused\n"
"                          busy or cut, this long (default 10000)\n"
"  --handshake-timeout-ms T  drop a peer whose greeting is not done T ms\n"
"                          after its accept (default 5000)\n"
"Limits:\n"
"  --max-fragment BYTES    largest payload accepted (default 1048576)\n"
"  --batch-bytes B         bytes read per call per source (default 262144)\n"
"  --socket-buffer B       kernel send/receive buffers of the builder connection\n"
"                          (default: the kernel's autotuning)\n"
"                          memory: sources x (B + max-fragment + 42)\n"
"  --source-idle-timeout-ms T  a source that delivers no complete frame for T ms\n"
"                          while the run is live (a frame has come from one of\n"
"                          ours) is given up as lost and the builder told, though\n"
"                          its control link may live on (default 5000; 0 = off)\n"
"Testing:\n"
"  --forward-stall BYTES   once BYTES are forwarded, forward nothing more while the\n"
"                          sources and the control link go on\n"
"  --shm-inject KIND@N     after N records put a damaged one in the ring and\n"
"                          forward nothing more; KIND is record, crc, length or head\n"
"Security:\n"
"  --run-key-file PATH     secret shared by every daemon of the run (16+ bytes);\n"
"                          without it only peers on this host are accepted\n"
"Other:\n"
"  --clock-offset-ns N     add N ns to every clock reading (an unsynchronised host)\n"
"  --quiet                 log warnings and errors only\n"
"  --help, --version\n"
"\n"
"Example:\n"
"  readoutd --id 0 --run 1 --listen 127.0.0.1:7000 --sources 0,1 \\\n"
"           --builder tcp://127.0.0.1:7100 --control 127.0.0.1:6999\n"
"  readoutd --id 1 --run 1 --listen 127.0.0.1:7001 --sources 2,3 \\\n"
"           --builder shm://run1 --control 127.0.0.1:6999\n");
}

enum {
	OPT_ID = 256, OPT_RUN, OPT_LISTEN, OPT_PORT_FILE, OPT_METRICS_LISTEN, OPT_SOURCES, OPT_BUILDER, OPT_CONTROL,
	OPT_MAX_FRAGMENT, OPT_BATCH, OPT_SOCKET_BUFFER, OPT_CONNECT_TIMEOUT, OPT_HANDSHAKE_TIMEOUT, OPT_SHM_INJECT,
	OPT_SOURCE_IDLE_TIMEOUT, OPT_FORWARD_STALL,
};

static const struct option long_options[] = {
	{ "id", required_argument, NULL, OPT_ID },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "port-file", required_argument, NULL, OPT_PORT_FILE },
	{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
	{ "sources", required_argument, NULL, OPT_SOURCES },
	{ "builder", required_argument, NULL, OPT_BUILDER },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "max-fragment", required_argument, NULL, OPT_MAX_FRAGMENT },
	{ "batch-bytes", required_argument, NULL, OPT_BATCH },
	{ "socket-buffer", required_argument, NULL, OPT_SOCKET_BUFFER },
	{ "connect-timeout-ms", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "handshake-timeout-ms", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT },
	{ "source-idle-timeout-ms", required_argument, NULL, OPT_SOURCE_IDLE_TIMEOUT },
	{ "forward-stall", required_argument, NULL, OPT_FORWARD_STALL },
	{ "shm-inject", required_argument, NULL, OPT_SHM_INJECT },
	DAEMON_LONG_OPTIONS,
	{ NULL, 0, NULL, 0 },
};

static bool parse_builder_url(const char *arg, struct rdr_options *o)
{
	if (strncmp(arg, "shm://", 6) == 0) {
		if (!shl_name_valid(arg + 6)) {
			opt_error("--builder", "expected shm://NAME with NAME of 1 to %u letters, digits, '.', '_' or '-' (not starting with '.'), got '%s'",
				  SHL_NAME_MAX, arg);
			return false;
		}
		snprintf(o->builder_shm, sizeof o->builder_shm, "%s", arg + 6);
		return true;
	}
	if (strncmp(arg, "tcp://", 6) != 0) {
		opt_error("--builder", "expected tcp://HOST:PORT or shm://NAME, got '%s'", arg);
		return false;
	}
	o->builder_shm[0] = '\0';
	return opt_hostport("--builder", arg + 6, o->builder_host, sizeof o->builder_host,
			    &o->builder_port, false);
}

static bool parse_options(int argc, char **argv, struct rdr_options *o)
{
	bool have_id = false, have_run = false, have_listen = false, have_sources = false;
	bool have_builder = false, have_control = false;
	struct daemon_options d = { .role = "readoutd", .usage = usage };
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
		case OPT_LISTEN:
			ok = have_listen = opt_hostport("--listen", optarg, o->listen_host,
							sizeof o->listen_host, &o->listen_port, true);
			break;
		case OPT_METRICS_LISTEN:
			ok = opt_hostport("--metrics-listen", optarg, o->metrics_host,
					  sizeof o->metrics_host, &o->metrics_port, true);
			break;
		case OPT_PORT_FILE:
			snprintf(o->port_file, sizeof o->port_file, "%s", optarg);
			break;
		case OPT_SOURCES:
			ok = have_sources = opt_id_list("--sources", optarg, o->sources, RDR_MAX_SOURCES,
							&o->source_count, 65536);
			break;
		case OPT_BUILDER: ok = have_builder = parse_builder_url(optarg, o); break;
		case OPT_CONTROL:
			ok = have_control = opt_hostport("--control", optarg, o->control_host,
							 sizeof o->control_host, &o->control_port, false);
			break;
		case OPT_MAX_FRAGMENT: ok = opt_u32("--max-fragment", optarg, 0, FRM_MAX_PAYLOAD_BYTES, &o->max_fragment_bytes); break;
		case OPT_BATCH: ok = opt_u32("--batch-bytes", optarg, 4096, 64u << 20, &o->batch_bytes); break;
		case OPT_SOCKET_BUFFER: ok = opt_u32("--socket-buffer", optarg, 1024, 64u << 20, &o->socket_buffer_bytes); break;
		case OPT_CONNECT_TIMEOUT: ok = opt_u64("--connect-timeout-ms", optarg, 1, 86400000, &o->connect_timeout_ms); break;
		case OPT_HANDSHAKE_TIMEOUT: ok = opt_u64("--handshake-timeout-ms", optarg, 1, 86400000, &o->handshake_timeout_ms); break;
		case OPT_FORWARD_STALL: ok = opt_u64("--forward-stall", optarg, 1, UINT64_MAX, &o->forward_stall_bytes); break;
		case OPT_SOURCE_IDLE_TIMEOUT: ok = opt_u64("--source-idle-timeout-ms", optarg, 0, 86400000, &o->source_idle_timeout_ms); break;
		case OPT_SHM_INJECT:
			ok = rdr_parse_shm_inject(optarg, &o->shm_inject, &o->shm_inject_after);
			if (!ok)
				opt_error("--shm-inject", "expected KIND@N with KIND one of record, crc, length, head, got '%s'", optarg);
			break;
		default: usage(stderr); return false;
		}
		if (!ok)
			return false;
	}
	const char *missing = !have_id ? "--id" : !have_run ? "--run" : !have_listen ? "--listen"
		: !have_sources ? "--sources" : !have_builder ? "--builder"
		: !have_control ? "--control" : NULL;
	if (!daemon_options_complete(&d, argc, argv, missing))
		return false;
	o->quiet = d.quiet;
	if (o->shm_inject != RDR_SHM_INJECT_NONE && o->builder_shm[0] == '\0') {
		fprintf(stderr, "readoutd: --shm-inject needs --builder shm://NAME\n");
		return false;
	}
	if (!daemon_apply_common(d.run_key_file, d.clock_offset_ns))
		return false;
	if (!daemon_listen_allowed(&d, "--listen", o->listen_host))
		return false;
	return true;
}

static void stop_reader(void *arg, const char *why)
{
	(void)why;
	rdr_stop(arg);
}

int main(int argc, char **argv)
{
	struct rdr_options o = {
		.max_fragment_bytes = FRM_MAX_PAYLOAD_BYTES,
		.batch_bytes = 262144,
		.connect_timeout_ms = 10000,
		.handshake_timeout_ms = 5000,
		.source_idle_timeout_ms = 5000,
	};
	if (!parse_options(argc, argv, &o))
		return 2;
	daemon_start_log("readoutd", (int)o.id, o.quiet);
	struct event_base *base = daemon_base_new();
	struct rdr *reader = base ? rdr_create(base, &o) : NULL;
	if (reader == NULL) {
		log_error("Reader %u could not start", o.id);
		if (base)
			event_base_free(base);
		return 1;
	}
	daemon_run(base, stop_reader, reader);
	int status = rdr_exit_status(reader);
	rdr_destroy(reader);
	event_base_free(base);
	return status;
}
