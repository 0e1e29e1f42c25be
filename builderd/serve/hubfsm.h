/* The serving hub's state machine (docs/RUNCONTROL.md, "The hub's states"),
 * described in one place: every state, whether it waits on its peers under
 * a deadline, and every transition as a rule (the event, the states it
 * applies in, the state it leads to). hubsession_states.c changes its state only
 * through hub_fsm_next; whoever describes the hub (its /state, a console)
 * lists the rules that apply now with hub_fsm_rule_applies. Pure: no I/O. */
#ifndef ES_BD_HUBFSM_H
#define ES_BD_HUBFSM_H

#include <stdbool.h>
#include <stddef.h>

enum hub_state {
	HUB_IDLE,
	HUB_CONFIGURING,     /* the run object made, the peers told, not all in yet */
	HUB_CONFIGURED,      /* every peer in, clocks measured: START is held */
	HUB_RUNNING,
	HUB_STOPPING,        /* the run is ending: its run object or peers not idle yet */
	HUB_RESETTING,       /* every peer told to reset: not all answered idle yet */
	HUB_ERROR,           /* a transition failed, named; reset leaves it */
	HUB_STATE_COUNT
};

enum hub_event {
	HUB_EV_CONFIGURE,    /* the operator's configure */
	HUB_EV_CONFIGURED,   /* every peer answered configured, the run object has them all */
	HUB_EV_START,        /* the operator's start: the held START goes out */
	HUB_EV_STOP,         /* the operator's stop: a drained stop */
	HUB_EV_RUN_OVER,     /* the current run object ended by itself */
	HUB_EV_SETTLED,      /* no run object, every linked peer idle (and answered a reset) */
	HUB_EV_FAILED,       /* a peer refused the configure or left during it */
	HUB_EV_DEADLINE,     /* the state's deadline passed: the laggards named */
	HUB_EV_RESET,        /* the operator's reset: every peer told, their answers awaited */
	HUB_EV_SHUTDOWN,     /* the operator's shutdown or a signal: every peer told, then exit */
	HUB_EVENT_COUNT
};

/* One transition: event, in any state of the mask `from` (bit 1u << state),
 * leads to `to`. */
struct hub_rule {
	enum hub_event event;
	unsigned from;
	enum hub_state to;
	const char *meaning;     /* one line, for a description of the machine */
};

const char *hub_state_name(enum hub_state s);
const char *hub_event_name(enum hub_event e);

/* Whether state s waits on the peers (and the run object) with a deadline
 * (--transition-timeout-ms): configuring, stopping, resetting. */
bool hub_state_has_deadline(enum hub_state s);

/* The state event leads to from state `from`; false when it does not apply
 * there (the caller refuses it, or for an event of the run, ignores it). */
bool hub_fsm_next(enum hub_state from, enum hub_event event, enum hub_state *to);

/* The rules, in order (count, then each); a rule applies now when its mask
 * holds the current state. */
size_t hub_fsm_rule_count(void);
const struct hub_rule *hub_fsm_rule_at(size_t i);
bool hub_fsm_rule_applies(const struct hub_rule *r, enum hub_state now);

#endif
