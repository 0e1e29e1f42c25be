/* Unit tests of the connection plumbing over real loopback sockets and a
 * real libevent loop: common/io/net.c (listen, port files, dialing with
 * retry), common/io/handshake*.c (the greeting both ways, refusals, silent
 * and garbled peers, a dial retried while busy; the doors are in
 * test_handshake), common/io/msgstream.c (control messages, a malformed one
 * closes) and common/io/ctlclient.c (a peer's link answering PING,
 * delivering CREDIT, START and BYE). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "seals.h"
#include "io/ctlclient.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "io/msgstream.h"
#include "io/net.h"

#include "loop.h"

static struct event_base *base;

static void loop_setup(void)
{
	base = event_base_new();
	log_init("test", -1, LOG_LEVEL_ERROR);
}

static void loop_teardown(void)
{
	event_base_free(base);
}

/* Runs the loop until *done or timeout_ms. */
static void run_until(const bool *done, int timeout_ms)
{
	test_run_until(base, done, timeout_ms);
}

START_TEST(test_listen_and_port_file)
{
	uint16_t port = 0;
	int fd = net_listen("127.0.0.1", 0, &port);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_gt(port, 0);
	char path[] = "/tmp/es-test-portfile-XXXXXX";
	int tmp = mkstemp(path);
	close(tmp);
	ck_assert_int_eq(net_write_port_file(path, "data 1234\n"), 0);
	FILE *f = fopen(path, "r");
	char line[32] = "";
	ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
	fclose(f);
	ck_assert_str_eq(line, "data 1234\n");
	unlink(path);
	/* The same port twice is refused with the address in the log. */
	uint16_t again;
	ck_assert_int_eq(net_listen("127.0.0.1", port, &again), -EADDRINUSE);
	ck_assert_int_lt(net_write_port_file("/nonexistent-dir/x", "y"), 0);
	/* A daemon's lines, a port not listened on (0) left out. */
	tmp = mkstemp(path);
	close(tmp);
	const struct net_port ports[] = { { "data", 1234 }, { "metrics", 0 }, { "control", 5678 } };
	ck_assert_int_eq(net_write_ports(path, ports, 3), 0);
	char all[64] = "";
	f = fopen(path, "r");
	size_t got = fread(all, 1, sizeof all - 1, f);
	fclose(f);
	all[got] = '\0';
	ck_assert_str_eq(all, "data 1234\ncontrol 5678\n");
	unlink(path);
	close(fd);
}
END_TEST

struct dial_result {
	bool done;
	int fd;
};

static void on_dialed(int fd, void *arg)
{
	struct dial_result *r = arg;
	r->fd = fd;
	r->done = true;
}

static int late_listener = -1;
static uint16_t late_port;

static void open_late_listener(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	uint16_t p;
	late_listener = net_listen("127.0.0.1", late_port, &p);
}

/* The read back is what the kernel granted: past net.core.wmem_max as root
 * (SO_SNDBUFFORCE), within it (doubled) otherwise, and never 0 for a
 * socket; an unchanged socket reports the kernel's default. */
