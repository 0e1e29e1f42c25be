/* What builderd's reports are made from: a plain copy of the run's figures,
 * filled by the modules that own them (the hub: peers, errors, status; the
 * control port: its greetings; progress: the rate; ingest: the data paths
 * and the builder core; the output: latencies and records; the event
 * manager: each builder as it sees it and its own sections), read by
 * metrics.c for metrics.json and the summary, live.c for the live /metrics
 * and /status views, progress.c for the progress line. Nothing here is a
 * module's state: a report never reaches into another module. Private to
 * builderd. */
#ifndef ES_BD_SNAPSHOT_H
#define ES_BD_SNAPSHOT_H

#include "core/builder.h"
#include "core/evm.h"
#include "core/hist.h"
#include "peer.h"
#include "options.h"
#include "wire/counters.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct clocks;
struct ctl_report;
struct output_uncertainty;

/* A section of metrics.json a module owns whole (the event manager's
 * "routing", "manager" and "builders"), made only when the document is
 * written: the report calls make(owner) and knows nothing of the owner. */
struct snapshot_section {
	const char *name;
	json_t *(*make)(const void *owner);
	const void *owner;
};
#define SNAPSHOT_SECTIONS 4

/* One TCP connection (rail, core/rails.h) of a reader's data path: its
 * counters, metrics.json's "builder.from_reader.R.rail.K" (wire/counters.h,
 * CNT_LIST_BUILDER_RAIL). */
struct snapshot_rail {
#define SNAPSHOT_RAIL_FIELD(name) uint64_t name;
	CNT_LIST_BUILDER_RAIL(SNAPSHOT_RAIL_FIELD)
#undef SNAPSHOT_RAIL_FIELD
	char address[CTL_MAX_TEXT];      /* the connection's peer */
};

/* One reader's data path. */
struct snapshot_link {
	const char *transport;        /* "tcp", "shm", or "none" (never opened) */
	const char *address;          /* tcp: the peer's address */
	const char *segment;          /* shm: "/es-NAME-r<id>" */
	uint64_t ring_capacity_bytes; /* shm */
	bool attached;                /* shm: the reader attached */
	bool peer_died;               /* shm: it vanished without closing the ring */
	uint64_t wakeups;             /* shm: data eventfd wake-ups */
	uint64_t frames_received;
	uint64_t end_frames;
	uint64_t bytes_received;
	uint64_t read_calls;          /* TCP reads, or ring drains */
	const uint16_t *sources;      /* the sources it serves */
	size_t source_count;
	uint32_t rails;               /* tcp: its connections (core/rails.h) */
	const struct snapshot_rail *rail;   /* [rails]: each connection's counters */
};

struct snapshot {
	const struct options *opt;
	bool running;                 /* the run has not finished */
	int status;                   /* 0 while nothing went wrong */

	/* the hub */
	const struct peer_table *peers;
	const char *const *errors;
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t refused_connections;
	uint64_t control_refused;     /* control messages refused for their seal */
	uint64_t greetings_busy;      /* every listener's, summed */
	uint64_t greetings_evicted;
	uint64_t greetings_timed_out;
	uint64_t credits_sent;
	double recent_events_per_s;

	/* event building: the data paths and the builder core */
	const struct snapshot_link *links;   /* [opt->readers] */
	uint64_t frames_read;
	uint64_t first_fragment_ns;
	uint64_t last_complete_ns;
	struct bld_counters builder;
	uint32_t pending;
	uint64_t admission_limit;     /* 0: admission off */
	uint64_t oldest_pending;      /* UINT64_MAX: none */
	uint64_t decided_below;       /* every event ID below it is decided (in role hub,
				       * retired: decided by its builder or lost with it) */
	uint64_t core_memory_bytes;
	uint64_t read_buffers_bytes;
	uint64_t shm_capacity_bytes;  /* 0 without shared memory */

	/* run control, on the monotonic clock, 0 when it has not happened:
	 * START sent, the first event decided, the operator's drained stop
	 * asked (with its proposal and its final last_event), the books
	 * closed */
	uint64_t started_ns;
	uint64_t first_built_ns;
	uint64_t drain_ns;
	uint64_t fault_ns;                 /* a peer stopped the run for a fault; 0: none */
	uint64_t drain_proposed;
	uint64_t drain_last_event;
	uint64_t books_ns;

	/* the record files; latency NULL once they are closed */
	const struct hist *latency;
	uint64_t events_written;
	uint64_t record_writes;
	uint64_t negative_latencies;
	uint64_t output_bytes;
	/* the event files (--record, data/record.h): closed files, events
	 * and bytes written, events handed over after the writer failed or
	 * with a fragment larger than its cell, time in writev and syncs; and
	 * the memory the fragments kept until written take by construction */
	uint64_t data_files;
	uint64_t data_events_written;
	uint64_t data_bytes_written;
	uint64_t data_events_unwritten;
	uint64_t data_events_unrecorded;
	uint64_t data_write_ns;
	uint64_t data_sync_calls;
	uint64_t data_store_bytes;
	uint64_t data_free_bytes;          /* on the files' file system, at the writer's last check */
	uint64_t data_events_in_files;     /* the closed files' manifests' events */
	uint64_t data_direct_bytes;        /* of data_bytes_written, by direct I/O */
	uint64_t data_frames_in_place;     /* kept where they arrived, not copied */
	uint64_t data_frames_copied_late;  /* of those, copied to free their place */
	uint64_t data_recording;           /* 1: this builder records (a hub: how many of its do) */
	const char *data_format;           /* "raw", "hdf5"; NULL: not recorded */
	/* --role hub: the builders' latency uncertainty merged (NULL in role
	 * both, where the output has it) and the longest builder's span from
	 * its first fragment to its last complete event (0: unknown) */
	const struct output_uncertainty *fleet_uncertainty;
	uint64_t build_span_ns;

	/* clocks, read through clocks.h only */
	const struct clocks *clocks;

	/* --role hub: the event manager's part, filled by manager_snapshot()
	 * (hub false, the rest empty, in role both): each builder as the
	 * manager sees it (zero for an id it does not know), the IDs assigned
	 * and not yet decided over every builder, its sections of metrics.json */
	bool hub;
	struct evm_builder_view builder_views[EVM_MAX_BUILDERS];
	uint64_t assignment_backlog;
	struct snapshot_section sections[SNAPSHOT_SECTIONS];
	size_t n_sections;

	/* the builder process itself */
	const struct ctl_report *self;
	const char *self_host;
	uint32_t self_pid;
	uint64_t self_peak_rss_kib;
};

#endif
