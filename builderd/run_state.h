/* The builder run's state, shared by run.c (the loop) and metrics.c (the
 * end-of-run report). Private to builderd. */
#ifndef ES_RUN_STATE_H
#define ES_RUN_STATE_H

#include "run.h"

#include "builder.h"
#include "ctl.h"
#include "frame.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct event;
struct msgconn;
struct out;

#define BD_TICK_US 2000u
#define BD_CREDIT_MIN_INTERVAL_NS 1000000u
#define BD_MAX_ERRORS 64u

enum bd_phase { BD_RUNNING, BD_FINISHED };

struct bd;

/* A daemon on the control channel. */
struct bd_peer {
	struct bd *run;
	enum ctl_role role;
	uint32_t id;
	bool connected;          /* greeted at least once */
	bool reported;           /* END received */
	bool lost;               /* control connection gone before END */
	struct msgconn *conn;
	char host[CTL_MAX_TEXT];
	char address[CTL_MAX_TEXT];
	uint32_t pid;
	struct ctl_report *report;
	uint64_t credit_sent;    /* last limit sent to a reader */
	uint64_t credit_sent_ns;
	uint64_t credits;
};

enum bd_data_state { BD_DATA_WAITING, BD_DATA_STREAMING, BD_DATA_CLOSED, BD_DATA_FAILED };

/* A reader's data connection. */
struct bd_reader {
	struct bd *run;
	uint32_t id;
	enum bd_data_state state;
	int fd;
	struct event *ev_read;
	char address[CTL_MAX_TEXT];
	uint8_t *buf;
	size_t cap, start, end;
	struct frm_decoder decoder;
	uint16_t sources[CTL_MAX_SOURCE_LIST];
	size_t source_count;
	uint64_t frames_received;
	uint64_t end_frames;
	uint64_t bytes_received;
	uint64_t read_calls;
};

struct bd {
	struct event_base *base;
	struct bd_options opt;
	enum bd_phase phase;
	int status;
	int data_fd, control_fd;
	struct event *ev_data_accept, *ev_control_accept, *ev_tick;
	struct bld *core;
	struct out *out;
	int64_t *source_offsets_ns;
	struct bd_peer *source_peers;     /* [sources] */
	struct bd_peer *reader_peers;     /* [readers] */
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
	uint64_t last_progress_log_ns;
	uint64_t progress_complete_at_log;
	uint64_t credits_sent;
	uint32_t open_conns;              /* after the run: peers still flushing BYE */
	char *errors[BD_MAX_ERRORS];
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t end_ns;
	bool started;                     /* START sent to the sources */
};


#endif
