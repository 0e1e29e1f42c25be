/* Unit tests of common/io/handshake*.c, the listener's door over real
 * loopback sockets and a real libevent loop: one address's share full, the
 * greeting that has come least far is evicted (idle before partial, then
 * the oldest) and told busy; the whole door full across addresses; the
 * deadline; out of descriptors, each waiting connection closed at once and
 * counted, the listening socket left quiet; a whole greeting through a door
 * over an abstract Unix socket by greet_dial_start(); the HELLO of this
 * process. The greeting both ways and
 * the client's retries are in test_net. */
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/handshake.h"
#include "io/net.h"
#include "sys/clock.h"
#include "sys/log.h"

#include "loop.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

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

/* Runs the loop for ms of real time (test_run_until's slices may last
 * longer than 1 ms each). */
static void wait_ms(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

struct door_server {
	struct greet_door door;
	uint64_t refused;          /* the daemon's refused_connections */
	int listen_fd;
	struct event *ev;
	int failed;                /* greetings reported failed (fd < 0) */
	int welcomed;
	struct msgseal seal;       /* the last welcomed connection's */
};

static void door_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
			    const char *peer, void *arg)
{
	struct door_server *s = arg;
	(void)peer;
	if (seal != NULL)
		s->seal = *seal;
	if (fd < 0) {
		s->failed++;
		s->refused++;
		return;
	}
	ck_assert_int_eq(greet_reply_welcome(fd, h->run_id, CTL_ROLE_BUILDER, 0), 0);
	s->welcomed++;
	close(fd);
}

static void door_on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct door_server *s = arg;
	(void)what;
	greet_accept_all(&s->door, fd, door_on_greeted, s);
}

static void door_start(struct door_server *s, int listen_fd, uint64_t timeout_ms)
{
	memset(s, 0, sizeof *s);
	s->listen_fd = listen_fd;
	ck_assert_int_ge(s->listen_fd, 0);
	greet_door_init(&s->door, base, "the test port", "the test", timeout_ms, &s->refused);
	s->ev = event_new(base, s->listen_fd, EV_READ | EV_PERSIST, door_on_readable, s);
	event_add(s->ev, NULL);
}

static void door_stop(struct door_server *s)
{
	greet_door_close(&s->door);
	ck_assert_uint_eq(s->door.in_progress, 0);
	event_free(s->ev);
	close(s->listen_fd);
}

/* A TCP connection to 127.0.0.1:port from address from (any 127/8 address
 * is this host's), accepted by the door before it returns. */
static int connect_from(const char *from, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(inet_pton(AF_INET, from, &src.sin_addr), 1);
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr), 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
	/* Accepted, and its start told apart from the next one's. */
	wait_ms(3);
	return fd;
}

/* What the listener has said on fd so far. */
struct heard {
	int challenges;
	bool error;
	struct ctl_error last_error;
	bool closed;
};

static struct heard hear(int fd)
{
	static uint8_t buf[4 * (CTL_LENGTH_BYTES + 512)];
	static struct ctl_msg msg;
	struct heard h = { 0 };
	size_t have = 0;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof buf - have);
		if (n == 0)
			h.closed = true;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	for (size_t off = 0; off < have;) {
		long used = ctl_decode(buf + off, have - off, &msg, NULL, NULL, 0);
		ck_assert_int_gt(used, 0);
		if (msg.type == CTL_CHALLENGE)
			h.challenges++;
		if (msg.type == CTL_ERROR) {
			h.error = true;
			h.last_error = msg.u.error;
		}
		off += (size_t)used;
	}
	return h;
}

static void assert_evicted(int fd, const char *limit)
{
	struct heard h = hear(fd);
	ck_assert_int_eq(h.challenges, 1);
	ck_assert(h.error);
	ck_assert_str_eq(h.last_error.code, GREET_BUSY_CODE);
	ck_assert_msg(strstr(h.last_error.reason, limit) != NULL, "reason: %s", h.last_error.reason);
	ck_assert(h.closed);
}

static void assert_waiting(int fd)
{
	struct heard h = hear(fd);
	ck_assert_int_eq(h.challenges, 1);
	ck_assert(!h.error);
	ck_assert(!h.closed);
}

