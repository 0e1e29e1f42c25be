/* What serve_session_states.c (the transitions, the deadlines, the run's end, the loop) and
 * serve_session_peers.c (the session port, the peers' links and arguments)
 * share, and nothing else includes. */
#ifndef ES_BD_SERVE_SESSION_INTERNAL_H
#define ES_BD_SERVE_SESSION_INTERNAL_H

#include "serve/serve_session.h"

#include "io/handshake.h"

struct msgconn;
struct options;

struct serve_peer {
	enum ctl_role role;
	uint32_t id;
	struct msgconn *link;
	struct serve_session *hs;
	char host[CTL_MAX_TEXT];
	uint32_t pid;
	struct ctl_state last;          /* its last STATE */
	bool configured;                /* answered this run's configure */
	bool answered;                  /* a STATE since the last reset it was sent */
	bool has_args;
	char args[CTL_MAX_ARGS_TEXT];
};

struct serve_session {
	struct event_base *base;
	const struct options *opt;   /* the base's */
	struct run_slot *slot;
	struct serve_peer *peers;
	size_t n_peers;
	int session_fd;
	struct event *ev_accept;
	struct event *ev_tick;
	struct event *ev_deadline;      /* the current state's, when it has one */
	struct event *ev_abandoned;     /* an abandoned run object's last chance to end */
	struct greet_door door;
	uint64_t refused;
	uint64_t session_lost;
	enum serve_state state;
	uint32_t run;
	/* Run objects made so far; the one whose end drives the state (0: the
	 * current one was abandoned, its end is only summarised). */
	uint64_t epoch, live_epoch;
	bool run_ready;                 /* the run object has every peer in */
	bool run_started;
	char error[512];
	char ended_by[512];
	char hub_args[CTL_MAX_ARGS_TEXT];
	bool has_hub_args;
	uint64_t start_ns, first_event_ns, stop_ns;
	struct serve_run_summary summaries[SERVE_SUMMARIES_KEPT];
	size_t n_summaries;
	bool quit;
	/* What the peers' links report up to the transitions, which set these:
	 * called through them, not by name, the peers' file stays below the
	 * states' (no call circle between the two). */
	void (*on_peer_state)(struct serve_session *hs, struct serve_peer *p, const struct ctl_state *st);
	void (*on_peer_left)(struct serve_session *hs, struct serve_peer *p);
};

/* ---- serve_session_peers.c ---- */
/* The peer table from the base's options, the session port bound and
 * accepting; false, logged, on failure (serve_session_peers_close undoes it). */
bool serve_session_peers_open(struct serve_session *hs, uint16_t *session_port);
void serve_session_peers_close(struct serve_session *hs);
void serve_session_send(struct serve_peer *p, const struct ctl_msg *m);
/* Sends every linked peer an order (CTL_RESET, CTL_SHUTDOWN). */
void serve_session_order_all(struct serve_session *hs, enum ctl_type type, const char *reason);
void serve_session_peer_name(const struct serve_peer *p, char *out, size_t len);      /* "reader 1" */
/* The peers missing a session link (args false) or arguments (true),
 * named; false with none. */
bool serve_session_missing(const struct serve_session *hs, bool args, char *out, size_t len);

#endif
