#include "options.h"

#include "core/builder.h"
#include "io/shmlink.h"
#include "io/shmring.h"
#include "wire/control.h"
#include "wire/frame.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char options_usage_synopsis[] =
	"--run R --sources S --readers N --listen HOST:PORT\n"
	"--control-listen HOST:PORT --out DIR [options]\n"
	"builderd --role hub --builders M --run R --sources S --readers N --events N\n"
	"--control-listen HOST:PORT --out DIR [options]\n"
	"builderd --role builder --id B --builders M --hub HOST:PORT --run R\n"
	"--sources S --readers N --listen HOST:PORT --out DIR [options]";

const char options_usage_description[] =
	"The event builder: assembles each event from one fragment per source,\n"
	"filters and records it, gathers every daemon's final counters and checks\n"
	"the conservation equations. Exits 0 only when every equation balances and\n"
	"no error occurred, 1 for a failed run, 2 for a usage error. With several\n"
	"builders, one builderd is the run's hub (--role hub: greetings, clocks,\n"
	"the event manager, the books) and each builder (--role builder) builds\n"
	"the events the hub assigns it (docs/BUILDERS.md).";

const char options_usage_epilogue[] =
	"Signals:\n"
	"  SIGTERM, SIGINT         end the run now, as a failed run (status 1)\n"
	"  SIGUSR2                 --role both or hub: the operator's drained stop: every\n"
	"                          source generates up to an event boundary (the last\n"
	"                          event decided plus a margin), then ends; the run\n"
	"                          ends the normal way, the cut-off counted as\n"
	"                          frags_cut_by_stop (docs/RUNCONTROL.md)\n"
	"\n"
	"Environment:\n"
	"  ES_CHRONY_SOCKET=PATH   chronyd command socket for this host's chrony reads\n"
	"                          (chronyc -h PATH; every daemon honours it)\n";

const char options_usage_example[] =
	"  builderd --run 1 --sources 4 --readers 2 --listen 127.0.0.1:7100 \\\n"
	"           --control-listen 127.0.0.1:6999 --out runs/1\n";

static bool options_take_shm_listen(const char *flag, const char *arg, void *opts)
{
	struct options *o = opts;
	if (!shl_name_valid(arg)) {
		opt_error(flag, "expected a NAME of 1 to %u letters, digits, '.', '_' or '-' (not starting with '.'), got '%s'",
			  SHL_NAME_MAX, arg);
		return false;
	}
	snprintf(o->shm_name, sizeof o->shm_name, "%s", arg);
	return true;
}

/* --listen, once per rail: one port for every address, no address twice. */
static bool options_take_listen(const char *flag, const char *arg, void *opts)
{
	struct options *o = opts;
	char host[sizeof o->listen_hosts[0]];
	uint16_t port;
	if (!opt_hostport(flag, arg, host, sizeof host, &port, true))
		return false;
	if (o->listen_count == CTL_MAX_RAILS) {
		opt_error(flag, "given more than %u times; it takes one address per rail, at most %u",
			  CTL_MAX_RAILS, CTL_MAX_RAILS);
		return false;
	}
	if (o->listen_count > 0 && port != o->listen_port) {
		opt_error(flag, "every rail's address takes the same port: the first has %u, '%s' has %u",
			  (unsigned)o->listen_port, arg, (unsigned)port);
		return false;
	}
	for (uint32_t i = 0; i < o->listen_count; i++) {
		if (strcmp(o->listen_hosts[i], host) == 0) {
			opt_error(flag, "address %s is given twice; each rail listens on its own", host);
			return false;
		}
	}
	snprintf(o->listen_hosts[o->listen_count++], sizeof o->listen_hosts[0], "%s", host);
	o->listen_port = port;
	return true;
}

const char *const options_role_names[] = { "both", "hub", "builder", NULL };
static const char *const options_routing_names[] = { "manager", "static", NULL };
static const char *const options_record_names[] = { "none", "raw", "hdf5", NULL };
/* enum evw_sync's order. */
static const char *const options_sync_names[] = { "close", "batch", "never", NULL };
static const char *const options_io_names[] = { "buffered", "direct", NULL };
static const char *const options_keep_names[] = { "copy", "in-place", NULL };

