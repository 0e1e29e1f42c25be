/* Unit tests of common/sys/notify against a real datagram socket the test
 * binds and names in $NOTIFY_SOCKET, as systemd does for a Type=notify unit:
 * READY=1 with its STATUS=, a formatted STATUS= kept on one line and cut at
 * its limit, STOPPING=1; without $NOTIFY_SOCKET, and with one nobody
 * listens on, the calls return quietly. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sys/notify.h"

static char sock_path[sizeof ((struct sockaddr_un *)0)->sun_path];
static int sock_fd = -1;

/* A datagram socket at a fresh path, named in $NOTIFY_SOCKET. */
static void notify_socket_setup(void)
{
	snprintf(sock_path, sizeof sock_path, "/tmp/es-notify-%d.sock", (int)getpid());
	unlink(sock_path);
	sock_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(sock_fd, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
	ck_assert_int_eq(bind(sock_fd, (struct sockaddr *)&a, sizeof a), 0);
	struct timeval tv = { 2, 0 };
	ck_assert_int_eq(setsockopt(sock_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", sock_path, 1), 0);
}

static void notify_socket_teardown(void)
{
	unsetenv("NOTIFY_SOCKET");
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	unlink(sock_path);
}

/* The next datagram as a string; fails the test when none comes. */
static const char *next_datagram(void)
{
	static char buf[4096];
	ssize_t n = recv(sock_fd, buf, sizeof buf - 1, 0);
	ck_assert_msg(n >= 0, "no datagram: %s", strerror(errno));
	buf[n] = '\0';
	return buf;
}

static void assert_no_datagram(void)
{
	char b[64];
	ck_assert_int_eq(recv(sock_fd, b, sizeof b, MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);
}

START_TEST(test_ready_status_stopping)
{
	notify_ready("joined the hub's session; idle");
	ck_assert_str_eq(next_datagram(), "READY=1\nSTATUS=joined the hub's session; idle");
	notify_ready(NULL);
	ck_assert_str_eq(next_datagram(), "READY=1");
	notify_ready("");
	ck_assert_str_eq(next_datagram(), "READY=1");
	notify_status("configured for run %u", 7u);
	ck_assert_str_eq(next_datagram(), "STATUS=configured for run 7");
	notify_status("run %u over (status %d)", 7u, 1);
	ck_assert_str_eq(next_datagram(), "STATUS=run 7 over (status 1)");
	notify_stopping();
	ck_assert_str_eq(next_datagram(), "STOPPING=1");
	assert_no_datagram();
}
END_TEST

/* A status is one assignment: a newline in it must not start another
 * (it would read as "READY=1" here), and it is cut at its limit without
 * splitting a UTF-8 character. */
START_TEST(test_status_one_line_and_cut)
{
	notify_status("refused\nREADY=1\tagain");
	ck_assert_str_eq(next_datagram(), "STATUS=refused READY=1 again");
	char lng[2 * NOTIFY_STATUS_MAX];
	memset(lng, 'x', sizeof lng - 1);
	lng[sizeof lng - 1] = '\0';
	notify_status("%s", lng);
	const char *d = next_datagram();
	ck_assert_uint_eq(strlen(d), strlen("STATUS=") + NOTIFY_STATUS_MAX);
	/* "é" (2 bytes) straddling the limit is left out whole. */
	memset(lng, 'y', NOTIFY_STATUS_MAX - 1);
	memcpy(lng + NOTIFY_STATUS_MAX - 1, "\xc3\xa9tail", sizeof "\xc3\xa9tail");
	notify_ready(lng);
	d = next_datagram();
	ck_assert_uint_eq(strlen(d), strlen("READY=1\nSTATUS=") + NOTIFY_STATUS_MAX - 1);
	ck_assert_int_eq(d[strlen(d) - 1], 'y');
}
END_TEST

/* Not under systemd: nothing is sent anywhere, nothing fails. */
START_TEST(test_without_notify_socket)
{
	unsetenv("NOTIFY_SOCKET");
	notify_ready("idle");
	notify_status("run %d", 1);
	notify_stopping();
	assert_no_datagram();
}
END_TEST

/* A $NOTIFY_SOCKET nobody listens on (the manager gone): logged, not fatal;
 * the socket named again, the next datagram arrives. */
START_TEST(test_unreachable_socket)
{
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", "/nonexistent/es-notify.sock", 1), 0);
	notify_ready("idle");
	notify_status("idle");
	notify_stopping();
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", sock_path, 1), 0);
	notify_status("back");
	ck_assert_str_eq(next_datagram(), "STATUS=back");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("sd_notify");
	tcase_add_checked_fixture(tc, notify_socket_setup, notify_socket_teardown);
	tcase_add_test(tc, test_ready_status_stopping);
	tcase_add_test(tc, test_status_one_line_and_cut);
	tcase_add_test(tc, test_without_notify_socket);
	tcase_add_test(tc, test_unreachable_socket);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
