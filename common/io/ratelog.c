#include "io/ratelog.h"

#include "sys/clock.h"
#include "sys/log.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define RATELOG_WINDOW_NS 1000000000u

static void ratelog_flush(struct ratelog *r)
{
	if (r->suppressed == 0)
		return;
	log_warn("%s: %" PRIu64 " more in the last second, not logged one by one (every one is "
		 "counted in %s)", r->what, r->suppressed, r->counted_in);
	r->suppressed = 0;
}

static void ratelog_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ratelog_flush(arg);
}

void ratelog_init(struct ratelog *r, struct event_base *base, const char *what,
		  const char *counted_in)
{
	memset(r, 0, sizeof *r);
	snprintf(r->what, sizeof r->what, "%s", what);
	snprintf(r->counted_in, sizeof r->counted_in, "%s", counted_in);
	r->ev_summary = evtimer_new(base, ratelog_on_timer, r);
}

void ratelog_warn(struct ratelog *r, const char *fmt, ...)
{
	uint64_t now = clk_monotonic_ns();
	if (now - r->window_ns >= RATELOG_WINDOW_NS) {
		ratelog_flush(r);
		r->window_ns = now;
		r->lines = 0;
	}
	if (r->lines < RATELOG_PER_SECOND) {
		char line[1024];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(line, sizeof line, fmt, ap);
		va_end(ap);
		r->lines++;
		log_warn("%s", line);
		return;
	}
	r->suppressed++;
	r->suppressed_total++;
	if (r->ev_summary != NULL && !evtimer_pending(r->ev_summary, NULL)) {
		uint64_t left = r->window_ns + RATELOG_WINDOW_NS - now;
		struct timeval tv = { .tv_sec = (time_t)(left / 1000000000u),
				      .tv_usec = (suseconds_t)(left % 1000000000u) / 1000 };
		evtimer_add(r->ev_summary, &tv);
	}
}

void ratelog_close(struct ratelog *r)
{
	ratelog_flush(r);
	if (r->ev_summary != NULL)
		event_free(r->ev_summary);
	r->ev_summary = NULL;
}
