/* Every counter that leaves a process, named once: the lists of the END and
 * STATS reports (docs/PROTOCOL.md) and of metrics.json's counters
 * (docs/METRICS.md), and the names of their groups. A daemon builds its
 * counter struct from its list, writes its report from it, and a reader of
 * a report (the books, metrics.json, the watchdog) asks for a counter by
 * the list's symbol, CNT_SOURCE(frames_wire), never by a string: a renamed
 * counter then fails to compile where it is read rather than reading 0 at
 * run time. scripts/check_counters.py fails on a counter's or a group's
 * name written as a string literal anywhere else in the C tree.
 *
 * Each list CNT_LIST_<L>(X) calls X(name) once per counter, in report
 * order; for each there is an index enum (CNT_<L>_<name>, CNT_<L>_COUNT),
 * a table of names (cnt_<l>_names) and CNT_<L>(name), the name as a
 * string. Pure: no allocation, no I/O. */
#ifndef ES_WIRE_COUNTERS_H
#define ES_WIRE_COUNTERS_H

#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The groups of a report (struct ctl_group's name). */
#define CNT_GROUP_TOTALS ""          /* the daemon's own counters */
#define CNT_GROUP_PROCESS "process"  /* CPU time and peak memory: CNT_LIST_PROCESS */
#define CNT_GROUP_CLOCK "clock"      /* the injected clock offset: CNT_LIST_CLOCK */
#define CNT_GROUP_PROBE "probe"      /* where the UDP clock probes go: CNT_LIST_PROBE */
#define CNT_GROUP_LATENCY "hist"     /* a builder's latency (--role builder): CNT_LIST_LATENCY */
#define CNT_GROUP_CONTROL_HTTP "control_http" /* the hub's /state: CNT_LIST_CONTROL_HTTP */
/* The group "chrony" (CKS_CHRONY_GROUP) is no counters but chrony's tracking
 * state, written and read by one codec, core/clockoffset's. */

/* A group name, with its NUL. */
#define CNT_GROUP_BYTES CTL_MAX_NAME

/* A source's END report, group "": what it generated and sent;
 * frags_cut_by_stop the event IDs past the operator's drained stop's
 * last_event, never generated. */
#define CNT_LIST_SOURCE(X) \
	X(events) X(frags_omitted) X(frags_sent) X(frags_duplicated) X(frags_delayed) \
	X(frags_abandoned) X(frags_cut_by_stop) X(frames_wire) X(frames_bad_injected) X(frames_unsent) \
	X(bytes_wire) X(write_calls) X(write_blocked) X(sending_ns)

/* A source's STATS to its hub while it sends, group "", for the operator's
 * live view (docs/RUNCONTROL.md, "The console"), taken at every whole
 * second of the run after START so that every source's are of the same
 * instants: that second (run_second, 1, 2, ...), its send positions done
 * (event IDs generated into its stream, or omitted by the seed's faults)
 * and the event ID of the last of them (meaningless while send_positions
 * is 0). */
#define CNT_LIST_SOURCE_STATS(X) X(run_second) X(send_positions) X(last_event_sent)

/* A reader's counters of one source, in group "source.N" of its END report
 * (cnt_group_peer) and summed over its sources in "". Its STATS carries
 * the sums of held_ns, held_count and frames_verified in "". */
#define CNT_LIST_READER_SOURCE(X) \
	X(frames_received) X(frames_forwarded) X(frames_rejected) X(frames_held_at_end) \
	X(frames_verified) X(bytes_received) X(read_calls) X(held_count) X(held_ns) \
	X(end_frames) X(err_magic) X(err_version) X(err_flags) X(err_length) X(err_crc) \
	X(err_run) X(err_truncated) X(err_no_end) X(err_after_end) X(err_dropped) X(err_idle) \
	X(err_event_id) X(frames_late) X(frames_lost_builder)

/* A reader's END report, group "", after those sums: its forwarder (the
 * ring_ ones only over shared memory), its door and its buffers. */
