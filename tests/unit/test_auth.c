/* Unit tests of common/sys/auth.c: loading run keys, and proofs that hold only
 * for the same key, nonce and identity. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/auth.h"
#include "sys/log.h"

/* The session keys of test_session_keys, as Python's hmac computes them
 * (tests/e2e/wire.py derives them so). */
#define NO_KEY_SESSION "a11166b744755318cd100d4d35adf9e9a497fbdc06139e33ae9d33ff8e9651a1"
#define KEYED_SESSION "a36d91f66fb9795b0a54007a661ed8280a2eba52635bb1654504ade971ac131e"

static char key_path[] = "/tmp/es-test-key-XXXXXX";

static void write_key(const char *text, size_t len)
{
	FILE *f = fopen(key_path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	fclose(f);
	chmod(key_path, 0600);
}

static void key_setup(void)
{
	log_init("test", -1, LOG_LEVEL_ERROR + 1);
	int fd = mkstemp(key_path);
	close(fd);
	auth_forget_key();
}

static void key_teardown(void)
{
	unlink(key_path);
	strcpy(key_path, "/tmp/es-test-key-XXXXXX");
	auth_forget_key();
}

static struct ctl_hello hello(void)
{
	struct ctl_hello h = { .role = CTL_ROLE_SOURCE, .id = 2, .channel = CTL_CHANNEL_DATA,
			       .run_id = 7, .protocol = CTL_PROTOCOL_VERSION, .pid = 99, .rails = 1 };
	strcpy(h.host, "daq-03");
	return h;
}

START_TEST(test_key_files)
{
	ck_assert(!auth_have_key());
	ck_assert_int_eq(auth_load_key_file("/nonexistent/key"), -ENOENT);
	write_key("short\n", 6);
	ck_assert_int_eq(auth_load_key_file(key_path), -EINVAL);
	ck_assert(!auth_have_key());
	static char big[AUTH_MAX_KEY_BYTES + 2];
	memset(big, 'k', sizeof big);
	write_key(big, sizeof big);
	ck_assert_int_eq(auth_load_key_file(key_path), -EINVAL);
	write_key("0123456789abcdef0123456789abcdef\n", 33);
	ck_assert_int_eq(auth_load_key_file(key_path), 0);
	ck_assert(auth_have_key());
}
END_TEST

START_TEST(test_proofs)
{
	char nonce[CTL_NONCE_TEXT], other_nonce[CTL_NONCE_TEXT];
	auth_new_nonce(nonce);
	auth_new_nonce(other_nonce);
	ck_assert_uint_eq(strlen(nonce), 64);
	ck_assert_str_ne(nonce, other_nonce);

	/* Without a key: no proof, and nothing checks. */
	struct ctl_hello h = hello();
	auth_sign_hello(nonce, &h);
	ck_assert_str_eq(h.proof, "");
	ck_assert(!auth_check_hello(nonce, &h));

	write_key("the run key of run 7, 32 bytes!!", 32);
	ck_assert_int_eq(auth_load_key_file(key_path), 0);
	auth_sign_hello(nonce, &h);
	ck_assert_uint_eq(strlen(h.proof), 64);
	ck_assert(auth_check_hello(nonce, &h));
	/* Another connection's nonce, another identity, a damaged proof. */
	ck_assert(!auth_check_hello(other_nonce, &h));
	struct ctl_hello t = h;
	t.id = 3;
	ck_assert(!auth_check_hello(nonce, &t));
	t = h;
	t.run_id = 8;
	ck_assert(!auth_check_hello(nonce, &t));
	t = h;
	t.role = CTL_ROLE_READER;
	ck_assert(!auth_check_hello(nonce, &t));
	t = h;
	t.proof[10] = t.proof[10] == 'a' ? 'b' : 'a';
	ck_assert(!auth_check_hello(nonce, &t));
	t = h;
	strcpy(t.nonce, "another client nonce");
	ck_assert(!auth_check_hello(nonce, &t));
	t = h;
	t.proof[63] = '\0';
	ck_assert(!auth_check_hello(nonce, &t));
	strcpy(t.proof, "not hex at all");
	ck_assert(!auth_check_hello(nonce, &t));

	/* Another key makes another proof. */
	write_key("a different key, also 32 bytes!!", 32);
	ck_assert_int_eq(auth_load_key_file(key_path), 0);
	ck_assert(!auth_check_hello(nonce, &h));
}
END_TEST

/* The session key: the same from the same challenge and HELLO (both ends
 * derive it), another from another challenge, client nonce, identity or
 * run key, and one without a key too (loopback peers). Known answers: a
 * peer written in another language must derive the same bytes. */
START_TEST(test_session_keys)
{
	struct ctl_hello h = hello();
	strcpy(h.nonce, "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1");
	const char *challenge = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";
	unsigned char k1[AUTH_SESSION_KEY_BYTES], k2[AUTH_SESSION_KEY_BYTES];
	char hex[2 * AUTH_SESSION_KEY_BYTES + 1];

	auth_session_key(challenge, &h, k1);
	auth_session_key(challenge, &h, k2);
	ck_assert_mem_eq(k1, k2, sizeof k1);
	/* HMAC-SHA256("", "session|" challenge "|source|2|7|data|99|daq-03|0/1|" nonce) */
	for (size_t i = 0; i < sizeof k1; i++)
		snprintf(hex + 2 * i, 3, "%02x", k1[i]);
	ck_assert_str_eq(hex, NO_KEY_SESSION);

	struct ctl_hello t = h;
	t.nonce[0] = 'd';
	auth_session_key(challenge, &t, k2);
	ck_assert_mem_ne(k1, k2, sizeof k1);
	auth_session_key("0f", &h, k2);
	ck_assert_mem_ne(k1, k2, sizeof k1);
	t = h;
	t.id = 3;
	auth_session_key(challenge, &t, k2);
	ck_assert_mem_ne(k1, k2, sizeof k1);

	write_key("the run key of run 7, 32 bytes!!", 32);
	ck_assert_int_eq(auth_load_key_file(key_path), 0);
	auth_session_key(challenge, &h, k2);
	ck_assert_mem_ne(k1, k2, sizeof k1);
	for (size_t i = 0; i < sizeof k2; i++)
		snprintf(hex + 2 * i, 3, "%02x", k2[i]);
	ck_assert_str_eq(hex, KEYED_SESSION);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("auth");
	tcase_add_checked_fixture(tc, key_setup, key_teardown);
	tcase_add_test(tc, test_key_files);
	tcase_add_test(tc, test_proofs);
	tcase_add_test(tc, test_session_keys);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
