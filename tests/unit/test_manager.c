/* Unit tests of builderd/hub/manager.c: routing to readers and builders only,
 * tokens joining builders and refused by name, assignments from START on
 * to every reader and builder alike and in order, a dead builder's loss
 * and LOST to everyone, a stalled builder found by its tokens, and the
 * metrics.json sections. No sockets: the hooks record what would be sent
 * (a peer's connection is only tested for NULL). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builderd/hub/manager.h"
#include "builderd/peer.h"

enum { S = 1, N = 1, M = 2, EVENTS = 256, BATCH = 64, SLOTS = 1024 };

struct sent {
	uint32_t peer;           /* peer_index */
	struct ctl_msg msg;
};

static struct sent sent[256];
static size_t sent_count;
static char errors[4][512];
static size_t error_count;
static uint64_t progress_calls;
static struct peer_table peers;
static struct options opt;
static struct manager *m;
static int fake_conn;   /* a non-NULL connection never dereferenced */

static void on_error(void *ctx, const char *text)
{
	(void)ctx;
	if (error_count < 4)
		snprintf(errors[error_count++], sizeof errors[0], "%s", text);
}

static void on_send(void *ctx, struct peer *p, const struct ctl_msg *msg)
{
	(void)ctx;
	ck_assert_uint_lt(sent_count, 256);
	sent[sent_count++] = (struct sent){ peer_index(&peers, p), *msg };
}

static void on_progress(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	progress_calls++;
}

static void setup_events(uint64_t events)
{
	sent_count = error_count = 0;
	progress_calls = 0;
	opt = (struct options){ .role = ROLE_HUB, .builders = M, .sources = S, .readers = N,
				   .events = events, .batch = BATCH, .window_batches = 16,
				   .routing = CTL_ROUTING_MANAGER, .stall_timeout_ms = 2000,
				   .timeout_ms = 1000 };
	ck_assert_int_eq(peer_table_init_builders(&peers, S, N, M), 0);
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		peer_at(&peers, i)->conn = (struct msgconn *)&fake_conn;
	struct manager_hooks h = { .error = on_error, .send = on_send, .progress = on_progress };
	m = manager_create(&opt, &peers, &h);
	ck_assert_ptr_nonnull(m);
}

static void setup(void)
{
	setup_events(EVENTS);
}

static void teardown(void)
{
	manager_destroy(m);
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		peer_at(&peers, i)->conn = NULL;
	peer_table_free(&peers);
}

static void token(uint32_t b, uint32_t slots, uint64_t decided, uint64_t below, uint64_t now)
{
	struct ctl_token t = { .slots = slots, .decided = decided, .decided_below = below };
	manager_token(m, peer_builder(&peers, b), &t, now);
}

static size_t count_of(enum ctl_type type)
{
	size_t n = 0;
	for (size_t i = 0; i < sent_count; i++)
		n += sent[i].msg.type == type;
	return n;
}

START_TEST(test_routing_to_readers_and_builders)
{
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		manager_welcomed(m, peer_at(&peers, i));
	ck_assert_uint_eq(sent_count, N + M);
	for (size_t i = 0; i < sent_count; i++) {
		ck_assert_int_eq(sent[i].msg.type, CTL_ROUTING);
		ck_assert_int_ne(peer_at(&peers, sent[i].peer)->role, CTL_ROLE_SOURCE);
		const struct ctl_routing *r = &sent[i].msg.u.routing;
		ck_assert_int_eq(r->mode, CTL_ROUTING_MANAGER);
		ck_assert_uint_eq(r->builders, M);
		ck_assert_uint_eq(r->events, EVENTS);
		ck_assert_uint_eq(r->batch, BATCH);
		ck_assert_uint_eq(r->window_batches, 16);
	}
}
END_TEST

/* Nothing is assigned before START; then every record goes to every
 * reader and builder, in order, round-robin from builder 0. */