START_TEST(test_address_share)
{
	static struct door_server s;
	int fd[GREET_MAX_PER_ADDRESS + 1];

	uint16_t port;

	door_start(&s, net_listen("127.0.0.1", 0, &port), 5000);
	/* The oldest has sent part of its HELLO: it is not idle. */
	fd[0] = connect_from("127.0.0.1", port);
	ck_assert_int_eq(write(fd[0], "\0\0", 2), 2);
	for (unsigned i = 1; i < GREET_MAX_PER_ADDRESS; i++)
		fd[i] = connect_from("127.0.0.1", port);
	ck_assert_uint_eq(s.door.in_progress, GREET_MAX_PER_ADDRESS);
	ck_assert_uint_eq(s.door.evicted, 0);

	/* One more from that address: the oldest idle one makes room. */
	fd[GREET_MAX_PER_ADDRESS] = connect_from("127.0.0.1", port);
	ck_assert_uint_eq(s.door.evicted, 1);
	ck_assert_uint_eq(s.door.busy, 1);
	ck_assert_int_eq(s.failed, 1);
	ck_assert_uint_eq(s.door.in_progress, GREET_MAX_PER_ADDRESS);
	assert_evicted(fd[1], "at most 16 greetings from 127.0.0.1 at once");
	assert_waiting(fd[0]);
	assert_waiting(fd[2]);
	assert_waiting(fd[GREET_MAX_PER_ADDRESS]);

	/* Another address is not held back by the full share. */
	int other = connect_from("127.0.0.2", port);
	ck_assert_uint_eq(s.door.evicted, 1);
	assert_waiting(other);
	close(other);

	for (unsigned i = 0; i <= GREET_MAX_PER_ADDRESS; i++)
		close(fd[i]);
	door_stop(&s);
}
END_TEST

START_TEST(test_door_cap)
{
	static struct door_server s;
	static int fd[GREET_MAX_IN_PROGRESS];
	const char *from[] = { "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5" };
	uint16_t port;

	door_start(&s, net_listen("127.0.0.1", 0, &port), 5000);
	_Static_assert(GREET_MAX_IN_PROGRESS == 4 * GREET_MAX_PER_ADDRESS, "four shares fill the door");
	for (unsigned i = 0; i < GREET_MAX_IN_PROGRESS; i++)
		fd[i] = connect_from(from[i % 4], port);
	ck_assert_uint_eq(s.door.in_progress, GREET_MAX_IN_PROGRESS);
	ck_assert_uint_eq(s.door.evicted, 0);

	/* A fifth address: the oldest greeting of any address goes. */
	int newcomer = connect_from("127.0.0.6", port);
	ck_assert_uint_eq(s.door.evicted, 1);
	ck_assert_int_eq(s.failed, 1);
	ck_assert_uint_eq(s.door.in_progress, GREET_MAX_IN_PROGRESS);
	assert_evicted(fd[0], "at most 64 greetings at once");
	assert_waiting(fd[1]);
	assert_waiting(newcomer);

	close(newcomer);
	for (unsigned i = 0; i < GREET_MAX_IN_PROGRESS; i++)
		close(fd[i]);
	door_stop(&s);
}
END_TEST

