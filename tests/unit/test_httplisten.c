/* Unit tests of common/io/httplisten.c over real loopback TCP and a real
 * libevent loop, its client libevent's own: a server opened on port 0
 * answers on the port it reports, and freeing it closes the socket; a port
 * that is taken is net_listen's error with nothing left open; in a process
 * that keeps its listeners, the next run's server is on the same port. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
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
	struct evhttp *http = NULL;
	uint16_t port = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, &http, &port), 0);
	ck_assert_ptr_nonnull(http);
	ck_assert_uint_ne(port, 0);
	evhttp_set_gencb(http, serve, NULL);
	struct answer a = get(port, "/metrics");
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.body, "served /metrics");

	/* The evhttp owned the socket: once it is freed nobody listens. */
	evhttp_free(http);
	a = get(port, "/metrics");
	ck_assert_int_eq(a.status, 0);
}
END_TEST

START_TEST(test_a_taken_port_leaves_nothing_open)
{
	struct evhttp *first = NULL, *second = NULL;
	uint16_t port = 0, again = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, &first, &port), 0);
	unsigned before = open_fds();
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", port, &second, &again), -EADDRINUSE);
	ck_assert_ptr_null(second);
	ck_assert_uint_eq(open_fds(), before);
	evhttp_free(first);
}
END_TEST

/* A daemon serving many runs (docs/RUNCONTROL.md): each run's endpoint is
 * freed at its end and the next one, asking for port 0 again, gets the kept
 * socket, so an operator's URL or a scraper's target stays right. */
START_TEST(test_the_next_run_serves_on_the_same_port)
{
	net_keep_listeners();
	struct evhttp *http = NULL;
	uint16_t first = 0, next = 0;
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, &http, &first), 0);
	evhttp_free(http);
	net_kept_rewind();
	ck_assert_int_eq(httplisten_open(base, "127.0.0.1", 0, &http, &next), 0);
	ck_assert_uint_eq(next, first);
	evhttp_set_gencb(http, serve, NULL);
	struct answer a = get(next, "/status");
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.body, "served /status");
	evhttp_free(http);
	net_close_kept();
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
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
