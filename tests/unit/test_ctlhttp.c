/* Unit tests of common/io/ctlhttp.c over real loopback TCP: a ctlhttp in
 * the test's event base, requests written by a raw socket client here and
 * signed here with libsodium directly (not with the module's own signer).
 * A good request reaches the handler with its method, path and body; every
 * bad one (no header, a malformed one, a wrong proof, a stale or future
 * time, a replay, an unknown path, a wrong method, bad JSON, a body too
 * large) is answered with its status and a reason in JSON, and the handler
 * is not called. Without a run key requests need no header and only loopback is
 * served. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/ctlhttp.h"
#include "sys/auth.h"
#include "sys/log.h"

static const char run_key[] = "0123456789abcdef0123456789abcdef";
static char key_path[] = "/tmp/es-test-ctlhttp-key-XXXXXX";
static struct event_base *base;
static struct ctlhttp *server;

/* What the handler saw. */
static unsigned calls;
static char seen_method[16], seen_path[32], seen_body[256];
static int handler_status = 200;

static int handler(void *arg, const char *method, const char *path, const json_t *body,
		   json_t **answer)
{
	(void)arg;
	calls++;
	snprintf(seen_method, sizeof seen_method, "%s", method);
	snprintf(seen_path, sizeof seen_path, "%s", path);
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	snprintf(seen_body, sizeof seen_body, "%s", text != NULL ? text : "(null)");
	free(text);
	*answer = handler_status == 200 ? json_pack("{s:b,s:s}", "accepted", 1, "state", "idle")
					: json_pack("{s:b,s:s}", "accepted", 0, "reason", "no");
	return handler_status;
}

struct reply {
	int status;
	char head[4096];
	char body[8192];
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "es-hmac MS NONCE HEX" over METHOD\nPATH\nMS\nNONCE\nBODY under key. */
static void sign_nonce(char *out, size_t cap, const char *key, const char *method,
		       const char *path, uint64_t ms, const char *nonce, const char *body, size_t len)
{
	char head[160];
	int n = snprintf(head, sizeof head, "%s\n%s\n%" PRIu64 "\n%s\n", method, path, ms, nonce);
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, (const unsigned char *)key, strlen(key));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)head, (size_t)n);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)body, len);
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_final(&st, mac);
	char hex[2 * sizeof mac + 1];
	sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
	snprintf(out, cap, "es-hmac %" PRIu64 " %s %s", ms, nonce, hex);
}

/* As sign_nonce() with a fresh random nonce. */
static void sign(char *out, size_t cap, const char *key, const char *method, const char *path,
		 uint64_t ms, const char *body, size_t len)
{
	unsigned char raw[16];
	char nonce[2 * sizeof raw + 1];
	randombytes_buf(raw, sizeof raw);
	sodium_bin2hex(nonce, sizeof nonce, raw, sizeof raw);
	sign_nonce(out, cap, key, method, path, ms, nonce, body, len);
}

#define NONCE_A "aaaaaaaaaaaaaaaa0123456789abcdef"
#define NONCE_B "bbbbbbbbbbbbbbbb0123456789abcdef"
#define NONCE_C "cccccccccccccccc0123456789abcdef"