/* The deadline counts from the accept, however the bytes trickle in. */
START_TEST(test_deadline)
{
	static struct door_server s;
	uint16_t port;

	uint64_t t0 = clk_monotonic_ns();
	door_start(&s, net_listen("127.0.0.1", 0, &port), 1000);
	int fd = connect_from("127.0.0.1", port);
	/* A HELLO of 200 bytes announced, then its bytes one every 100 ms,
	 * each well within the gap a timeout per read would allow, until the
	 * door closes the connection: only a deadline for the whole greeting
	 * ends it. The times are watched on the clock, not assumed from the
	 * waits, which a loaded machine stretches. */
	static const uint8_t length[CTL_LENGTH_BYTES] = { 0, 0, 0, 200 };
	ck_assert_int_eq(send(fd, length, sizeof length, MSG_NOSIGNAL), (ssize_t)sizeof length);
	int sent = 0;
	for (;;) {
		wait_ms(100);
		uint64_t ms = (clk_monotonic_ns() - t0) / 1000000u;
		struct pollfd p = { .fd = fd, .events = POLLRDHUP };
		if (ms >= 5000 || (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP))))
			break;
		if (ms < 900)
			ck_assert_uint_eq(s.door.timed_out, 0);
		ssize_t n = send(fd, "\0", 1, MSG_NOSIGNAL);
		ck_assert_msg(n == 1, "byte %d: %s", sent, strerror(errno));
		sent++;
	}
	ck_assert_int_ge(sent, 2);
	ck_assert_uint_eq(s.door.timed_out, 1);
	ck_assert_int_eq(s.failed, 1);
	ck_assert_uint_eq(s.door.in_progress, 0);
	struct heard h = hear(fd);
	ck_assert_int_eq(h.challenges, 1);
	ck_assert(h.closed);
	close(fd);
	door_stop(&s);
}
END_TEST

/* With every descriptor taken, accept fails with EMFILE while the
 * listening socket stays readable: each waiting connection is accepted on
 * the door's spare descriptor and closed, counted as refused, so the
 * socket is quiet again and the loop does not spin. */
START_TEST(test_out_of_descriptors)
{
	static struct door_server s;
	uint16_t port;

	/* valgrind keeps a descriptor limit of its own and closes what the
	 * kernel accepts past it: the test means the kernel's. */
	if (RUNNING_ON_VALGRIND)
		return;
	door_start(&s, net_listen("127.0.0.1", 0, &port), 1000);
	int fds[3];
	for (int i = 0; i < 3; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port),
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&dst, sizeof dst), 0);
	}
	struct rlimit was, lim;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
	lim = was;
	lim.rlim_cur = 64;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	int hog[64], hogs = 0;
	for (int fd; hogs < 64 && (fd = dup(0)) >= 0;)
		hog[hogs++] = fd;
	ck_assert_int_eq(errno, EMFILE);
	wait_ms(20);
	struct pollfd p = { .fd = s.listen_fd, .events = POLLIN };
	int ready = poll(&p, 1, 0);
	while (hogs > 0)
		close(hog[--hogs]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	ck_assert_int_eq(ready, 0);
	ck_assert_uint_eq(s.refused, 3);
	ck_assert_uint_eq(s.door.in_progress, 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(hear(fds[i]).closed);
		close(fds[i]);
	}
	/* Descriptors back: the next one is greeted. */
	int fd = connect_from("127.0.0.1", port);
	assert_waiting(fd);
	close(fd);
	door_stop(&s);
}
END_TEST

struct client {
	bool done;
	int fd;
	struct ctl_msg reply;
	bool sealed;
	struct msgseal seal;
};

static void client_on_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
			      void *arg)
{
	struct client *c = arg;
	c->fd = fd;
	c->sealed = seal != NULL;
	if (seal != NULL)
		c->seal = *seal;
	if (reply != NULL)
		c->reply = *reply;
	c->done = true;
}