static uint64_t sysctl_u64(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;
	if (f != NULL) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* A blocking connection to 127.0.0.1:port. */
static int connect_loopback(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

/* A serving daemon's listeners (docs/RUNCONTROL.md): each run asks for the
 * same host:port list and gets the same sockets, in order; two asked for on
 * host:0 in one run are two; a peer that connects between runs waits in
 * the backlog for the next one; closing them frees the ports. */
START_TEST(test_kept_listeners)
{
	net_keep_listeners();
	uint16_t a1, b1, a2, b2, c;
	int a = net_listen("127.0.0.1", 0, &a1), b = net_listen("127.0.0.1", 0, &b1);
	ck_assert_int_ge(a, 0);
	ck_assert_int_ge(b, 0);
	ck_assert_uint_ne(a1, b1);
	/* A rail's second address asks for the first one's port by number. */
	int rail = net_listen("127.0.0.2", a1, &c);
	ck_assert_int_ge(rail, 0);
	ck_assert_uint_eq(c, a1);
	ck_assert_uint_eq(net_kept_count(), 3);
	close(a);
	close(b);
	close(rail);

	int early = connect_loopback(b1);      /* between runs */
	net_kept_rewind();
	a = net_listen("127.0.0.1", 0, &a2);
	b = net_listen("127.0.0.1", 0, &b2);
	rail = net_listen("127.0.0.2", a2, &c);
	ck_assert_uint_eq(a2, a1);
	ck_assert_uint_eq(b2, b1);
	ck_assert_uint_eq(c, a1);
	ck_assert_uint_eq(net_kept_count(), 3);
	char peer[64];
	int got = -1;
	for (int i = 0; i < 200 && got < 0; i++) {
		got = net_accept(b, peer, sizeof peer);
		if (got < 0)
			usleep(5000);
	}
	ck_assert_int_ge(got, 0);
	close(got);
	close(early);
	/* A third listener in this run is a new one. */
	uint16_t d;
	int extra = net_listen("127.0.0.1", 0, &d);
	ck_assert_uint_ne(d, a1);
	ck_assert_uint_ne(d, b1);
	ck_assert_uint_eq(net_kept_count(), 4);
	close(extra);
	close(a);
	close(b);
	close(rail);

	net_close_kept();
	ck_assert_uint_eq(net_kept_count(), 0);
	uint16_t again;
	int fresh = net_listen("127.0.0.1", a1, &again);
	ck_assert_int_ge(fresh, 0);
	ck_assert_uint_eq(again, a1);
	ck_assert_uint_eq(net_kept_count(), 0);   /* no longer keeping */
	close(fresh);
}
END_TEST

START_TEST(test_tune_reads_back_the_granted_buffers)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_gt(net_send_buffer(fd), 0);
	ck_assert_uint_gt(net_receive_buffer(fd), 0);
	const int want = 8 << 20;
	net_tune(fd, want);
	uint64_t snd = net_send_buffer(fd), rcv = net_receive_buffer(fd);
	if (geteuid() == 0) {
		ck_assert_uint_ge(snd, (uint64_t)want);
		ck_assert_uint_ge(rcv, (uint64_t)want);
	} else {
		ck_assert_uint_le(snd, 2 * sysctl_u64("/proc/sys/net/core/wmem_max"));
		ck_assert_uint_le(rcv, 2 * sysctl_u64("/proc/sys/net/core/rmem_max"));
	}
	ck_assert_uint_eq(net_send_buffer(-1), 0);
	close(fd);
}
END_TEST

START_TEST(test_dial_retries_until_listener_appears)
{
	/* Find a free port, close it, dial it, and open it 100 ms later. */
	int probe = net_listen("127.0.0.1", 0, &late_port);
	close(probe);
	struct dial_result r = { .fd = -1 };
	struct net_dial *d = net_dial_start(base, "test listener", "127.0.0.1", late_port, 5000,
					    on_dialed, &r);
	ck_assert_ptr_nonnull(d);
	struct event *ev = evtimer_new(base, open_late_listener, NULL);
	struct timeval tv = { 0, 100000 };
	evtimer_add(ev, &tv);
	run_until(&r.done, 5000);
	ck_assert(r.done);
	ck_assert_int_ge(r.fd, 0);
	close(r.fd);
	close(late_listener);
	event_free(ev);
}
END_TEST

START_TEST(test_dial_gives_up)
{
	uint16_t port;
	int probe = net_listen("127.0.0.1", 0, &port);
	close(probe);
	struct dial_result r = { .fd = 0 };
	net_dial_start(base, "nobody", "127.0.0.1", port, 200, on_dialed, &r);
	run_until(&r.done, 3000);
	ck_assert(r.done);
	ck_assert_int_eq(r.fd, -ECONNREFUSED);
}
END_TEST

/* A listener that greets every connection: welcomes run 1, refuses others. */
struct server {
	int listen_fd;
	uint16_t port;
	struct event *ev;
	int accepted;
	int refused;
	int failed;
	struct ctl_hello last;
	struct msgseal seal;       /* of the connection welcomed last */
	int conn_fd;
	int busy_first;     /* refuse this many greetings "busy" first */
	int busy_sent;
};

static void server_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
			      const char *peer, void *arg)
{
	struct server *s = arg;
	if (fd < 0) {
		s->failed++;
		return;
	}
	s->last = *h;
	if (s->busy_sent < s->busy_first) {
		greet_reply_error(fd, peer, GREET_BUSY_CODE, "too busy, attempt %d", ++s->busy_sent);
		return;
	}
	if (h->run_id != 1) {
		greet_reply_error(fd, peer, "wrong_run", "run %u, expected run 1", h->run_id);
		s->refused++;
		return;
	}
	ck_assert_int_eq(greet_reply_welcome(fd, 1, CTL_ROLE_BUILDER, 0), 0);
	s->accepted++;
	s->conn_fd = fd;
	s->seal = *seal;
}

