/* Unit tests of common/io/httplisten.c over real loopback TCP and a real
 * libevent loop, its client libevent's own: a server opened on port 0
 * answers on the port it reports, and freeing it closes the socket; a port
 * that is taken is net_listen's error with nothing left open; in a process
 * that keeps its listeners, the next run's server is on the same port.
 * The door: connections past an address's share or the listener's cap
 * evict the oldest and a request still gets through; a connection that
 * dribbles is closed at the deadline; with no descriptor left accept backs
 * off (counted, no spinning) and serves again once some are freed. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "io/httplisten.h"
#include "io/net.h"
#include "sys/log.h"

#include "loop.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static struct event_base *base;

static void setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR + 1);   /* the taken port is logged */
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
	event_base_free(base);
}

static void serve(struct evhttp_request *req, void *arg)
{
	(void)arg;
	struct evbuffer *out = evbuffer_new();
	evbuffer_add_printf(out, "served %s", evhttp_request_get_uri(req));
	evhttp_send_reply(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

struct answer {
	bool done;
	int status;                /* 0: no answer (the connection failed) */
	char body[64];
};

static void on_answer(struct evhttp_request *req, void *arg)
{
	struct answer *a = arg;
	a->done = true;
	if (req == NULL)
		return;
	a->status = evhttp_request_get_response_code(req);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	n = n < sizeof a->body - 1 ? n : sizeof a->body - 1;
	evbuffer_remove(in, a->body, n);
	a->body[n] = '\0';
}

/* GET path from 127.0.0.1:port, the loop turning meanwhile. */
static struct answer get(uint16_t port, const char *path)
{
	struct answer a = { 0 };
	struct evhttp_connection *c = evhttp_connection_base_new(base, NULL, "127.0.0.1", port);
	ck_assert_ptr_nonnull(c);
	struct evhttp_request *req = evhttp_request_new(on_answer, &a);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "127.0.0.1");
	ck_assert_int_eq(evhttp_make_request(c, req, EVHTTP_REQ_GET, path), 0);
	test_run_until(base, &a.done, 5000);
	ck_assert(a.done);
	evhttp_connection_free(c);
	return a;
}

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	unsigned n = 0;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

START_TEST(test_serves_on_the_port_it_reports)
{
	struct httplisten *l = NULL;
	uint16_t port = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &port), 0);
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_ne(port, 0);
	evhttp_set_gencb(httplisten_http(l), serve, NULL);
	struct answer a = get(port, "/metrics");
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.body, "served /metrics");

	/* The listener owned the socket: once it is closed nobody listens. */
	httplisten_close(l);
	a = get(port, "/metrics");
	ck_assert_int_eq(a.status, 0);
}
END_TEST

START_TEST(test_a_taken_port_leaves_nothing_open)
{
	struct httplisten *first = NULL, *second = NULL;
	uint16_t port = 0, again = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &first, &port), 0);
	unsigned before = open_fds();
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", port, "the test port", &second, &again),
			 -EADDRINUSE);
	ck_assert_ptr_null(second);
	ck_assert_uint_eq(open_fds(), before);
	httplisten_close(first);
}
END_TEST

/* A daemon serving many runs (docs/RUNCONTROL.md): each run's endpoint is
 * freed at its end and the next one, asking for port 0 again, gets the kept
 * socket, so an operator's URL or a scraper's target stays right. */
START_TEST(test_the_next_run_serves_on_the_same_port)
{
	net_keep_listeners();
	struct httplisten *l = NULL;
	uint16_t first = 0, next = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &first), 0);
	httplisten_close(l);
	net_kept_rewind();
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &next), 0);
	ck_assert_uint_eq(next, first);
	evhttp_set_gencb(httplisten_http(l), serve, NULL);
	struct answer a = get(next, "/status");
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.body, "served /status");
	httplisten_close(l);
	net_close_kept();
}
END_TEST

/* A connection to port from the loopback address source ("127.0.0.2"),
 * non-blocking, its handshake completed by the kernel. */
static int dial_from(const char *source, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in from = { .sin_family = AF_INET };
	inet_pton(AF_INET, source, &from.sin_addr);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc = connect(fd, (struct sockaddr *)&to, sizeof to);
	ck_assert(rc == 0 || errno == EINPROGRESS);
	return fd;
}

/* Whether the server closed fd (EOF or reset), after draining it. */
static bool closed_by_server(int fd)
{
	char buf[256];
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof buf, 0);
		if (r > 0)
			continue;
		return r == 0 || errno != EAGAIN;
	}
}

static void run_ms(int ms)
{
	bool never = false;
	test_run_until(base, &never, ms);
}

/* The loop for ms of real time: test_run_until's 1 ms slices last longer
 * on a busy machine, and the backoff below is counted against the clock. */
