#include "io/ctlhttp.h"

#include "io/ctlowner.h"
#include "io/ctlstatic.h"
#include "io/httplisten.h"
#include "io/net.h"
#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/replay.h"
#include "wire/text.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* evhttp buffers a body up to this before the handler runs; past it, it
 * answers 413 itself (its own HTML page). Between CTLHTTP_MAX_BODY and
 * this the refusal is ours, in JSON, naming the limit. */
#define CTLHTTP_READ_MAX (1024 * 1024)
#define CTLHTTP_HEX_DIGITS 64u
#define CTLHTTP_MS_DIGITS_MAX 15u

struct ctlhttp {
	struct httplisten *listener;
	struct evhttp *http;
	ctlhttp_handler handler;
	void *arg;
	uint16_t port;
	struct replay_set *nonces;      /* the signed requests taken, for their window */
	struct ctlhttp_stats stats;
	struct ctlowner owner;          /* who is in control */
	char console_dir[4096];         /* the console's files; "" serves none */
	ctlhttp_file_resolver resolve;  /* GET /runs/...; NULL serves none */
	void *resolve_arg;
};

/* Each path served and the one method it takes. */
static const struct {
	const char *path;
	enum evhttp_cmd_type method;
} ctlhttp_routes[] = {
	{ "/state", EVHTTP_REQ_GET },	  { "/configure", EVHTTP_REQ_POST },
	{ "/start", EVHTTP_REQ_POST },	  { "/stop", EVHTTP_REQ_POST },
	{ "/reset", EVHTTP_REQ_POST },	  { "/shutdown", EVHTTP_REQ_POST },
	{ "/control", EVHTTP_REQ_POST },  { "/release", EVHTTP_REQ_POST },
};
#define CTLHTTP_ROUTES (sizeof ctlhttp_routes / sizeof ctlhttp_routes[0])

static const char *ctlhttp_method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}

static const char *ctlhttp_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	}
	return status < 300 ? "OK" : status < 500 ? "Refused" : "Error";
}

/* One request per connection. The door (io/httplisten) closes every
 * connection 5 s after its accept, whatever it is doing, answers queued
 * included; a browser that sent a request on a connection it kept may then
 * send it again on a new one, signed as it was, and the hub has to refuse
 * that as replayed although the first was taken. A connection closed after
 * each answer is never kept, so nothing is sent twice. */
static void ctlhttp_one_request(struct evhttp_request *req)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
}

/* Sends answer (released here; NULL sends {}) as one line of JSON. */
static void ctlhttp_send(struct evhttp_request *req, int status, json_t *answer)
{
	if (answer == NULL)
		answer = json_object();
	char *text = answer != NULL ? json_dumps(answer, JSON_COMPACT) : NULL;
	json_decref(answer);
	if (text == NULL) {
		status = 500;
		text = strdup("{\"error\":\"the answer could not be written as JSON\"}");
	}
	struct evbuffer *out = evbuffer_new();
	if (text != NULL && out != NULL)
		evbuffer_add_printf(out, "%s\n", text);
	struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
	evhttp_add_header(headers, "Content-Type", "application/json");
	if (status == 401)
		evhttp_add_header(headers, "WWW-Authenticate", "es-hmac");
	ctlhttp_one_request(req);
	evhttp_send_reply(req, status, ctlhttp_phrase(status), out);
	if (out != NULL)
		evbuffer_free(out);
	free(text);
}

/* Answers {"error": reason}, the reason made valid UTF-8 (it may quote the
 * client's bytes), and logs it with the client's address. */