#define O struct options

const struct opt_spec options_specs[] = {
	OPT_UINT("run", "R", O, run_id, 0, UINT32_MAX, .required = true, .group = "Run",
		 .help = "run number"),
	OPT_UINT("sources", "S", O, sources, 1, BLD_MAX_SOURCES, .fixed = true, .required = true,
		 .help = "number of sources (IDs 0 .. S-1)"),
	OPT_UINT("readers", "N", O, readers, 1, 1024, .fixed = true, .required = true,
		 .help = "number of readers (IDs 0 .. N-1)"),
	OPT_UINT("first-event", "N", O, first_event, 0, UINT64_MAX / 2, .def = "0",
		 .help = "lowest event ID of the run (default {default})"),
	OPT_UINT("events", "N", O, events, 0, UINT64_MAX / 2,
		 .help = "number of event IDs, when known (default: from the sources)"),
	OPT_CHOICE("role", "ROLE", O, role, options_role_names, .fixed = true, .def = "both", .group = "Builders",
		   .help = "both: the hub and the run's one builder (default);\n"
			   "hub: the hub of --builders M builders, building nothing;\n"
			   "builder: builder --id of M, reporting to --hub"),
	OPT_UINT("builders", "M", O, builders, 1, CTL_MAX_BUILDERS, .fixed = true, .def = "1",
		 .help = "number of builders (IDs 0 .. M-1; default {default})"),
	OPT_UINT("id", "B", O, builder_id, 0, CTL_MAX_BUILDERS - 1, .fixed = true, .def = "0",
		 .help = "this builder's ID (--role builder)"),
	OPT_HOSTPORT("hub", "HOST:PORT", O, hub_host, hub_port, 1,
		     .fixed = true, .help = "the hub's control port (--role builder)"),
	OPT_CHOICE("routing", "MODE", O, routing, options_routing_names, .def = "manager",
		   .help = "manager: batches go round-robin to builders holding\n"
			   "tokens; static: batch k to builder k mod M (--role hub;\n"
			   "default {default})"),
	OPT_UINT("batch", "N", O, batch, 1, CTL_MAX_BATCH, .def = "64",
		 .help = "event IDs per assignment (--role hub; default {default})"),
	OPT_UINT("window-batches", "K", O, window_batches, 1, CTL_MAX_WINDOW_BATCHES,
		 .def = "4096",
		 .help = "batches assigned and not yet decided, at most\n"
			 "(--role hub; default {default})"),
	OPT_UINT("backlog-ms", "T", O, backlog_ms, 0, 60000, .def = "100",
		 .help = "give a builder at most what it decides in T ms at the\n"
			 "pace its tokens show, within its slots (--role hub;\n"
			 "default {default}; 0 = its slots alone)"),
	OPT_CUSTOM("listen", "HOST:PORT", options_take_listen, .fixed = true, .group = "Connections",
		   .help = "data port for the readers (port 0: any free port;\n"
			   "not --role hub); once per rail, at most 4, all on one\n"
			   "port: a reader's link is then one connection per rail"),
	OPT_HOSTPORT("control-listen", "HOST:PORT", O, control_host, control_port, 0,
		     .fixed = true, .help = "control port for every daemon (not --role builder)"),
	OPT_STRING("port-file", "PATH", O, port_file,
		   .fixed = true, .help = "write 'data PORT' and 'control PORT' there once listening"),
	DAEMON_OPT_METRICS_LISTEN(O, .fixed = true),
	OPT_UINT("peer-timeout-ms", "T", O, peer_timeout_ms, 1, 86400000, .def = "10000",
		 .help = "a peer not connected after T ms ends the run with an\n"
			 "error; no progress for T ms gives up by name the sources\n"
			 "that have not ended and ends the run once the readers\n"
			 "have reported, or --stall-timeout-ms later (default {default})"),
	OPT_UINT("handshake-timeout-ms", "T", O, handshake_timeout_ms, 1, 86400000, .def = "5000",
		 .help = "drop a connection whose greeting is not done\n"
			 "T ms after its accept (default {default})"),
	OPT_UINT("stall-timeout-ms", "T", O, stall_timeout_ms, 500, 86400000, .def = "2000",
		 .help = "a peer silent this long (it answers clock probes every\n"
			 "200 ms) is given up as stalled (default {default})"),
	OPT_CUSTOM("shm-listen", "NAME", options_take_shm_listen,
		   .fixed = true, .help = "readers on this host may forward through shared-memory\n"
			   "rings (readoutd --builder shm://NAME); one ring per\n"
			   "reader, /dev/shm/es-NAME-r<id>, removed once attached"),
	OPT_UINT("shm-capacity", "BYTES", O, shm_capacity_bytes, SHR_MIN_CAPACITY_BYTES,
		 SHR_MAX_CAPACITY_BYTES,
		 .help = "bytes of each ring (default 4Mi); rounded up to a power\n"
			 "of two that holds two frames of --max-fragment"),
	OPT_UINT("max-inflight", "W", O, max_inflight, 1, BLD_MAX_WINDOW, .def = "4096",
		 .group = "Building", .help = "window of event IDs in flight (default {default})"),
	OPT_UINT("timeout-ms", "T", O, timeout_ms, 0, 86400000, .def = "1000",
		 .help = "an incomplete event expires T ms after its first\n"
			 "fragment (default {default}; 0 = never)"),
	OPT_UINT("skip-timeout-ms", "T", O, skip_timeout_ms, 0, 86400000, .def = "100",
		 .help = "sooner, T ms after its first fragment, for the\n"
			 "oldest undecided event once every source it lacks\n"
			 "has sent later events: they skipped it (default\n"
			 "{default}; 0 = wait for --timeout-ms). Keep T above any\n"
			 "delay a source puts on single fragments"),
	OPT_FLAG("no-admission", O, no_admission,
		 .help = "do not limit readers with credits (for comparison)"),
	OPT_UINT("filter-modulo", "M", O, filter_modulo, 1, UINT32_MAX, .def = "1",
		 .help = "accept an event when its CRC % M == 0 (default {default})"),
	OPT_UINT("filter-cost-us", "U", O, filter_cost_us, 0, 1000000, .def = "0",
		 .help = "spend U us of CPU per complete event (default {default})"),
	OPT_UINT("max-fragment", "BYTES", O, max_fragment_bytes, 0, FRM_MAX_PAYLOAD_BYTES,
		 .def = "1048576", .help = "largest payload accepted (default {default})"),
	OPT_STRING("out", "DIR", O, out_dir, .required = true, .group = "Output",
		   .help = "events.jsonl, expired.jsonl and metrics.json go here"),
	OPT_UINT("flush-every", "N", O, flush_every, 1, 1u << 20, .def = "256",
		 .help = "at most N records per write (default {default})"),
	OPT_CHOICE("record", "FORMAT", O, record_format, options_record_names, .def = "none",
		   .help = "write every accepted event's fragments to event files:\n"
			   "raw (docs/event-file-format.md), hdf5\n"
			   "(docs/hdf5-layout.md) or none (default {default})"),
	OPT_STRING("record-dir", "DIR", O, record_dir,
		   .help = "where the event files go (default: --out)"),
	OPT_UINT("record-max-payload", "BYTES", O, record_max_payload, 1, FRM_MAX_PAYLOAD_BYTES,
		 .def = "16384",
		 .help = "largest payload recorded (default {default}); the builder\n"
			 "keeps window x sources fragments of this size, and an\n"
			 "event with a larger one is not recorded: counted, and\n"
			 "the run fails naming it"),
	OPT_UINT("record-max-file-bytes", "BYTES", O, record_max_file_bytes, 1u << 20, UINT64_MAX,
		 .def = "268435456", .help = "an event file rolls before it passes this (default {default})"),
	OPT_UINT("record-slice-ms", "T", O, record_slice_ms, 0, 86400000, .def = "10000",
		 .help = "cut the recording into slices of T ms from the first\n"
			 "event (default {default}; 0: not by time): each slice's\n"
			 "files closed and its end-of-slice document written"),
	OPT_UINT("record-slice-events", "N", O, record_slice_events, 0, UINT64_MAX, .def = "0",
		 .help = "and a slice ends after N events written (default {default}: not by count)"),
	OPT_CHOICE("record-sync", "WHEN", O, record_sync, options_sync_names, .def = "close",
		   .help = "fdatasync each file at its close (close, the default),\n"
			   "after every batch too (batch), or never (never: a\n"
			   "crash may lose closed files; for measurements)"),
	OPT_CHOICE("record-io", "HOW", O, record_io, options_io_names, .def = "buffered",
		   .help = "raw files through the page cache (buffered, the\n"
			   "default: the faster here), or their whole blocks by\n"
			   "direct I/O past it (direct: less CPU per byte, but each\n"
			   "write waits for the disk; buffered on tmpfs)"),
	OPT_CHOICE("record-keep", "HOW", O, record_keep, options_keep_names, .def = "copy",
		   .help = "each fragment copied into the window's cells as it\n"
			   "comes (copy, the default: as fast here), or, from a\n"
			   "shared-memory ring, kept in it until its event is\n"
			   "written and copied only if the ring needs the room\n"
			   "(in-place); from TCP, always copied"),
	OPT_STRING("config-sha256", "HEX", O, config_sha256,
		   .help = "the run's configuration hash, stamped into each event\n"
			   "file (daqrun gives the topology's)"),
	OPT_UINT("batch-bytes", "B", O, batch_bytes, 4096, 64u << 20, .def = "262144",
		 .help = "bytes read per call per reader (default {default})"),
	OPT_UINT("socket-buffer", "B", O, socket_buffer_bytes, 1024, 64u << 20,
		 .help = "kernel buffers of reader connections (default: autotuned)"),
	OPT_UINT("probe-period-ms", "T", O, probe_period_ms, 1, 1000, .def = "10", .group = "Clocks",
		 .help = "between bursts, one clock exchange per peer over its\n"
			 "UDP probe socket this often (default {default}): longer\n"
			 "costs the hub and its peers less CPU, and lets the\n"
			 "newest sample age by up to T ms x the drift bound"),
	OPT_FLAG("no-clock-correction", O, no_clock_correction,
		 .help = "measure peers' clock offsets but do not apply them to\n"
			 "latencies; metrics.json shows the error left in"),
	OPT_HOSTPORT("session-listen", "HOST:PORT", O, session_listen_host, session_listen_port, 0,
		     .fixed = true, .group = "Serving many runs (the hub)",
		     .help = "serve many runs: peers started with --session join\n"
			     "here, and runs are configured, started and stopped\n"
			     "through --control-http (docs/RUNCONTROL.md)"),
	OPT_HOSTPORT("control-http", "HOST:PORT", O, control_http_host, control_http_port, 0,
		     .fixed = true,
		     .help = "the operator's HTTP endpoint (deploy/daqctl) with\n"
			     "--session-listen; requests signed with the run key"),
	OPT_STRING("console-dir", "DIR", O, console_dir, .fixed = true,
		   .help = "the operator's console served at GET / of\n"
			   "--control-http: index.html and its files (default:\n"
			   "the console make built, build/console)"),
	OPT_UINT("transition-timeout-ms", "T", O, transition_timeout_ms, 100, 86400000,
		 .fixed = true, .def = "15000",
		 .help = "with --session-listen: a configure, a stop or a reset\n"
			 "whose peers have not all answered within T ms fails,\n"
			 "naming each silent peer (default {default})"),
};
const size_t options_count = sizeof options_specs / sizeof options_specs[0];