/* Runs the base a millisecond. */
static void spin(void)
{
	struct timeval tv = { 0, 1000 };
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Whether request() asks to keep its connection (HTTP/1.1's default). */
static bool keep_alive;

/* Writes the request (authorization: the header's value, or NULL for
 * none) on a fresh connection and reads the whole answer up to the
 * connection's close, turning the server's loop meanwhile. */
static struct reply request(const char *method, const char *path, const char *authorization,
			    const char *body, size_t len)
{
	size_t cap = len + 1024;
	char *req = malloc(cap);
	ck_assert_ptr_nonnull(req);
	int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
				   "Content-Length: %zu\r\n%s%s%s\r\n",
			 method, path, keep_alive ? "" : "Connection: close\r\n", len,
			 authorization ? "Authorization: " : "",
			 authorization ? authorization : "", authorization ? "\r\n" : "");
	memcpy(req + n, body, len);
	size_t total = (size_t)n + len, sent = 0;

	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(ctlhttp_port(server)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	ck_assert(rc == 0 || errno == EINPROGRESS);
	static char got[64 * 1024];
	size_t have = 0;
	bool eof = false;
	for (int i = 0; i < 10000 && !eof; i++) {
		spin();
		if (sent < total) {
			ssize_t w = send(fd, req + sent, total - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != ENOTCONN)
				sent = total; /* the server closed: read its answer */
		}
		for (;;) {
			ssize_t r = recv(fd, got + have, sizeof got - 1 - have, 0);
			if (r > 0) {
				have += (size_t)r;
				if (have < sizeof got - 1)
					continue;
			}
			eof = r >= 0 || errno != EAGAIN;
			break;
		}
	}
	close(fd);
	free(req);
	got[have] = '\0';
	ck_assert_msg(eof, "no complete answer to %s %s", method, path);
	struct reply rep = { 0 };
	ck_assert_int_eq(sscanf(got, "HTTP/1.1 %d", &rep.status), 1);
	char *split = strstr(got, "\r\n\r\n");
	ck_assert_ptr_nonnull(split);
	*split = '\0';
	size_t n_head = strnlen(got, sizeof rep.head - 1), n_body = strnlen(split + 4, sizeof rep.body - 1);
	memcpy(rep.head, got, n_head);
	memcpy(rep.body, split + 4, n_body);
	return rep;
}

static struct reply signed_request(const char *method, const char *path, const char *body)
{
	char auth[200];
	sign(auth, sizeof auth, run_key, method, path, now_ms(), body, strlen(body));
	return request(method, path, auth, body, strlen(body));
}

/* The answer is one line of JSON, {"error": ...} holding want. */
static void assert_refused(const struct reply *r, int status, const char *want, unsigned calls0)
{
	ck_assert_msg(r->status == status, "status %d, not %d: %s", r->status, status, r->body);
	ck_assert_ptr_nonnull(strstr(r->head, "Content-Type: application/json"));
	size_t len = strlen(r->body);
	ck_assert(len > 0 && r->body[len - 1] == '\n' && strchr(r->body, '\n') == r->body + len - 1);
	json_error_t e;
	json_t *j = json_loads(r->body, 0, &e);
	ck_assert_msg(j != NULL, "not JSON: %s", r->body);
	const char *reason = json_string_value(json_object_get(j, "error"));
	ck_assert_msg(reason != NULL && strstr(reason, want) != NULL, "reason %s lacks \"%s\"",
		      r->body, want);
	json_decref(j);
	ck_assert_uint_eq(calls, calls0);
}

static void start_server(bool with_key)
{
	log_init("test", -1, LOG_LEVEL_ERROR + 1);
	auth_forget_key();
	if (with_key) {
		int fd = mkstemp(key_path);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, run_key, strlen(run_key)), (int)strlen(run_key));
		close(fd);
		ck_assert_int_eq(auth_load_key_file(key_path), 0);
	}
	base = event_base_new();
	char err[256] = "";
	server = ctlhttp_new(base, "127.0.0.1", 0, handler, NULL, err, sizeof err);
	ck_assert_msg(server != NULL, "%s", err);
	ck_assert_uint_ne(ctlhttp_port(server), 0);
	calls = 0;
	handler_status = 200;
}

static void keyed_setup(void)
{
	start_server(true);
}

static void keyless_setup(void)
{
	start_server(false);
}

static void teardown(void)
{
	ctlhttp_free(server);
	event_base_free(base);
	if (strchr(key_path, 'X') == NULL)
		unlink(key_path);
	strcpy(key_path, "/tmp/es-test-ctlhttp-key-XXXXXX");
	auth_forget_key();
}

