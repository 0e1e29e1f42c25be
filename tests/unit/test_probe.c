/* Unit tests of common/probe: the datagram format, reading kernel stamps
 * out of control messages as the kernel lays them out (receive stamps,
 * send stamps from the error queue), and real exchanges over loopback
 * sockets with kernel stamps and with the user-space fallback. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/net.h"
#include "io/probe.h"

#define SEC INT64_C(1000000000)

START_TEST(test_roundtrip)
{
	struct prb_msg m = { .type = PRB_REPLY, .flags = PRB_F_T2_KERNEL | PRB_F_FOLLOWUP,
			     .token = 0x0123456789abcdefULL, .sequence = 42,
			     .t2_ns = 1795980992123456789ULL, .t3_ns = UINT64_MAX }, d;
	uint8_t buf[PRB_MSG_SIZE];

	prb_encode(&m, buf);
	ck_assert_int_eq(buf[0], 'E');
	ck_assert_int_eq(buf[3], 'B');
	ck_assert(prb_decode(&d, buf, sizeof buf));
	ck_assert_int_eq(d.type, m.type);
	ck_assert_int_eq(d.flags, m.flags);
	ck_assert_uint_eq(d.token, m.token);
	ck_assert_uint_eq(d.sequence, m.sequence);
	ck_assert_uint_eq(d.t2_ns, m.t2_ns);
	ck_assert_uint_eq(d.t3_ns, m.t3_ns);
	/* Big-endian on the wire. */
	ck_assert_int_eq(buf[23], 42);
}
END_TEST

START_TEST(test_decode_refuses)
{
	struct prb_msg m = { .type = PRB_PROBE, .sequence = 1 }, d;
	uint8_t buf[PRB_MSG_SIZE + 1];

	prb_encode(&m, buf);
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE - 1));
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE + 1));
	buf[0] ^= 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
	buf[0] ^= 1;
	buf[4] = PRB_VERSION + 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
	buf[4] = PRB_VERSION;
	for (int t = 0; t < 256; t++) {
		buf[5] = (uint8_t)t;
		ck_assert_int_eq(prb_decode(&d, buf, PRB_MSG_SIZE), t >= PRB_PROBE && t <= PRB_FOLLOWUP);
	}
	buf[5] = PRB_PROBE;
	buf[6] = 1;
	ck_assert(!prb_decode(&d, buf, PRB_MSG_SIZE));
}
END_TEST

/* Control messages laid out as the kernel does: optionally an extended
 * error (error queue), then SCM_TIMESTAMPING with ts[0] software, ts[2]
 * hardware. */
