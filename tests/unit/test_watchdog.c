/* Unit tests of builderd/hub/watchdog.c, the hub's judgement of its peers,
 * driven without sockets: a real peer table and a real data side (ingest,
 * its per-frame path fed frames by hand), the time passed in. Who stalls,
 * who is stuck at a wind-up and why, who is asked for final counters, and
 * who is named as missing. */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builderd/hub/dataview.h"
#include "builderd/data/ingest.h"
#include "builderd/data/link.h"
#include "builderd/peer.h"
#include "builderd/hub/watchdog.h"
#include "wire/control.h"
#include "wire/frame.h"

#define MS 1000000u

struct record {
	char gone[8][256];
	struct peer *gone_peer[8];
	unsigned gone_count;
	struct peer *sent[8];
	char sent_reason[8][CTL_MAX_TEXT];
	unsigned sent_count;
	char errors[16][512];
	unsigned error_count;
	bool over;
};

static struct event_base *base;
static char dir[64];
static struct options opt;
static struct peer_table peers;
static struct ingest *ing;
static struct dataview data;   /* the view of ing */
static struct record rec;
static struct watchdog w;

static void on_gone(void *ctx, struct peer *p, const char *why)
{
	struct record *r = ctx;
	ck_assert_uint_lt(r->gone_count, 8);
	p->lost = true;   /* as the hub does */
	r->gone_peer[r->gone_count] = p;
	snprintf(r->gone[r->gone_count++], sizeof r->gone[0], "%s", why);
}

static void on_send(void *ctx, struct peer *p, const struct ctl_msg *m)
{
	struct record *r = ctx;
	ck_assert_int_eq(m->type, CTL_STOP);
	ck_assert_uint_eq(m->u.stop.source, CTL_STOP_ALL);
	r->sent[r->sent_count] = p;
	snprintf(r->sent_reason[r->sent_count++], CTL_MAX_TEXT, "%s", m->u.stop.reason);
}

static void on_error(void *ctx, const char *text)
{
	struct record *r = ctx;
	if (r->error_count < 16)
		snprintf(r->errors[r->error_count++], sizeof r->errors[0], "%s", text);
}

static bool running(void *ctx)
{
	const struct record *r = ctx;
	return !r->over;
}

static void ing_started_hook(void *ctx) { (void)ctx; }
static void ing_progress_hook(void *ctx, uint64_t now) { (void)ctx; (void)now; }
static void ing_after_hook(void *ctx) { (void)ctx; }
static bool ing_holds(void *ctx, uint32_t r, uint32_t pid) { (void)ctx; (void)r; (void)pid; return true; }

/* A link that carries nothing: the frames are handed to ingest_take here. */
static void quiet_close(struct ingest_reader *rd) { (void)rd; }
static void quiet_describe(const struct ingest_reader *rd, struct snapshot_link *l) { (void)rd; (void)l; }
static const struct link_ops quiet_link = {
	.transport = "tcp", .close = quiet_close, .describe = quiet_describe,
};

/* 3 sources, 2 readers: reader 0 serves sources 0 and 1, reader 1 source 2.
 * Every peer connected and heard at 0. */
static void setup(void)
{
	memset(&rec, 0, sizeof rec);
	base = event_base_new();
	snprintf(dir, sizeof dir, "/tmp/test_watchdog.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	opt = (struct options){ .run_id = 3, .sources = 3, .readers = 2, .max_inflight = 64,
				   .timeout_ms = 1000, .filter_modulo = 1, .flush_every = 8,
				   .max_fragment_bytes = 1024, .batch_bytes = 4096,
				   .peer_timeout_ms = 1000, .stall_timeout_ms = 500 };
	snprintf(opt.out_dir, sizeof opt.out_dir, "%s", dir);
	ck_assert_int_eq(peer_table_init(&peers, 3, 2), 0);
	struct ingest_hooks hooks = { .ctx = &rec, .error = on_error, .data_started = ing_started_hook,
				   .progress = ing_progress_hook, .after_frames = ing_after_hook,
				   .reader_holds_slot = ing_holds };
	ing = ingest_create(base, &opt, NULL, &hooks);
	dataview_from_ingest(&data, ing);
	ck_assert_ptr_nonnull(ing);
	for (uint32_t i = 0; i < peer_count(&peers); i++) {
		struct peer *p = peer_at(&peers, i);
		p->connected = true;
		p->pid = 10 + i;
		p->conn = (struct msgconn *)(uintptr_t)1;   /* up; never dereferenced here */
	}
	w = (struct watchdog){ .opt = &opt, .peers = &peers, .data = &data,
			 .hooks = { .ctx = &rec, .gone = on_gone, .send = on_send, .error = on_error,
				    .running = running } };
}