START_TEST(test_good_requests_reach_the_handler)
{
	struct reply r = signed_request("GET", "/state", "");
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 1);
	ck_assert_str_eq(seen_method, "GET");
	ck_assert_str_eq(seen_path, "/state");
	ck_assert_str_eq(seen_body, "(null)");
	ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: application/json"));
	/* The handler's answer, and who is in control (nobody yet). */
	ck_assert_str_eq(r.body, "{\"accepted\":true,\"state\":\"idle\",\"control\":{\"operator\":null,"
				 "\"since_unix_ms\":null,\"previous\":\"\",\"takes\":0,\"takeovers\":0,"
				 "\"releases\":0,\"refused\":0}}\n");

	r = signed_request("POST", "/configure", "{\"run\": 7, \"args\": {\"hub\": [\"--events\", \"9\"]}}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 2);
	ck_assert_str_eq(seen_method, "POST");
	ck_assert_str_eq(seen_path, "/configure");
	ck_assert_str_eq(seen_body, "{\"args\":{\"hub\":[\"--events\",\"9\"]},\"run\":7}");

	/* An empty body is NULL; the handler's status and answer go back. */
	handler_status = 409;
	r = signed_request("POST", "/start", "");
	ck_assert_int_eq(r.status, 409);
	ck_assert_str_eq(seen_path, "/start");
	ck_assert_str_eq(seen_body, "(null)");
	ck_assert_str_eq(r.body, "{\"accepted\":false,\"reason\":\"no\"}\n");
	handler_status = 200;
	const char *paths[] = { "/stop", "/reset", "/shutdown" };
	for (unsigned i = 0; i < 3; i++) {
		r = signed_request("POST", paths[i], "{}");
		ck_assert_int_eq(r.status, 200);
		ck_assert_str_eq(seen_path, paths[i]);
		ck_assert_str_eq(seen_body, "{}");
	}
	/* Uppercase hex is the same proof (the nonce is lowercase only). */
	char auth[200];
	sign(auth, sizeof auth, run_key, "GET", "/state", now_ms(), "", 0);
	for (char *p = auth + strlen(auth) - 64; *p; p++)
		*p = (char)(*p >= 'a' && *p <= 'f' ? *p - 32 : *p);
	r = request("GET", "/state", auth, "", 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 7);
	/* A client that would keep the connection: answered, then closed. */
	keep_alive = true;
	r = signed_request("GET", "/state", "");
	keep_alive = false;
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.head, "Connection: close"));
	r = signed_request("POST", "/start", "{\"run\": 1}");
	ck_assert_ptr_nonnull(strstr(r.head, "Connection: close"));
}
END_TEST

