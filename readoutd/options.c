#include "options.h"

#include "io/shmlink.h"
#include "reader.h"
#include "wire/frame.h"

#include <stdio.h>
#include <string.h>

const char rdr_usage_synopsis[] =
	"--id N --run R --listen HOST:PORT --sources LIST\n"
	"--builder tcp://HOST:PORT|shm://NAME --control HOST:PORT [options]";

const char rdr_usage_description[] =
	"A reader: accepts its sources' data connections, verifies every frame and\n"
	"forwards verified frames to the builder in batches (over TCP, or through a\n"
	"shared-memory ring on the builder's host), holding fragments at or beyond\n"
	"the builder's admission limit.";

const char rdr_usage_example[] =
	"  readoutd --id 0 --run 1 --listen 127.0.0.1:7000 --sources 0,1 \\\n"
	"           --builder tcp://127.0.0.1:7100 --control 127.0.0.1:6999\n"
	"  readoutd --id 1 --run 1 --listen 127.0.0.1:7001 --sources 2,3 \\\n"
	"           --builder shm://run1 --control 127.0.0.1:6999\n";

static bool rdr_take_sources(const char *flag, const char *arg, void *opts)
{
	struct rdr_options *o = opts;
	return opt_id_list(flag, arg, o->sources, RDR_MAX_SOURCES, &o->source_count, 65536);
}

static bool rdr_take_builder(const char *flag, const char *arg, void *opts)
{
	struct rdr_options *o = opts;
	if (strncmp(arg, "shm://", 6) == 0) {
		if (!shl_name_valid(arg + 6)) {
			opt_error(flag, "expected shm://NAME with NAME of 1 to %u letters, digits, '.', '_' or '-' (not starting with '.'), got '%s'",
				  SHL_NAME_MAX, arg);
			return false;
		}
		snprintf(o->builder_shm, sizeof o->builder_shm, "%s", arg + 6);
		return true;
	}
	if (strncmp(arg, "tcp://", 6) != 0) {
		opt_error(flag, "expected tcp://HOST:PORT or shm://NAME, got '%s'", arg);
		return false;
	}
	o->builder_shm[0] = '\0';
	return opt_hostport(flag, arg + 6, o->builder_host, sizeof o->builder_host,
			    &o->builder_port, false);
}

static bool rdr_take_shm_inject(const char *flag, const char *arg, void *opts)
{
	struct rdr_options *o = opts;
	if (rdr_parse_shm_inject(arg, &o->shm_inject, &o->shm_inject_after))
		return true;
	opt_error(flag, "expected KIND@N with KIND one of record, crc, length, head, got '%s'", arg);
	return false;
}

#define O struct rdr_options

const struct opt_spec rdr_option_specs[] = {
	OPT_UINT("id", "N", O, id, 0, 65535, .required = true, .group = "Run",
		 .help = "reader ID (0 .. readers-1)"),
	OPT_UINT("run", "R", O, run_id, 0, UINT32_MAX, .required = true,
		 .help = "run number; frames of another run are refused"),
	OPT_HOSTPORT("listen", "HOST:PORT", O, listen_host, listen_port, 0, .required = true,
		     .group = "Connections",
		     .help = "data port for the sources (port 0: any free port)"),
	OPT_CUSTOM("sources", "LIST", rdr_take_sources, .required = true,
		   .help = "source IDs served, e.g. 0,1 or 0-3"),
	OPT_STRING("port-file", "PATH", O, port_file,
		   .help = "write 'data PORT' there once listening"),
	DAEMON_OPT_METRICS_LISTEN(O),
	OPT_CUSTOM("builder", "tcp://HOST:PORT", rdr_take_builder, .required = true,
		   .help = "the builder's data port"),
	OPT_NOTE("--builder shm://NAME",
		 .help = "the builder's shared-memory rings (its --shm-listen\n"
			 "NAME); only on the builder's host"),
	OPT_HOSTPORT("control", "HOST:PORT", O, control_host, control_port, 1, .required = true,
		     .help = "the builder's control port"),
	DAEMON_OPT_CONNECT_TIMEOUT(O),
	OPT_UINT("handshake-timeout-ms", "T", O, handshake_timeout_ms, 1, 86400000, .def = "5000",
		 .help = "drop a peer whose greeting is not done T ms\n"
			 "after its accept (default {default})"),
	OPT_UINT("max-fragment", "BYTES", O, max_fragment_bytes, 0, FRM_MAX_PAYLOAD_BYTES,
		 .def = "1048576", .group = "Limits",
		 .help = "largest payload accepted (default {default})"),
	OPT_UINT("batch-bytes", "B", O, batch_bytes, 4096, 64u << 20, .def = "262144",
		 .help = "bytes read per call per source (default {default})"),
	OPT_UINT("socket-buffer", "B", O, socket_buffer_bytes, 1024, 64u << 20,
		 .help = "kernel send/receive buffers of the builder connection\n"
			 "(default: the kernel's autotuning)\n"
			 "memory: sources x (B + max-fragment + 42)"),
	OPT_UINT("source-idle-timeout-ms", "T", O, source_idle_timeout_ms, 0, 86400000,
		 .def = "5000",
		 .help = "a source that delivers no complete frame for T ms\n"
			 "while the run is live (a frame has come from one of\n"
			 "ours) is given up as lost and the builder told, though\n"
			 "its control link may live on (default {default}; 0 = off)"),
	OPT_UINT("forward-stall", "BYTES", O, forward_stall_bytes, 1, UINT64_MAX,
		 .group = "Testing",
		 .help = "once BYTES are forwarded, forward nothing more while the\n"
			 "sources and the control link go on"),
	OPT_CUSTOM("shm-inject", "KIND@N", rdr_take_shm_inject,
		   .help = "after N records put a damaged one in the ring and\n"
			   "forward nothing more; KIND is record, crc, length or head"),
};
const size_t rdr_option_count = sizeof rdr_option_specs / sizeof rdr_option_specs[0];

bool rdr_options_check(void *opts, const struct daemon_options *d)
{
	(void)d;
	const struct rdr_options *o = opts;
	if (o->shm_inject != RDR_SHM_INJECT_NONE && o->builder_shm[0] == '\0') {
		fprintf(stderr, "readoutd: --shm-inject needs --builder shm://NAME\n");
		return false;
	}
	return true;
}

bool rdr_options_check_listen(void *opts, const struct daemon_options *d)
{
	const struct rdr_options *o = opts;
	return daemon_listen_allowed(d, "--listen", o->listen_host);
}
