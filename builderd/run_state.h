/* The builder run's state, shared by run.c (the loop) and metrics.c (the
 * end-of-run report). Private to builderd. */
#ifndef ES_RUN_STATE_H
#define ES_RUN_STATE_H

#include "run.h"
#include "peers.h"

#include "core/builder.h"
#include "wire/control.h"
#include "wire/frame.h"
#include "io/handshake.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct event;
struct msgconn;
struct out;
struct bdc;
struct bshm;
struct bshm_link;
struct bd_snapshot_link;

#define BD_TICK_US 2000u
#define BD_CREDIT_MIN_INTERVAL_NS 1000000u
#define BD_MAX_ERRORS 64u

enum bd_phase { BD_RUNNING, BD_FINISHED };

/* The builder's listeners, each with a greeting door of its own. */
enum bd_door { BD_DOOR_DATA, BD_DOOR_CONTROL, BD_DOOR_SHM, BD_DOORS };

struct bd;

enum bd_data_state { BD_DATA_WAITING, BD_DATA_STREAMING, BD_DATA_CLOSED, BD_DATA_FAILED };

/* A reader's data connection. */
struct bd_reader {
	struct bd *run;
	uint32_t id;
	enum bd_data_state state;
	int fd;
	struct event *ev_read;
	char address[CTL_MAX_TEXT];
	uint32_t pid;                    /* as its data HELLO says */
	uint8_t *buf;
	size_t cap, start, end;
	struct frm_decoder decoder;
	uint16_t sources[CTL_MAX_SOURCE_LIST];
	size_t source_count;
	uint64_t frames_received;
	uint64_t end_frames;
	uint64_t bytes_received;
	uint64_t read_calls;             /* TCP reads, or ring drains */
	struct bshm_link *shm;           /* shm.c: the ring, when not TCP */
};

struct bd {
	struct event_base *base;
	struct bd_options opt;
	enum bd_phase phase;
	int status;
	int data_fd, control_fd;
	struct event *ev_data_accept, *ev_control_accept, *ev_tick;
	struct greet_door doors[BD_DOORS];
	struct bld *core;
	struct out *out;
	struct bdc *clocks;               /* clocks.c: offsets and bounds */
	struct bshm *shm;                 /* shm.c: rings for co-located readers */
	int64_t *source_offsets_ns;
	struct peer_table peers;          /* every source and reader */
	struct bd_reader *readers;        /* [readers] */
	int32_t *reader_of_source;        /* [sources], -1 when none */
	uint64_t *end_frame_events;       /* [sources], event count in END frames */
	bool *end_frame_seen;
	uint64_t frames_received;
	uint64_t refused_connections;
	uint64_t start_ns;
	uint64_t first_fragment_ns;
	uint64_t last_complete_ns;
	uint64_t last_progress_ns;
	uint64_t wind_up_ns;              /* the watchdog fired: gathering final counters */
	uint64_t last_progress_log_ns;
	uint64_t progress_complete_at_log;
	uint64_t credits_sent;
	uint32_t open_conns;              /* after the run: peers still flushing BYE */
	char *errors[BD_MAX_ERRORS];
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t end_ns;
	bool started;                     /* START sent to the sources */
	double recent_events_per_s;       /* completions over the last second */
	uint64_t rate_sample_ns;
	uint64_t rate_sample_complete;
	struct prom_server *prom;         /* --metrics-listen */
	struct bd_snapshot_link *snap_links;   /* [readers], for reports */
	char host[256];                   /* the builder's host name */
	bool progress_on_terminal;        /* stderr is a terminal: one live line */
	bool progress_line_shown;
};

/* run.c functions shared with the data transports (shm.c). */

/* Records an error of the run: logged, listed in metrics.json, and the run
 * ends non-zero. */
void bd_error(struct bd *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks a reader's data HELLO, whatever the transport: the reader it names
 * is waiting for its data path, and the sources it claims are its own. NULL
 * after refusing it (answered with ERROR, fd closed). */
struct bd_reader *bd_reader_admit(struct bd *b, int fd, const struct ctl_hello *h,
				  const char *peer);

/* The reader's data path is up (WELCOME sent): records the sources it
 * serves and starts the run once every peer is there. */
void bd_reader_started(struct bd_reader *rd, const struct ctl_hello *h, const char *peer);
/* A data path that ends before it carried a byte (a peer that took the
 * reader's slot and left, a ring never attached) took nothing from the run:
 * frees the slot for the reader and returns true, unless it was the reader
 * itself (its control link is up under the same pid), the reader is already
 * done or gone, or the run is over (false: close it as usual). why: what
 * happened, after "Reader N's data connection from ADDRESS". */
bool bd_reader_release(struct bd_reader *rd, const char *why);

/* The per-frame path of both transports: decodes and verifies the frame at
 * buf (avail bytes) and feeds it to the builder core, or notes its source's
 * END. exact: buf is one ring record, which must hold exactly one frame.
 * Returns FRM_OK with *frame_bytes consumed, FRM_NEED_MORE (stream only), or
 * an error, already reported, after which the caller closes the path. */
enum frm_status bd_reader_take(struct bd_reader *rd, const uint8_t *buf, size_t avail,
			       bool exact, size_t *frame_bytes, uint64_t now);

/* Closes a reader's data path (socket or ring). */
void bd_reader_close(struct bd_reader *rd, enum bd_data_state state);

/* After a batch of frames from a reader: writes the records they completed,
 * publishes the admission limit and ends the run when all is done. */
void bd_after_frames(struct bd *b);


#endif