/* Which options each role needs and which it has no use for. */
static bool options_check_role(const struct options *o)
{
	const char *role = options_role_names[o->role];
	bool hub = o->role != ROLE_BUILDER, builds = o->role != ROLE_HUB;
	const char *missing = NULL, *unused = NULL;
	if (hub && o->control_host[0] == '\0')
		missing = "--control-listen";
	else if (builds && o->listen_count == 0)
		missing = "--listen";
	else if (o->role == ROLE_BUILDER && o->hub_host[0] == '\0')
		missing = "--hub";
	else if (o->role == ROLE_HUB && o->events == 0)
		missing = "--events (the event manager assigns every ID of the run)";
	else if (o->role != ROLE_BUILDER && o->hub_host[0] != '\0')
		unused = "--hub";
	else if (!builds && (o->listen_count != 0 || o->shm_name[0] != '\0'))
		unused = o->shm_name[0] != '\0' ? "--shm-listen" : "--listen";
	else if (!hub && o->control_host[0] != '\0')
		unused = "--control-listen";
	if (missing != NULL || unused != NULL) {
		fprintf(stderr, "builderd: --role %s %s %s\n", role,
			missing != NULL ? "needs" : "does not take", missing != NULL ? missing : unused);
		return false;
	}
	if (o->role == ROLE_BOTH && o->builders != 1) {
		fprintf(stderr, "builderd: --builders %u needs --role hub and --role builder processes; --role both is the one builder of a run\n",
			o->builders);
		return false;
	}
	if (o->role != ROLE_BOTH && o->timeout_ms == 0) {
		fprintf(stderr, "builderd: --role %s --timeout-ms 0: a builder whose events never time out may hold one for ever without a token, and the hub gives a builder up after --timeout-ms + --stall-timeout-ms (%" PRIu64 " ms) without one; give the builders' event timeout\n",
			role, o->stall_timeout_ms);
		return false;
	}
	if (o->role == ROLE_BUILDER && o->builder_id >= o->builders) {
		fprintf(stderr, "builderd: --id %u is not a builder of --builders %u (IDs 0 .. %u)\n",
			o->builder_id, o->builders, o->builders - 1);
		return false;
	}
	return true;
}