static void ctlhttp_refuse(struct ctlhttp *h, struct evhttp_request *req, int status,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void ctlhttp_refuse(struct ctlhttp *h, struct evhttp_request *req, int status,
			   const char *fmt, ...)
{
	char raw[512], reason[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	text_to_utf8(reason, sizeof reason, raw);
	char *host = NULL;
	ev_uint16_t port = 0;
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	if (conn != NULL)
		evhttp_connection_get_peer(conn, &host, &port);
	h->stats.refused++;
	httplisten_warn(h->listener, "Control request from %s:%u refused (%d): %s",
			host != NULL ? host : "?", (unsigned)port, status, reason);
	ctlhttp_send(req, status, json_pack("{s:s}", "error", reason));
}

/* The route of the request, or NULL after answering 404 or 405: a path
 * of ctlhttp_routes, or the files under CTLHTTP_FILES_PREFIX (GET, the
 * whole path signed). */
static const char *ctlhttp_route(struct ctlhttp *h, struct evhttp_request *req)
{
	const char *uri = evhttp_request_get_uri(req);
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	if (strncmp(uri, CTLHTTP_FILES_PREFIX, sizeof CTLHTTP_FILES_PREFIX - 1) == 0) {
		if (method == EVHTTP_REQ_GET)
			return uri;
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
		ctlhttp_refuse(h, req, 405, "%s %sN/NAME: the method is GET (read only)",
			       ctlhttp_method_name(method), CTLHTTP_FILES_PREFIX);
		return NULL;
	}
	for (size_t i = 0; i < CTLHTTP_ROUTES; i++) {
		if (strcmp(uri, ctlhttp_routes[i].path) != 0)
			continue;
		if (method == ctlhttp_routes[i].method)
			return ctlhttp_routes[i].path;
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
				  ctlhttp_method_name(ctlhttp_routes[i].method));
		ctlhttp_refuse(h, req, 405, "%s %s: the method is %s", ctlhttp_method_name(method), uri,
			       ctlhttp_method_name(ctlhttp_routes[i].method));
		return NULL;
	}
	char shown[160];
	text_log_escape(shown, sizeof shown, uri, strlen(uri));
	ctlhttp_refuse(h, req, 404,
		       "no such path %s; served: GET /state, %sN/metrics.json; POST /configure, "
		       "/start, /stop, /reset, /shutdown, /control, /release; the console GET /",
		       shown, CTLHTTP_FILES_PREFIX);
	return NULL;
}

/* n hex digits of p, lowercased into out (n digits and a NUL); false at
 * anything else. */
static bool ctlhttp_take_hex(const char *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)p[i]))
			return false;
		out[i] = (char)tolower((unsigned char)p[i]);
	}
	out[n] = '\0';
	return true;
}

/* Parses "es-hmac <unix-ms> <nonce> <hex>": the time, the nonce (lowercase
 * hex as it was signed, so that one nonce has one spelling to remember)
 * and the proof, lowercased. */
static bool ctlhttp_parse_authorization(const char *value, uint64_t *ms,
					char nonce[REPLAY_NONCE_HEX + 1],
					char hex[CTLHTTP_HEX_DIGITS + 1])
{
	static const char scheme[] = "es-hmac ";
	if (strncmp(value, scheme, sizeof scheme - 1) != 0)
		return false;
	const char *p = value + sizeof scheme - 1;
	size_t digits = 0;
	*ms = 0;
	while (isdigit((unsigned char)p[digits]) && digits < CTLHTTP_MS_DIGITS_MAX) {
		*ms = *ms * 10 + (uint64_t)(p[digits] - '0');
		digits++;
	}
	if (digits == 0 || p[digits] != ' ')
		return false;
	p += digits + 1;
	if (!ctlhttp_take_hex(p, REPLAY_NONCE_HEX, nonce) || memcmp(nonce, p, REPLAY_NONCE_HEX) != 0 ||
	    p[REPLAY_NONCE_HEX] != ' ')
		return false;
	p += REPLAY_NONCE_HEX + 1;
	return ctlhttp_take_hex(p, CTLHTTP_HEX_DIGITS, hex) && p[CTLHTTP_HEX_DIGITS] == '\0';
}

/* The proof over "METHOD\nPATH\nUNIX-MS\nNONCE\nBODY" under the run key. */
static bool ctlhttp_expected(const char *method, const char *path, uint64_t ms,
			     const char *nonce, const unsigned char *body, size_t len,
			     char want[AUTH_HMAC_HEX])
{
	char head[64 + REPLAY_NONCE_HEX];
	int n = snprintf(head, sizeof head, "%s\n%s\n%" PRIu64 "\n%s\n", method, path, ms, nonce);
	unsigned char *msg = malloc((size_t)n + len + 1);
	if (msg == NULL)
		return false;
	memcpy(msg, head, (size_t)n);
	if (len > 0)
		memcpy(msg + n, body, len);
	bool ok = auth_hmac_hex(msg, (size_t)n + len, want);
	free(msg);
	return ok;
}

