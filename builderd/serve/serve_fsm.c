/* The serving hub's state machine (serve_fsm.h): its states and rules. */
#include "serve/serve_fsm.h"

#define IN(s) (1u << (s))
#define ANY_BUT_IDLE (IN(SERVE_CONFIGURING) | IN(SERVE_CONFIGURED) | IN(SERVE_RUNNING) | \
		      IN(SERVE_STOPPING) | IN(SERVE_RESETTING) | IN(SERVE_ERROR))

static const struct {
	const char *name;
	bool deadline;
} states[SERVE_STATE_COUNT] = {
	[SERVE_IDLE] = { "idle", false },
	[SERVE_CONFIGURING] = { "configuring", true },
	[SERVE_CONFIGURED] = { "configured", false },
	[SERVE_RUNNING] = { "running", false },
	[SERVE_STOPPING] = { "stopping", true },
	[SERVE_RESETTING] = { "resetting", true },
	[SERVE_ERROR] = { "error", false },
};

static const char *const event_names[SERVE_EVENT_COUNT] = {
	"configure", "configured", "start", "stop", "run over", "settled", "failed",
	"deadline", "reset", "shutdown",
};

/* The first rule of an event whose mask holds the state wins. */
static const struct serve_fsm_rule rules[] = {
	{ SERVE_EV_CONFIGURE, IN(SERVE_IDLE), SERVE_CONFIGURING,
	  "make the hub's run object (START held), send every peer its configure" },
	{ SERVE_EV_CONFIGURED, IN(SERVE_CONFIGURING), SERVE_CONFIGURED,
	  "every peer answered configured and greeted the run object, clocks measured" },
	{ SERVE_EV_START, IN(SERVE_CONFIGURED), SERVE_RUNNING, "the held START goes out" },
	{ SERVE_EV_STOP, IN(SERVE_RUNNING), SERVE_STOPPING,
	  "a drained stop: STOP to every source, the books closed" },
	{ SERVE_EV_RUN_OVER, IN(SERVE_RUNNING) | IN(SERVE_STOPPING), SERVE_STOPPING,
	  "the run object is over: waiting for every peer to report idle" },
	{ SERVE_EV_RUN_OVER, IN(SERVE_CONFIGURING) | IN(SERVE_CONFIGURED), SERVE_ERROR,
	  "the run object ended before START: something failed" },
	{ SERVE_EV_SETTLED, IN(SERVE_STOPPING) | IN(SERVE_RESETTING), SERVE_IDLE,
	  "no run object, every peer idle: ready for the next configure" },
	{ SERVE_EV_FAILED, IN(SERVE_CONFIGURING), SERVE_ERROR,
	  "a peer refused the configure or left: the run abandoned, every peer reset" },
	{ SERVE_EV_DEADLINE, IN(SERVE_CONFIGURING) | IN(SERVE_STOPPING) | IN(SERVE_RESETTING), SERVE_ERROR,
	  "no answer within --transition-timeout-ms: the silent peers named" },
	{ SERVE_EV_RESET, ANY_BUT_IDLE, SERVE_RESETTING,
	  "the run abandoned, every peer told to reset; idle once all answered idle" },
	{ SERVE_EV_SHUTDOWN, IN(SERVE_IDLE) | ANY_BUT_IDLE, SERVE_STOPPING,
	  "every peer told to exit; the hub exits once its run object is over" },
};

const char *serve_fsm_state_name(enum serve_state s)
{
	return s < SERVE_STATE_COUNT ? states[s].name : "?";
}

const char *serve_fsm_event_name(enum serve_event e)
{
	return e < SERVE_EVENT_COUNT ? event_names[e] : "?";
}

bool serve_fsm_has_deadline(enum serve_state s)
{
	return s < SERVE_STATE_COUNT && states[s].deadline;
}

size_t serve_fsm_rule_count(void) { return sizeof rules / sizeof rules[0]; }
const struct serve_fsm_rule *serve_fsm_rule_at(size_t i) { return &rules[i]; }

bool serve_fsm_rule_applies(const struct serve_fsm_rule *r, enum serve_state now)
{
	return now < SERVE_STATE_COUNT && (r->from & IN(now)) != 0;
}

bool serve_fsm_next(enum serve_state from, enum serve_event event, enum serve_state *to)
{
	for (size_t i = 0; i < serve_fsm_rule_count(); i++) {
		if (rules[i].event == event && serve_fsm_rule_applies(&rules[i], from)) {
			*to = rules[i].to;
			return true;
		}
	}
	return false;
}
