/* Unit tests of io/net's net_sent_acked over real loopback TCP: a live
 * peer acknowledges what was written; a peer that closed its socket while
 * our receive window was full (its FIN stuck behind the data we never
 * read, as a builder stopped while its hub gave it up finds it) is told
 * from a live one by the reset our next bytes get, though a poll for the
 * FIN sees nothing. And io/msgstream's msgconn_write_now, which the
 * builder's check leans on: a message it writes has left the process
 * before the loop turns again, so the peer can read it at once. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "io/msgstream.h"
#include "io/net.h"
#include "wire/control.h"

#include "seals.h"

/* A connected pair on loopback: *client dialled, *server accepted; the
 * client's receive buffer small so that it fills. */
static void pair(int *client, int *server)
{
	uint16_t port = 0;
	int lfd = net_listen("127.0.0.1", 0, &port);
	ck_assert_int_ge(lfd, 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	int small = 4096;
	ck_assert_int_eq(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	int s = accept(lfd, NULL, NULL);
	ck_assert_int_ge(s, 0);
	close(lfd);
	*client = c;
	*server = s;
}

START_TEST(test_live_peer_acknowledges)
{
	int c, s;
	pair(&c, &s);
	ck_assert_int_eq(write(c, "stats", 5), 5);
	ck_assert(net_sent_acked(c, 1000000000ull));
	close(c);
	close(s);
}
END_TEST

START_TEST(test_closed_peer_behind_a_full_window)
{
	int c, s;
	pair(&c, &s);
	/* The peer writes until both buffers are full, then closes. */
	int flags = MSG_DONTWAIT;
	static char junk[65536];
	while (send(s, junk, sizeof junk, flags) > 0)
		;
	ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	close(s);
	usleep(50000);
	struct pollfd p = { .fd = c, .events = POLLIN | POLLRDHUP };
	ck_assert_int_eq(poll(&p, 1, 0), 1);
	ck_assert(p.revents & POLLIN);                                /* data to read ... */
	ck_assert(!(p.revents & (POLLRDHUP | POLLHUP | POLLERR)));   /* ... but no FIN seen */
	ck_assert_int_eq(write(c, "stats", 5), 5);
	ck_assert(!net_sent_acked(c, 1000000000ull));
	close(c);
}
END_TEST

static void ignore_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns, void *arg)
{
	(void)c, (void)msg, (void)rx_ns, (void)arg;
}

static void ignore_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)c, (void)reason, (void)arg;
}

static const struct msgconn_ops quiet_ops = { .on_message = ignore_message,
					      .on_close = ignore_close };

/* The loop never turns here: what the peer reads, write_now wrote. A
 * stale EAGAIN in errno must not pass for a write, so one is planted. */
START_TEST(test_write_now_leaves_the_process)
{
	int c, s;
	pair(&c, &s);
	struct event_base *base = event_base_new();
	struct msgseal dialer, listener;
	test_seal_pair(&dialer, &listener);
	struct msgconn *conn = msgconn_new(base, c, &dialer, "the hub", &quiet_ops, NULL);
	ck_assert_ptr_nonnull(conn);
	struct ctl_msg m = { .type = CTL_TOKEN };
	m.u.token = (struct ctl_token){ .slots = 64, .decided = 7, .decided_below = 9 };
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(msgconn_send(conn, &m), 0);
		errno = EAGAIN;
		ck_assert_int_eq(msgconn_write_now(conn), 0);
		struct pollfd p = { .fd = s, .events = POLLIN };
		ck_assert_int_eq(poll(&p, 1, 1000), 1);
		char buf[512];
		ck_assert_int_gt(read(s, buf, sizeof buf), 0);
	}
	ck_assert(net_sent_acked(c, 1000000000ull));
	msgconn_free(conn);   /* closes c */
	event_base_free(base);
	close(s);
}
END_TEST

static Suite *netack_suite(void)
{
	Suite *s = suite_create("netack");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_live_peer_acknowledges);
	tcase_add_test(tc, test_closed_peer_behind_a_full_window);
	tcase_add_test(tc, test_write_now_leaves_the_process);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(netack_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