#define CNT_LIST_READER(X) \
	X(writev_calls) X(bytes_forwarded) X(transport_shm) X(ring_records) \
	X(ring_full_waits) X(ring_capacity_bytes) X(credits_received) \
	X(refused_connections) X(greetings_busy) X(greetings_evicted) \
	X(greetings_timed_out) X(buffer_bytes)

/* Several builders (docs/BUILDERS.md): a reader's counters of its link to
 * builder B, group "builder.B" (cnt_group_peer) of its END report. */
#define CNT_LIST_READER_LINK(X) \
	X(frames_forwarded) X(bytes_forwarded) X(end_frames) X(writev_calls) \
	X(transport_shm) X(pending_frames_max) X(pending_bytes_max) X(pending_full)

/* Rails (core/rails.h): a reader's counters of one TCP connection of its
 * link to a builder, group "builder.B.rail.K" (cnt_group_rail) of its END
 * report, one per rail of a TCP link of two rails or more (over one rail
 * the link's group says it all);
 * socket_buffer_bytes the send buffer the kernel granted (SO_SNDBUF read
 * back). */
#define CNT_LIST_READER_RAIL(X) \
	X(frames_forwarded) X(bytes_forwarded) X(writev_calls) X(socket_buffer_bytes)

/* Every peer's END report, group "process". */
#define CNT_LIST_PROCESS(X) X(cpu_user_us) X(cpu_sys_us) X(max_rss_kib)

/* Every peer's first STATS and its END, group "clock": the offset injected
 * with --clock-offset-ns, as a magnitude and a sign. */
#define CNT_LIST_CLOCK(X) X(injected_offset_ns) X(injected_offset_negative)

/* Every peer's first STATS, group "probe", when it has a probe socket. */
#define CNT_LIST_PROBE(X) X(udp_port) X(token)

/* The builder core's counters (core/builder), metrics.json's "builder". */
#define CNT_LIST_BUILDER_CORE(X) \
	X(frags_received) X(frags_unique) X(frags_duplicate) X(frags_late) X(frags_invalid) \
	X(frags_in_expired) X(events_created) X(events_complete) X(events_accepted) \
	X(events_filtered) X(events_expired) X(events_expired_timeout) \
	X(events_expired_window) X(events_expired_end_of_run) X(events_expired_skipped) \
	X(events_unobserved) X(window_slides) X(ids_given_up)

/* builderd's own counters, in metrics.json's "builder" after the core's;
 * control_refused the control messages it refused for their seal
 * (io/msgseal: a bad tag, or out of sequence), each of which closed its
 * connection. */
#define CNT_LIST_BUILDER(X) \
	X(greetings_busy) X(greetings_evicted) X(greetings_timed_out) X(frames_read) \
	X(refused_connections) X(credits_sent) X(events_written) X(record_writes) \
	X(negative_latencies) X(control_refused) \
	X(data_files) X(data_events_written) X(data_bytes_written) X(data_events_unwritten) \
	X(data_events_unrecorded) X(data_write_ns) X(data_sync_calls) X(data_recording) \
	X(data_events_in_files) X(data_direct_bytes) X(data_frames_in_place) X(data_frames_copied_late)

/* builderd's counters of one reader's data link, metrics.json's
 * "builder.from_reader.R" (cnt_group_builder_link). */
#define CNT_LIST_BUILDER_LINK(X) X(frames_received) X(end_frames) X(bytes_received) X(read_calls)

/* builderd's counters of one TCP connection (one rail) of reader R's data
 * link: metrics.json's "builder.from_reader.R.rail.K" and, with --role
 * builder, its END report's "reader.R.rail.K" (cnt_group_rail), for a
 * link of two rails or more;
 * frames_wrong_rail the frames of an event whose lane (core/rails.h) is
 * another rail's: the reader and this builder disagree on the lanes, an
 * error; socket_buffer_bytes the receive buffer granted (SO_RCVBUF). */
#define CNT_LIST_BUILDER_RAIL(X) \
	X(frames_received) X(bytes_received) X(read_calls) X(frames_wrong_rail) \
	X(socket_buffer_bytes)

