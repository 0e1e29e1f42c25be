/* Unit tests of builderd/hub/peerlink.c: each peer's control link over a real
 * loopback connection, with a real data side (ingest, two readers'
 * paths opened by hand) and clock module: what arrives (END, STATS, PONG, a
 * reader's STOP giving up a source, a message a peer should not send), a
 * lost reader or source and the STOPs its dependents get, a stalled
 * reader's data path cut, and connections ending after the run. */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seals.h"
#include "clockpeers.h"

#include "builderd/clock/clocks.h"
#include "builderd/hub/dataview.h"
#include "builderd/data/ingest.h"
#include "builderd/data/link.h"
#include "builderd/hub/peerlink.h"
#include "builderd/peer.h"
#include "core/acct.h"
#include "io/msgstream.h"
#include "wire/control.h"

#define PEERS 5

/* The peer's end of its control link: what it received. */
struct far_end {
	struct msgconn *conn;
	unsigned stops;
	struct ctl_stop stop;      /* the last */
	unsigned others;
};

struct record {
	unsigned errors;
	char error[8][512];
	unsigned progress;
	unsigned reported;
	int32_t status;
	unsigned lost;
	struct peer *lost_peer;
	unsigned closed;
	unsigned faults;
	struct peer *fault_peer;
	bool over;
};

static struct event_base *base;
static char dir[64];
static struct options opt;
static struct peer_table peers;
static struct ingest *ing;
static struct dataview data;   /* the view of ing */
static struct clocks *clocks;
static struct peerlink *link_;
static struct far_end far[PEERS];
static struct record rec;

static void on_error(void *ctx, const char *text)
{
	struct record *r = ctx;
	if (r->errors < 8)
		snprintf(r->error[r->errors], sizeof r->error[0], "%s", text);
	r->errors++;
}

static void on_progress(void *ctx, uint64_t now)
{
	(void)now;
	((struct record *)ctx)->progress++;
}

static void on_reported(void *ctx, struct peer *p, int32_t status)
{
	(void)p;
	struct record *r = ctx;
	r->reported++;
	r->status = status;
}

static void on_lost(void *ctx, struct peer *p)
{
	struct record *r = ctx;
	r->lost++;
	r->lost_peer = p;
}

static void on_fault(void *ctx, struct peer *p)
{
	struct record *r = ctx;
	r->faults++;
	r->fault_peer = p;
}

static void on_closed(void *ctx)
{
	((struct record *)ctx)->closed++;
}

static bool running(void *ctx)
{
	return !((struct record *)ctx)->over;
}

static void far_message(struct msgconn *c, const struct ctl_msg *m, uint64_t rx, void *arg)
{
	(void)c;
	(void)rx;
	struct far_end *f = arg;
	if (m->type == CTL_STOP) {
		f->stops++;
		f->stop = m->u.stop;
	} else if (m->type != CTL_PING) {
		f->others++;
	}
}

static void far_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)reason;
	struct far_end *f = arg;
	msgconn_free(c);
	f->conn = NULL;
}

static const struct msgconn_ops far_ops = { far_message, far_close };

static void ing_started_hook(void *ctx) { (void)ctx; }
static void ing_progress_hook(void *ctx, uint64_t now) { (void)ctx; (void)now; }
static void ing_after_hook(void *ctx) { (void)ctx; }
static bool ing_holds(void *ctx, uint32_t r, uint32_t pid) { (void)ctx; (void)r; (void)pid; return true; }
static void quiet_close(struct ingest_reader *rd) { (void)rd; }
static void quiet_describe(const struct ingest_reader *rd, struct snapshot_link *l) { (void)rd; (void)l; }
static const struct link_ops quiet_link = {
	.transport = "tcp", .close = quiet_close, .describe = quiet_describe,
};

/* Reader r's data path up, serving sources[0..n). */
static void stream(uint32_t r, const uint16_t *sources, uint32_t n)
{
	struct ctl_hello h = { .role = CTL_ROLE_READER, .id = r, .channel = CTL_CHANNEL_DATA,
			       .run_id = opt.run_id, .pid = 20 + r, .source_count = n };
	memcpy(h.sources, sources, n * sizeof *sources);
	struct ingest_reader *rd = ingest_admit(ing, -1, &h, "127.0.0.1:1");
	ck_assert_ptr_nonnull(rd);
	ingest_started(rd, &quiet_link, &h, "127.0.0.1:1");
}

static void run_for(unsigned ms)
{
	clockpeers_run(base, NULL, NULL, ms);
}

/* 3 sources, 2 readers: reader 0 serves sources 0 and 1, reader 1 source
 * 2; every peer's control link up. */
