#include "data/output.h"

#include "sys/clock.h"
#include "sys/log.h"
#include "wire/text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest events.jsonl line: seven numbers of at most 20 digits and keys. */
#define OUT_EVENT_LINE_MAX 256u
/* Longest expired.jsonl line before its missing list. */
#define OUT_EXPIRED_LINE_MAX 128u
/* Widest source ID in the missing list, with its comma. */
#define OUT_MISSING_ITEM_MAX 6u

struct out_pending {
	uint64_t event_id;
	uint64_t bytes;
	uint64_t earliest_timestamp_ns;
	uint32_t crc;
	uint32_t run_id;
	uint16_t earliest_source;
};

struct out {
	int events_fd;
	int expired_fd;
	uint32_t flush_every;
	uint16_t sources;
	struct out_clock *clocks;              /* [sources] */
	struct out_uncertainty uncertainty;
	struct out_uncertainty *source_uncertainty;  /* [sources] */
	struct out_pending *pending;
	uint32_t pending_count;
	char *event_lines;
	size_t event_lines_cap;
	char *expired_lines;
	size_t expired_cap;
	size_t expired_len;
	struct hist latency;
	struct hist uncertainty_hist;   /* per-record uncertainty, bounded ones */
	uint64_t written;
	uint64_t negative;
	uint64_t write_calls;
	bool failed;
	bool sealed;                    /* out_seal: nothing more is written */
};

static int out_open_file(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		log_error("Cannot create %s: %s", path, strerror(errno));
	return fd;
}

struct out *out_open(const char *dir, uint32_t flush_every, uint16_t sources,
		     const int64_t *source_offsets_ns)
{
	struct out *o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	o->events_fd = o->expired_fd = -1;
	o->flush_every = flush_every;
	o->sources = sources;
	hist_reset(&o->latency);
	hist_reset(&o->uncertainty_hist);
	o->clocks = calloc(sources, sizeof *o->clocks);
	o->source_uncertainty = calloc(sources, sizeof *o->source_uncertainty);
	if (o->clocks == NULL || o->source_uncertainty == NULL) {
		out_close(o);
		return NULL;
	}
	for (uint16_t s = 0; s < sources; s++) {
		o->clocks[s].offset_ns = source_offsets_ns ? source_offsets_ns[s] : 0;
		o->clocks[s].bound_ns = OUT_UNBOUNDED;
	}
	o->pending = calloc(flush_every, sizeof *o->pending);
	o->event_lines_cap = (size_t)flush_every * OUT_EVENT_LINE_MAX;
	o->event_lines = malloc(o->event_lines_cap);
	/* Room for flush_every expired records missing every source. */
	o->expired_cap = (size_t)flush_every * (OUT_EXPIRED_LINE_MAX + (size_t)sources * OUT_MISSING_ITEM_MAX);
	o->expired_lines = malloc(o->expired_cap);
	o->events_fd = out_open_file(dir, "events.jsonl");
	o->expired_fd = out_open_file(dir, "expired.jsonl");
	if (o->pending == NULL || o->event_lines == NULL || o->expired_lines == NULL ||
	    o->events_fd < 0 || o->expired_fd < 0) {
		out_close(o);
		return NULL;
	}
	return o;
}