uint64_t options_builder_stall_ms(const struct options *o)
{
	return o->stall_timeout_ms + o->timeout_ms;
}

bool options_check(void *opts, const struct daemon_options *d)
{
	const struct options *o = opts;
	if (!options_check_role(o))
		return false;
	if (o->readers > o->sources) {
		fprintf(stderr, "builderd: --readers %u exceeds --sources %u: every reader serves at least one source\n",
			o->readers, o->sources);
		return false;
	}
	if ((o->session_listen_host[0] != '\0') != (o->control_http_host[0] != '\0')) {
		fprintf(stderr, "builderd: --session-listen and --control-http go together: the hub serves runs an operator drives\n");
		return false;
	}
	if (o->session_listen_host[0] != '\0' && o->role == ROLE_BUILDER) {
		fprintf(stderr, "builderd: --session-listen is the hub's (--role both or hub); a --role builder serves runs with --session HUB:PORT\n");
		return false;
	}
	if (d->session_port != 0 && o->role != ROLE_BUILDER) {
		fprintf(stderr, "builderd: --session is for a --role builder; the hub serves runs with --session-listen\n");
		return false;
	}
	if (o->config_sha256[0] != '\0' && (strlen(o->config_sha256) != 64 ||
					     strspn(o->config_sha256, "0123456789abcdef") != 64)) {
		fprintf(stderr, "builderd: --config-sha256 takes 64 lowercase hex digits, not \"%s\"\n",
			o->config_sha256);
		return false;
	}
	if (o->record_format != OPTIONS_RECORD_NONE && o->role == ROLE_HUB) {
		fprintf(stderr, "builderd: --record is a builder's (--role both or builder); the hub builds no events\n");
		return false;
	}
	if (o->shm_capacity_bytes != 0 && o->shm_name[0] == '\0') {
		fprintf(stderr, "builderd: --shm-capacity needs --shm-listen NAME\n");
		return false;
	}
	return true;
}

bool options_check_listen(void *opts, const struct daemon_options *d)
{
	const struct options *o = opts;
	for (uint32_t i = 0; i < o->listen_count; i++)
		if (!daemon_listen_allowed(d, "--listen", o->listen_hosts[i]))
			return false;
	return (o->control_host[0] == '\0' ||
		daemon_listen_allowed(d, "--control-listen", o->control_host)) &&
	       (o->session_listen_host[0] == '\0' ||
		daemon_listen_allowed(d, "--session-listen", o->session_listen_host)) &&
	       (o->control_http_host[0] == '\0' ||
		daemon_listen_allowed(d, "--control-http", o->control_http_host));
}
