/* The serving hub's state machine (hubfsm.h): its states and rules. */
#include "serve/hubfsm.h"

#define IN(s) (1u << (s))
#define ANY_BUT_IDLE (IN(HUB_CONFIGURING) | IN(HUB_CONFIGURED) | IN(HUB_RUNNING) | \
		      IN(HUB_STOPPING) | IN(HUB_RESETTING) | IN(HUB_ERROR))

static const struct {
	const char *name;
	bool deadline;
} states[HUB_STATE_COUNT] = {
	[HUB_IDLE] = { "idle", false },
	[HUB_CONFIGURING] = { "configuring", true },
	[HUB_CONFIGURED] = { "configured", false },
	[HUB_RUNNING] = { "running", false },
	[HUB_STOPPING] = { "stopping", true },
	[HUB_RESETTING] = { "resetting", true },
	[HUB_ERROR] = { "error", false },
};

static const char *const event_names[HUB_EVENT_COUNT] = {
	"configure", "configured", "start", "stop", "run over", "settled", "failed",
	"deadline", "reset", "shutdown",
};

/* The first rule of an event whose mask holds the state wins. */
static const struct hub_rule rules[] = {
	{ HUB_EV_CONFIGURE, IN(HUB_IDLE), HUB_CONFIGURING,
	  "make the hub's run object (START held), send every peer its configure" },
	{ HUB_EV_CONFIGURED, IN(HUB_CONFIGURING), HUB_CONFIGURED,
	  "every peer answered configured and greeted the run object, clocks measured" },
	{ HUB_EV_START, IN(HUB_CONFIGURED), HUB_RUNNING, "the held START goes out" },
	{ HUB_EV_STOP, IN(HUB_RUNNING), HUB_STOPPING,
	  "a drained stop: STOP to every source, the books closed" },
	{ HUB_EV_RUN_OVER, IN(HUB_RUNNING) | IN(HUB_STOPPING), HUB_STOPPING,
	  "the run object is over: waiting for every peer to report idle" },
	{ HUB_EV_RUN_OVER, IN(HUB_CONFIGURING) | IN(HUB_CONFIGURED), HUB_ERROR,
	  "the run object ended before START: something failed" },
	{ HUB_EV_SETTLED, IN(HUB_STOPPING) | IN(HUB_RESETTING), HUB_IDLE,
	  "no run object, every peer idle: ready for the next configure" },
	{ HUB_EV_FAILED, IN(HUB_CONFIGURING), HUB_ERROR,
	  "a peer refused the configure or left: the run abandoned, every peer reset" },
	{ HUB_EV_DEADLINE, IN(HUB_CONFIGURING) | IN(HUB_STOPPING) | IN(HUB_RESETTING), HUB_ERROR,
	  "no answer within --transition-timeout-ms: the silent peers named" },
	{ HUB_EV_RESET, ANY_BUT_IDLE, HUB_RESETTING,
	  "the run abandoned, every peer told to reset; idle once all answered idle" },
	{ HUB_EV_SHUTDOWN, IN(HUB_IDLE) | ANY_BUT_IDLE, HUB_STOPPING,
	  "every peer told to exit; the hub exits once its run object is over" },
};

const char *hub_state_name(enum hub_state s)
{
	return s < HUB_STATE_COUNT ? states[s].name : "?";
}

const char *hub_event_name(enum hub_event e)
{
	return e < HUB_EVENT_COUNT ? event_names[e] : "?";
}

bool hub_state_has_deadline(enum hub_state s)
{
	return s < HUB_STATE_COUNT && states[s].deadline;
}

size_t hub_fsm_rule_count(void) { return sizeof rules / sizeof rules[0]; }
const struct hub_rule *hub_fsm_rule_at(size_t i) { return &rules[i]; }

bool hub_fsm_rule_applies(const struct hub_rule *r, enum hub_state now)
{
	return now < HUB_STATE_COUNT && (r->from & IN(now)) != 0;
}

bool hub_fsm_next(enum hub_state from, enum hub_event event, enum hub_state *to)
{
	for (size_t i = 0; i < hub_fsm_rule_count(); i++) {
		if (rules[i].event == event && hub_fsm_rule_applies(&rules[i], from)) {
			*to = rules[i].to;
			return true;
		}
	}
	return false;
}