static void server_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	char peer[64];
	int c = net_accept(fd, peer, sizeof peer);
	if (c >= 0)
		greet_accept(base, c, peer, 300, server_on_greeted, arg);
}

static void server_start(struct server *s)
{
	memset(s, 0, sizeof *s);
	s->conn_fd = -1;
	s->listen_fd = net_listen("127.0.0.1", 0, &s->port);
	ck_assert_int_ge(s->listen_fd, 0);
	s->ev = event_new(base, s->listen_fd, EV_READ | EV_PERSIST, server_on_accept, s);
	event_add(s->ev, NULL);
}

static void server_stop(struct server *s)
{
	event_free(s->ev);
	close(s->listen_fd);
	if (s->conn_fd >= 0)
		close(s->conn_fd);
}

struct client {
	bool done;
	int fd;
	struct ctl_msg reply;
	bool got_reply;
};

static void client_on_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
			      void *arg)
{
	(void)seal;
	struct client *c = arg;
	c->fd = fd;
	c->got_reply = reply != NULL;
	if (reply)
		c->reply = *reply;
	c->done = true;
}

static int connect_blocking(uint16_t port)
{
	struct dial_result r = { .fd = -1 };
	net_dial_start(base, "server", "127.0.0.1", port, 2000, on_dialed, &r);
	run_until(&r.done, 2000);
	ck_assert_int_ge(r.fd, 0);
	return r.fd;
}

static struct ctl_hello hello_of(uint32_t run)
{
	struct ctl_hello h = { .role = CTL_ROLE_SOURCE, .id = 3, .channel = CTL_CHANNEL_DATA,
			       .run_id = run, .protocol = CTL_PROTOCOL_VERSION, .pid = 42, .rails = 1 };
	strcpy(h.host, "testhost");
	return h;
}

START_TEST(test_greeting_welcome_and_refusal)
{
	struct server s;
	server_start(&s);
	struct ctl_hello h = hello_of(1);
	static struct client c;
	memset(&c, 0, sizeof c);
	greet_connect(base, connect_blocking(s.port), "server", &h, 1000, client_on_greeted, &c);
	run_until(&c.done, 2000);
	ck_assert_int_ge(c.fd, 0);
	ck_assert_int_eq(c.reply.type, CTL_WELCOME);
	ck_assert_int_eq(s.accepted, 1);
	ck_assert_uint_eq(s.last.id, 3);
	ck_assert_str_eq(s.last.host, "testhost");
	close(c.fd);

	h = hello_of(2);
	memset(&c, 0, sizeof c);
	greet_connect(base, connect_blocking(s.port), "server", &h, 1000, client_on_greeted, &c);
	run_until(&c.done, 2000);
	ck_assert_int_lt(c.fd, 0);
	ck_assert(c.got_reply);
	ck_assert_int_eq(c.reply.type, CTL_ERROR);
	ck_assert_str_eq(c.reply.u.error.code, "wrong_run");
	ck_assert_str_eq(c.reply.u.error.reason, "run 2, expected run 1");
	ck_assert_int_eq(s.refused, 1);
	server_stop(&s);
}
END_TEST

/* One retry policy for every client: "busy" is tried again with backoff,
 * anything else is final, and the give-up hands back the last words. */