START_TEST(test_authorization_refused)
{
	struct reply r = request("GET", "/state", NULL, "", 0);
	assert_refused(&r, 401, "no Authorization header", 0);
	ck_assert_ptr_nonnull(strstr(r.head, "WWW-Authenticate: es-hmac"));

#define NONCE "0123456789abcdef0123456789abcdef"
#define PROOF "0000000000000000000000000000000000000000000000000000000000000000"
	const char *malformed[] = {
		"Bearer abc",
		"es-hmac",
		"es-hmac 123",
		"es-hmac 123 " PROOF,                      /* no nonce */
		"es-hmac x123 " NONCE " " PROOF,           /* the time not digits */
		"es-hmac 123 " NONCE " 00",
		"es-hmac 123 0123 " PROOF,                 /* a short nonce */
		"es-hmac 123 " NONCE "0 " PROOF,           /* a long one */
		"es-hmac 123 zz23456789abcdef0123456789abcdef " PROOF,
		"es-hmac 123 0123456789ABCDEF0123456789abcdef " PROOF, /* one nonce, one spelling */
		"es-hmac 123 " NONCE " zz" PROOF,
		"es-hmac 123 " NONCE " " PROOF " x",
	};
	for (unsigned i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
		r = request("GET", "/state", malformed[i], "", 0);
		assert_refused(&r, 401, "malformed Authorization header", 0);
	}

	/* Another key; the right key over another body, path or method. */
	char auth[200];
	const char *body = "{\"run\": 3}";
	sign(auth, sizeof auth, "another key of sixteen bytes or more", "POST", "/start",
	     now_ms(), body, strlen(body));
	r = request("POST", "/start", auth, body, strlen(body));
	assert_refused(&r, 401, "wrong proof", 0);
	sign(auth, sizeof auth, run_key, "POST", "/start", now_ms(), "{\"run\": 4}", 10);
	r = request("POST", "/start", auth, body, strlen(body));
	assert_refused(&r, 401, "wrong proof", 0);
	sign(auth, sizeof auth, run_key, "POST", "/stop", now_ms(), body, strlen(body));
	r = request("POST", "/start", auth, body, strlen(body));
	assert_refused(&r, 401, "wrong proof", 0);

	/* 40 s old, 40 s ahead. */
	sign(auth, sizeof auth, run_key, "GET", "/state", now_ms() - 40000, "", 0);
	r = request("GET", "/state", auth, "", 0);
	assert_refused(&r, 401, "behind the hub's clock (at most 30 s either way)", 0);
	sign(auth, sizeof auth, run_key, "GET", "/state", now_ms() + 40000, "", 0);
	r = request("GET", "/state", auth, "", 0);
	assert_refused(&r, 401, "ahead of the hub's clock", 0);
	/* 20 s off is within the limit. */
	sign(auth, sizeof auth, run_key, "GET", "/state", now_ms() - 20000, "", 0);
	r = request("GET", "/state", auth, "", 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 1);
}
END_TEST

/* A signed request is taken once: the same bytes again, or its nonce under
 * another request, are refused by name and counted; the handler saw only
 * the first. */
START_TEST(test_replays_refused)
{
	char auth[200];
	const char *body = "{\"run\": 3}";
	sign_nonce(auth, sizeof auth, run_key, "POST", "/start", now_ms(), NONCE_A, body,
		   strlen(body));
	struct reply r = request("POST", "/start", auth, body, strlen(body));
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 1);
	r = request("POST", "/start", auth, body, strlen(body));
	assert_refused(&r, 401, "replayed request: nonce " NONCE_A " was taken already", 1);
	sign_nonce(auth, sizeof auth, run_key, "POST", "/reset", now_ms(), NONCE_A, "{}", 2);
	r = request("POST", "/reset", auth, "{}", 2);
	assert_refused(&r, 401, "replayed request", 1);
	/* A request 29 s old is still in its window: once, then refused. */
	sign_nonce(auth, sizeof auth, run_key, "GET", "/state", now_ms() - 29000, NONCE_B, "", 0);
	r = request("GET", "/state", auth, "", 0);
	ck_assert_int_eq(r.status, 200);
	r = request("GET", "/state", auth, "", 0);
	assert_refused(&r, 401, "replayed request", 2);
	/* A wrong proof takes no nonce: the right one after it is fresh. */
	sign_nonce(auth, sizeof auth, "another key of sixteen bytes or more", "GET", "/state",
		   now_ms(), NONCE_C, "", 0);
	r = request("GET", "/state", auth, "", 0);
	assert_refused(&r, 401, "wrong proof", 2);
	sign_nonce(auth, sizeof auth, run_key, "GET", "/state", now_ms(), NONCE_C, "", 0);
	r = request("GET", "/state", auth, "", 0);
	ck_assert_int_eq(r.status, 200);
	struct ctlhttp_stats st;
	ctlhttp_stats(server, &st);
	ck_assert_uint_eq(st.replayed, 3);
	ck_assert_uint_eq(st.requests, 7);
	ck_assert_uint_eq(st.refused, 4);
}
END_TEST

