/* The serving hub's state machine (docs/RUNCONTROL.md, "The hub's states"),
 * described in one place: every state, whether it waits on its peers under
 * a deadline, and every transition as a rule (the event, the states it
 * applies in, the state it leads to). serve_session_states.c changes its state only
 * through serve_fsm_next; whoever describes the hub (its /state, a console)
 * lists the rules that apply now with serve_fsm_rule_applies. Pure: no I/O. */
#ifndef ES_BD_SERVE_FSM_H
#define ES_BD_SERVE_FSM_H

#include <stdbool.h>
#include <stddef.h>

enum serve_state {
	SERVE_IDLE,
	SERVE_CONFIGURING,     /* the run object made, the peers told, not all in yet */
	SERVE_CONFIGURED,      /* every peer in, clocks measured: START is held */
	SERVE_RUNNING,
	SERVE_STOPPING,        /* the run is ending: its run object or peers not idle yet */
	SERVE_RESETTING,       /* every peer told to reset: not all answered idle yet */
	SERVE_ERROR,           /* a transition failed, named; reset leaves it */
	SERVE_STATE_COUNT
};

enum serve_event {
	SERVE_EV_CONFIGURE,    /* the operator's configure */
	SERVE_EV_CONFIGURED,   /* every peer answered configured, the run object has them all */
	SERVE_EV_START,        /* the operator's start: the held START goes out */
	SERVE_EV_STOP,         /* the operator's stop: a drained stop */
	SERVE_EV_RUN_OVER,     /* the current run object ended by itself */
	SERVE_EV_SETTLED,      /* no run object, every linked peer idle (and answered a reset) */
	SERVE_EV_FAILED,       /* a peer refused the configure or left during it */
	SERVE_EV_DEADLINE,     /* the state's deadline passed: the laggards named */
	SERVE_EV_RESET,        /* the operator's reset: every peer told, their answers awaited */
	SERVE_EV_SHUTDOWN,     /* the operator's shutdown or a signal: every peer told, then exit */
	SERVE_EVENT_COUNT
};

/* One transition: event, in any state of the mask `from` (bit 1u << state),
 * leads to `to`. */
struct serve_fsm_rule {
	enum serve_event event;
	unsigned from;
	enum serve_state to;
	const char *meaning;     /* one line, for a description of the machine */
};

const char *serve_fsm_state_name(enum serve_state s);
const char *serve_fsm_event_name(enum serve_event e);

/* Whether state s waits on the peers (and the run object) with a deadline
 * (--transition-timeout-ms): configuring, stopping, resetting. */
bool serve_fsm_has_deadline(enum serve_state s);

/* The state event leads to from state `from`; false when it does not apply
 * there (the caller refuses it, or for an event of the run, ignores it). */
bool serve_fsm_next(enum serve_state from, enum serve_event event, enum serve_state *to);

/* The rules, in order (count, then each); a rule applies now when its mask
 * holds the current state. */
size_t serve_fsm_rule_count(void);
const struct serve_fsm_rule *serve_fsm_rule_at(size_t i);
bool serve_fsm_rule_applies(const struct serve_fsm_rule *r, enum serve_state now);

#endif