static void setup(void)
{
	memset(&rec, 0, sizeof rec);
	memset(far, 0, sizeof far);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	snprintf(dir, sizeof dir, "/tmp/test_peerlink.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	opt = (struct options){ .run_id = 3, .sources = 3, .readers = 2, .max_inflight = 64,
				   .timeout_ms = 1000, .filter_modulo = 1, .flush_every = 8,
				   .max_fragment_bytes = 1024, .batch_bytes = 4096 };
	snprintf(opt.out_dir, sizeof opt.out_dir, "%s", dir);
	ck_assert_int_eq(peer_table_init(&peers, 3, 2), 0);
	struct ingest_hooks ih = { .ctx = &rec, .error = on_error, .data_started = ing_started_hook,
				.progress = ing_progress_hook, .after_frames = ing_after_hook,
				.reader_holds_slot = ing_holds };
	ing = ingest_create(base, &opt, NULL, &ih);
	dataview_from_ingest(&data, ing);
	ck_assert_ptr_nonnull(ing);
	static const uint16_t s01[] = { 0, 1 }, s2[] = { 2 };
	stream(0, s01, 2);
	stream(1, s2, 1);
	struct clocks_config cc = { .base = base, .peers = &peers, .run_id = 3, .quiet = true,
				 .ready = ing_started_hook };
	clocks = clocks_create(&cc);
	ck_assert_ptr_nonnull(clocks);
	struct peerlink_config lc = {
		.base = base, .peers = &peers, .data = &data, .clocks = clocks,
		.hooks = { .ctx = &rec, .error = on_error, .progress = on_progress,
			   .reported = on_reported, .lost = on_lost, .closed = on_closed,
			   .running = running, .fault = on_fault },
	};
	link_ = peerlink_create(&lc);
	ck_assert_ptr_nonnull(link_);
	for (uint32_t i = 0; i < PEERS; i++) {
		struct peer *p = peer_at(&peers, i);
		int a, b;
		clockpeers_tcp_pair(&a, &b);
		p->connected = true;
		p->pid = 10 + i;
		snprintf(p->host, sizeof p->host, "host%u", i);
		snprintf(p->address, sizeof p->address, "127.0.0.1:%u", 1000 + i);
		struct msgseal far_seal, hub_seal;
		test_seal_pair(&far_seal, &hub_seal);
		peerlink_attach(link_, p, b, &hub_seal, p->address);
		ck_assert_ptr_nonnull(p->conn);
		far[i].conn = msgconn_new(base, a, &far_seal, "far end", &far_ops, &far[i]);
		ck_assert_ptr_nonnull(far[i].conn);
	}
}

static void teardown(void)
{
	for (uint32_t i = 0; i < PEERS; i++)
		if (far[i].conn != NULL)
			msgconn_free(far[i].conn);
	peerlink_destroy(link_);
	for (uint32_t i = 0; i < PEERS; i++)
		ck_assert_ptr_null(peer_at(&peers, i)->conn);
	clocks_destroy(clocks);
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

static void send_from(uint32_t i, const struct ctl_msg *m)
{
	ck_assert_int_eq(msgconn_send(far[i].conn, m), 0);
	run_for(50);
}

static unsigned stops_total(void)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < PEERS; i++)
		n += far[i].stops;
	return n;
}

START_TEST(test_end_and_stats)
{
	static struct ctl_msg m;
	memset(&m, 0, sizeof m);
	m.type = CTL_STATS;
	struct ctl_group *g = ctl_report_group(&m.u.report, "");
	ck_assert(ctl_group_set(g, "held_ns", 7000));
	ck_assert(ctl_group_set(g, "held_count", 2));
	ck_assert(ctl_group_set(g, "frames_verified", 9));
	send_from(3, &m);
	struct peer *r0 = peer_reader(&peers, 0);
	ck_assert_uint_eq(r0->held_ns, 7000);
	ck_assert_uint_eq(r0->held_count, 2);
	ck_assert_uint_eq(r0->verified, 9);
	ck_assert(!r0->sent.seen);

	/* A source's STATS: where it is; a reader's counters it has not. */
	static struct ctl_msg sm;
	memset(&sm, 0, sizeof sm);
	sm.type = CTL_STATS;
	struct ctl_group *sg = ctl_report_group(&sm.u.report, "");
	ck_assert(ctl_group_set(sg, "run_second", 3));
	ck_assert(ctl_group_set(sg, "send_positions", 500));
	ck_assert(ctl_group_set(sg, "last_event_sent", 499));
	send_from(1, &sm);
	struct peer *s1 = peer_source(&peers, 1);
	ck_assert(s1->sent.seen);
	ck_assert_uint_eq(s1->sent.run_second, 3);
	ck_assert_uint_eq(s1->sent.send_positions, 500);
	ck_assert_uint_eq(s1->sent.last_event_sent, 499);
	ck_assert_uint_eq(s1->held_ns, 0);
	ck_assert_uint_eq(rec.progress, 0);
	ck_assert_uint_gt(r0->last_heard_ns, 0);
	ck_assert(!r0->reported);
	ck_assert_uint_eq(rec.progress, 0);   /* STATS are no progress */

	m.type = CTL_END;
	m.u.report.status = 3;
	send_from(3, &m);
	ck_assert(r0->reported);
	ck_assert_ptr_nonnull(r0->report);
	ck_assert_uint_eq(acct_value(r0->report, "", "frames_verified", NULL), 9);
	ck_assert_uint_eq(rec.reported, 1);
	ck_assert_int_eq(rec.status, 3);
	ck_assert_uint_eq(rec.progress, 1);
	/* It reported: its connection closing is no loss. */
	msgconn_free(far[3].conn);
	far[3].conn = NULL;
	run_for(50);
	ck_assert_ptr_null(r0->conn);
	ck_assert(!r0->lost);
	ck_assert_uint_eq(rec.errors, 0);
}
END_TEST

