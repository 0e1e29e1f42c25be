/* builderd's options: what a run is given (plain data, read by every
 * module of the run), and the table --help, the man page and the parsing
 * come from (see sys/opt.h). */
#ifndef ES_BD_OPTIONS_H
#define ES_BD_OPTIONS_H

#include "io/daemon.h"
#include "wire/control.h"
#include "sys/opt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const struct opt_spec options_specs[];
extern const size_t options_count;
extern const char options_usage_synopsis[], options_usage_description[], options_usage_epilogue[],
	options_usage_example[];

/* What no single option can check: readers against sources, --shm-capacity
 * without --shm-listen, a hub's or builder's --timeout-ms 0. */
bool options_check(void *opts, const struct daemon_options *d);

/* Once the run key is loaded: the listeners on loopback unless there is one. */
bool options_check_listen(void *opts, const struct daemon_options *d);

/* Which part of a run this process plays (docs/BUILDERS.md): the hub and
 * the one builder of a run (both), the hub of M builders that only manages
 * (hub), or one of those builders (builder). */
enum role { ROLE_BOTH, ROLE_HUB, ROLE_BUILDER };

/* "both", "hub", "builder": --role's choices, in enum order. */
extern const char *const options_role_names[];

struct options {
	int role;                       /* enum role */
	uint32_t builders;              /* M, builder ids 0 .. M-1 */
	uint32_t builder_id;            /* --id, role builder */
	char hub_host[256];             /* --hub, role builder: the hub's control port */
	uint16_t hub_port;
	int routing;                    /* enum ctl_routing_mode, role hub */
	uint32_t batch;                 /* event IDs per assignment */
	uint32_t window_batches;        /* batches live at once */
	uint64_t backlog_ms;            /* evm_config.backlog_ns, in ms */
	uint32_t run_id;
	uint16_t sources;
	uint32_t readers;
	/* --listen, once per rail (core/rails.h): the data port's addresses,
	 * all on one port (0: the first picks a free one the others take) */
	char listen_hosts[CTL_MAX_RAILS][256];
	uint16_t listen_port;
	uint32_t listen_count;
	char control_host[256];
	uint16_t control_port;
	char port_file[1024];
	char metrics_host[256];         /* --metrics-listen; "" = off */
	uint16_t metrics_port;
	char out_dir[1024];
	uint32_t max_inflight;          /* window W, in event IDs */
	uint64_t timeout_ms;
	uint64_t skip_timeout_ms;       /* see bld_config.skip_timeout_ns */
	uint32_t filter_modulo;
	uint32_t filter_cost_us;
	uint32_t flush_every;
	uint32_t max_fragment_bytes;
	uint32_t batch_bytes;
	uint32_t socket_buffer_bytes;   /* kernel buffers of reader connections; 0 = default */
	uint64_t peer_timeout_ms;
	uint64_t handshake_timeout_ms;
	uint64_t stall_timeout_ms;      /* a peer silent this long is given up */
	uint64_t probe_period_ms;       /* one UDP clock exchange per peer this often */
	uint64_t first_event;
	uint64_t events;                /* 0: learnt from the sources */
	bool no_admission;
	char shm_name[64];              /* --shm-listen NAME; "" = no shared memory */
	uint64_t shm_capacity_bytes;    /* ring per co-located reader; 0 = default */
	bool no_clock_correction;       /* measure offsets but apply none */
	char session_listen_host[256];  /* --session-listen: "" = one run */
	uint16_t session_listen_port;
	char control_http_host[256];    /* --control-http */
	uint16_t control_http_port;
	char console_dir[1024];         /* --console-dir; "" = the built one */
	uint64_t transition_timeout_ms; /* the hub's deadline for a transition's answers */
	int record_format;              /* enum options_record: --record */
	char record_dir[1024];          /* "" = out_dir */
	uint32_t record_max_payload;    /* a fragment's cell: this + the frame header */
	uint64_t record_max_file_bytes;
	int record_sync;                /* enum evw_sync: close, batch, never */
	int record_io;                  /* enum options_io: direct, buffered */
	int record_keep;                /* enum options_keep: copy, in-place */
	uint64_t record_slice_ms;       /* a slice's length; 0: by count only, or one slice */
	uint64_t record_slice_events;   /* a slice's events; 0: by time only */
	char config_sha256[65];         /* hex, "" = not given (zeros in the files) */
	bool quiet;
};

/* What --record writes (docs/RECORDING.md). */
enum options_record { OPTIONS_RECORD_NONE, OPTIONS_RECORD_RAW, OPTIONS_RECORD_HDF5 };
enum options_io { OPTIONS_IO_BUFFERED, OPTIONS_IO_DIRECT };
enum options_keep { OPTIONS_KEEP_COPY, OPTIONS_KEEP_IN_PLACE };

/* How long the hub lets a builder that holds events go without a TOKEN:
 * --stall-timeout-ms past --timeout-ms, the builders' event timeout (a
 * healthy builder may wait that long for an event's last fragment before
 * it decides it; docs/BUILDERS.md, "A dead or stalled builder"). */
uint64_t options_builder_stall_ms(const struct options *o);

#endif
