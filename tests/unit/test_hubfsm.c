/* Unit tests of builderd/serve/hubfsm.c: the serving hub's state machine as its
 * rules say (docs/RUNCONTROL.md, "The hub's states"): a whole run, the
 * failures, every state that waits having a deadline and leaving it to
 * error, reset from any state but idle, and a run's end that comes after
 * the hub moved on driving nothing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/serve/hubfsm.h"

static enum hub_state step(enum hub_state from, enum hub_event ev)
{
	enum hub_state to;
	ck_assert_msg(hub_fsm_next(from, ev, &to), "%s does not apply in %s", hub_event_name(ev),
		      hub_state_name(from));
	return to;
}

static bool applies(enum hub_state from, enum hub_event ev)
{
	enum hub_state to;
	return hub_fsm_next(from, ev, &to);
}

START_TEST(test_a_whole_run)
{
	enum hub_state s = HUB_IDLE;
	s = step(s, HUB_EV_CONFIGURE);
	ck_assert_int_eq(s, HUB_CONFIGURING);
	s = step(s, HUB_EV_CONFIGURED);
	ck_assert_int_eq(s, HUB_CONFIGURED);
	s = step(s, HUB_EV_START);
	ck_assert_int_eq(s, HUB_RUNNING);
	s = step(s, HUB_EV_STOP);
	ck_assert_int_eq(s, HUB_STOPPING);
	ck_assert_int_eq(step(s, HUB_EV_RUN_OVER), HUB_STOPPING);
	ck_assert_int_eq(step(s, HUB_EV_SETTLED), HUB_IDLE);
	/* The run's own end takes the stop's path. */
	ck_assert_int_eq(step(HUB_RUNNING, HUB_EV_RUN_OVER), HUB_STOPPING);
}
END_TEST

START_TEST(test_the_operator_is_refused_out_of_turn)
{
	ck_assert(!applies(HUB_IDLE, HUB_EV_START));
	ck_assert(!applies(HUB_IDLE, HUB_EV_STOP));
	ck_assert(!applies(HUB_IDLE, HUB_EV_RESET));
	ck_assert(!applies(HUB_CONFIGURING, HUB_EV_START));
	ck_assert(!applies(HUB_CONFIGURED, HUB_EV_STOP));
	for (int s = HUB_CONFIGURING; s < HUB_STATE_COUNT; s++)
		ck_assert_msg(!applies(s, HUB_EV_CONFIGURE), "configure in %s", hub_state_name(s));
}
END_TEST

START_TEST(test_every_waiting_state_has_a_deadline_to_error)
{
	for (int s = 0; s < HUB_STATE_COUNT; s++) {
		bool waits = s == HUB_CONFIGURING || s == HUB_STOPPING || s == HUB_RESETTING;
		ck_assert_int_eq(hub_state_has_deadline(s), waits);
		ck_assert_int_eq(applies(s, HUB_EV_DEADLINE), waits);
		if (waits)
			ck_assert_int_eq(step(s, HUB_EV_DEADLINE), HUB_ERROR);
	}
}
END_TEST

START_TEST(test_reset_from_any_state_but_idle_waits_then_idles)
{
	for (int s = HUB_CONFIGURING; s < HUB_STATE_COUNT; s++) {
		enum hub_state r = step(s, HUB_EV_RESET);
		ck_assert_int_eq(r, HUB_RESETTING);
		ck_assert(hub_state_has_deadline(r));
		ck_assert_int_eq(step(r, HUB_EV_SETTLED), HUB_IDLE);
	}
	ck_assert(!applies(HUB_ERROR, HUB_EV_SETTLED));
}
END_TEST

/* A run object that ends before START failed; one that ends once the hub
 * is idle, resetting or in error (abandoned) has no rule, so its caller
 * drives nothing with it. */
START_TEST(test_a_run_over_out_of_turn_drives_nothing)
{
	ck_assert_int_eq(step(HUB_CONFIGURING, HUB_EV_RUN_OVER), HUB_ERROR);
	ck_assert_int_eq(step(HUB_CONFIGURED, HUB_EV_RUN_OVER), HUB_ERROR);
	ck_assert(!applies(HUB_IDLE, HUB_EV_RUN_OVER));
	ck_assert(!applies(HUB_RESETTING, HUB_EV_RUN_OVER));
	ck_assert(!applies(HUB_ERROR, HUB_EV_RUN_OVER));
	ck_assert_int_eq(step(HUB_CONFIGURING, HUB_EV_FAILED), HUB_ERROR);
	ck_assert(!applies(HUB_RUNNING, HUB_EV_FAILED));
}
END_TEST

START_TEST(test_the_rules_describe_what_applies_now)
{
	size_t n_idle = 0;
	for (size_t i = 0; i < hub_fsm_rule_count(); i++) {
		const struct hub_rule *r = hub_fsm_rule_at(i);
		ck_assert(r->meaning != NULL && r->meaning[0] != '\0');
		ck_assert_str_ne(hub_event_name(r->event), "?");
		ck_assert_str_ne(hub_state_name(r->to), "?");
		n_idle += hub_fsm_rule_applies(r, HUB_IDLE);
	}
	ck_assert_uint_eq(n_idle, 2);          /* configure, shutdown */
	for (int s = 0; s < HUB_STATE_COUNT; s++)
		ck_assert_str_ne(hub_state_name(s), "?");
	ck_assert_str_eq(hub_state_name(HUB_STATE_COUNT), "?");
}
END_TEST

static Suite *hubfsm_suite(void)
{
	Suite *s = suite_create("hubfsm");
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