START_TEST(test_assignments_after_start_to_everyone)
{
	token(0, SLOTS, 0, 0, 1);
	ck_assert(!manager_all_joined(m));
	token(1, SLOTS, 0, 0, 2);
	ck_assert(manager_all_joined(m));
	ck_assert_uint_eq(progress_calls, 2);
	ck_assert_uint_eq(sent_count, 0);
	manager_start(m, 1);
	ck_assert_uint_eq(count_of(CTL_ASSIGN), (N + M) * (EVENTS / BATCH));
	uint64_t first = 0, seq = 0;
	for (size_t i = 0; i < sent_count; i += N + M) {
		for (size_t k = 0; k < N + M; k++) {
			const struct ctl_assign *a = &sent[i + k].msg.u.assign;
			ck_assert_uint_eq(a->first, first);
			ck_assert_uint_eq(a->count, BATCH);
			ck_assert_uint_eq(a->builder, (first / BATCH) % M);
			ck_assert_uint_eq(a->sequence, seq + 1);
			ck_assert_int_ne(peer_at(&peers, sent[i + k].peer)->role, CTL_ROLE_SOURCE);
		}
		first += BATCH;
		seq++;
	}
	struct evm_totals t = manager_totals(m);
	ck_assert_uint_eq(t.assigned_end, EVENTS);
	json_t *j = manager_json_manager(m);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "assignments")), EVENTS / BATCH);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "events_assigned")), EVENTS);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "tokens_received")), 2);
	ck_assert_int_gt(json_integer_value(json_object_get(j, "memory_bytes")), 0);
	json_decref(j);
}
END_TEST

/* A stop for a fault before START: every ID is the stop's, and nothing
 * is ever assigned, whatever the tokens. */
START_TEST(test_cut_before_start)
{
	manager_cut(m);
	ck_assert_uint_eq(manager_ids_cut_unassigned(m), EVENTS);
	token(0, SLOTS, 0, 0, 1);
	token(1, SLOTS, 0, 0, 2);
	manager_start(m, 3);
	ck_assert_uint_eq(count_of(CTL_ASSIGN), 0);
	ck_assert_uint_eq(manager_totals(m).assigned_end, 0);
}
END_TEST

/* A stop for a fault mid-run: the builders' tokens free room, yet nothing
 * more is assigned; the rest of the run's IDs are the stop's. The hub's
 * stall limit of a builder follows its event timeout. */
START_TEST(test_cut_after_start)
{
	teardown();
	setup_events(100 * BATCH);
	token(0, 5 * BATCH, 0, 0, 1);
	token(1, 5 * BATCH, 0, 0, 2);
	manager_start(m, 3);
	uint64_t end = manager_totals(m).assigned_end;
	ck_assert_uint_gt(end, 0);
	ck_assert_uint_lt(end, 100 * BATCH);
	manager_cut(m);
	size_t assigns = count_of(CTL_ASSIGN);
	for (uint32_t b = 0; b < M; b++) {
		struct evm_builder_view v;
		ck_assert(manager_builder_view(m, b, &v));
		token(b, 5 * BATCH, v.assigned, end, 4 + b);
	}
	manager_pump(m);
	ck_assert_uint_eq(error_count, 0);
	ck_assert_uint_eq(count_of(CTL_ASSIGN), assigns);
	ck_assert_uint_eq(manager_totals(m).assigned_end, end);
	ck_assert_uint_eq(manager_ids_cut_unassigned(m), 100 * BATCH - end);
	json_t *j = manager_json_routing(m);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "builder_stall_ms")), 2000 + 1000);
	json_decref(j);
}
END_TEST

/* Slots at the high water mark (4 batches) cannot join; a total that goes
 * back is refused; each names the builder. */
START_TEST(test_refused_tokens_name_the_builder)
{
	token(1, 4 * BATCH, 0, 0, 1);
	ck_assert_uint_eq(error_count, 1);
	ck_assert_msg(strstr(errors[0], "Builder 1 (pid 0 on ) sent a token the event manager refused (slots 256") != NULL, "%s", errors[0]);
	ck_assert_msg(strstr(errors[0], "high water mark of 256 events") != NULL, "%s", errors[0]);
	token(0, SLOTS, 0, 0, 1);
	token(1, SLOTS, 0, 0, 1);
	manager_start(m, 1);
	token(0, SLOTS, 10, 0, 2);
	token(0, SLOTS, 5, 0, 3);
	ck_assert_uint_eq(error_count, 2);
	ck_assert_msg(strstr(errors[1], "its decided total went backwards") != NULL, "%s", errors[1]);
	token(1, SLOTS, 10000, 0, 4);
	ck_assert_uint_eq(error_count, 3);
	ck_assert_msg(strstr(errors[2], "Builder 1") != NULL && strstr(errors[2], "more decided than it was assigned") != NULL,
		      "%s", errors[2]);
	json_t *j = manager_json_manager(m);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "tokens_refused")), 3);
	json_decref(j);
}
END_TEST