/* A whole greeting through a door, dialled over an abstract Unix socket. */
START_TEST(test_dial_unix_through_door)
{
	static struct door_server s;
	static struct client c;
	char name[64];
	struct ctl_hello hello;
	uint16_t sources[2] = { 4, 7 };

	snprintf(name, sizeof name, "es-test-handshake-%d", (int)getpid());
	door_start(&s, net_listen_unix(name), 2000);
	greet_hello_init(&hello, CTL_ROLE_READER, 2, CTL_CHANNEL_DATA, 9, sources, 2);
	ck_assert_ptr_nonnull(greet_dial_start(base, "the test socket", name, 0, true, &hello, 2000, -1,
					       client_on_greeted, &c));
	test_run_until(base, &c.done, 3000);
	ck_assert(c.done);
	ck_assert_int_ge(c.fd, 0);
	ck_assert_int_eq(c.reply.type, CTL_WELCOME);
	ck_assert_uint_eq(c.reply.u.welcome.run_id, 9);
	ck_assert_int_eq(s.welcomed, 1);
	ck_assert_int_eq(s.failed, 0);
	close(c.fd);
	/* Both ends got the same session key from the greeting, each its own
	 * direction: what one seals the other opens, and not itself. */
	ck_assert(c.sealed);
	const uint8_t msg[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t header[MSGSEAL_HEADER_BYTES];
	uint64_t seq;
	msgseal_seal(&c.seal, msg, sizeof msg, header);
	ck_assert_int_eq(msgseal_open(&s.seal, header, msg, sizeof msg, &seq), MSGSEAL_OK);
	msgseal_seal(&s.seal, msg, sizeof msg, header);
	ck_assert_int_eq(msgseal_open(&c.seal, header, msg, sizeof msg, &seq), MSGSEAL_OK);
	ck_assert_int_eq(msgseal_open(&s.seal, header, msg, sizeof msg, &seq), MSGSEAL_BAD_TAG);
	/* Another greeting, another key: a fresh nonce at each end. */
	struct msgseal first = s.seal;
	memset(&c, 0, sizeof c);
	greet_dial_start(base, "the test socket", name, 0, true, &hello, 2000, -1, client_on_greeted,
			 &c);
	test_run_until(base, &c.done, 3000);
	ck_assert_int_ge(c.fd, 0);
	close(c.fd);
	msgseal_seal(&c.seal, msg, sizeof msg, header);
	ck_assert_int_eq(msgseal_open(&first, header, msg, sizeof msg, &seq), MSGSEAL_BAD_TAG);
	ck_assert_int_eq(msgseal_open(&s.seal, header, msg, sizeof msg, &seq), MSGSEAL_OK);

	/* Nobody listening under that name: unreachable, said so. */
	memset(&c, 0, sizeof c);
	greet_dial_start(base, "nobody", "es-test-handshake-nobody", 0, true, &hello, 100, -1,
			 client_on_greeted, &c);
	test_run_until(base, &c.done, 2000);
	ck_assert(c.done);
	ck_assert_int_lt(c.fd, 0);
	ck_assert_int_eq(c.reply.type, CTL_ERROR);
	ck_assert_str_eq(c.reply.u.error.code, "unreachable");
	ck_assert_msg(strstr(c.reply.u.error.reason, "nobody at @es-test-handshake-nobody") != NULL,
		      "reason: %s", c.reply.u.error.reason);
	door_stop(&s);
}
END_TEST

START_TEST(test_hello_init)
{
	struct ctl_hello h;
	static uint16_t many[CTL_MAX_SOURCE_LIST + 5];

	for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
		many[i] = (uint16_t)i;
	greet_hello_init(&h, CTL_ROLE_SOURCE, 3, CTL_CHANNEL_CONTROL, 11, NULL, 0);
	ck_assert_int_eq(h.role, CTL_ROLE_SOURCE);
	ck_assert_uint_eq(h.id, 3);
	ck_assert_int_eq(h.channel, CTL_CHANNEL_CONTROL);
	ck_assert_uint_eq(h.run_id, 11);
	ck_assert_uint_eq(h.protocol, CTL_PROTOCOL_VERSION);
	ck_assert_uint_eq(h.pid, (uint32_t)getpid());
	ck_assert_uint_eq(h.source_count, 0);
	ck_assert(h.host[0] != '\0');
	ck_assert_str_eq(h.proof, "");
	/* A reader's list, cut at what a HELLO carries. */
	greet_hello_init(&h, CTL_ROLE_READER, 0, CTL_CHANNEL_DATA, 1, many, sizeof many / sizeof many[0]);
	ck_assert_uint_eq(h.source_count, CTL_MAX_SOURCE_LIST);
	ck_assert_uint_eq(h.sources[CTL_MAX_SOURCE_LIST - 1], CTL_MAX_SOURCE_LIST - 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handshake");
	TCase *tc = tcase_create("door");
	tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_address_share);
	tcase_add_test(tc, test_door_cap);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_out_of_descriptors);
	tcase_add_test(tc, test_dial_unix_through_door);
	tcase_add_test(tc, test_hello_init);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