/* A request with a good proof is taken once: its nonce is remembered for
 * as long as its time is within the skew, and a second request with it is
 * refused by name. False after the refusal. */
static bool ctlhttp_first_use(struct ctlhttp *h, struct evhttp_request *req, const char *nonce,
			      uint64_t ms, uint64_t now_ms)
{
	switch (replay_check(h->nonces, nonce, ms, now_ms)) {
	case REPLAY_FRESH:
		return true;
	case REPLAY_REPLAYED:
		h->stats.replayed++;
		ctlhttp_refuse(h, req, 401, "replayed request: nonce %s was taken already; every "
					 "request is signed anew with a nonce of its own", nonce);
		return false;
	case REPLAY_FULL:
		h->stats.nonces_full++;
		ctlhttp_refuse(h, req, 503, "too many signed requests: the %u nonces of the last "
					 "%u s are all remembered; retry later",
			       REPLAY_MAX_NONCES, 2 * CTLHTTP_MAX_SKEW_MS / 1000u);
		return false;
	}
	return false;
}

/* Whether the request may go to the handler; after a 401 it may not. */
static bool ctlhttp_authorized(struct ctlhttp *h, struct evhttp_request *req, const char *method,
			       const char *path, const unsigned char *body, size_t len)
{
	const char *value =
		evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (!auth_have_key())
		return true;
	if (value == NULL) {
		ctlhttp_refuse(h, req, 401, "no Authorization header: every request carries "
					 "\"es-hmac UNIX-MS NONCE HEX\" signed with the run key");
		return false;
	}
	uint64_t ms;
	char nonce[REPLAY_NONCE_HEX + 1], given[CTLHTTP_HEX_DIGITS + 1], want[AUTH_HMAC_HEX];
	if (!ctlhttp_parse_authorization(value, &ms, nonce, given)) {
		ctlhttp_refuse(h, req, 401, "malformed Authorization header: it is \"es-hmac UNIX-MS "
					 "NONCE HEX\" (the time in ms, 32 lowercase hex digits of "
					 "a nonce, 64 of the proof)");
		return false;
	}
	int64_t now_ms = (int64_t)(clk_realtime_true_ns() / 1000000u);
	int64_t skew = now_ms - (int64_t)ms;
	if (skew > (int64_t)CTLHTTP_MAX_SKEW_MS || skew < -(int64_t)CTLHTTP_MAX_SKEW_MS) {
		ctlhttp_refuse(h, req, 401, "the request's time is %.1f s %s the hub's clock (at most "
					 "%u s either way): check the clocks, then sign it again",
			       (double)(skew < 0 ? -skew : skew) / 1000.0,
			       skew > 0 ? "behind" : "ahead of", CTLHTTP_MAX_SKEW_MS / 1000u);
		return false;
	}
	if (!ctlhttp_expected(method, path, ms, nonce, body, len, want)) {
		ctlhttp_refuse(h, req, 500, "cannot compute the request's proof");
		return false;
	}
	if (sodium_memcmp(want, given, CTLHTTP_HEX_DIGITS) != 0) {
		ctlhttp_refuse(h, req, 401, "wrong proof: the request was not signed with this hub's "
					 "run key (or was changed on the way)");
		return false;
	}
	return ctlhttp_first_use(h, req, nonce, ms, (uint64_t)now_ms);
}

/* The body as a JSON object in *body (NULL when empty), or false after a
 * 400. */
static bool ctlhttp_parse_body(struct ctlhttp *h, struct evhttp_request *req, const unsigned char *bytes,
			       size_t len, json_t **body)
{
	*body = NULL;
	if (len == 0)
		return true;
	json_error_t error;
	json_t *j = json_loadb((const char *)bytes, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
			       &error);
	if (j == NULL) {
		ctlhttp_refuse(h, req, 400, "the body is not JSON: %s (line %d, column %d)",
			       error.text, error.line, error.column);
		return false;
	}
	if (!json_is_object(j)) {
		ctlhttp_refuse(h, req, 400, "the body must be a JSON object ({...}), not %s",
			       json_is_array(j) ? "an array" : "a single value");
		json_decref(j);
		return false;
	}
	*body = j;
	return true;
}

