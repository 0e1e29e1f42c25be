/* Unit tests of builderd/serve/serve_fsm.c: the serving hub's state machine as its
 * rules say (docs/RUNCONTROL.md, "The hub's states"): a whole run, the
 * failures, every state that waits having a deadline and leaving it to
 * error, reset from any state but idle, and a run's end that comes after
 * the hub moved on driving nothing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/serve/serve_fsm.h"

static enum serve_state step(enum serve_state from, enum serve_event ev)
{
	enum serve_state to;
	ck_assert_msg(serve_fsm_next(from, ev, &to), "%s does not apply in %s", serve_fsm_event_name(ev),
		      serve_fsm_state_name(from));
	return to;
}

static bool applies(enum serve_state from, enum serve_event ev)
{
	enum serve_state to;
	return serve_fsm_next(from, ev, &to);
}

START_TEST(test_a_whole_run)
{
	enum serve_state s = SERVE_IDLE;
	s = step(s, SERVE_EV_CONFIGURE);
	ck_assert_int_eq(s, SERVE_CONFIGURING);
	s = step(s, SERVE_EV_CONFIGURED);
	ck_assert_int_eq(s, SERVE_CONFIGURED);
	s = step(s, SERVE_EV_START);
	ck_assert_int_eq(s, SERVE_RUNNING);
	s = step(s, SERVE_EV_STOP);
	ck_assert_int_eq(s, SERVE_STOPPING);
	ck_assert_int_eq(step(s, SERVE_EV_RUN_OVER), SERVE_STOPPING);
	ck_assert_int_eq(step(s, SERVE_EV_SETTLED), SERVE_IDLE);
	/* The run's own end takes the stop's path. */
	ck_assert_int_eq(step(SERVE_RUNNING, SERVE_EV_RUN_OVER), SERVE_STOPPING);
}
END_TEST

START_TEST(test_the_operator_is_refused_out_of_turn)
{
	ck_assert(!applies(SERVE_IDLE, SERVE_EV_START));
	ck_assert(!applies(SERVE_IDLE, SERVE_EV_STOP));
	ck_assert(!applies(SERVE_IDLE, SERVE_EV_RESET));
	ck_assert(!applies(SERVE_CONFIGURING, SERVE_EV_START));
	ck_assert(!applies(SERVE_CONFIGURED, SERVE_EV_STOP));
	for (int s = SERVE_CONFIGURING; s < SERVE_STATE_COUNT; s++)
		ck_assert_msg(!applies(s, SERVE_EV_CONFIGURE), "configure in %s", serve_fsm_state_name(s));
}
END_TEST

START_TEST(test_every_waiting_state_has_a_deadline_to_error)
{
	for (int s = 0; s < SERVE_STATE_COUNT; s++) {
		bool waits = s == SERVE_CONFIGURING || s == SERVE_STOPPING || s == SERVE_RESETTING;
		ck_assert_int_eq(serve_fsm_has_deadline(s), waits);
		ck_assert_int_eq(applies(s, SERVE_EV_DEADLINE), waits);
		if (waits)
			ck_assert_int_eq(step(s, SERVE_EV_DEADLINE), SERVE_ERROR);
	}
}
END_TEST

START_TEST(test_reset_from_any_state_but_idle_waits_then_idles)
{
	for (int s = SERVE_CONFIGURING; s < SERVE_STATE_COUNT; s++) {
		enum serve_state r = step(s, SERVE_EV_RESET);
		ck_assert_int_eq(r, SERVE_RESETTING);
		ck_assert(serve_fsm_has_deadline(r));
		ck_assert_int_eq(step(r, SERVE_EV_SETTLED), SERVE_IDLE);
	}
	ck_assert(!applies(SERVE_ERROR, SERVE_EV_SETTLED));
}
END_TEST

/* A run object that ends before START failed; one that ends once the hub
 * is idle, resetting or in error (abandoned) has no rule, so its caller
 * drives nothing with it. */
START_TEST(test_a_run_over_out_of_turn_drives_nothing)
{
	ck_assert_int_eq(step(SERVE_CONFIGURING, SERVE_EV_RUN_OVER), SERVE_ERROR);
	ck_assert_int_eq(step(SERVE_CONFIGURED, SERVE_EV_RUN_OVER), SERVE_ERROR);
	ck_assert(!applies(SERVE_IDLE, SERVE_EV_RUN_OVER));
	ck_assert(!applies(SERVE_RESETTING, SERVE_EV_RUN_OVER));
	ck_assert(!applies(SERVE_ERROR, SERVE_EV_RUN_OVER));
	ck_assert_int_eq(step(SERVE_CONFIGURING, SERVE_EV_FAILED), SERVE_ERROR);
	ck_assert(!applies(SERVE_RUNNING, SERVE_EV_FAILED));
}
END_TEST

START_TEST(test_the_rules_describe_what_applies_now)
{
	size_t n_idle = 0;
	for (size_t i = 0; i < serve_fsm_rule_count(); i++) {
		const struct serve_fsm_rule *r = serve_fsm_rule_at(i);
		ck_assert(r->meaning != NULL && r->meaning[0] != '\0');
		ck_assert_str_ne(serve_fsm_event_name(r->event), "?");
		ck_assert_str_ne(serve_fsm_state_name(r->to), "?");
		n_idle += serve_fsm_rule_applies(r, SERVE_IDLE);
	}
	ck_assert_uint_eq(n_idle, 2);          /* configure, shutdown */
	for (int s = 0; s < SERVE_STATE_COUNT; s++)
		ck_assert_str_ne(serve_fsm_state_name(s), "?");
	ck_assert_str_eq(serve_fsm_state_name(SERVE_STATE_COUNT), "?");
}
END_TEST

static Suite *hubfsm_suite(void)
{
	Suite *s = suite_create("serve_fsm");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, test_a_whole_run);
	tcase_add_test(tc, test_the_operator_is_refused_out_of_turn);
	tcase_add_test(tc, test_every_waiting_state_has_a_deadline_to_error);
	tcase_add_test(tc, test_reset_from_any_state_but_idle_waits_then_idles);
	tcase_add_test(tc, test_a_run_over_out_of_turn_drives_nothing);
	tcase_add_test(tc, test_the_rules_describe_what_applies_now);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hubfsm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
