/* What hubsession_states.c (the transitions, the deadlines, the run's end, the loop) and
 * hubsession_peers.c (the session port, the peers' links and arguments)
 * share, and nothing else includes. */
#ifndef ES_BD_HUBSESSION_INTERNAL_H
#define ES_BD_HUBSESSION_INTERNAL_H

#include "serve/hubsession.h"

#include "io/handshake.h"

struct msgconn;
struct bd_options;

struct hub_peer {
	enum ctl_role role;
	uint32_t id;
	struct msgconn *link;
	struct hub_session *hs;
	char host[CTL_MAX_TEXT];
	uint32_t pid;
	struct ctl_state last;          /* its last STATE */
	bool configured;                /* answered this run's configure */
	bool answered;                  /* a STATE since the last reset it was sent */
	bool has_args;
	char args[CTL_MAX_ARGS_TEXT];
};

struct hub_session {
	struct event_base *base;
	const struct bd_options *opt;   /* the base's */
	struct run_slot *slot;
	struct hub_peer *peers;
	size_t n_peers;
	int session_fd;
	struct event *ev_accept;
	struct event *ev_tick;
	struct event *ev_deadline;      /* the current state's, when it has one */
	struct event *ev_abandoned;     /* an abandoned run object's last chance to end */
	struct greet_door door;
	uint64_t refused;
	uint64_t session_lost;
	enum hub_state state;
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
	struct hub_run_summary summaries[HUB_SUMMARIES_KEPT];
	size_t n_summaries;
	bool quit;
	/* What the peers' links report up to the transitions, which set these:
	 * called through them, not by name, the peers' file stays below the
	 * states' (no call circle between the two). */
	void (*on_peer_state)(struct hub_session *hs, struct hub_peer *p, const struct ctl_state *st);
	void (*on_peer_left)(struct hub_session *hs, struct hub_peer *p);
};

/* ---- hubsession_peers.c ---- */
/* The peer table from the base's options, the session port bound and
 * accepting; false, logged, on failure (hub_peers_close undoes it). */
bool hub_peers_open(struct hub_session *hs, uint16_t *session_port);
void hub_peers_close(struct hub_session *hs);
void hub_send(struct hub_peer *p, const struct ctl_msg *m);
/* Sends every linked peer an order (CTL_RESET, CTL_SHUTDOWN). */
void hub_order_all(struct hub_session *hs, enum ctl_type type, const char *reason);
void hub_peer_name(const struct hub_peer *p, char *out, size_t len);      /* "reader 1" */
/* The peers missing a session link (args false) or arguments (true),
 * named; false with none. */
bool hub_missing(const struct hub_session *hs, bool args, char *out, size_t len);

#endif
