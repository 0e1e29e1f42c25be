/* Unit tests of common/io/probesock: reading kernel stamps out of control
 * messages as the kernel lays them out (receive stamps, send stamps from
 * the error queue), and the socket itself over loopback: opened on a
 * control connection's address, a datagram received with its sender and
 * stamp, nothing waiting, a closed peer port, the sender's address check. */
#include <check.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/probesock.h"
#include "sys/clock.h"

#define SEC INT64_C(1000000000)

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

/* ---- the socket ---- */

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

/* Opens one probe socket on each end of a loopback TCP connection. */
static void open_pair(struct prb_sock *a, struct prb_sock *b, struct sockaddr_storage *b_addr)
{
	struct sockaddr_storage local, peer;
	socklen_t len;
	int ta, tb;

	tcp_pair(&ta, &tb);
	ck_assert_int_eq(prb_sock_addresses(ta, &local, &len, &peer), 0);
	ck_assert_int_eq(local.ss_family, AF_INET);
	ck_assert_int_eq(prb_sock_open(a, &local, len, "test a"), 0);
	ck_assert_int_eq(prb_sock_addresses(tb, &local, &len, &peer), 0);
	ck_assert_int_eq(prb_sock_open(b, &local, len, "test b"), 0);
	*b_addr = local;
	((struct sockaddr_in *)b_addr)->sin_port = htons(prb_sock_port(b));
	close(ta);
	close(tb);
}

START_TEST(test_socket_recv)
{
	struct prb_sock a, b;
	struct sockaddr_storage b_addr, from;
	socklen_t from_len = sizeof from;
	uint8_t buf[PRB_MSG_SIZE + 1] = { 0 };
	enum prb_stamp kind;
	int64_t rx = 0;
	size_t n = 0;

	open_pair(&a, &b, &b_addr);
	ck_assert_uint_gt(prb_sock_port(&a), 0);
	ck_assert_uint_ne(prb_sock_port(&a), prb_sock_port(&b));
	/* Nothing waiting. */
	ck_assert_int_eq(prb_sock_recv(&b, buf, sizeof buf, &n, &from, &from_len, &rx, &kind), 0);

	uint8_t out[PRB_MSG_SIZE];
	memset(out, 0x5a, sizeof out);
	uint64_t before = clk_realtime_ns();
	ck_assert_int_eq(sendto(a.fd, out, sizeof out, 0, (struct sockaddr *)&b_addr,
				sizeof(struct sockaddr_in)), (ssize_t)sizeof out);
	struct timespec wait = { 0, 20000000 };
	nanosleep(&wait, NULL);
	ck_assert_int_eq(prb_sock_recv(&b, buf, sizeof buf, &n, &from, &from_len, &rx, &kind), 1);
	uint64_t after = clk_realtime_ns();
	ck_assert_uint_eq(n, sizeof out);
	ck_assert_int_eq(memcmp(buf, out, sizeof out), 0);
	ck_assert_uint_eq(from_len, sizeof(struct sockaddr_in));
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&from)->sin_port), prb_sock_port(&a));
	ck_assert(prb_same_ip(&from, &b_addr));
	/* The receive time, kernel or user space, lies between the send and
	 * the read. The kernel turns stamping on a moment after the first
	 * socket asks, so the first datagrams may come without a stamp. */
	ck_assert(kind == PRB_STAMP_USER || (b.kernel && kind == PRB_STAMP_SOFTWARE));
	ck_assert_int_ge(rx, (int64_t)before);
	ck_assert_int_le(rx, (int64_t)after);
	/* A sender whose address is not ours is told apart. */
	struct sockaddr_storage other = from;
	((struct sockaddr_in *)&other)->sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
	ck_assert(!prb_same_ip(&other, &b_addr));
	other.ss_family = AF_INET6;
	ck_assert(!prb_same_ip(&other, &b_addr));

	prb_sock_close(&a);
	prb_sock_close(&b);
	ck_assert_int_eq(b.fd, -1);
	prb_sock_close(&b);
}
END_TEST

START_TEST(test_socket_peer_gone)
{
	struct prb_sock a, b;
	struct sockaddr_storage b_addr;
	uint8_t buf[PRB_MSG_SIZE + 1] = { 0 };
	enum prb_stamp kind;
	int64_t rx;
	size_t n;

	open_pair(&a, &b, &b_addr);
	ck_assert_int_eq(connect(a.fd, (struct sockaddr *)&b_addr, sizeof(struct sockaddr_in)), 0);
	prb_sock_close(&b);
	ck_assert_int_eq(send(a.fd, buf, PRB_MSG_SIZE, 0), PRB_MSG_SIZE);
	struct timespec wait = { 0, 20000000 };
	nanosleep(&wait, NULL);
	/* The port unreachable comes back as the connected socket's error. */
	ck_assert_int_eq(prb_sock_recv(&a, buf, sizeof buf, &n, NULL, NULL, &rx, &kind), -ECONNREFUSED);
	ck_assert_int_eq(prb_sock_recv(&a, buf, sizeof buf, &n, NULL, NULL, &rx, &kind), 0);
	prb_sock_close(&a);
}
END_TEST

START_TEST(test_socket_refuses_unix)
{
	int sv[2];
	struct sockaddr_storage local, peer;
	socklen_t len;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(prb_sock_addresses(sv[0], &local, &len, &peer), -EAFNOSUPPORT);
	close(sv[0]);
	close(sv[1]);
	ck_assert_str_eq(prb_stamp_name(PRB_STAMP_HARDWARE), "hardware");
	ck_assert_str_eq(prb_stamp_name(PRB_STAMP_SOFTWARE), "kernel software");
	ck_assert_str_eq(prb_stamp_name(PRB_STAMP_USER), "user space");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("probesock");
	TCase *tc = tcase_create("stamps");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_rx_stamp_parsing);
	tcase_add_test(tc, test_tx_stamp_parsing);
	suite_add_tcase(s, tc);
	tc = tcase_create("socket");
	tcase_add_test(tc, test_socket_recv);
	tcase_add_test(tc, test_socket_peer_gone);
	tcase_add_test(tc, test_socket_refuses_unix);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