/* PONGs go to the clock module; a message no peer sends is ignored. */
START_TEST(test_pong_and_unexpected)
{
	struct ctl_msg m = { .type = CTL_PONG, .u.pong = { .sequence = 999 } };
	send_from(0, &m);
	struct clocks_peer_view v;
	clocks_peer_view(clocks, 0, &v);
	ck_assert_uint_eq(v.pongs_unmatched, 1);
	m = (struct ctl_msg){ .type = CTL_CREDIT, .u.credit.limit = 5 };
	send_from(0, &m);
	m = (struct ctl_msg){ .type = CTL_STOP, .u.stop.source = 1 };
	send_from(1, &m);   /* a source giving up a source: ignored */
	ck_assert_uint_eq(rec.errors, 0);
	ck_assert_uint_eq(stops_total(), 0);
	ck_assert(!peer_source(&peers, 1)->lost);
	ck_assert_ptr_nonnull(peer_source(&peers, 0)->conn);
}
END_TEST

/* A reader that dies: named, lost, its sources told to stop (not the
 * other reader's); its data path ends by itself, so it is not cut. */
START_TEST(test_lost_reader)
{
	msgconn_free(far[3].conn);
	far[3].conn = NULL;
	run_for(50);
	struct peer *r0 = peer_reader(&peers, 0);
	ck_assert(r0->lost);
	ck_assert_ptr_null(r0->conn);
	ck_assert_uint_eq(rec.lost, 1);
	ck_assert_ptr_eq(rec.lost_peer, r0);
	ck_assert_uint_eq(rec.errors, 1);
	ck_assert_str_eq(rec.error[0], "Reader 0 (127.0.0.1:1003, pid 13 on host3) lost its control connection before reporting (closed by peer); what it held is counted as lost with it");
	ck_assert_uint_eq(far[0].stops, 1);
	ck_assert_uint_eq(far[1].stops, 1);
	ck_assert_uint_eq(far[2].stops, 0);
	ck_assert_uint_eq(far[0].stop.source, CTL_STOP_ALL);
	ck_assert_str_eq(far[0].stop.reason, "reader 0 is gone");
	ck_assert_int_eq(ingest_reader_state(ing, 0), INGEST_DATA_STREAMING);
	/* Once only. */
	peerlink_gone(link_, r0, "again");
	ck_assert_uint_eq(rec.errors, 1);
	ck_assert_uint_eq(rec.lost, 1);
}
END_TEST

/* A reader's STOP for every source is a fault it found: it is given up at
 * once, named with the fault (how: refused), its sources told to stop,
 * and the hub hears of it to end the run; its later END is not waited for. */
START_TEST(test_reader_fault)
{
	struct ctl_msg m = { .type = CTL_STOP };
	m.u.stop.source = CTL_STOP_ALL;
	m.u.stop.last_event = CTL_STOP_NOW;
	snprintf(m.u.stop.reason, sizeof m.u.stop.reason,
		 "finds builder link 0 answered as builder 1: the links are crossed");
	send_from(3, &m);
	struct peer *r0 = peer_reader(&peers, 0);
	ck_assert(r0->lost && r0->refused);
	ck_assert_str_eq(peer_how_gone(r0), "refused");
	ck_assert_uint_eq(rec.faults, 1);
	ck_assert_ptr_eq(rec.fault_peer, r0);
	ck_assert_uint_eq(rec.lost, 1);
	ck_assert_uint_eq(rec.errors, 1);
	ck_assert_str_eq(rec.error[0], "Reader 0 (127.0.0.1:1003, pid 13 on host3) stopped the run: it finds builder link 0 answered as builder 1: the links are crossed; what it held is counted as lost with it");
	ck_assert_uint_eq(far[0].stops, 1);
	ck_assert_uint_eq(far[1].stops, 1);
	ck_assert_str_eq(far[0].stop.reason, "reader 0 stopped the run for a fault");
	ck_assert_uint_eq(far[2].stops, 0);
	/* The other reader's fault is its own. */
	send_from(4, &m);
	ck_assert_uint_eq(rec.faults, 2);
	ck_assert_ptr_eq(rec.fault_peer, peer_reader(&peers, 1));
	ck_assert_uint_eq(rec.errors, 2);
}
END_TEST