/* A builder's END report to its hub (--role builder), group "", after the
 * core's (CNT_LIST_BUILDER_CORE) and builderd's (CNT_LIST_BUILDER) own:
 * what the hub assigned it and what it made of it; clocks_received the
 * hub's clock messages applied, build_span_ns its first fragment to its
 * last complete event (its monotonic clock), what the hub's rates divide by. */
#define CNT_LIST_BUILDER_ROLE(X) \
	X(events_assigned) X(ids_decided) X(frags_misrouted) X(frames_held_unassigned) \
	X(tokens_sent) X(assignments_received) X(clocks_received) X(build_span_ns)

/* A builder's latency histogram in its END report (--role builder): group
 * "hist" holds these, groups "hist.K" the non-empty buckets of
 * core/hist as counters "b<index>" (docs/BUILDERS.md). */
#define CNT_LIST_LATENCY(X) \
	X(hist_samples) X(hist_min_ns) X(hist_max_ns) X(hist_sum_ns) X(hist_uncertainty_max_ns) \
	X(hist_bounded) X(hist_unbounded)

/* A builder's STATS to its hub every second (--role builder), group "",
 * besides CNT_BUILDER_CORE's events_complete, events_expired and
 * events_accepted, CNT_BUILDER_ROLE's tokens_sent and, when it records
 * (--record), CNT_BUILDER's data_recording, data_files, data_bytes_written
 * and data_write_ns: the IDs assigned to it not yet decided, the events it
 * completed per second over the last second (rounded), and when it records
 * the free bytes where its event files go (at the writer's last check). */
#define CNT_LIST_BUILDER_STATS(X) X(events_in_flight) X(events_complete_per_s) X(data_free_bytes)

/* The hub's event manager (--role hub), metrics.json's "manager". */
#define CNT_LIST_MANAGER(X) \
	X(assignments) X(events_assigned) X(tokens_received) X(tokens_refused) \
	X(waits_for_tokens) X(waits_for_window) X(busy_spells) X(builders_lost) \
	X(events_lost_with_builders)

/* The serving hub's operator endpoint (io/ctlhttp), /state's
 * "control_http": requests read whole, refused (any refusal), of them
 * replays and refusals for a full nonce table; its door (io/httplisten):
 * connections accepted, evicted for a newcomer, closed at the deadline,
 * accepts paused for want of descriptors, log lines held back. */
#define CNT_LIST_CONTROL_HTTP(X) \
	X(http_requests) X(http_refused) X(http_replayed) X(http_nonces_full) \
	X(http_connections) X(http_evicted) X(http_timed_out) X(http_accept_backoffs) \
	X(http_log_suppressed)

#define CNT_ENUM_ITEM_(list, name) CNT_##list##_##name,
#define CNT_ENUM_SOURCE_(name) CNT_ENUM_ITEM_(SOURCE, name)
#define CNT_ENUM_SOURCE_STATS_(name) CNT_ENUM_ITEM_(SOURCE_STATS, name)
#define CNT_ENUM_READER_SOURCE_(name) CNT_ENUM_ITEM_(READER_SOURCE, name)
#define CNT_ENUM_READER_(name) CNT_ENUM_ITEM_(READER, name)
#define CNT_ENUM_PROCESS_(name) CNT_ENUM_ITEM_(PROCESS, name)
#define CNT_ENUM_CLOCK_(name) CNT_ENUM_ITEM_(CLOCK, name)
#define CNT_ENUM_PROBE_(name) CNT_ENUM_ITEM_(PROBE, name)
#define CNT_ENUM_BUILDER_CORE_(name) CNT_ENUM_ITEM_(BUILDER_CORE, name)
#define CNT_ENUM_BUILDER_(name) CNT_ENUM_ITEM_(BUILDER, name)
#define CNT_ENUM_BUILDER_LINK_(name) CNT_ENUM_ITEM_(BUILDER_LINK, name)
#define CNT_ENUM_READER_LINK_(name) CNT_ENUM_ITEM_(READER_LINK, name)
#define CNT_ENUM_BUILDER_ROLE_(name) CNT_ENUM_ITEM_(BUILDER_ROLE, name)
#define CNT_ENUM_BUILDER_STATS_(name) CNT_ENUM_ITEM_(BUILDER_STATS, name)
#define CNT_ENUM_MANAGER_(name) CNT_ENUM_ITEM_(MANAGER, name)
#define CNT_ENUM_READER_RAIL_(name) CNT_ENUM_ITEM_(READER_RAIL, name)
#define CNT_ENUM_BUILDER_RAIL_(name) CNT_ENUM_ITEM_(BUILDER_RAIL, name)
#define CNT_ENUM_LATENCY_(name) CNT_ENUM_ITEM_(LATENCY, name)
#define CNT_ENUM_CONTROL_HTTP_(name) CNT_ENUM_ITEM_(CONTROL_HTTP, name)

