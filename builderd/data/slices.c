#include "data/slices.h"

#include "sys/afile.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slices {
	struct slices_config cfg;
	char dir[1024];
	uint32_t current;
	uint32_t ended;                  /* documents written */
	uint64_t first_ns;               /* the first event's time; 0: none yet */
	uint64_t slice_start_ns;         /* the current slice's start */
	uint64_t events_in_slice;        /* handed to the writer in this slice */
	struct slices_figures now;       /* the current slice, as its closed files say */
	struct slices_figures run;       /* the slices ended */
};

static void slices_zero(struct slices_figures *f)
{
	*f = (struct slices_figures){ .first_event = UINT64_MAX };
}

struct slices *slices_create(const struct slices_config *c)
{
	struct slices *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->cfg = *c;
	snprintf(s->dir, sizeof s->dir, "%s", c->dir);
	s->cfg.dir = s->dir;
	slices_zero(&s->now);
	slices_zero(&s->run);
	return s;
}

void slices_destroy(struct slices *s)
{
	free(s);
}

uint32_t slices_current(const struct slices *s)
{
	return s->current;
}

static void slices_add(struct slices_figures *to, const struct slices_figures *f)
{
	to->events += f->events;
	to->bytes += f->bytes;
	to->files += f->files;
	to->expired += f->expired;
	to->unwritten += f->unwritten;
	if (f->first_event < to->first_event)
		to->first_event = f->first_event;
	if (f->first_event != UINT64_MAX && f->last_event > to->last_event)
		to->last_event = f->last_event;
}

void slices_file_closed(struct slices *s, const struct evw_file_info *info)
{
	struct slices_figures f = { .events = info->events, .bytes = info->bytes, .files = 1,
				    .first_event = info->events ? info->first_event : UINT64_MAX,
				    .last_event = info->events ? info->last_event : 0 };
	slices_add(&s->now, &f);
}

void slices_event(struct slices *s, uint64_t now)
{
	if (s->first_ns == 0)
		s->first_ns = s->slice_start_ns = now;
	s->events_in_slice++;
}

void slices_expired(struct slices *s)
{
	s->now.expired++;
}

void slices_unwritten(struct slices *s, uint64_t events)
{
	s->now.unwritten += events;
}

bool slices_due(const struct slices *s, uint64_t now)
{
	if (s->first_ns == 0)
		return false;
	return (s->cfg.slice_ns != 0 && now - s->slice_start_ns >= s->cfg.slice_ns) ||
	       (s->cfg.slice_events != 0 && s->events_in_slice >= s->cfg.slice_events);
}

void slices_slice_name(char *dst, size_t size, uint32_t run, uint16_t builder_id, uint32_t slice)
{
	snprintf(dst, size, "run%06u_b%u_s%04u.eos.json", (unsigned)run, (unsigned)builder_id,
		 (unsigned)slice);
}

void slices_run_name(char *dst, size_t size, uint32_t run, uint16_t builder_id)
{
	snprintf(dst, size, "run%06u_b%u.eor.json", (unsigned)run, (unsigned)builder_id);
}

static json_t *slices_json(const struct slices *s, const char *format, const struct slices_figures *f)
{
	json_t *doc = json_pack("{s:s, s:I, s:i, s:I, s:I, s:I, s:I, s:I}", "format", format,
				"run", (json_int_t)s->cfg.run, "builder", (int)s->cfg.builder_id,
				"event_count", (json_int_t)f->events, "bytes", (json_int_t)f->bytes,
				"files", (json_int_t)f->files, "expired", (json_int_t)f->expired,
				"unwritten", (json_int_t)f->unwritten);
	if (doc == NULL)
		return NULL;
	json_object_set_new(doc, "first_event",
			    f->first_event == UINT64_MAX ? json_null() : json_integer((json_int_t)f->first_event));
	json_object_set_new(doc, "last_event",
			    f->first_event == UINT64_MAX ? json_null() : json_integer((json_int_t)f->last_event));
	return doc;
}

static int slices_write(const struct slices *s, const char *name, json_t *doc)
{
	if (doc == NULL)
		return -ENOMEM;
	char path[1200];
	snprintf(path, sizeof path, "%s/%s", s->dir, name);
	char *text = json_dumps(doc, JSON_INDENT(1));
	json_decref(doc);
	if (text == NULL)
		return -ENOMEM;
	size_t len = strlen(text);
	text[len] = '\n';    /* json_dumps leaves room: its NUL becomes the newline */
	int rc = afile_write_all(path, text, len + 1);
	free(text);
	return rc;
}

int slices_end_slice(struct slices *s, uint64_t now)
{
	char name[96];
	slices_slice_name(name, sizeof name, s->cfg.run, s->cfg.builder_id, s->current);
	json_t *doc = slices_json(s, "esdq-end-of-slice/1", &s->now);
	if (doc != NULL) {
		json_object_set_new(doc, "slice", json_integer(s->current));
		json_object_set_new(doc, "duration_ms",
				    json_integer((json_int_t)((now - s->slice_start_ns) / 1000000u)));
	}
	int rc = slices_write(s, name, doc);
	slices_add(&s->run, &s->now);
	slices_zero(&s->now);
	s->ended++;
	s->current++;
	s->slice_start_ns = now;
	s->events_in_slice = 0;
	return rc;
}

int slices_end_run(struct slices *s, uint64_t now)
{
	int rc = slices_end_slice(s, now);
	char name[96];
	slices_run_name(name, sizeof name, s->cfg.run, s->cfg.builder_id);
	json_t *doc = slices_json(s, "esdq-end-of-run/1", &s->run);
	if (doc != NULL)
		json_object_set_new(doc, "slices", json_integer(s->ended));
	int rc2 = slices_write(s, name, doc);
	return rc != 0 ? rc : rc2;
}

struct slices_figures slices_run(const struct slices *s)
{
	struct slices_figures f = s->run;
	slices_add(&f, &s->now);
	return f;
}

uint32_t slices_ended(const struct slices *s)
{
	return s->ended;
}