/* A file's bytes with its type and the static files' headers; frees out. */
static void ctlhttp_send_file(struct evhttp_request *req, const char *type, struct evbuffer *out)
{
	struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
	evhttp_add_header(headers, "Content-Type", type);
	for (size_t i = 0; ctlstatic_headers[i] != NULL; i += 2)
		evhttp_add_header(headers, ctlstatic_headers[i], ctlstatic_headers[i + 1]);
	ctlhttp_one_request(req);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/* GET / and /console/NAME: the console's files, unsigned (a browser
 * loads them before it holds the key; they are the same for everyone). */
static void ctlhttp_console(struct ctlhttp *h, struct evhttp_request *req, const char *uri)
{
	char reason[512];
	const char *type = NULL;
	struct evbuffer *out = evbuffer_new();
	int status = out == NULL ? 500
		: h->console_dir[0] == '\0'
		? (snprintf(reason, sizeof reason, "this hub serves no console (builderd "
						   "--console-dir)"), 404)
		: ctlstatic_read(h->console_dir, uri, out, &type, reason, sizeof reason);
	if (status != 200) {
		if (out != NULL)
			evbuffer_free(out);
		ctlhttp_refuse(h, req, status, "%s", status == 500 && out == NULL ? "out of memory"
										 : reason);
		return;
	}
	ctlhttp_send_file(req, type, out);
}

/* GET /runs/N/NAME, signed: the file the resolver names, as it is. */
static void ctlhttp_file(struct ctlhttp *h, struct evhttp_request *req, const char *uri)
{
	char file[4096], reason[512], shown[160];
	const char *type = NULL;
	int status = 404;
	struct evbuffer *out = evbuffer_new();
	text_log_escape(shown, sizeof shown, uri, strlen(uri));
	if (out == NULL)
		status = 500, snprintf(reason, sizeof reason, "out of memory");
	else if (h->resolve == NULL)
		snprintf(reason, sizeof reason, "no such path %s: this endpoint serves no files", shown);
	else if ((status = h->resolve(h->resolve_arg, uri, file, sizeof file, reason,
				      sizeof reason)) == 200)
		status = ctlstatic_read_file(file, shown, "", out, &type, reason, sizeof reason);
	if (status != 200) {
		if (out != NULL)
			evbuffer_free(out);
		ctlhttp_refuse(h, req, status, "%s", reason);
		return;
	}
	ctlhttp_send_file(req, type, out);
}

/* POST /control ({"operator", "take_over"}) and /release ({"operator"}),
 * answered here; any other POST goes on (true) when its "operator" may
 * change the state now, else 409 naming the holder. */
static bool ctlhttp_control(struct ctlhttp *h, struct evhttp_request *req, const char *path,
			    const json_t *body)
{
	char reason[512] = "";
	uint64_t now_ms = clk_realtime_true_ns() / 1000000u;
	json_t *name = body != NULL ? json_object_get(body, "operator") : NULL;
	bool own = strcmp(path, "/control") == 0 || strcmp(path, "/release") == 0;
	if ((own || name != NULL) && !ctlowner_name_ok(name, reason, sizeof reason)) {
		ctlhttp_refuse(h, req, 400, "%s", reason);
		return false;
	}
	const char *who = json_string_value(name);
	bool ok;
	if (strcmp(path, "/control") == 0)
		ok = ctlowner_take(&h->owner, who, json_is_true(json_object_get(body, "take_over")),
				   now_ms, reason, sizeof reason);
	else if (strcmp(path, "/release") == 0)
		ok = ctlowner_release(&h->owner, who, reason, sizeof reason);
	else if (ctlowner_allows(&h->owner, who, now_ms, reason, sizeof reason))
		return true;
	else
		ok = false;
	if (!ok) {
		httplisten_warn(h->listener, "%s refused: %s", path + 1, reason);
		ctlhttp_send(req, 409, json_pack("{s:b, s:s}", "accepted", 0, "reason", reason));
	} else {
		ctlhttp_send(req, 200, json_pack("{s:b, s:o}", "accepted", 1, "control",
						 ctlowner_json(&h->owner)));
	}
	return false;
}

static void ctlhttp_on_request(struct evhttp_request *req, void *arg)
{
	struct ctlhttp *h = arg;
	h->stats.requests++;
	const char *uri = evhttp_request_get_uri(req);
	if (evhttp_request_get_command(req) == EVHTTP_REQ_GET && ctlstatic_wanted(uri)) {
		ctlhttp_console(h, req, uri);
		return;
	}
	const char *path = ctlhttp_route(h, req);
	if (path == NULL)
		return;
	const char *method = ctlhttp_method_name(evhttp_request_get_command(req));
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	if (len > CTLHTTP_MAX_BODY) {
		ctlhttp_refuse(h, req, 413, "the body is %zu bytes; at most %u are taken", len,
			       CTLHTTP_MAX_BODY);
		return;
	}
	const unsigned char *bytes = len > 0 ? evbuffer_pullup(in, -1) : NULL;
	if (!ctlhttp_authorized(h, req, method, path, bytes, len))
		return;
	if (strncmp(path, CTLHTTP_FILES_PREFIX, sizeof CTLHTTP_FILES_PREFIX - 1) == 0) {
		ctlhttp_file(h, req, uri);
		return;
	}
	json_t *body = NULL;
	bool post = evhttp_request_get_command(req) == EVHTTP_REQ_POST;
	if (post && !ctlhttp_parse_body(h, req, bytes, len, &body))
		return;
	if (post && !ctlhttp_control(h, req, path, body)) {
		json_decref(body);
		return;
	}
	json_t *answer = NULL;
	int status = h->handler(h->arg, method, path, body, &answer);
	json_decref(body);
	if (!post && json_is_object(answer))
		json_object_set_new(answer, "control", ctlowner_json(&h->owner));
	ctlhttp_send(req, status, answer);
}

struct ctlhttp *ctlhttp_new(struct event_base *base, const char *host, uint16_t port,
			    ctlhttp_handler handler, void *arg, char *err, size_t errlen)
{
	if (!auth_have_key() && !net_host_is_loopback(host)) {
		snprintf(err, errlen, "--control-http: without a run key the control endpoint "
				      "listens on loopback only (%s is not; give --run-key-file)",
			 host);
		return NULL;
	}
	struct ctlhttp *h = calloc(1, sizeof *h);
	if (h == NULL) {
		snprintf(err, errlen, "--control-http: out of memory");
		return NULL;
	}
	h->handler = handler;
	h->arg = arg;
	int rc = httplisten_open(base, host, port, "the control endpoint", &h->listener, &h->port);
	if (rc == 0) {
		h->http = httplisten_http(h->listener);
		h->nonces = replay_new(CTLHTTP_MAX_SKEW_MS);
		rc = h->nonces != NULL ? 0 : -ENOMEM;
	}
	if (rc < 0) {
		httplisten_close(h->listener);
		snprintf(err, errlen, "--control-http: cannot listen on %s:%u: %s", host,
			 (unsigned)port, strerror(-rc));
		free(h);
		return NULL;
	}
	/* Every method reaches ctlhttp_route, so a wrong one gets our 405 in
	 * JSON; a slow client is dropped, and evhttp reads a body it refuses to
	 * the end first (lingering close) so the client sees the 413. */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(h->http, 16384);
	evhttp_set_max_body_size(h->http, CTLHTTP_READ_MAX);
	evhttp_set_flags(h->http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_timeout(h->http, 10);
	evhttp_set_gencb(h->http, ctlhttp_on_request, h);
	return h;
}

void ctlhttp_set_console(struct ctlhttp *h, const char *dir)
{
	snprintf(h->console_dir, sizeof h->console_dir, "%s", dir != NULL ? dir : "");
}

void ctlhttp_set_files(struct ctlhttp *h, ctlhttp_file_resolver resolve, void *arg)
{
	h->resolve = resolve;
	h->resolve_arg = arg;
}

uint16_t ctlhttp_port(const struct ctlhttp *h)
{
	return h->port;
}

void ctlhttp_free(struct ctlhttp *h)
{
	if (h == NULL)
		return;
	httplisten_close(h->listener);
	replay_free(h->nonces);
	free(h);
}

void ctlhttp_stats(const struct ctlhttp *h, struct ctlhttp_stats *out)
{
	*out = h->stats;
	httplisten_stats(h->listener, &out->listener);
}
