#include "builder/fence.h"

#include "builder/breport.h"
#include "report/rundir.h"

#include "sys/afile.h"
#include "sys/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "event" of a record line (output.c writes it second, after "run"). */
static bool fence_event_of(const char *line, uint64_t *event)
{
	const char *at = strstr(line, "\"event\":");
	if (at == NULL)
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(at + 8, &end, 10);
	if (errno != 0 || end == at + 8)
		return false;
	*event = v;
	return true;
}

static int fence_cut_file(const char *dir, const char *name, uint64_t below,
			  struct fence_cut *cut)
{
	char path[AFILE_PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	*cut = (struct fence_cut){ 0 };
	FILE *in = fopen(path, "r");
	if (in == NULL)
		return errno == ENOENT ? 0 : -errno;
	struct afile f;
	int rc = afile_begin(&f, path);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while (rc == 0 && (n = getline(&line, &cap, in)) > 0) {
		uint64_t event;
		if (!fence_event_of(line, &event) || event >= below) {
			cut->removed++;
			continue;
		}
		cut->kept++;
		rc = afile_write(&f, line, (size_t)n);
	}
	if (rc == 0 && ferror(in))
		rc = -EIO;
	free(line);
	fclose(in);
	if (rc == 0)
		rc = afile_commit(&f);
	else
		afile_abort(&f);
	if (rc < 0)
		log_error("Cannot cut %s back to its fence: %s", path, strerror(-rc));
	return rc;
}

int fence_cut_records(const char *dir, uint64_t below, struct fence_cut *events,
		      struct fence_cut *expired)
{
	int rc = fence_cut_file(dir, "events.jsonl", below, events);
	int rc2 = fence_cut_file(dir, "expired.jsonl", below, expired);
	return rc < 0 ? rc : rc2;
}

void fence_apply(const struct fence_at *at, const char *what, const char *why)
{
	struct fence_cut ev = { 0 }, ex = { 0 };
	int rc = fence_cut_records(at->dir, at->below, &ev, &ex);
	log_error("Builder %u %s (%s): fenced at event %" PRIu64
		  " (its last token: %" PRIu64 " events decided); its records keep %" PRIu64
		  " events and %" PRIu64 " expired below it, %" PRIu64
		  " records past it removed and %" PRIu64 " never written; it writes nothing more for run %u",
		  at->builder, what, why, at->below, at->decided, ev.kept, ex.kept,
		  ev.removed + ex.removed, at->unwritten, at->run);
	struct breport_fence f = { .below = at->below, .decided = at->decided,
				.events_kept = ev.kept, .expired_kept = ex.kept,
				.removed = ev.removed + ex.removed, .unwritten = at->unwritten,
				.complete = rc == 0 };
	if (breport_write_fenced(at->dir, at->builder, at->run, &f) == 0)
		rundir_end(at->dir);
}