enum cnt_source { CNT_LIST_SOURCE(CNT_ENUM_SOURCE_) CNT_SOURCE_COUNT };
enum cnt_source_stats { CNT_LIST_SOURCE_STATS(CNT_ENUM_SOURCE_STATS_) CNT_SOURCE_STATS_COUNT };
enum cnt_reader_source { CNT_LIST_READER_SOURCE(CNT_ENUM_READER_SOURCE_) CNT_READER_SOURCE_COUNT };
enum cnt_reader { CNT_LIST_READER(CNT_ENUM_READER_) CNT_READER_COUNT };
enum cnt_process { CNT_LIST_PROCESS(CNT_ENUM_PROCESS_) CNT_PROCESS_COUNT };
enum cnt_clock { CNT_LIST_CLOCK(CNT_ENUM_CLOCK_) CNT_CLOCK_COUNT };
enum cnt_probe { CNT_LIST_PROBE(CNT_ENUM_PROBE_) CNT_PROBE_COUNT };
enum cnt_builder_core { CNT_LIST_BUILDER_CORE(CNT_ENUM_BUILDER_CORE_) CNT_BUILDER_CORE_COUNT };
enum cnt_builder { CNT_LIST_BUILDER(CNT_ENUM_BUILDER_) CNT_BUILDER_COUNT };
enum cnt_builder_link { CNT_LIST_BUILDER_LINK(CNT_ENUM_BUILDER_LINK_) CNT_BUILDER_LINK_COUNT };
enum cnt_reader_link { CNT_LIST_READER_LINK(CNT_ENUM_READER_LINK_) CNT_READER_LINK_COUNT };
enum cnt_builder_role { CNT_LIST_BUILDER_ROLE(CNT_ENUM_BUILDER_ROLE_) CNT_BUILDER_ROLE_COUNT };
enum cnt_builder_stats { CNT_LIST_BUILDER_STATS(CNT_ENUM_BUILDER_STATS_) CNT_BUILDER_STATS_COUNT };
enum cnt_manager { CNT_LIST_MANAGER(CNT_ENUM_MANAGER_) CNT_MANAGER_COUNT };
enum cnt_reader_rail { CNT_LIST_READER_RAIL(CNT_ENUM_READER_RAIL_) CNT_READER_RAIL_COUNT };
enum cnt_builder_rail { CNT_LIST_BUILDER_RAIL(CNT_ENUM_BUILDER_RAIL_) CNT_BUILDER_RAIL_COUNT };
enum cnt_latency { CNT_LIST_LATENCY(CNT_ENUM_LATENCY_) CNT_LATENCY_COUNT };
enum cnt_control_http { CNT_LIST_CONTROL_HTTP(CNT_ENUM_CONTROL_HTTP_) CNT_CONTROL_HTTP_COUNT };