START_TEST(test_paths_methods_bodies_refused)
{
	struct reply r = signed_request("GET", "/nothing", "");
	assert_refused(&r, 404, "no such path /nothing; served: GET /state, /runs/N/metrics.json; "
				"POST /configure", 0);
	r = signed_request("GET", "/state?verbose=1", "");
	assert_refused(&r, 404, "no such path /state?verbose=1", 0);
	r = signed_request("POST", "/state", "{}");
	assert_refused(&r, 405, "POST /state: the method is GET", 0);
	ck_assert_ptr_nonnull(strstr(r.head, "Allow: GET"));
	r = signed_request("GET", "/start", "");
	assert_refused(&r, 405, "GET /start: the method is POST", 0);
	r = signed_request("PUT", "/configure", "{}");
	assert_refused(&r, 405, "PUT /configure: the method is POST", 0);

	r = signed_request("POST", "/configure", "{\"run\": 7,\n \"args\": }");
	assert_refused(&r, 400, "the body is not JSON: ", 0);
	ck_assert_ptr_nonnull(strstr(r.body, "(line 2, column"));
	r = signed_request("POST", "/start", "[1, 2]");
	assert_refused(&r, 400, "the body must be a JSON object ({...}), not an array", 0);
	r = signed_request("POST", "/start", "7");
	assert_refused(&r, 400, "not a single value", 0);
	r = signed_request("POST", "/start", "{\"run\": 1, \"run\": 2}");
	assert_refused(&r, 400, "duplicate object key", 0);
	r = signed_request("POST", "/start", "{\"run\": \"\xff\"}");
	assert_refused(&r, 400, "the body is not JSON", 0);

	/* One byte over the limit, then far over it (evhttp's own 413). */
	size_t big = CTLHTTP_MAX_BODY + 1;
	char *body = malloc(3 * 1024 * 1024);
	memset(body, ' ', 3 * 1024 * 1024);
	body[0] = '{';
	body[big - 1] = '}';
	body[big] = '\0';
	r = signed_request("POST", "/configure", body);
	assert_refused(&r, 413, "the body is 65537 bytes; at most 65536 are taken", 0);
	body[big - 2] = '}';
	body[big - 1] = '\0';
	r = signed_request("POST", "/configure", body);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 1);
	char auth[160];
	sign(auth, sizeof auth, run_key, "POST", "/configure", now_ms(), body, 2 * 1024 * 1024);
	r = request("POST", "/configure", auth, body, 2 * 1024 * 1024);
	ck_assert_int_eq(r.status, 413);
	ck_assert_uint_eq(calls, 1);
	free(body);
}
END_TEST

/* The files under /runs/: what the resolver names, signed, read only. */
static char file_path[] = "/tmp/es-test-ctlhttp-files-XXXXXX";
static unsigned resolved;

static int resolve(void *arg, const char *uri, char *file, size_t len, char *reason,
		   size_t reason_len)
{
	(void)arg;
	resolved++;
	if (strcmp(uri, "/runs/1/metrics.json") == 0) {
		snprintf(file, len, "%s/metrics.json", file_path);
		return 200;
	}
	if (strcmp(uri, "/runs/1/report.html") == 0) {
		snprintf(file, len, "%s/report.html", file_path);
		return 200;
	}
	snprintf(reason, reason_len, "no such run file %s", uri);
	return 404;
}

