#include "hub/watchdog.h"

#include "hub/dataview.h"

#include "sys/log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static void watchdog_error(const struct watchdog *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void watchdog_error(const struct watchdog *w, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	w->hooks.error(w->hooks.ctx, text);
}

/* The no-progress watchdog fired. Ending at once would leave the healthy
 * peers' final counters out and fail their books, so: every source that has
 * not ended is named stuck and given up (its reader is told to drop it and
 * can then report), every reader still to report is asked to stop and
 * report, and the run ends once they have, or after --stall-timeout-ms,
 * when whoever still has not is given up by name too. */
void watchdog_wind_up(const struct watchdog *w, uint64_t now, uint64_t last_progress_ns)
{
	log_warn("Run %u: no progress for %" PRIu64 " ms; giving up the sources that have not ended and asking the readers for their final counters",
		 w->opt->run_id, (now - last_progress_ns) / 1000000u);
	uint64_t stall_ns = w->opt->stall_timeout_ms * 1000000u;
	/* A reader that verified frames the builder never received has a data
	 * path to the builder that stopped delivering: it is the stuck one,
	 * and its sources, held up behind it, are told to stop and report. */
	for (uint32_t r = 0; r < w->opt->readers && w->hooks.running(w->hooks.ctx); r++) {
		struct peer *p = peer_reader(w->peers, r);
		uint64_t received = dataview_reader_frames(w->data, r);
		if (!p->connected || p->reported || p->lost ||
		    dataview_reader_state(w->data, r) != INGEST_DATA_STREAMING || p->verified <= received)
			continue;
		p->stuck = true;
		char why[200];
		snprintf(why, sizeof why,
			 "is stuck: its data path to the builder stopped delivering (it verified %" PRIu64 " frames, the builder received %" PRIu64 ")",
			 p->verified, received);
		w->hooks.gone(w->hooks.ctx, p, why);
	}
	for (uint16_t s = 0; s < w->opt->sources && w->hooks.running(w->hooks.ctx); s++) {
		struct peer *p = peer_source(w->peers, s);
		int32_t r = dataview_reader_of_source(w->data, s);
		if (!p->connected || p->reported || p->lost)
			continue;
		if (r >= 0 && peer_reader(w->peers, r)->stuck)
			continue;   /* told to stop by peerlink_gone(); waited for below */
		p->stuck = true;
		char why[200];
		snprintf(why, sizeof why,
			 "is stuck: no final counters after %" PRIu64 " ms without progress, though its control link %s",
			 w->opt->peer_timeout_ms,
			 p->conn != NULL && now - p->last_heard_ns <= stall_ns ? "still answers" : "is silent");
		w->hooks.gone(w->hooks.ctx, p, why);
	}
	struct ctl_msg stop = { .type = CTL_STOP };
	stop.u.stop.source = CTL_STOP_ALL;
	stop.u.stop.last_event = CTL_STOP_NOW;
	snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason,
		 "the run made no progress for %" PRIu64 " ms; send your final counters",
		 w->opt->peer_timeout_ms);
	for (uint32_t r = 0; r < w->opt->readers && w->hooks.running(w->hooks.ctx); r++) {
		struct peer *p = peer_reader(w->peers, r);
		if (p->conn != NULL && !p->reported && !p->lost)
			w->hooks.send(w->hooks.ctx, p, &stop);
	}
}

/* The watchdog's wait is over: whoever has still not reported is stuck. */
void watchdog_wind_up_over(const struct watchdog *w)
{
	for (uint32_t i = 0; i < peer_count(w->peers) && w->hooks.running(w->hooks.ctx);
	     i++) {
		struct peer *p = peer_at(w->peers, i);
		if (!p->connected || p->reported || p->lost)
			continue;
		p->stuck = true;
		char why[160];
		snprintf(why, sizeof why,
			 "is stuck: no final counters within %" PRIu64 " ms of the builder asking for them",
			 w->opt->stall_timeout_ms);
		w->hooks.gone(w->hooks.ctx, p, why);
	}
}

/* From the tick: a peer that has not said anything (clock answers come
 * every 200 ms) for the stall timeout is stopped, SIGSTOP-style, or hung. */
void watchdog_check_stalls(const struct watchdog *w, uint64_t now)
{
	uint64_t limit = w->opt->stall_timeout_ms * 1000000u;
	for (uint32_t i = 0; i < peer_count(w->peers); i++) {
		struct peer *p = peer_at(w->peers, i);
		if (p->conn == NULL || p->reported || p->lost || now - p->last_heard_ns <= limit)
			continue;
		p->stalled = true;
		char why[96];
		snprintf(why, sizeof why, "stalled: no answer for %" PRIu64 " ms",
			 (now - p->last_heard_ns) / 1000000u);
		w->hooks.gone(w->hooks.ctx, p, why);
	}
}

/* Names every peer that has not done its part. */
void watchdog_report_missing(const struct watchdog *w, bool never_connected_only)
{
	for (uint16_t s = 0; s < w->opt->sources; s++) {
		struct peer *p = peer_source(w->peers, s);
		if (!p->connected)
			watchdog_error(w, "Source %u never connected to the builder's control port", s);
		else if (!never_connected_only && !p->reported && !p->lost)
			watchdog_error(w, "Source %u (pid %u on %s) never ended: no final counters after %" PRIu64 " ms without progress",
				 s, p->pid, p->host, w->opt->peer_timeout_ms);
	}
	for (uint32_t r = 0; r < w->opt->readers; r++) {
		struct peer *p = peer_reader(w->peers, r);
		enum ingest_data_state st = dataview_reader_state(w->data, r);
		if (!p->connected)
			watchdog_error(w, "Reader %u never connected to the builder's control port", r);
		else if (!never_connected_only && !p->reported && !p->lost)
			watchdog_error(w, "Reader %u (pid %u on %s) never ended: no final counters after %" PRIu64 " ms without progress",
				 r, p->pid, p->host, w->opt->peer_timeout_ms);
		/* A hub sees no data path: its readers' go to the builders. */
		if (st == INGEST_DATA_WAITING && w->peers->builders == 0)
			watchdog_error(w, "Reader %u never opened its data connection", r);
		else if (!never_connected_only && st == INGEST_DATA_STREAMING)
			watchdog_error(w, "Reader %u never closed its data stream", r);
	}
	for (uint32_t k = 0; k < w->peers->builders; k++) {
		struct peer *p = peer_builder(w->peers, k);
		if (!p->connected)
			watchdog_error(w, "Builder %u never connected to the hub's control port", k);
		else if (!never_connected_only && !p->reported && !p->lost)
			watchdog_error(w, "Builder %u (pid %u on %s) never ended: no final counters after %" PRIu64 " ms without progress",
				 k, p->pid, p->host, w->opt->peer_timeout_ms);
	}
}