static int out_write_all(struct out *o, int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		o->write_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = -errno;
			if (!o->failed)
				log_error("Cannot write a record file: %s", strerror(errno));
			o->failed = true;
			return rc;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* How far the applied offset may be from the truth at now: the bound
 * widened by drift since it was taken (either way: a clock stepped back
 * still drifted). */
static int64_t out_bound_at(const struct out_clock *c, uint64_t now)
{
	if (c->bound_ns < 0)
		return OUT_UNBOUNDED;
	if (c->drift_ppm <= 0.0)
		return c->bound_ns;
	int64_t at = c->at_ns;
	uint64_t age = (int64_t)now >= at ? now - (uint64_t)at : (uint64_t)at - now;
	double widen = ceil(c->drift_ppm * (double)age / 1e6);
	int64_t bound;
	if (!(widen < 9.2e18) || __builtin_add_overflow(c->bound_ns, (int64_t)widen, &bound))
		return INT64_MAX;
	return bound;
}

static void out_count_uncertainty(struct out_uncertainty *u, int64_t bound)
{
	if (bound < 0) {
		u->unbounded++;
		return;
	}
	u->bounded++;
	if (bound > u->max_ns)
		u->max_ns = bound;
}

/* Appends text, returns the new end. */
static char *out_put_str(char *q, const char *text)
{
	size_t n = strlen(text);
	memcpy(q, text, n);
	return q + n;
}

/* Appends v in decimal, returns the new end. */
static char *out_put_u64(char *q, uint64_t v)
{
	char digits[20];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*q++ = digits[--n];
	return q;
}

int out_flush(struct out *o)
{
	int rc = 0;
	if (o->pending_count > 0) {
		uint64_t now = clk_realtime_ns();
		size_t len = 0;
		for (uint32_t i = 0; i < o->pending_count; i++) {
			const struct out_pending *p = &o->pending[i];
			const struct out_clock *c = &o->clocks[p->earliest_source];
			/* The source's timestamp on the builder's clock. */
			uint64_t origin = p->earliest_timestamp_ns - (uint64_t)c->offset_ns;
			uint64_t latency = 0;
			if (now >= origin)
				latency = now - origin;
			else
				o->negative++;
			hist_add(&o->latency, latency);
			int64_t bound = out_bound_at(c, now);
			out_count_uncertainty(&o->uncertainty, bound);
			if (bound >= 0)
				hist_add(&o->uncertainty_hist, (uint64_t)bound);
			out_count_uncertainty(&o->source_uncertainty[p->earliest_source], bound);
			/* Hand-formatted: snprintf was a third of the builder's time
			 * at a million events a second. */
			char *line = o->event_lines + len;
			char *q = line;
			q = out_put_str(q, "{\"run\":");
			q = out_put_u64(q, p->run_id);
			q = out_put_str(q, ",\"event\":");
			q = out_put_u64(q, p->event_id);
			q = out_put_str(q, ",\"crc\":");
			q = out_put_u64(q, p->crc);
			q = out_put_str(q, ",\"bytes\":");
			q = out_put_u64(q, p->bytes);
			q = out_put_str(q, ",\"latency_ns\":");
			q = out_put_u64(q, latency);
			q = out_put_str(q, ",\"uncertainty_ns\":");
			q = bound >= 0 ? out_put_u64(q, (uint64_t)bound) : out_put_str(q, "null");
			q = out_put_str(q, ",\"t_ns\":");   /* when written: rates over time */
			q = out_put_u64(q, now);
			q = out_put_str(q, "}\n");
			len += (size_t)(q - line);
		}
		o->written += o->pending_count;
		o->pending_count = 0;
		rc = out_write_all(o, o->events_fd, o->event_lines, len);
	}
	if (o->expired_len > 0) {
		int rc2 = out_write_all(o, o->expired_fd, o->expired_lines, o->expired_len);
		o->expired_len = 0;
		if (rc == 0)
			rc = rc2;
	}
	return rc;
}

void out_add_event(struct out *o, const struct bld_event *e)
{
	if (o->sealed)
		return;
	o->pending[o->pending_count++] = (struct out_pending){
		.event_id = e->event_id,
		.bytes = e->bytes,
		.earliest_timestamp_ns = e->earliest_timestamp_ns,
		.crc = e->filter_crc,
		.run_id = e->run_id,
		.earliest_source = e->earliest_source,
	};
	if (o->pending_count == o->flush_every)
		out_flush(o);
}

void out_add_expired(struct out *o, const struct bld_expired *x)
{
	if (o->sealed)
		return;
	size_t need = OUT_EXPIRED_LINE_MAX + (size_t)x->missing_count * OUT_MISSING_ITEM_MAX;
	if (o->expired_cap - o->expired_len < need)
		out_flush(o);
	char *p = o->expired_lines + o->expired_len;
	/* Every string of the record files goes through the one JSON escaper
	 * (wire/text.h), whatever its origin; the numbers need none. */
	char reason[32];
	text_json_escape(reason, sizeof reason, bld_expiry_reason_name(x->reason));
	int n = snprintf(p, OUT_EXPIRED_LINE_MAX,
			 "{\"run\":%" PRIu32 ",\"event\":%" PRIu64 ",\"reason\":\"%s\",\"missing\":[",
			 x->run_id, x->event_id, reason);
	for (uint16_t i = 0; i < x->missing_count; i++)
		n += snprintf(p + n, OUT_MISSING_ITEM_MAX + 1, "%s%u", i ? "," : "",
			      (unsigned)x->missing[i]);
	n += snprintf(p + n, 4, "]}\n");
	o->expired_len += (size_t)n;
}

void out_set_clock(struct out *o, uint16_t source, const struct out_clock *clock)
{
	if (source < o->sources)
		o->clocks[source] = *clock;
}

struct out_uncertainty out_uncertainty(const struct out *o)
{
	return o->uncertainty;
}

struct out_uncertainty out_source_uncertainty(const struct out *o, uint16_t source)
{
	struct out_uncertainty none = { 0 };
	return source < o->sources ? o->source_uncertainty[source] : none;
}

const struct hist *out_latency(const struct out *o)
{
	return &o->latency;
}

const struct hist *out_uncertainty_hist(const struct out *o)
{
	return &o->uncertainty_hist;
}

uint64_t out_events_written(const struct out *o)
{
	return o->written;
}

uint64_t out_negative_latencies(const struct out *o)
{
	return o->negative;
}

uint64_t out_write_calls(const struct out *o)
{
	return o->write_calls;
}

uint64_t out_buffer_bytes(const struct out *o)
{
	return (uint64_t)o->flush_every * sizeof *o->pending + o->event_lines_cap + o->expired_cap +
	       (uint64_t)o->sources * (sizeof *o->clocks + sizeof *o->source_uncertainty);
}

uint64_t out_seal(struct out *o)
{
	uint64_t dropped = o->pending_count;
	for (size_t i = 0; i < o->expired_len; i++)
		dropped += o->expired_lines[i] == '\n';
	o->pending_count = 0;
	o->expired_len = 0;
	o->sealed = true;
	if (o->events_fd >= 0 && close(o->events_fd) < 0)
		o->failed = true;
	if (o->expired_fd >= 0 && close(o->expired_fd) < 0)
		o->failed = true;
	o->events_fd = o->expired_fd = -1;
	return dropped;
}

bool out_close(struct out *o)
{
	if (o == NULL)
		return true;
	if (o->events_fd >= 0 && o->expired_fd >= 0)
		out_flush(o);
	bool ok = !o->failed;
	if (o->events_fd >= 0 && close(o->events_fd) < 0)
		ok = false;
	if (o->expired_fd >= 0 && close(o->expired_fd) < 0)
		ok = false;
	free(o->pending);
	free(o->event_lines);
	free(o->expired_lines);
	free(o->clocks);
	free(o->source_uncertainty);
	free(o);
	return ok;
}