struct cmsgs {
	union {
		char buf[512];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
};

static void build(struct cmsgs *c, const struct sock_extended_err *ee, int ee_level,
		  const struct timespec *sw, const struct timespec *hw, size_t stamp_len)
{
	struct cmsghdr *h;
	size_t used = 0;

	memset(c, 0, sizeof *c);
	c->mh.msg_control = c->u.buf;
	c->mh.msg_controllen = sizeof c->u.buf;
	h = CMSG_FIRSTHDR(&c->mh);
	if (ee != NULL) {
		h->cmsg_level = ee_level;
		h->cmsg_type = ee_level == SOL_IP ? IP_RECVERR : IPV6_RECVERR;
		h->cmsg_len = CMSG_LEN(sizeof *ee + sizeof(struct sockaddr_in6));
		memcpy(CMSG_DATA(h), ee, sizeof *ee);
		used += CMSG_SPACE(sizeof *ee + sizeof(struct sockaddr_in6));
		h = (struct cmsghdr *)(c->u.buf + used);
	}
	if (sw != NULL || hw != NULL) {
		struct scm_timestamping st;

		memset(&st, 0, sizeof st);
		if (sw)
			st.ts[0] = *sw;
		if (hw)
			st.ts[2] = *hw;
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_TIMESTAMPING;
		h->cmsg_len = CMSG_LEN(stamp_len);
		memcpy(CMSG_DATA(h), &st, stamp_len < sizeof st ? stamp_len : sizeof st);
		used += CMSG_SPACE(stamp_len);
	}
	c->mh.msg_controllen = used;
}

START_TEST(test_rx_stamp_parsing)
{
	struct timespec sw = { .tv_sec = 1795980992, .tv_nsec = 123456789 };
	struct timespec hw = { .tv_sec = 1795980992, .tv_nsec = 123450000 };
	struct cmsgs c;
	enum prb_stamp kind;
	int64_t ns = 0;

	/* Software stamp only. */
	build(&c, NULL, 0, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	ck_assert_int_eq(ns, 1795980992 * SEC + 123456789);
	ck_assert_int_eq(kind, PRB_STAMP_SOFTWARE);
	/* Hardware asked for but absent: the software one. */
	ck_assert(prb_stamp_from_cmsgs(&c.mh, true, &ns, &kind));
	ck_assert_int_eq(kind, PRB_STAMP_SOFTWARE);

	/* Both: hardware only when asked for. */
	build(&c, NULL, 0, &sw, &hw, sizeof(struct scm_timestamping));
	ck_assert(prb_stamp_from_cmsgs(&c.mh, true, &ns, &kind));
	ck_assert_int_eq(kind, PRB_STAMP_HARDWARE);
	ck_assert_int_eq(ns, 1795980992 * SEC + 123450000);
	ck_assert(prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	ck_assert_int_eq(kind, PRB_STAMP_SOFTWARE);

	/* Hardware alone, not asked for: no stamp, the caller falls back. */
	build(&c, NULL, 0, NULL, &hw, sizeof(struct scm_timestamping));
	ck_assert(!prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));

	/* No control message, a truncated one, a zero or invalid stamp. */
	build(&c, NULL, 0, NULL, NULL, 0);
	ck_assert(!prb_stamp_from_cmsgs(&c.mh, true, &ns, &kind));
	build(&c, NULL, 0, &sw, NULL, sizeof(struct timespec));
	ck_assert(!prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	struct timespec zero = { 0 }, bad = { .tv_sec = 1, .tv_nsec = 1000000000 };
	build(&c, NULL, 0, &zero, NULL, sizeof(struct scm_timestamping));
	ck_assert(!prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	build(&c, NULL, 0, &bad, NULL, sizeof(struct scm_timestamping));
	ck_assert(!prb_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
}
END_TEST

START_TEST(test_tx_stamp_parsing)
{
	struct timespec sw = { .tv_sec = 1795980992, .tv_nsec = 5 };
	struct sock_extended_err ee = { .ee_errno = ENOMSG,
					.ee_origin = SO_EE_ORIGIN_TIMESTAMPING,
					.ee_info = SCM_TSTAMP_SND };
	struct cmsgs c;
	enum prb_stamp kind;
	int64_t ns = 0;

	build(&c, &ee, SOL_IP, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	ck_assert_int_eq(ns, 1795980992 * SEC + 5);
	ck_assert_int_eq(kind, PRB_STAMP_SOFTWARE);
	build(&c, &ee, SOL_IPV6, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));

	/* A scheduling stamp (before the qdisc) is not the send. */
	ee.ee_info = SCM_TSTAMP_SCHED;
	build(&c, &ee, SOL_IP, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(!prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	/* A real error (port unreachable) with a stamp attached. */
	ee = (struct sock_extended_err){ .ee_errno = ECONNREFUSED, .ee_origin = SO_EE_ORIGIN_ICMP };
	build(&c, &ee, SOL_IP, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(!prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	/* No extended error at all (a receive). */
	build(&c, NULL, 0, &sw, NULL, sizeof(struct scm_timestamping));
	ck_assert(!prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
	/* The send stamp but no stamp in it. */
	ee = (struct sock_extended_err){ .ee_errno = ENOMSG, .ee_origin = SO_EE_ORIGIN_TIMESTAMPING,
					 .ee_info = SCM_TSTAMP_SND };
	build(&c, &ee, SOL_IP, NULL, NULL, 0);
	ck_assert(!prb_tx_stamp_from_cmsgs(&c.mh, false, &ns, &kind));
}
END_TEST

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
	TCase *tc = tcase_create("format");

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_decode_refuses);
	tcase_add_test(tc, test_rx_stamp_parsing);
	tcase_add_test(tc, test_tx_stamp_parsing);
	suite_add_tcase(s, tc);
	tc = tcase_create("sockets");
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