START_TEST(test_dial_retries_a_busy_greeting)
{
	struct server s;
	server_start(&s);
	s.busy_first = 3;
	struct ctl_hello h = hello_of(1);
	static struct client c;
	memset(&c, 0, sizeof c);
	ck_assert_ptr_nonnull(greet_dial_start(base, "server", "127.0.0.1", s.port, false, &h, 3000,
					       0, client_on_greeted, &c));
	run_until(&c.done, 4000);
	ck_assert_int_ge(c.fd, 0);
	ck_assert_int_eq(c.reply.type, CTL_WELCOME);
	ck_assert_int_eq(s.busy_sent, 3);
	ck_assert_int_eq(s.accepted, 1);
	close(c.fd);

	/* Busy for longer than the connect timeout: fails with what it was told. */
	s.busy_first = 1000;
	s.busy_sent = 0;
	memset(&c, 0, sizeof c);
	greet_dial_start(base, "server", "127.0.0.1", s.port, false, &h, 300, 0, client_on_greeted,
			 &c);
	run_until(&c.done, 2000);
	ck_assert_int_lt(c.fd, 0);
	ck_assert(c.got_reply);
	ck_assert_str_eq(c.reply.u.error.code, GREET_BUSY_CODE);
	ck_assert_int_gt(s.busy_sent, 2);
	ck_assert_int_lt(s.busy_sent, 12);   /* backoff, not a busy loop */

	/* Any other refusal is final at once. */
	s.busy_first = 0;
	s.busy_sent = 0;
	s.refused = 0;
	h = hello_of(2);
	memset(&c, 0, sizeof c);
	greet_dial_start(base, "server", "127.0.0.1", s.port, false, &h, 3000, 0, client_on_greeted,
			 &c);
	run_until(&c.done, 2000);
	ck_assert_int_lt(c.fd, 0);
	ck_assert_str_eq(c.reply.u.error.code, "wrong_run");
	ck_assert_int_eq(s.refused, 1);
	server_stop(&s);
}
END_TEST

START_TEST(test_greeting_silent_and_garbled_peers)
{
	struct server s;
	server_start(&s);
	/* Silent: the handshake timeout (300 ms) drops it. */
	int silent = connect_blocking(s.port);
	bool never = false;
	run_until(&never, 600);
	ck_assert_int_eq(s.failed, 1);
	/* The server spoke first (its challenge), then closed. */
	char bytes[256];
	ck_assert_int_gt(read(silent, bytes, sizeof bytes), 0);
	ck_assert_int_eq(read(silent, bytes, sizeof bytes), 0);
	close(silent);
	/* Garbled: not a control message at all. */
	int garbled = connect_blocking(s.port);
	ck_assert_int_eq(write(garbled, "GET / HTTP/1.0\r\n\r\n", 18), 18);
	run_until(&never, 200);
	ck_assert_int_eq(s.failed, 2);
	ck_assert_int_eq(s.accepted, 0);
	close(garbled);
	server_stop(&s);
}
END_TEST

/* ctllink against a minimal builder: greet, then PING, CREDIT, START, BYE. */
struct fake_builder {
	struct server s;
	struct msgconn *conn;
	struct ctl_msg last;
	int messages;
	bool pong;
};

static void fb_on_message(struct msgconn *c, const struct ctl_msg *m, uint64_t rx, void *arg)
{
	(void)c;
	(void)rx;
	struct fake_builder *fb = arg;
	fb->last = *m;
	fb->messages++;
	if (m->type == CTL_PONG)
		fb->pong = true;
}

static void fb_on_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)reason;
	struct fake_builder *fb = arg;
	msgconn_free(c);
	fb->conn = NULL;
}

static const struct msgconn_ops fb_ops = { .on_message = fb_on_message, .on_close = fb_on_close };

struct peer_state {
	bool ready, started, bye, lost;
	uint64_t credit;
	int32_t status;
};

static void ps_ready(void *a) { ((struct peer_state *)a)->ready = true; }
static void ps_credit(uint64_t l, void *a) { ((struct peer_state *)a)->credit = l; }
static void ps_start(uint64_t t, void *a) { (void)t; ((struct peer_state *)a)->started = true; }
static void ps_bye(int32_t st, void *a) { ((struct peer_state *)a)->bye = true; ((struct peer_state *)a)->status = st; }
static void ps_lost(const char *r, void *a) { (void)r; ((struct peer_state *)a)->lost = true; }

static const struct ctllink_ops ps_ops = {
	.on_ready = ps_ready, .on_credit = ps_credit, .on_start = ps_start,
	.on_bye = ps_bye, .on_lost = ps_lost,
};