/* The names, indexed by the enums. */
extern const char *const cnt_source_names[CNT_SOURCE_COUNT];
extern const char *const cnt_source_stats_names[CNT_SOURCE_STATS_COUNT];
extern const char *const cnt_reader_source_names[CNT_READER_SOURCE_COUNT];
extern const char *const cnt_reader_names[CNT_READER_COUNT];
extern const char *const cnt_process_names[CNT_PROCESS_COUNT];
extern const char *const cnt_clock_names[CNT_CLOCK_COUNT];
extern const char *const cnt_probe_names[CNT_PROBE_COUNT];
extern const char *const cnt_builder_core_names[CNT_BUILDER_CORE_COUNT];
extern const char *const cnt_builder_names[CNT_BUILDER_COUNT];
extern const char *const cnt_builder_link_names[CNT_BUILDER_LINK_COUNT];
extern const char *const cnt_reader_link_names[CNT_READER_LINK_COUNT];
extern const char *const cnt_builder_role_names[CNT_BUILDER_ROLE_COUNT];
extern const char *const cnt_builder_stats_names[CNT_BUILDER_STATS_COUNT];
extern const char *const cnt_manager_names[CNT_MANAGER_COUNT];
extern const char *const cnt_latency_names[CNT_LATENCY_COUNT];
extern const char *const cnt_control_http_names[CNT_CONTROL_HTTP_COUNT];
extern const char *const cnt_reader_rail_names[CNT_READER_RAIL_COUNT];
extern const char *const cnt_builder_rail_names[CNT_BUILDER_RAIL_COUNT];

/* A counter's name by its list and name: a name outside the list does not
 * compile. */
#define CNT_SOURCE(name) (cnt_source_names[CNT_SOURCE_##name])
#define CNT_SOURCE_STATS(name) (cnt_source_stats_names[CNT_SOURCE_STATS_##name])
#define CNT_READER_SOURCE(name) (cnt_reader_source_names[CNT_READER_SOURCE_##name])
#define CNT_READER(name) (cnt_reader_names[CNT_READER_##name])
#define CNT_PROCESS(name) (cnt_process_names[CNT_PROCESS_##name])
#define CNT_CLOCK(name) (cnt_clock_names[CNT_CLOCK_##name])
#define CNT_PROBE(name) (cnt_probe_names[CNT_PROBE_##name])
#define CNT_BUILDER_CORE(name) (cnt_builder_core_names[CNT_BUILDER_CORE_##name])
#define CNT_BUILDER(name) (cnt_builder_names[CNT_BUILDER_##name])
#define CNT_BUILDER_LINK(name) (cnt_builder_link_names[CNT_BUILDER_LINK_##name])
#define CNT_READER_LINK(name) (cnt_reader_link_names[CNT_READER_LINK_##name])
#define CNT_BUILDER_ROLE(name) (cnt_builder_role_names[CNT_BUILDER_ROLE_##name])
#define CNT_BUILDER_STATS(name) (cnt_builder_stats_names[CNT_BUILDER_STATS_##name])
#define CNT_MANAGER(name) (cnt_manager_names[CNT_MANAGER_##name])
#define CNT_LATENCY(name) (cnt_latency_names[CNT_LATENCY_##name])
#define CNT_CONTROL_HTTP(name) (cnt_control_http_names[CNT_CONTROL_HTTP_##name])
#define CNT_READER_RAIL(name) (cnt_reader_rail_names[CNT_READER_RAIL_##name])
#define CNT_BUILDER_RAIL(name) (cnt_builder_rail_names[CNT_BUILDER_RAIL_##name])

/* "<role>.<id>": a reader's group of source id in its report
 * (CTL_ROLE_SOURCE), and metrics.json's prefix of a peer's report groups
 * ("source.3", "reader.1"). Writes into buf (CNT_GROUP_BYTES) and returns
 * it. */
const char *cnt_group_peer(char buf[CNT_GROUP_BYTES], enum ctl_role role, uint32_t id);

/* "builder.from_reader.<id>": metrics.json's group of builderd's counters
 * of reader id's data link. Writes into buf and returns it. */
const char *cnt_group_builder_link(char buf[CNT_GROUP_BYTES], uint32_t id);

/* "<link>.rail.<k>": the group of rail k of the link whose group is link
 * ("builder.2" in a reader's report, "reader.1" in a builder's END,
 * "builder.from_reader.1" in metrics.json). Writes into buf and returns it. */
const char *cnt_group_rail(char buf[CNT_GROUP_BYTES], const char *link, uint32_t rail);

/* Whether name is a counter of any list above. */
bool cnt_known(const char *name);

#endif