/* A stalled reader's data connection would not end by itself: cut. */
START_TEST(test_stalled_reader_cut)
{
	struct peer *r1 = peer_reader(&peers, 1);
	r1->stalled = true;
	peerlink_gone(link_, r1, "stalled: no answer for 501 ms");
	run_for(50);
	ck_assert_int_eq(ingest_reader_state(ing, 1), INGEST_DATA_FAILED);
	ck_assert_int_eq(ingest_reader_state(ing, 0), INGEST_DATA_STREAMING);
	ck_assert_ptr_null(r1->conn);
	ck_assert_uint_eq(far[2].stops, 1);
	ck_assert_str_eq(far[2].stop.reason, "reader 1 stalled");
	ck_assert_uint_eq(far[0].stops + far[1].stops, 0);
	ck_assert_ptr_null(far[4].conn);   /* its far end saw the close */
}
END_TEST

/* A lost source: its reader is told to drop it. */
START_TEST(test_lost_source)
{
	struct peer *s2 = peer_source(&peers, 2);
	s2->stalled = true;
	peerlink_gone(link_, s2, "stalled: no answer for 501 ms");
	run_for(50);
	ck_assert(s2->lost);
	ck_assert_uint_eq(far[4].stops, 1);
	ck_assert_uint_eq(far[4].stop.source, 2);
	ck_assert_str_eq(far[4].stop.reason, "source 2 stalled");
	ck_assert_uint_eq(stops_total(), 1);
	ck_assert_str_eq(rec.error[0], "Source 2 (127.0.0.1:1002, pid 12 on host2) stalled: no answer for 501 ms; what it held is counted as lost with it");
}
END_TEST

/* A reader gives up a source it serves: the source is stuck and lost, the
 * reader told to drop it; one it does not serve is ignored. */
START_TEST(test_source_given_up)
{
	struct ctl_msg m = { .type = CTL_STOP, .u.stop.source = 2 };
	send_from(3, &m);   /* reader 0 does not serve source 2 */
	ck_assert_uint_eq(rec.errors, 0);
	ck_assert(!peer_source(&peers, 2)->lost);
	m.u.stop.source = 7;
	send_from(3, &m);
	ck_assert_uint_eq(rec.errors, 0);

	m.u.stop.source = 1;
	send_from(3, &m);
	struct peer *s1 = peer_source(&peers, 1);
	ck_assert(s1->stuck && s1->lost);
	ck_assert_uint_eq(rec.errors, 1);
	ck_assert_str_eq(rec.error[0], "Source 1 (127.0.0.1:1001, pid 11 on host1) was given up by reader 0: its data connection delivered no complete frame within the reader's inactivity limit while its control link was alive; what it held is counted as lost with it");
	ck_assert_uint_eq(far[3].stops, 1);
	ck_assert_uint_eq(far[3].stop.source, 1);
	ck_assert_str_eq(far[3].stop.reason, "source 1 is stuck");
	ck_assert_ptr_null(far[1].conn);
}
END_TEST

/* After the run, connections end as peers read BYE: no loss. */
START_TEST(test_closed_after_the_run)
{
	rec.over = true;
	for (uint32_t i = 0; i < PEERS; i++) {
		msgconn_free(far[i].conn);
		far[i].conn = NULL;
	}
	run_for(50);
	ck_assert_uint_eq(rec.closed, PEERS);
	ck_assert_uint_eq(rec.errors, 0);
	ck_assert_uint_eq(rec.lost, 0);
}
END_TEST

static Suite *peerlink_suite(void)
{
	Suite *s = suite_create("peerlink");
	TCase *tc = tcase_create("links");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_end_and_stats);
	tcase_add_test(tc, test_pong_and_unexpected);
	tcase_add_test(tc, test_lost_reader);
	tcase_add_test(tc, test_reader_fault);
	tcase_add_test(tc, test_stalled_reader_cut);
	tcase_add_test(tc, test_lost_source);
	tcase_add_test(tc, test_source_given_up);
	tcase_add_test(tc, test_closed_after_the_run);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peerlink_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
