/* Unit tests of common/io/probe: real exchanges between a responder and a
 * prober over loopback sockets, with kernel stamps and with the user-space
 * fallback, and the responder's refusals. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/net.h"
#include "io/probe.h"

/* ---- real exchanges over loopback ---- */

struct ctx {
	struct event_base *base;
	struct prb_exchange x[8];
	int n;
};

static void on_exchange(const struct prb_exchange *x, void *arg)
{
	struct ctx *c = arg;

	if (c->n < 8)
		c->x[c->n++] = *x;
	if (c->n == 4)
		event_base_loopbreak(c->base);
}

/* A connected TCP pair on loopback: the control connection whose
 * addresses the probe sockets take. */
static void tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int l = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	*a = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(*a, (struct sockaddr *)&sa, sizeof sa), 0);
	*b = accept(l, NULL, NULL);
	ck_assert_int_ge(*b, 0);
	close(l);
}

/* Four exchanges between a responder and a prober in this process; every
 * stamp of origin expect (kernel software, or user space with the
 * fallback forced); one clock, so each offset is within its bound of 0. */
static void run_exchanges(enum prb_stamp expect)
{
	struct ctx c = { 0 };
	struct timeval limit = { .tv_sec = 5 };
	int peer_fd, builder_fd;

	c.base = event_base_new();
	tcp_pair(&peer_fd, &builder_fd);
	struct prb_responder *r = prb_responder_start(c.base, peer_fd, "test peer");
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_ne(prb_responder_port(r), 0);
	struct prb_prober *p = prb_prober_start(c.base, builder_fd, prb_responder_port(r),
						prb_responder_token(r), "test builder", on_exchange,
						&c);
	ck_assert_ptr_nonnull(p);
	/* The kernel turns receive stamping on for the machine a moment after
	 * the first socket asks (a deferred static key): the first datagrams
	 * may come without one, and take the user-space fallback. A first
	 * round warms up; the second is checked. */
	for (uint64_t seq = 1; seq <= 4; seq++)
		ck_assert_int_eq(prb_prober_send(p, seq), 0);
	event_base_loopexit(c.base, &limit);
	event_base_dispatch(c.base);
	prb_prober_flush(p);
	ck_assert_int_eq(c.n, 4);
	c.n = 0;
	usleep(20000);
	for (uint64_t seq = 5; seq <= 8; seq++)
		ck_assert_int_eq(prb_prober_send(p, seq), 0);
	event_base_loopexit(c.base, &limit);
	event_base_dispatch(c.base);
	prb_prober_flush(p);
	ck_assert_int_eq(c.n, 4);
	for (int i = 0; i < c.n; i++) {
		const struct prb_exchange *x = &c.x[i];
		int64_t offset = ((x->t2_ns - x->t1_ns) + (x->t3_ns - x->t4_ns)) / 2;
		int64_t delay = (x->t4_ns - x->t1_ns) - (x->t3_ns - x->t2_ns);

		fprintf(stderr, "test_probe: %s: exchange %d: t1 %lld t2-t1 %lld t3-t2 %lld t4-t3 %lld: offset %lld ns, delay %lld ns\n",
			prb_stamp_name(expect), i, (long long)x->t1_ns, (long long)(x->t2_ns - x->t1_ns), (long long)(x->t3_ns - x->t2_ns), (long long)(x->t4_ns - x->t3_ns), (long long)offset, (long long)delay);
		for (int k = 0; k < 4; k++)
			ck_assert_int_eq(x->stamp[k], expect);
		ck_assert(x->t1_ns <= x->t2_ns && x->t2_ns <= x->t3_ns && x->t3_ns <= x->t4_ns);
		ck_assert_int_ge(delay, 0);
		ck_assert_int_le(offset < 0 ? -offset : offset, delay / 2 + 1);
	}
	struct prb_prober_stats st;
	prb_prober_stats(p, &st);
	ck_assert_uint_eq(st.sent, 8);
	ck_assert_uint_eq(st.replies, 8);
	ck_assert_uint_eq(st.followups + st.no_followup, expect == PRB_STAMP_USER ? 0 : 8);
	ck_assert_uint_eq(st.refused, 0);
	ck_assert_uint_eq(prb_responder_answered(r), 8);
	prb_prober_free(p);
	prb_responder_free(r);
	close(peer_fd);
	close(builder_fd);
	event_base_free(c.base);
}

START_TEST(test_loopback_kernel_stamps)
{
	unsetenv(PRB_USER_STAMPS_ENV);
	/* Loopback's driver stamps sends (loopback_xmit) and every receive
	 * is stamped once a socket asks. */
	run_exchanges(PRB_STAMP_SOFTWARE);
}
END_TEST

START_TEST(test_loopback_user_fallback)
{
	setenv(PRB_USER_STAMPS_ENV, "1", 1);
	run_exchanges(PRB_STAMP_USER);
	unsetenv(PRB_USER_STAMPS_ENV);
}
END_TEST

/* A datagram with the wrong token, and one from another address than the
 * control connection's peer, are refused and never answered. */
START_TEST(test_responder_refuses)
{
	struct event_base *base = event_base_new();
	struct timeval t = { .tv_usec = 100000 };
	int peer_fd, builder_fd;

	tcp_pair(&peer_fd, &builder_fd);
	struct prb_responder *r = prb_responder_start(base, peer_fd, "test peer");
	ck_assert_ptr_nonnull(r);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons(prb_responder_port(r)) };
	struct sockaddr_in other = { .sin_family = AF_INET,
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1) };
	int u = socket(AF_INET, SOCK_DGRAM, 0), v = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_eq(bind(v, (struct sockaddr *)&other, sizeof other), 0);
	struct prb_msg m = { .type = PRB_PROBE, .token = prb_responder_token(r) + 1, .sequence = 1 };
	uint8_t buf[PRB_MSG_SIZE];
	prb_encode(&m, buf);
	ck_assert_int_eq(sendto(u, buf, sizeof buf, 0, (struct sockaddr *)&to, sizeof to),
			 (ssize_t)sizeof buf);
	m.token = prb_responder_token(r);
	prb_encode(&m, buf);
	ck_assert_int_eq(sendto(v, buf, sizeof buf, 0, (struct sockaddr *)&to, sizeof to),
			 (ssize_t)sizeof buf);
	ck_assert_int_eq(sendto(u, "x", 1, 0, (struct sockaddr *)&to, sizeof to), 1);
	event_base_loopexit(base, &t);
	event_base_dispatch(base);
	ck_assert_uint_eq(prb_responder_refused(r), 3);
	ck_assert_uint_eq(prb_responder_answered(r), 0);
	close(u);
	close(v);
	prb_responder_free(r);
	close(peer_fd);
	close(builder_fd);
	event_base_free(base);
}
END_TEST

static Suite *probe_suite(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("sockets");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_loopback_kernel_stamps);
	tcase_add_test(tc, test_loopback_user_fallback);
	tcase_add_test(tc, test_responder_refuses);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(probe_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
