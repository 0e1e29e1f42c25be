#include "options.h"

#include "io/shmlink.h"
#include "config.h"
#include "wire/control.h"
#include "wire/frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char rdr_usage_synopsis[] =
	"--id N --run R --listen HOST:PORT --sources LIST\n"
	"--builder tcp://HOST:PORT|shm://NAME --control HOST:PORT [options]\n"
	"--id N --run R --listen HOST:PORT --sources LIST\n"
	"--builder 0=URL ... --builder M-1=URL --control HUB_HOST:PORT [options]\n"
	"(a tcp:// link given again, up to 4 times: one TCP connection per rail)";

const char rdr_usage_description[] =
	"A reader: accepts its sources' data connections, verifies every frame and\n"
	"forwards verified frames to the builder in batches (over TCP, or through a\n"
	"shared-memory ring on the builder's host), holding fragments at or beyond\n"
	"the builder's admission limit. With one --builder B=URL per builder of a\n"
	"run of several, each fragment goes to the builder the hub assigned its\n"
	"event to, and is held until its event is assigned. A TCP link given once\n"
	"per rail (network) is one connection per rail, its frames dealt to them in\n"
	"lanes of consecutive events (docs/BUILDERS.md, Rails).";

const char rdr_usage_example[] =
	"  readoutd --id 0 --run 1 --listen 127.0.0.1:7000 --sources 0,1 \\\n"
	"           --builder tcp://127.0.0.1:7100 --control 127.0.0.1:6999\n"
	"  readoutd --id 1 --run 1 --listen 127.0.0.1:7001 --sources 2,3 \\\n"
	"           --builder shm://run1 --control 127.0.0.1:6999\n"
	"  readoutd --id 0 --run 1 --listen 127.0.0.1:7000 --sources 0,1 \\\n"
	"           --builder 0=shm://run1-b0 --builder 1=tcp://10.0.0.2:7100 \\\n"
	"           --control 127.0.0.1:6999\n"
	"  readoutd --id 0 --run 1 --listen 198.18.0.2:7000 --sources 0,1 \\\n"
	"           --builder tcp://198.18.0.3:7100 --builder tcp://198.18.1.3:7100 \\\n"
	"           --control 198.18.0.3:6999\n";

static bool rdr_take_sources(const char *flag, const char *arg, void *opts)
{
	struct rdr_options *o = opts;
	return opt_id_list(flag, arg, o->sources, RDR_MAX_SOURCES, &o->source_count, 65536);
}

_Static_assert(RDR_MAX_RAILS == CTL_MAX_RAILS, "a link's rails are the HELLO's");
_Static_assert(RDR_MAX_LINKS == CTL_MAX_BUILDERS, "a reader's links are the run's builders");

/* One URL into link l, who names it in an error ("builder 2", "the
 * builder"): its first, or its next rail. */
static bool rdr_take_url(const char *flag, const char *arg, const char *url, struct rdr_link *l,
			 const char *who)
{
	bool shm = strncmp(url, "shm://", 6) == 0;
	if (l->rails > 0 && (shm || l->shm[0] != '\0')) {
		opt_error(flag, "'%s': %s is given again, but a shared-memory link is one ring whatever the rails: it takes one shm://NAME and no other URL",
			  arg, who);
		return false;
	}
	if (l->rails >= RDR_MAX_RAILS) {
		opt_error(flag, "'%s': %s has more than %u URLs; a link is at most %u TCP connections, one per rail",
			  arg, who, RDR_MAX_RAILS, RDR_MAX_RAILS);
		return false;
	}
	if (shm) {
		if (!shl_name_valid(url + 6)) {
			opt_error(flag, "expected shm://NAME with NAME of 1 to %u letters, digits, '.', '_' or '-' (not starting with '.'), got '%s'",
				  SHL_NAME_MAX, arg);
			return false;
		}
		snprintf(l->shm, sizeof l->shm, "%s", url + 6);
		l->rails = 1;
		return true;
	}
	if (strncmp(url, "tcp://", 6) != 0) {
		opt_error(flag, "expected tcp://HOST:PORT or shm://NAME, got '%s'", arg);
		return false;
	}
	struct rdr_rail *r = &l->rail[l->rails];
	if (!opt_hostport(flag, url + 6, r->host, sizeof r->host, &r->port, false))
		return false;
	l->rails++;
	return true;
}

/* B=URL: builder B's link; URL alone: the one builder of a CREDIT run.
 * Either again: the link's next rail. */