START_TEST(test_files)
{
	struct reply r = signed_request("GET", "/runs/1/metrics.json", "");
	assert_refused(&r, 404, "no such path /runs/1/metrics.json: this endpoint serves no files", 0);
	ck_assert_ptr_nonnull(mkdtemp(file_path));
	char path[128];
	snprintf(path, sizeof path, "%s/metrics.json", file_path);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"balanced\": true}\n", f);
	fclose(f);
	ctlhttp_set_files(server, resolve, NULL);

	r = signed_request("GET", "/runs/1/metrics.json", "");
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "{\"balanced\": true}\n");
	ck_assert_ptr_nonnull(strstr(r.head, "Connection: close"));
	ck_assert_ptr_nonnull(strstr(r.head, "Content-Type: application/json"));
	ck_assert_ptr_nonnull(strstr(r.head, "Content-Security-Policy: default-src 'none'"));
	ck_assert_uint_eq(resolved, 1);
	/* Neither unsigned nor written to; the resolver's refusal as it is. */
	r = request("GET", "/runs/1/metrics.json", NULL, "", 0);
	assert_refused(&r, 401, "no Authorization header", 0);
	r = signed_request("POST", "/runs/1/metrics.json", "{}");
	assert_refused(&r, 405, "POST /runs/N/NAME: the method is GET (read only)", 0);
	ck_assert_ptr_nonnull(strstr(r.head, "Allow: GET"));
	ck_assert_uint_eq(resolved, 1);
	r = signed_request("GET", "/runs/2/metrics.json", "");
	assert_refused(&r, 404, "no such run file /runs/2/metrics.json", 0);
	/* What it names is read as the console's files are. */
	r = signed_request("GET", "/runs/1/report.html", "");
	assert_refused(&r, 404, "/runs/1/report.html: No such file or directory", 0);
	snprintf(path, sizeof path, "%s/report.html", file_path);
	ck_assert_int_eq(symlink("metrics.json", path), 0);
	r = signed_request("GET", "/runs/1/report.html", "");
	assert_refused(&r, 404, "/runs/1/report.html: Too many levels of symbolic links", 0);
	ck_assert_uint_eq(calls, 0);
	unlink(path);
	snprintf(path, sizeof path, "%s/metrics.json", file_path);
	unlink(path);
	rmdir(file_path);
	strcpy(file_path, "/tmp/es-test-ctlhttp-files-XXXXXX");
}
END_TEST

START_TEST(test_without_a_key)
{
	struct reply r = request("GET", "/state", NULL, "", 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(calls, 1);
	r = request("POST", "/configure", NULL, "{\"run\": 2}", 10);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(seen_body, "{\"run\":2}");
	/* The other checks hold without a key too. */
	r = request("POST", "/configure", NULL, "{", 1);
	assert_refused(&r, 400, "the body is not JSON", 2);
	r = request("DELETE", "/state", NULL, "", 0);
	assert_refused(&r, 405, "DELETE /state: the method is GET", 2);

	char err[256] = "";
	struct ctlhttp *open_to_all = ctlhttp_new(base, "0.0.0.0", 0, handler, NULL, err, sizeof err);
	ck_assert_ptr_null(open_to_all);
	ck_assert_str_eq(err, "--control-http: without a run key the control endpoint listens on "
			      "loopback only (0.0.0.0 is not; give --run-key-file)");
}
END_TEST

START_TEST(test_listen_failure)
{
	char err[256] = "";
	uint16_t taken = ctlhttp_port(server);
	struct ctlhttp *again = ctlhttp_new(base, "127.0.0.1", taken, handler, NULL, err, sizeof err);
	ck_assert_ptr_null(again);
	char want[128];
	snprintf(want, sizeof want, "--control-http: cannot listen on 127.0.0.1:%u: ", taken);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
	/* With a key any host may be served. */
	struct ctlhttp *any = ctlhttp_new(base, "0.0.0.0", 0, handler, NULL, err, sizeof err);
	ck_assert_msg(any != NULL, "%s", err);
	ctlhttp_free(any);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctlhttp");
	TCase *keyed = tcase_create("keyed");
	tcase_add_checked_fixture(keyed, keyed_setup, teardown);
	tcase_add_test(keyed, test_good_requests_reach_the_handler);
	tcase_add_test(keyed, test_authorization_refused);
	tcase_add_test(keyed, test_replays_refused);
	tcase_add_test(keyed, test_paths_methods_bodies_refused);
	tcase_add_test(keyed, test_listen_failure);
	tcase_add_test(keyed, test_files);
	suite_add_tcase(s, keyed);
	TCase *keyless = tcase_create("keyless");
	tcase_add_checked_fixture(keyless, keyless_setup, teardown);
	tcase_add_test(keyless, test_without_a_key);
	suite_add_tcase(s, keyless);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