START_TEST(test_ctllink_round_trip)
{
	static struct fake_builder fb;
	memset(&fb, 0, sizeof fb);
	server_start(&fb.s);
	struct ctl_hello h = hello_of(1);
	static struct peer_state ps;
	memset(&ps, 0, sizeof ps);
	struct ctllink *l = ctllink_start(base, "127.0.0.1", fb.s.port, &h, 2000, &ps_ops, &ps);
	run_until(&ps.ready, 3000);
	ck_assert(ps.ready);
	ck_assert_int_ge(fb.s.conn_fd, 0);
	fb.conn = msgconn_new(base, fb.s.conn_fd, &fb.s.seal, "peer", &fb_ops, &fb);
	fb.s.conn_fd = -1;

	struct ctl_msg m = { .type = CTL_PING };
	m.u.ping.sequence = 9;
	m.u.ping.t1_ns = 123;
	ck_assert_int_eq(msgconn_send(fb.conn, &m), 0);
	run_until(&fb.pong, 2000);
	ck_assert(fb.pong);
	ck_assert_uint_eq(fb.last.u.pong.sequence, 9);
	ck_assert_uint_eq(fb.last.u.pong.t1_ns, 123);
	ck_assert_uint_le(fb.last.u.pong.t2_ns, fb.last.u.pong.t3_ns);

	m.type = CTL_CREDIT;
	m.u.credit.limit = 4096;
	msgconn_send(fb.conn, &m);
	m.type = CTL_START;
	m.u.start.delay_ns = 1000;
	msgconn_send(fb.conn, &m);
	run_until(&ps.started, 2000);
	ck_assert_uint_eq(ps.credit, 4096);

	struct ctl_msg end = { .type = CTL_END };
	ctl_group_set(ctl_report_group(&end.u.report, ""), "events", 77);
	ck_assert_int_eq(ctllink_send(l, &end), 0);
	bool have_end = false;
	for (int i = 0; i < 2000 && !have_end; i++) {
		run_until(&have_end, 1);
		have_end = fb.last.type == CTL_END;
	}
	ck_assert(have_end);
	uint64_t v;
	ck_assert(ctl_group_get(ctl_report_find(&fb.last.u.report, ""), "events", &v));
	ck_assert_uint_eq(v, 77);
	/* The link adds this host's clock state to END. */
	ck_assert_ptr_nonnull(ctl_report_find(&fb.last.u.report, "chrony"));

	m.type = CTL_BYE;
	m.u.bye.status = 3;
	msgconn_send(fb.conn, &m);
	run_until(&ps.bye, 2000);
	ck_assert_int_eq(ps.status, 3);

	/* The builder going away is reported as lost. */
	msgconn_free(fb.conn);
	fb.conn = NULL;
	run_until(&ps.lost, 2000);
	ck_assert(ps.lost);
	ctllink_free(l);
	server_stop(&fb.s);
}
END_TEST

START_TEST(test_malformed_control_message_closes)
{
	static struct fake_builder fb;
	memset(&fb, 0, sizeof fb);
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct msgseal far, near;
	test_seal_pair(&far, &near);
	fb.conn = msgconn_new(base, sv[0], &near, "peer", &fb_ops, &fb);
	/* A length prefix of 70000, sealed: refused before the body is read. */
	uint8_t big[MSGSEAL_HEADER_BYTES + 4] = { 0 };
	memcpy(big + MSGSEAL_HEADER_BYTES, (const uint8_t[]){ 0x00, 0x01, 0x11, 0x70 }, 4);
	msgseal_seal(&far, big + MSGSEAL_HEADER_BYTES, 4, big);
	ck_assert_int_eq(write(sv[1], big, sizeof big), (ssize_t)sizeof big);
	bool never = false;
	run_until(&never, 100);
	ck_assert_ptr_null(fb.conn);
	ck_assert_int_eq(fb.messages, 0);
	close(sv[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("loopback");
	tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_listen_and_port_file);
	tcase_add_test(tc, test_kept_listeners);
	tcase_add_test(tc, test_tune_reads_back_the_granted_buffers);
	tcase_add_test(tc, test_dial_retries_until_listener_appears);
	tcase_add_test(tc, test_dial_gives_up);
	tcase_add_test(tc, test_greeting_welcome_and_refusal);
	tcase_add_test(tc, test_greeting_silent_and_garbled_peers);
	tcase_add_test(tc, test_dial_retries_a_busy_greeting);
	tcase_add_test(tc, test_ctllink_round_trip);
	tcase_add_test(tc, test_malformed_control_message_closes);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