static bool rdr_take_builder(const char *flag, const char *arg, void *opts)
{
	struct rdr_options *o = opts;
	const char *eq = strchr(arg, '=');
	const char *scheme = strstr(arg, "://");
	if (eq == NULL || (scheme != NULL && scheme < eq)) {
		if (o->routing) {
			opt_error(flag, "'%s': a URL without B= names the one builder of the run, so it is never given with B=URL links",
				  arg);
			return false;
		}
		o->plain_given = true;
		o->link_count = 1;
		return rdr_take_url(flag, arg, arg, &o->links[0], "the builder");
	}
	char *stop;
	errno = 0;
	unsigned long b = strtoul(arg, &stop, 10);
	if (stop != eq || eq == arg || arg[0] < '0' || arg[0] > '9' || errno != 0 ||
	    b >= RDR_MAX_LINKS) {
		opt_error(flag, "expected B=URL with B a builder ID of 0 .. %u, got '%s'",
			  RDR_MAX_LINKS - 1, arg);
		return false;
	}
	if (o->plain_given) {
		opt_error(flag, "'%s': B=URL links cannot follow a URL without B= (the one builder of the run)",
			  arg);
		return false;
	}
	o->routing = true;
	o->link_given[b] = true;
	if (b + 1 > o->link_count)
		o->link_count = (uint32_t)b + 1;
	char who[32];
	snprintf(who, sizeof who, "builder %lu", b);
	return rdr_take_url(flag, arg, eq + 1, &o->links[b], who);
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
	OPT_UINT("id", "N", O, id, 0, 65535, .fixed = true, .required = true, .group = "Run",
		 .help = "reader ID (0 .. readers-1)"),
	OPT_UINT("run", "R", O, run_id, 0, UINT32_MAX, .required = true,
		 .help = "run number; frames of another run are refused"),
	OPT_HOSTPORT("listen", "HOST:PORT", O, listen_host, listen_port, 0, .fixed = true, .required = true,
		     .group = "Connections",
		     .help = "data port for the sources (port 0: any free port)"),
	OPT_CUSTOM("sources", "LIST", rdr_take_sources, .fixed = true, .required = true,
		   .help = "source IDs served, e.g. 0,1 or 0-3"),
	OPT_STRING("port-file", "PATH", O, port_file,
		   .fixed = true, .help = "write 'data PORT' there once listening"),
	DAEMON_OPT_METRICS_LISTEN(O, .fixed = true),
	OPT_CUSTOM("builder", "tcp://HOST:PORT", rdr_take_builder, .fixed = true, .required = true,
		   .help = "the builder's data port; given again (up to 4\n"
			   "times), its port on the next rail, in rail order:\n"
			   "one TCP connection per rail"),
	OPT_NOTE("--builder shm://NAME",
		 .help = "the builder's shared-memory rings (its --shm-listen\n"
			 "NAME); only on the builder's host"),
	OPT_NOTE("--builder B=URL",
		 .help = "builder B's link (URL as above) in a run of several\n"
			 "builders: one for each B of 0 .. M-1, routed by the\n"
			 "hub's assignments instead of CREDIT; B=tcp://... given\n"
			 "again (up to 4 times) is B's next rail"),
	OPT_HOSTPORT("control", "HOST:PORT", O, control_host, control_port, 1, .fixed = true, .required = true,
		     .help = "the builder's control port (the hub's with B=URL links)"),
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
		 .help = "kernel send/receive buffers of each builder connection\n"
			 "(default: the kernel's autotuning)\n"
			 "memory: sources x (B + max-fragment + 42)"),
	OPT_UINT("pending-frames", "N", O, pending_frames, 1, 1u << 20, .def = "8192",
		 .help = "frames routed to one builder connection (one rail\n"
			 "of its link) and not yet written before the sources\n"
			 "feeding it pause (default {default}); memory: 16 bytes\n"
			 "x (C x (N + sources) + sources x min(C x N,\n"
			 "(batch-bytes + max-fragment) / 42)), C the builder\n"
			 "connections (every link's rails summed)"),
	OPT_UINT("pending-bytes", "B", O, pending_bytes, 1, UINT64_MAX, .def = "16777216",
		 .help = "bytes routed to one builder connection and not yet\n"
			 "written (default {default}; the frames stay in the\n"
			 "receive buffers, so this takes no memory of its own)"),
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
	OPT_UINT("skip-assign", "N", O, skip_assign, 1, UINT64_MAX,
		 .help = "take the hub's N-th assignment (from 1) as never\n"
			 "received, so that the next one leaves a gap"),
};
const size_t rdr_option_count = sizeof rdr_option_specs / sizeof rdr_option_specs[0];

bool rdr_options_check(void *opts, const struct daemon_options *d)
{
	(void)d;
	const struct rdr_options *o = opts;
	for (uint32_t b = 0; o->routing && b < o->link_count; b++) {
		if (!o->link_given[b]) {
			fprintf(stderr, "readoutd: --builder: no link for builder %u; the links given go up to builder %u, so each of 0 .. %u needs one\n",
				b, o->link_count - 1, o->link_count - 1);
			return false;
		}
	}
	if (o->skip_assign != 0 && !o->routing) {
		fprintf(stderr, "readoutd: --skip-assign takes a run of several builders (--builder B=URL links)\n");
		return false;
	}
	if (o->shm_inject != RDR_SHM_INJECT_NONE && o->routing) {
		fprintf(stderr, "readoutd: --shm-inject takes the one builder of a run (--builder shm://NAME without B=)\n");
		return false;
	}
	if (o->shm_inject != RDR_SHM_INJECT_NONE && o->links[0].shm[0] == '\0') {
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
