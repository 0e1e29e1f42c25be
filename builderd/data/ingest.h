/* The data side of a builder run: the reader table (each reader's data
 * path, whatever its link), the per-frame path into the builder core and the
 * record files. The links (tcp.c, shm.c) greet readers and move bytes; they
 * hand frames to ingest_take() and report through the functions below. The hub
 * (hub.c) sees this side only through this header: it is the seam a second
 * builder, or an event manager handing event ranges to several, plugs into.
 * Private to builderd. */
#ifndef ES_BD_INGEST_H
#define ES_BD_INGEST_H

#include "core/builder.h"
#include "options.h"
#include "snapshot.h"
#include "wire/control.h"
#include "wire/frame.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct snapshot;
struct output;
struct link_ops;

enum ingest_data_state { INGEST_DATA_WAITING, INGEST_DATA_STREAMING, INGEST_DATA_CLOSED, INGEST_DATA_FAILED };

/* A reader's data path: what ingest counts, and the link that carries it.
 * Over TCP it is rails connections (its HELLOs' `rails`), each its own
 * stream of frames; over shared memory one ring, rail 0. */
struct ingest_reader {
	struct ingest *ing;
	uint32_t id;
	enum ingest_data_state state;
	char address[CTL_MAX_TEXT];
	uint32_t pid;                    /* as its data HELLO says */
	struct frm_decoder decoder[CTL_MAX_RAILS];   /* one per connection: each its stream */
	uint16_t sources[CTL_MAX_SOURCE_LIST];
	size_t source_count;
	uint64_t frames_received;
	uint64_t end_frames;
	uint64_t bytes_received;
	uint64_t read_calls;             /* TCP reads, or ring drains */
	uint32_t rails;                  /* its connections; 1 until a HELLO said */
	uint32_t rails_greeted;          /* bit K: rail K was welcomed */
	struct snapshot_rail rail[CTL_MAX_RAILS];
	/* --role builder: the frame at the head of the link's buffer is of an
	 * event not assigned yet; the link stops reading until ingest_assign()
	 * resumes it (link.h's resume). */
	bool held;
	const struct link_ops *link;  /* NULL until a link carried it */
	void *link_state;                /* the link's own, for the link only */
};

/* What ingest asks of the hub. */
struct ingest_hooks {
	void *ctx;
	/* Records an error of the run (logged, listed, the run fails). */
	void (*error)(void *ctx, const char *text);
	/* A reader's data path is up: the run may start. */
	void (*data_started)(void *ctx);
	/* Data arrived at now (monotonic): the run makes progress. Optional. */
	void (*progress)(void *ctx, uint64_t now);
	/* Before a batch of frames is taken, at now (monotonic): false when
	 * none may be (a builder its hub gave up while the process was stopped
	 * is fenced first). NULL: always. */
	bool (*may_take)(void *ctx, uint64_t now);
	/* After a batch of frames or a path's end: credits, end of run. */
	void (*after_frames)(void *ctx);
	/* true while reader id's own control link (same pid) is up, or it has
	 * reported or is gone: its data slot is not given back then. */
	bool (*reader_holds_slot)(void *ctx, uint32_t reader, uint32_t pid);
};

struct ingest;

/* Opens the record files in opt->out_dir (created) and the builder core.
 * NULL with a logged reason. */
struct ingest *ingest_create(struct event_base *base, const struct options *opt,
		       const int64_t *source_offsets_ns, const struct ingest_hooks *hooks);

/* A link's listener (tcp.c, shm.c), started by the run's wiring: ingest
 * ticks it, reports it and stops it. -ENOSPC past INGEST_MAX_LISTENERS. */
#define INGEST_MAX_LISTENERS 4
struct link_listener_ops;
int ingest_add_link(struct ingest *g, const struct link_listener_ops *ops, void *listener);

/* Stops the listeners, closes every path and the record files. */
void ingest_destroy(struct ingest *g);

const struct options *ingest_options(const struct ingest *g);
/* The id the data port's WELCOME names: --id in --role builder, else 0. */
uint32_t ingest_builder_id(const struct ingest *g);
struct event_base *ingest_base(const struct ingest *g);
struct output *ingest_output(const struct ingest *g);

/* ---- for the links --------------------------------------------------- */