static void teardown(void)
{
	ingest_destroy(ing);
	peer_table_free(&peers);
	event_base_free(base);
	char path[128];
	snprintf(path, sizeof path, "%s/events.jsonl", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/expired.jsonl", dir);
	unlink(path);
	rmdir(dir);
}

/* Reader r's data path up, serving sources[0..n). */
static struct ingest_reader *stream(uint32_t r, const uint16_t *sources, uint32_t n)
{
	struct ctl_hello h = { .role = CTL_ROLE_READER, .id = r, .channel = CTL_CHANNEL_DATA,
			       .run_id = opt.run_id, .pid = 10 + 3 + r, .source_count = n };
	memcpy(h.sources, sources, n * sizeof *sources);
	struct ingest_reader *rd = ingest_admit(ing, -1, &h, "127.0.0.1:1");
	ck_assert_ptr_nonnull(rd);
	ingest_started(rd, &quiet_link, &h, "127.0.0.1:1");
	return rd;
}

static void feed(struct ingest_reader *rd, uint16_t source, uint64_t event)
{
	uint8_t buf[FRM_HEADER_BYTES + 8];
	struct frm_header h = { .source_id = source, .run_id = opt.run_id, .event_id = event,
				.payload_len = 8 };
	size_t n = frm_encode(buf, &h, (const uint8_t *)"payload!"), used;
	ck_assert_int_eq(ingest_take(rd, buf, n, true, &used, 1, NULL), FRM_OK);
	ck_assert_uint_eq(used, n);
}

START_TEST(test_stall_after_the_timeout_only)
{
	peer_source(&peers, 1)->last_heard_ns = 0;
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		if (i != 1)
			peer_at(&peers, i)->last_heard_ns = 400 * MS;
	watchdog_check_stalls(&w, 500 * MS);   /* exactly the limit: not yet */
	ck_assert_uint_eq(rec.gone_count, 0);
	watchdog_check_stalls(&w, 501 * MS);
	ck_assert_uint_eq(rec.gone_count, 1);
	ck_assert_ptr_eq(rec.gone_peer[0], peer_source(&peers, 1));
	ck_assert(peer_source(&peers, 1)->stalled);
	ck_assert_str_eq(rec.gone[0], "stalled: no answer for 501 ms");
	/* Gone once: not named again. */
	watchdog_check_stalls(&w, 900 * MS);
	ck_assert_uint_eq(rec.gone_count, 1);
}
END_TEST

/* A peer that reported, or has no control link, is not watched. */
START_TEST(test_reported_or_unlinked_never_stall)
{
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		peer_at(&peers, i)->reported = true;
	peer_reader(&peers, 1)->reported = false;
	peer_reader(&peers, 1)->conn = NULL;
	watchdog_check_stalls(&w, 10000 * MS);
	ck_assert_uint_eq(rec.gone_count, 0);
}
END_TEST

/* Reader 0 verified more frames than the builder received from it: its
 * data path is the stuck one, its sources are waited for; source 2 (whose
 * reader is fine) is given up; the readers still to report are asked. */
START_TEST(test_wind_up_names_the_stuck_path)
{
	static const uint16_t s01[] = { 0, 1 }, s2[] = { 2 };
	struct ingest_reader *r0 = stream(0, s01, 2), *r1 = stream(1, s2, 1);
	feed(r0, 0, 0);
	feed(r0, 1, 0);
	feed(r1, 2, 0);
	peer_reader(&peers, 0)->verified = 5;    /* the builder received 2 */
	peer_reader(&peers, 1)->verified = 1;    /* all of it arrived */
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		peer_at(&peers, i)->last_heard_ns = 900 * MS;
	watchdog_wind_up(&w, 1000 * MS, 0);
	ck_assert_uint_eq(rec.gone_count, 2);
	ck_assert_ptr_eq(rec.gone_peer[0], peer_reader(&peers, 0));
	ck_assert(peer_reader(&peers, 0)->stuck);
	ck_assert_str_eq(rec.gone[0], "is stuck: its data path to the builder stopped delivering (it verified 5 frames, the builder received 2)");
	ck_assert_ptr_eq(rec.gone_peer[1], peer_source(&peers, 2));
	ck_assert_str_eq(rec.gone[1], "is stuck: no final counters after 1000 ms without progress, though its control link still answers");
	ck_assert(!peer_source(&peers, 0)->lost && !peer_source(&peers, 1)->lost);
	/* Reader 0 is gone; reader 1 is asked for its final counters. */
	ck_assert_uint_eq(rec.sent_count, 1);
	ck_assert_ptr_eq(rec.sent[0], peer_reader(&peers, 1));
	ck_assert_str_eq(rec.sent_reason[0],
			 "the run made no progress for 1000 ms; send your final counters");
	/* The wait is over: sources 0 and 1 never reported. */
	watchdog_wind_up_over(&w);
	ck_assert_uint_eq(rec.gone_count, 5);
	ck_assert_ptr_eq(rec.gone_peer[2], peer_source(&peers, 0));
	ck_assert_ptr_eq(rec.gone_peer[3], peer_source(&peers, 1));
	ck_assert_ptr_eq(rec.gone_peer[4], peer_reader(&peers, 1));
	ck_assert_str_eq(rec.gone[4], "is stuck: no final counters within 500 ms of the builder asking for them");
}
END_TEST

/* A silent source's reason says so; the run ending stops the wind-up. */
START_TEST(test_wind_up_silent_and_run_over)
{
	peer_source(&peers, 0)->conn = NULL;
	peer_source(&peers, 1)->last_heard_ns = 0;
	peer_source(&peers, 2)->reported = true;
	watchdog_wind_up(&w, 1000 * MS, 0);
	ck_assert_uint_eq(rec.gone_count, 2);
	ck_assert_str_eq(rec.gone[0], "is stuck: no final counters after 1000 ms without progress, though its control link is silent");
	ck_assert_str_eq(rec.gone[1], "is stuck: no final counters after 1000 ms without progress, though its control link is silent");
	memset(&rec, 0, sizeof rec);
	rec.over = true;
	peer_reader(&peers, 0)->lost = false;
	watchdog_wind_up_over(&w);
	ck_assert_uint_eq(rec.gone_count, 0);
}
END_TEST

START_TEST(test_missing_peers_named)
{
	static const uint16_t s2[] = { 2 };
	peer_source(&peers, 1)->connected = false;
	peer_reader(&peers, 0)->connected = false;
	stream(1, s2, 1);
	watchdog_report_missing(&w, true);
	ck_assert_uint_eq(rec.error_count, 3);
	ck_assert_str_eq(rec.errors[0], "Source 1 never connected to the builder's control port");
	ck_assert_str_eq(rec.errors[1], "Reader 0 never connected to the builder's control port");
	ck_assert_str_eq(rec.errors[2], "Reader 0 never opened its data connection");
	rec.error_count = 0;
	watchdog_report_missing(&w, false);
	/* Now also whoever connected but never ended, and the open stream. */
	ck_assert_uint_eq(rec.error_count, 7);
	ck_assert_str_eq(rec.errors[6], "Reader 1 never closed its data stream");
}
END_TEST

static Suite *watchdog_suite(void)
{
	Suite *s = suite_create("watchdog");
	TCase *tc = tcase_create("peers");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stall_after_the_timeout_only);
	tcase_add_test(tc, test_reported_or_unlinked_never_stall);
	tcase_add_test(tc, test_wind_up_names_the_stuck_path);
	tcase_add_test(tc, test_wind_up_silent_and_run_over);
	tcase_add_test(tc, test_missing_peers_named);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(watchdog_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
