/* The JSON-lines sink (data/recsink.h): events.jsonl and expired.jsonl,
 * the spec's §4 record files, each batch one write() per file. */
#include "data/recsink.h"

#include "sys/log.h"
#include "wire/text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest events.jsonl line: seven numbers of at most 20 digits and keys. */
#define JSONL_EVENT_LINE_MAX 256u
/* Longest expired.jsonl line before its missing list. */
#define JSONL_EXPIRED_LINE_MAX 128u
/* Widest source ID in the missing list, with its comma. */
#define JSONL_MISSING_ITEM_MAX 6u

struct jsonl {
	int events_fd;
	int expired_fd;
	char *event_lines;
	size_t event_cap, event_len;
	uint64_t event_count;          /* lines in event_lines */
	char *expired_lines;
	size_t expired_cap, expired_len;
	uint64_t expired_count;
	struct recsink_stats stats;
	bool sealed;
};

static int jsonl_open_file(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		log_error("Cannot create %s: %s", path, strerror(errno));
	return fd;
}

static int jsonl_write_all(struct jsonl *j, int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		j->stats.write_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = -errno;
			if (!j->stats.failed)
				log_error("Cannot write a record file: %s", strerror(errno));
			j->stats.failed = true;
			return rc;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int jsonl_flush(void *self)
{
	struct jsonl *j = self;
	int rc = 0;
	if (j->event_len > 0) {
		rc = jsonl_write_all(j, j->events_fd, j->event_lines, j->event_len);
		j->stats.events += j->event_count;
		j->event_len = 0;
		j->event_count = 0;
	}
	if (j->expired_len > 0) {
		int rc2 = jsonl_write_all(j, j->expired_fd, j->expired_lines, j->expired_len);
		j->stats.expired += j->expired_count;
		j->expired_len = 0;
		j->expired_count = 0;
		if (rc == 0)
			rc = rc2;
	}
	return rc;
}

/* Appends text, returns the new end. */
static char *jsonl_put_str(char *q, const char *text)
{
	size_t n = strlen(text);
	memcpy(q, text, n);
	return q + n;
}

/* Appends v in decimal, returns the new end. */
static char *jsonl_put_u64(char *q, uint64_t v)
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

static void jsonl_add_event(void *self, const struct recsink_event *e)
{
	struct jsonl *j = self;
	if (j->sealed)
		return;
	if (j->event_cap - j->event_len < JSONL_EVENT_LINE_MAX)
		jsonl_flush(j);
	/* Hand-formatted: snprintf was a third of the builder's time at a
	 * million events a second. */
	char *line = j->event_lines + j->event_len, *q = line;
	q = jsonl_put_str(q, "{\"run\":");
	q = jsonl_put_u64(q, e->run_id);
	q = jsonl_put_str(q, ",\"event\":");
	q = jsonl_put_u64(q, e->event_id);
	q = jsonl_put_str(q, ",\"crc\":");
	q = jsonl_put_u64(q, e->crc);
	q = jsonl_put_str(q, ",\"bytes\":");
	q = jsonl_put_u64(q, e->bytes);
	q = jsonl_put_str(q, ",\"latency_ns\":");
	q = jsonl_put_u64(q, e->latency_ns);
	q = jsonl_put_str(q, ",\"uncertainty_ns\":");
	q = e->uncertainty_ns >= 0 ? jsonl_put_u64(q, (uint64_t)e->uncertainty_ns)
				   : jsonl_put_str(q, "null");
	q = jsonl_put_str(q, ",\"t_ns\":");   /* when written: rates over time */
	q = jsonl_put_u64(q, e->written_ns);
	q = jsonl_put_str(q, "}\n");
	j->event_len += (size_t)(q - line);
	j->event_count++;
}

static void jsonl_add_expired(void *self, const struct bld_expired *x)
{
	struct jsonl *j = self;
	if (j->sealed)
		return;
	size_t need = JSONL_EXPIRED_LINE_MAX + (size_t)x->missing_count * JSONL_MISSING_ITEM_MAX;
	if (j->expired_cap - j->expired_len < need)
		jsonl_flush(j);
	char *p = j->expired_lines + j->expired_len;
	/* Every string of the record files goes through the one JSON escaper
	 * (wire/text.h), whatever its origin; the numbers need none. */
	char reason[32];
	text_json_escape(reason, sizeof reason, bld_expiry_reason_name(x->reason));
	int n = snprintf(p, JSONL_EXPIRED_LINE_MAX,
			 "{\"run\":%" PRIu32 ",\"event\":%" PRIu64 ",\"reason\":\"%s\",\"missing\":[",
			 x->run_id, x->event_id, reason);
	for (uint16_t i = 0; i < x->missing_count; i++)
		n += snprintf(p + n, JSONL_MISSING_ITEM_MAX + 1, "%s%u", i ? "," : "",
			      (unsigned)x->missing[i]);
	n += snprintf(p + n, 4, "]}\n");
	j->expired_len += (size_t)n;
	j->expired_count++;
}

static void jsonl_close_files(struct jsonl *j)
{
	if (j->events_fd >= 0 && close(j->events_fd) < 0)
		j->stats.failed = true;
	if (j->expired_fd >= 0 && close(j->expired_fd) < 0)
		j->stats.failed = true;
	j->events_fd = j->expired_fd = -1;
}

static uint64_t jsonl_seal(void *self)
{
	struct jsonl *j = self;
	uint64_t dropped = j->event_count + j->expired_count;
	j->event_len = j->expired_len = 0;
	j->event_count = j->expired_count = 0;
	j->sealed = true;
	jsonl_close_files(j);
	return dropped;
}

static bool jsonl_close(void *self)
{
	struct jsonl *j = self;
	if (j == NULL)
		return true;
	if (!j->sealed && j->events_fd >= 0 && j->expired_fd >= 0)
		jsonl_flush(j);
	jsonl_close_files(j);
	bool ok = !j->stats.failed;
	free(j->event_lines);
	free(j->expired_lines);
	free(j);
	return ok;
}

static void jsonl_stats(const void *self, struct recsink_stats *out)
{
	const struct jsonl *j = self;
	*out = j->stats;
}

static const struct recsink_ops jsonl_ops = {
	.format = "jsonl",
	.add_event = jsonl_add_event,
	.add_expired = jsonl_add_expired,
	.flush = jsonl_flush,
	.seal = jsonl_seal,
	.close = jsonl_close,
	.stats = jsonl_stats,
};

bool recsink_jsonl_open(struct recsink *out, const char *dir, uint32_t batch_events,
		    uint16_t sources)
{
	struct jsonl *j = calloc(1, sizeof *j);
	if (j == NULL)
		return false;
	j->events_fd = j->expired_fd = -1;
	j->event_cap = (size_t)batch_events * JSONL_EVENT_LINE_MAX;
	/* Room for batch_events expired records missing every source. */
	j->expired_cap = (size_t)batch_events *
			 (JSONL_EXPIRED_LINE_MAX + (size_t)sources * JSONL_MISSING_ITEM_MAX);
	j->stats.buffer_bytes = j->event_cap + j->expired_cap;
	j->event_lines = malloc(j->event_cap);
	j->expired_lines = malloc(j->expired_cap);
	j->events_fd = jsonl_open_file(dir, "events.jsonl");
	j->expired_fd = jsonl_open_file(dir, "expired.jsonl");
	if (j->event_lines == NULL || j->expired_lines == NULL || j->events_fd < 0 ||
	    j->expired_fd < 0) {
		jsonl_close(j);
		return false;
	}
	*out = (struct recsink){ &jsonl_ops, j };
	return true;
}