/* Whether a batch of frames may be taken now (the hooks' may_take). */
bool ingest_may_take(struct ingest *g, uint64_t now);

/* Records an error of the run through the hub. */
void ingest_error(struct ingest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A connection a link refused at its greeting. */
void ingest_refused(struct ingest *g);

/* Checks a reader's data HELLO, whatever the link: the run, the channel,
 * the reader waiting for its data path, its sources its own; its rail
 * (core/rails.h) one of the link's `rails`, as its earlier connections
 * said, at most listeners (the builder's addresses), not connected yet
 * (bad_rail, duplicate_id), and greeting the listener of its rail, on
 * (bad_rail: the reader's rail URLs crossed). A later rail of a reader
 * already streaming is admitted too. NULL after refusing it (answered
 * with ERROR, fd closed). ingest_admit: a link of one address (shared memory). */
struct ingest_reader *ingest_admit_rail(struct ingest *g, int fd, const struct ctl_hello *h,
				 const char *peer, uint32_t listeners, uint32_t on);
struct ingest_reader *ingest_admit(struct ingest *g, int fd, const struct ctl_hello *h, const char *peer);

/* A connection of the reader's data path is up (WELCOME sent) on link:
 * the first records the sources it serves, sets their lanes in the core to
 * the HELLO's rails and tells the hub; each marks its rail greeted. */
void ingest_started(struct ingest_reader *rd, const struct link_ops *link, const struct ctl_hello *h,
		 const char *peer);

/* A data path that ends before it carried a byte took nothing from the
 * run: frees the slot for the reader and returns true, unless the reader
 * holds it (hooks.reader_holds_slot), the path is not streaming, or the run
 * is over (false: close it as usual). why: after "Reader N's data
 * connection from ADDRESS". */
bool ingest_release(struct ingest_reader *rd, const char *why);

/* The per-frame path of every link: decodes and verifies the frame at buf
 * (avail bytes), that came on connection rail (0 over shm), and feeds it
 * to the builder core, or notes its source's END (over only once every rail
 * delivered one). A fragment whose lane is another rail's is counted
 * (frames_wrong_rail), an error of the run, and built all the same.
 * exact: buf is one record that must hold exactly one frame. Returns FRM_OK
 * with *frame_bytes consumed, FRM_NEED_MORE (stream only), or an error,
 * already reported, after which the caller closes the path. In --role
 * builder a frame of an event not yet assigned (or any, before the plan
 * came: ingest_set_plan) returns
 * FRM_NEED_MORE with rd->held set, whatever exact: the link keeps it
 * unconsumed, stops reading, and takes it again once resumed. */
enum frm_status ingest_take_rail(struct ingest_reader *rd, uint32_t rail, const uint8_t *buf,
			      size_t avail, bool exact, size_t *frame_bytes, uint64_t now);
/* A frame whose bytes stay where they lie until its link hands them back
 * (a shared-memory ring's record), kept there by the recorder: which
 * window cell refers to it. */
struct ingest_in_place {
	bool kept;
	uint32_t slot;
	uint16_t src;
};

/* The same on a link of one connection (shared memory): rail 0. in_place:
 * NULL, or where to say that the recorder kept the frame where it lies
 * (--record-keep in-place, ingest_keeps_in_place): then the link keeps its
 * bytes there until ingest_refers says no more, or has them copied first
 * (ingest_own). */
enum frm_status ingest_take(struct ingest_reader *rd, const uint8_t *buf, size_t avail, bool exact,
			 size_t *frame_bytes, uint64_t now, struct ingest_in_place *in_place);
bool ingest_keeps_in_place(const struct ingest *g);
bool ingest_refers(const struct ingest *g, const struct ingest_in_place *kept, const uint8_t *frame);
void ingest_own(struct ingest *g, const struct ingest_in_place *kept);

/* Data arrived at now: the run makes progress. */
void ingest_progress(struct ingest *g, uint64_t now);

/* How long a link may feed frames in one turn of the loop before it gives
 * the others, the tick and the control link theirs: a builder whose filter
 * is slow still answers its hub's probes and sends its tokens on time. */
#define INGEST_TURN_NS 5000000u

/* Closes a reader's data path through its link; state says how it ended. */
void ingest_close(struct ingest_reader *rd, enum ingest_data_state state);

/* After a batch of frames: writes the records completed, then the hub's
 * turn (credits, end of run). */
void ingest_after_frames(struct ingest *g);

/* false once the run is over (ingest_finish). */
bool ingest_running(const struct ingest *g);

/* Reader r of the run. */
struct ingest_reader *ingest_reader_at(const struct ingest *g, uint32_t r);

/* ---- for the builder role (--role builder, brun.c) -------------------- */

struct ownroute;

/* From here on frames are numbered by plan (ownroute.h, which ingest then
 * owns and frees): each global event ID is mapped to the builder's own
 * local ID before the core sees it, and records carry the global ID
 * again. Set before any frame is taken. */
void ingest_set_plan(struct ingest *g, struct ownroute *plan);
struct ownroute *ingest_plan(const struct ingest *g);

/* The hub's next assign, through the plan; resumes every link held for
 * an unassigned event. 0, or -errno with the reason in why (an error of
 * the run, the caller's to report). */
int ingest_assign(struct ingest *g, const struct ctl_assign *a, char *why, size_t why_size);

/* The builder role's counters (wire/counters.h, CNT_LIST_BUILDER_ROLE),
 * those ingest keeps: frags_misrouted, frames_held_unassigned. */
uint64_t ingest_misrouted(const struct ingest *g);
/* Frames every reader sent on another rail than their lane's. */
uint64_t ingest_wrong_rail(const struct ingest *g);
uint64_t ingest_held_unassigned(const struct ingest *g);

/* Given up by the hub (docs/BUILDERS.md, "A given-up builder is fenced"):
 * cuts every reader's data path and seals the record files (output_seal):
 * nothing more is built or written. Returns the records dropped unwritten. */
uint64_t ingest_fence(struct ingest *g);

/* Local IDs decided: those below the lowest undecided one (the core's
 * admission limit less its window), at most the IDs assigned. */
uint64_t ingest_decided(const struct ingest *g);

/* ---- for the hub ----------------------------------------------------- */

enum ingest_data_state ingest_reader_state(const struct ingest *g, uint32_t r);
uint64_t ingest_reader_frames(const struct ingest *g, uint32_t r);
const uint16_t *ingest_reader_sources(const struct ingest *g, uint32_t r, size_t *count);
/* Reader r's link of two rails or more: its connections' counters in
 * *rail, their count returned; 0 for a link of one. */
uint32_t ingest_reader_rails(const struct ingest *g, uint32_t r, const struct snapshot_rail **rail);

/* The reader serving source s, -1 when none is known. */
int32_t ingest_reader_of_source(const struct ingest *g, uint16_t s);

/* A reader's control HELLO names the sources its data HELLO will: known
 * from the first, a reader lost before its data path opened still has its
 * sources stopped and its share of the books closed. */
void ingest_claim(struct ingest *g, const struct ctl_hello *h);

/* Cuts reader r's data path (FAILED) if it is waiting or streaming. */
void ingest_cut(struct ingest *g, uint32_t r);

/* Every data path has ended (or never will). */
bool ingest_done(const struct ingest *g);

/* The admission limit readers may forward below (UINT64_MAX: off). */
uint64_t ingest_admission_limit(const struct ingest *g);

const struct bld_counters *ingest_counters(const struct ingest *g);
uint32_t ingest_pending(const struct ingest *g);
uint64_t ingest_oldest_pending(const struct ingest *g);
const struct hist *ingest_latency(const struct ingest *g);

/* Source s's END frame, when one arrived: the event count it announced. */
bool ingest_end_frame(const struct ingest *g, uint16_t s, uint64_t *events);
uint64_t ingest_unique_from(const struct ingest *g, uint16_t s);
uint64_t ingest_frames_received(const struct ingest *g);

/* From the hub's tick: expires events, writes records, watches the links. */
void ingest_tick(struct ingest *g, uint64_t now);

/* The end of the run: cuts every path still streaming, closes the books of
 * the core with the events the run generated, writes the records. 0, or
 * -errno when a write failed. */
int ingest_finish(struct ingest *g, uint64_t events_generated);

/* Closes the record files; false if a write failed at any time. */
bool ingest_close_output(struct ingest *g);

/* The data side's part of a report. */
void ingest_snapshot(const struct ingest *g, struct snapshot *s);

#endif
