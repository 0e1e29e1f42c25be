#include "io/prom.h"

#include "io/httplisten.h"

#include "sys/log.h"
#include "wire/text.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void prom_family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_sample_u64(struct evbuffer *out, const char *name, const char *labels, uint64_t value)
{
	if (labels != NULL && labels[0] != '\0')
		evbuffer_add_printf(out, "%s{%s} %" PRIu64 "\n", name, labels, value);
	else
		evbuffer_add_printf(out, "%s %" PRIu64 "\n", name, value);
}

void prom_sample_f64(struct evbuffer *out, const char *name, const char *labels, double value)
{
	char text[64];
	if (isnan(value))
		snprintf(text, sizeof text, "NaN");
	else if (isinf(value))
		snprintf(text, sizeof text, value > 0 ? "+Inf" : "-Inf");
	else
		snprintf(text, sizeof text, "%.9g", value);
	if (labels != NULL && labels[0] != '\0')
		evbuffer_add_printf(out, "%s{%s} %s\n", name, labels, text);
	else
		evbuffer_add_printf(out, "%s %s\n", name, text);
}

void prom_label_add(char *dst, size_t cap, const char *key, const char *value)
{
	char escaped[256];
	text_prom_label_escape(escaped, sizeof escaped, value);
	size_t n = strnlen(dst, cap);
	if (n < cap)
		snprintf(dst + n, cap - n, "%s%s=\"%s\"", n ? "," : "", key, escaped);
}

void prom_sample_u64_id(struct evbuffer *out, const char *name, const char *key, unsigned id,
			uint64_t value)
{
	char labels[64];
	snprintf(labels, sizeof labels, "%s=\"%u\"", key, id);
	prom_sample_u64(out, name, labels, value);
}

void prom_sample_f64_id(struct evbuffer *out, const char *name, const char *key, unsigned id,
			double value)
{
	char labels[64];
	snprintf(labels, sizeof labels, "%s=\"%u\"", key, id);
	prom_sample_f64(out, name, labels, value);
}

void prom_histogram_ns(struct evbuffer *out, const char *name, const char *help,
		       const struct hist *h)
{
	prom_family(out, name, "histogram", help);
	/* The histogram's own buckets are finer (16 per power of two); the
	 * exposition keeps one boundary per power of two from 1 us to ~17 s,
	 * each the upper edge of a bucket, so the counts are exact. */
	uint64_t cumulative = 0;
	unsigned bucket = 0;
	for (unsigned power = 10; power <= 34; power++) {
		uint64_t edge = ((uint64_t)1 << power) - 1;
		while (bucket < HIST_BUCKETS && hist_bucket_upper(bucket) <= edge)
			cumulative += h->counts[bucket++];
		char labels[48];
		snprintf(labels, sizeof labels, "le=\"%.9g\"", (double)(edge + 1) / 1e9);
		char bucket_name[160];
		snprintf(bucket_name, sizeof bucket_name, "%s_bucket", name);
		prom_sample_u64(out, bucket_name, labels, cumulative);
	}
	char n[160];
	snprintf(n, sizeof n, "%s_bucket", name);
	prom_sample_u64(out, n, "le=\"+Inf\"", h->samples);
	snprintf(n, sizeof n, "%s_sum", name);
	prom_sample_f64(out, n, NULL, (double)h->sum / 1e9);
	snprintf(n, sizeof n, "%s_count", name);
	prom_sample_u64(out, n, NULL, h->samples);
}

struct prom_server {
	struct httplisten *listener;
	struct evhttp *http;
	prom_fill_fn fill;
	void *arg;
};

static void prom_on_request(struct evhttp_request *req, void *arg)
{
	struct prom_server *s = arg;
	const char *uri = evhttp_request_get_uri(req);
	bool json;
	if (strcmp(uri, "/metrics") == 0)
		json = false;
	else if (strcmp(uri, "/status") == 0)
		json = true;
	else {
		evhttp_send_error(req, HTTP_NOTFOUND, "Only /metrics and /status are served");
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "GET only");
		return;
	}
	struct evbuffer *out = evbuffer_new();
	s->fill(out, json, s->arg);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  json ? "application/json" : "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

struct prom_server *prom_server_start(struct event_base *base, const char *host, uint16_t port,
				      prom_fill_fn fill, void *arg, uint16_t *bound_port)
{
	struct prom_server *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->fill = fill;
	s->arg = arg;
	if (httplisten_open(base, host, port, "the metrics port", &s->listener, bound_port) < 0) {
		log_error("Cannot serve metrics on %s:%u", host, (unsigned)port);
		free(s);
		return NULL;
	}
	s->http = httplisten_http(s->listener);
	/* Scrapes are small and rare: a slow client must not hold memory. */
	evhttp_set_max_headers_size(s->http, 8192);
	evhttp_set_max_body_size(s->http, 0);
	evhttp_set_timeout(s->http, 5);
	evhttp_set_gencb(s->http, prom_on_request, s);
	return s;
}

void prom_server_stop(struct prom_server *s)
{
	if (s == NULL)
		return;
	httplisten_close(s->listener);
	free(s);
}
