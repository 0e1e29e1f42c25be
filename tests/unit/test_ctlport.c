/* Unit tests of builderd/hub/ctlport.c over real loopback connections: peers
 * greet the control port as the daemons do (io/handshake's client); the
 * welcomed are handed to the hub with their slot filled in, everyone else
 * gets the refusal that names why (wrong run, wrong channel, not a peer of
 * the run, already connected, left, run over), and refusals and a silent
 * greeting are counted. */
#include <check.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "builderd/hub/ctlport.h"
#include "builderd/options.h"
#include "builderd/peer.h"
#include "builderd/snapshot.h"
#include "io/handshake.h"
#include "io/msgstream.h"

static struct event_base *base;
static struct options opt;
static struct peer_table peers;
static struct ctlport *port;
static uint16_t port_number;
static bool running;
static unsigned joined;
static struct peer *joined_peer;
static char joined_address[CTL_MAX_TEXT];

static bool hook_running(void *ctx)
{
	(void)ctx;
	return running;
}

static void conn_message(struct msgconn *c, const struct ctl_msg *m, uint64_t rx, void *arg)
{
	(void)c;
	(void)m;
	(void)rx;
	(void)arg;
}

static void conn_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)reason;
	struct peer *p = arg;
	msgconn_free(c);
	p->conn = NULL;
}

static const struct msgconn_ops conn_ops = { conn_message, conn_close };

/* As the hub does: the connection becomes the peer's control link. */
static void hook_joined(void *ctx, struct peer *p, int fd, const struct ctl_hello *h,
			const struct msgseal *seal, const char *peer)
{
	(void)ctx;
	(void)h;
	joined++;
	joined_peer = p;
	snprintf(joined_address, sizeof joined_address, "%s", peer);
	p->conn = msgconn_new(base, fd, seal, peer, &conn_ops, p);
	ck_assert_ptr_nonnull(p->conn);
}

static void setup(void)
{
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	opt = (struct options){ .run_id = 5, .sources = 2, .readers = 1,
				   .handshake_timeout_ms = 200 };
	snprintf(opt.control_host, sizeof opt.control_host, "127.0.0.1");
	ck_assert_int_eq(peer_table_init(&peers, 2, 1), 0);
	struct ctlport_hooks hooks = { .running = hook_running, .joined = hook_joined };
	port = ctlport_open(base, &opt, &peers, &hooks, &port_number);
	ck_assert_ptr_nonnull(port);
	ck_assert_uint_ne(port_number, 0);
	running = true;
	joined = 0;
	joined_peer = NULL;
}

static void teardown(void)
{
	ctlport_close(port);
	for (uint32_t i = 0; i < peer_count(&peers); i++)
		if (peer_at(&peers, i)->conn != NULL)
			msgconn_free(peer_at(&peers, i)->conn);
	peer_table_free(&peers);
	event_base_free(base);
}

struct dialed {
	bool done;
	int fd;
	struct ctl_msg reply;
};

static void on_dialed(int fd, const struct ctl_msg *reply, const struct msgseal *seal, void *arg)
{
	(void)seal;
	struct dialed *d = arg;
	d->fd = fd;
	if (reply != NULL)
		d->reply = *reply;
	d->done = true;
}

static void run_until(const bool *done, unsigned ms)
{
	for (unsigned i = 0; i < ms && !*done; i++) {
		struct timeval tv = { 0, 1000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

/* Greets the port with a HELLO of that role, id, channel and run; the
 * ERROR's code, or "" when welcomed: then the client's end is kept in
 * *kept, or closed when kept is NULL. */
static const char *greet_keep(enum ctl_role role, uint32_t id, enum ctl_channel channel,
			      uint32_t run, int *kept)
{
	static struct dialed d;
	struct ctl_hello h;
	memset(&d, 0, sizeof d);
	greet_hello_init(&h, role, id, channel, run, NULL, 0);
	greet_dial_start(base, "the control port", "127.0.0.1", port_number, false, &h, 1000, -1,
			 on_dialed, &d);
	run_until(&d.done, 3000);
	ck_assert(d.done);
	if (d.fd >= 0) {
		ck_assert_int_eq(d.reply.type, CTL_WELCOME);
		if (kept != NULL)
			*kept = d.fd;
		else
			close(d.fd);
		return "";
	}
	ck_assert_int_eq(d.reply.type, CTL_ERROR);
	return d.reply.u.error.code;
}

static const char *greet(enum ctl_role role, uint32_t id, enum ctl_channel channel, uint32_t run)
{
	return greet_keep(role, id, channel, run, NULL);
}

static struct snapshot counters(void)
{
	struct snapshot s = { 0 };
	ctlport_snapshot(port, &s);
	return s;
}

START_TEST(test_welcome)
{
	ck_assert_str_eq(greet(CTL_ROLE_READER, 0, CTL_CHANNEL_CONTROL, 5), "");
	ck_assert_uint_eq(joined, 1);
	struct peer *p = peer_reader(&peers, 0);
	ck_assert_ptr_eq(joined_peer, p);
	ck_assert(p->connected);
	ck_assert_uint_eq(p->pid, (uint32_t)getpid());
	ck_assert_str_ne(p->host, "");
	ck_assert_str_eq(p->address, joined_address);
	ck_assert(strncmp(p->address, "127.0.0.1:", 10) == 0);
	ck_assert(!peer_source(&peers, 0)->connected);
	ck_assert_uint_eq(counters().refused_connections, 0);
}
END_TEST

START_TEST(test_refusals)
{
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 0, CTL_CHANNEL_CONTROL, 6), "wrong_run");
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 0, CTL_CHANNEL_DATA, 5), "wrong_channel");
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 2, CTL_CHANNEL_CONTROL, 5), "unknown_peer");
	ck_assert_str_eq(greet(CTL_ROLE_BUILDER, 0, CTL_CHANNEL_CONTROL, 5), "unknown_peer");
	ck_assert_uint_eq(joined, 0);
	ck_assert(!peer_source(&peers, 0)->connected);

	int kept = -1;
	ck_assert_str_eq(greet_keep(CTL_ROLE_SOURCE, 1, CTL_CHANNEL_CONTROL, 5, &kept), "");
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 1, CTL_CHANNEL_CONTROL, 5), "duplicate_id");
	/* Its connection gone: it left, and a second one would be counted
	 * twice. */
	close(kept);
	for (int i = 0; i < 2000 && peer_source(&peers, 1)->conn != NULL; i++)
		run_until(&(bool){ false }, 1);
	ck_assert_ptr_null(peer_source(&peers, 1)->conn);
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 1, CTL_CHANNEL_CONTROL, 5), "peer_left");
	ck_assert_uint_eq(joined, 1);

	running = false;
	ck_assert_str_eq(greet(CTL_ROLE_SOURCE, 0, CTL_CHANNEL_CONTROL, 5), "run_over");
	ck_assert_uint_eq(counters().refused_connections, 7);
}
END_TEST

/* A connection that never greets is dropped at the deadline, counted. */
START_TEST(test_silent)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port_number),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	bool never = false;
	run_until(&never, 2 * (unsigned)opt.handshake_timeout_ms + 100);
	struct snapshot s = counters();
	ck_assert_uint_eq(s.greetings_timed_out, 1);
	ck_assert_uint_eq(s.refused_connections, 1);
	ck_assert_uint_eq(joined, 0);
	close(fd);
}
END_TEST

static Suite *ctlport_suite(void)
{
	Suite *s = suite_create("ctlport");
	TCase *tc = tcase_create("greetings");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_welcome);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_silent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctlport_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