static void wait_ms(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

START_TEST(test_the_door_evicts_the_oldest)
{
	struct httplisten *l = NULL;
	uint16_t port = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &port), 0);
	evhttp_set_gencb(httplisten_http(l), serve, NULL);
	/* One address's share and more: its oldest go. */
	unsigned n = HTTPLISTEN_MAX_PER_ADDRESS + 4;
	int fds[HTTPLISTEN_MAX_CONNECTIONS + 8];
	for (unsigned i = 0; i < n; i++) {
		fds[i] = dial_from("127.0.0.2", port);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(send(fds[i], "G", 1, MSG_NOSIGNAL), 1);
		run_ms(5);
	}
	struct httplisten_stats st;
	httplisten_stats(l, &st);
	ck_assert_uint_eq(st.open, HTTPLISTEN_MAX_PER_ADDRESS);
	ck_assert_uint_eq(st.evicted, 4);
	for (unsigned i = 0; i < n; i++)
		ck_assert_msg(closed_by_server(fds[i]) == (i < 4), "connection %u", i);
	/* The listener's cap over many addresses: a request still gets in. */
	for (unsigned i = n; i < HTTPLISTEN_MAX_CONNECTIONS + 8; i++) {
		char from[32];
		snprintf(from, sizeof from, "127.0.1.%u", i % 16 + 1);
		fds[i] = dial_from(from, port);
		ck_assert_int_eq(send(fds[i], "G", 1, MSG_NOSIGNAL), 1);
		run_ms(2);
	}
	struct answer a = get(port, "/status");
	ck_assert_int_eq(a.status, 200);
	httplisten_stats(l, &st);
	ck_assert_uint_le(st.open, HTTPLISTEN_MAX_CONNECTIONS);
	/* The share's 16, the 52 others and the request: 5 past the cap. */
	unsigned others = HTTPLISTEN_MAX_CONNECTIONS + 8 - n;
	ck_assert_uint_eq(st.evicted, 4 + (HTTPLISTEN_MAX_PER_ADDRESS + others + 1 -
					  HTTPLISTEN_MAX_CONNECTIONS));
	for (unsigned i = 0; i < HTTPLISTEN_MAX_CONNECTIONS + 8; i++)
		close(fds[i]);
	httplisten_close(l);
}
END_TEST

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

START_TEST(test_a_dribbler_is_closed_at_the_deadline)
{
	struct httplisten *l = NULL;
	uint16_t port = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &port), 0);
	evhttp_set_gencb(httplisten_http(l), serve, NULL);
	evhttp_set_timeout(httplisten_http(l), 2);   /* restarts with every byte */
	int fd = dial_from("127.0.0.1", port);
	static const char req[] = "GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaa";
	uint64_t start = mono_ms();
	bool closed = false;
	for (size_t i = 0; !closed && mono_ms() - start < 3 * HTTPLISTEN_DEADLINE_MS; i++) {
		send(fd, req + i % (sizeof req - 1), 1, MSG_NOSIGNAL);
		wait_ms(250);
		closed = closed_by_server(fd);
	}
	uint64_t took = mono_ms() - start;
	ck_assert_msg(closed, "still open after %" PRIu64 " ms", took);
	ck_assert_uint_ge(took, HTTPLISTEN_DEADLINE_MS - 10);
	ck_assert_uint_le(took, HTTPLISTEN_DEADLINE_MS + 1000);
	struct httplisten_stats st;
	httplisten_stats(l, &st);
	ck_assert_uint_eq(st.timed_out, 1);
	ck_assert_uint_eq(st.open, 0);
	close(fd);
	httplisten_close(l);
}
END_TEST

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* With no descriptor left, accept fails with EMFILE on a socket that
 * stays readable: the listener pauses, counts it and does not spin; once
 * descriptors are freed the waiting request is served. */
START_TEST(test_accept_backs_off_without_descriptors)
{
	/* valgrind keeps a descriptor limit of its own: the kernel's accept
	 * succeeds past it and valgrind closes the connection and says EMFILE,
	 * so the client is never served. The test means the kernel's limit. */
	if (RUNNING_ON_VALGRIND)
		return;
	struct httplisten *l = NULL;
	uint16_t port = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, "the test port", &l, &port), 0);
	evhttp_set_gencb(httplisten_http(l), serve, NULL);
	int client = dial_from("127.0.0.1", port);
	static const char req[] = "GET /status HTTP/1.0\r\n\r\n";
	ck_assert_int_eq(send(client, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)sizeof req - 1);
	/* Every descriptor taken. */
	int hog[4096];
	unsigned hogs = 0;
	struct rlimit lim = { 0 }, was;
	getrlimit(RLIMIT_NOFILE, &lim);
	was = lim;
	lim.rlim_cur = (rlim_t)open_fds() + 16;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	for (int fd; hogs < 4096 && (fd = dup(0)) >= 0;)
		hog[hogs++] = fd;
	double cpu0 = cpu_s();
	wait_ms(1000);
	double cpu = cpu_s() - cpu0;
	struct httplisten_stats st;
	httplisten_stats(l, &st);
	ck_assert_uint_ge(st.accept_backoffs, 3);
	/* 10 ms doubling to 1 s: a handful of tries in a second, not millions. */
	ck_assert_uint_le(st.accept_backoffs, 10);
	ck_assert_msg(cpu < 0.2, "%.3f s of CPU in a second of EMFILE", cpu);
	ck_assert_uint_eq(st.accepted, 0);
	while (hogs > 0)
		close(hog[--hogs]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	char got[256] = "";
	uint64_t start = mono_ms();
	while (strstr(got, "served /status") == NULL && mono_ms() - start < 3000) {
		run_ms(20);
		ssize_t r = recv(client, got, sizeof got - 1, 0);
		if (r > 0)
			got[r] = '\0';
	}
	ck_assert_msg(strstr(got, "served /status") != NULL, "no answer once descriptors came back");
	close(client);
	httplisten_close(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("httplisten");
	TCase *tc = tcase_create("httplisten");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_serves_on_the_port_it_reports);
	tcase_add_test(tc, test_a_taken_port_leaves_nothing_open);
	tcase_add_test(tc, test_the_next_run_serves_on_the_same_port);
	tcase_add_test(tc, test_the_door_evicts_the_oldest);
	tcase_add_test(tc, test_a_dribbler_is_closed_at_the_deadline);
	tcase_add_test(tc, test_accept_backs_off_without_descriptors);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