/* A dead builder: its loss, LOST to every reader and builder, the others
 * get what is left; a token of it afterwards is refused. */
START_TEST(test_dead_builder)
{
	token(0, SLOTS, 0, 0, 1);
	token(1, SLOTS, 0, 0, 1);
	manager_start(m, 1);
	sent_count = 0;
	manager_builder_gone(m, 1, "died");
	ck_assert_uint_eq(count_of(CTL_LOST), N + M);
	ck_assert_uint_eq(sent[0].msg.u.lost.builder, 1);
	ck_assert_str_eq(sent[0].msg.u.lost.reason, "builder 1 died");
	struct evm_builder_view v;
	ck_assert(manager_builder_view(m, 1, &v));
	ck_assert(v.dead);
	ck_assert_uint_eq(v.lost, EVENTS / 2);
	manager_builder_gone(m, 1, "died");
	ck_assert_uint_eq(count_of(CTL_LOST), N + M);
	token(1, SLOTS, 0, 0, 2);
	ck_assert_uint_eq(error_count, 1);
	ck_assert_msg(strstr(errors[0], "it was given up already") != NULL, "%s", errors[0]);
	json_t *j = manager_json_builders(m);
	json_t *b1 = json_object_get(j, "1");
	ck_assert_int_eq(json_integer_value(json_object_get(b1, "lost")), EVENTS / 2);
	ck_assert_str_eq(json_string_value(json_object_get(b1, "lost_reason")), "died");
	json_decref(j);
	j = manager_json_manager(m);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "builders_lost")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "events_lost_with_builders")), EVENTS / 2);
	json_decref(j);
}
END_TEST

/* A builder holding events whose tokens stop is stalled; one with
 * nothing in flight is not. */
START_TEST(test_stalled_by_tokens)
{
	token(0, SLOTS, 0, 0, 1000);
	token(1, SLOTS, 0, 0, 1000);
	manager_start(m, 1);
	token(0, SLOTS, EVENTS / 2, EVENTS, 5000);
	ck_assert_int_eq(manager_stalled_builder(m, 2000, 2000), -1);
	ck_assert_int_eq(manager_stalled_builder(m, 4000, 2000), 1);
	ck_assert_int_eq(manager_stalled_builder(m, 1000000, 2000), 1);
	manager_builder_gone(m, 1, "stalled");
	ck_assert_int_eq(manager_stalled_builder(m, 1000000, 2000), -1);
}
END_TEST

/* Builders that joined long before START owe no token for the wait. */
START_TEST(test_silence_counts_from_start)
{
	token(0, SLOTS, 0, 0, 1000);
	token(1, SLOTS, 0, 0, 1000);
	ck_assert_int_eq(manager_stalled_builder(m, 900000, 2000), -1);
	manager_start(m, 1000000);
	ck_assert_int_eq(manager_stalled_builder(m, 1001000, 2000), -1);
	ck_assert_int_eq(manager_stalled_builder(m, 1002500, 2000), 0);
}
END_TEST

START_TEST(test_static_routing_json)
{
	manager_destroy(m);
	opt.routing = CTL_ROUTING_STATIC;
	struct manager_hooks h = { .error = on_error, .send = on_send, .progress = on_progress };
	m = manager_create(&opt, &peers, &h);
	ck_assert_ptr_nonnull(m);
	json_t *j = manager_json_routing(m);
	ck_assert_str_eq(json_string_value(json_object_get(j, "mode")), "static");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "high_water")), 4 * BATCH);
	json_decref(j);
}
END_TEST

static Suite *manager_suite(void)
{
	Suite *s = suite_create("manager");
	TCase *tc = tcase_create("manager");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_routing_to_readers_and_builders);
	tcase_add_test(tc, test_assignments_after_start_to_everyone);
	tcase_add_test(tc, test_refused_tokens_name_the_builder);
	tcase_add_test(tc, test_cut_before_start);
	tcase_add_test(tc, test_cut_after_start);
	tcase_add_test(tc, test_dead_builder);
	tcase_add_test(tc, test_stalled_by_tokens);
	tcase_add_test(tc, test_silence_counts_from_start);
	tcase_add_test(tc, test_static_routing_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(manager_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
