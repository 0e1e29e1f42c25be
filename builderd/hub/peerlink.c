#include "hub/peerlink.h"
#include "wire/counters.h"

#include "clock/clocks.h"
#include "hub/dataview.h"

#include "core/acct.h"
#include "io/msgstream.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "wire/control.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* A peer's connection's callbacks' context. */
struct peerlink_slot {
	struct peerlink *link;
	struct peer *peer;
};

struct peerlink {
	struct event_base *base;
	struct peer_table *peers;
	const struct dataview *data;
	struct clocks *clocks;
	struct peerlink_hooks hooks;
	struct peerlink_slot *slots;   /* [peer_count] */
};

static void peerlink_error(struct peerlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void peerlink_error(struct peerlink *l, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	l->hooks.error(l->hooks.ctx, text);
}

/* A reader gave up one of its sources: no complete frame on its data
 * connection for the reader's inactivity limit (stuck inside a frame, or a
 * data path that stopped delivering), though the source may still answer on
 * its control link. It is lost like a dead one: named, its reader's books
 * close without it, and what it generated beyond what the builder got is
 * counted as lost with it. */
static void peerlink_on_source_given_up(struct peerlink *l, struct peer *reader, uint32_t source)
{
	if (source >= l->peers->sources ||
	    dataview_reader_of_source(l->data, (uint16_t)source) != (int32_t)reader->id) {
		log_warn("Reader %u gave up source %" PRIu32 ", which it does not serve; ignored",
			 reader->id, source);
		return;
	}
	struct peer *p = peer_source(l->peers, source);
	if (p->reported || p->lost)
		return;
	p->stuck = true;
	char why[200];
	snprintf(why, sizeof why,
		 "was given up by reader %u: its data connection delivered no complete frame within the reader's inactivity limit%s",
		 reader->id, p->conn != NULL ? " while its control link was alive" : "");
	peerlink_gone(l, p, why);
}

/* A reader stopped the run for a fault it found (its STOP for every
 * source, the fault as reason): it forwards nothing more, so it is given
 * up at once, named with the fault, what it held counted lost with it,
 * and the hub ends the run rather than wait for its frames. */
static void peerlink_on_reader_fault(struct peerlink *l, struct peer *reader, const char *reason)
{
	if (reader->reported || reader->lost)
		return;
	reader->refused = true;
	char why[CTL_MAX_TEXT + 32];
	snprintf(why, sizeof why, "stopped the run: it %s", reason);
	peerlink_gone(l, reader, why);
	if (l->hooks.fault != NULL)
		l->hooks.fault(l->hooks.ctx, reader);
}

/* A builder's STATS: how it is doing, for the hub's live views. */
static void peerlink_builder_stats(struct peer *p, const struct ctl_report *r)
{
	bool found;
	uint64_t complete = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(events_complete), &found);
	if (!found)
		return;   /* its first STATS: the clock groups only */
	p->live.seen = true;
	p->live.events_complete = complete;
	p->live.events_expired = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(events_expired), NULL);
	p->live.events_accepted =
		acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_CORE(events_accepted), NULL);
	p->live.tokens_sent = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_ROLE(tokens_sent), NULL);
	p->live.events_in_flight =
		acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_STATS(events_in_flight), NULL);
	p->live.events_per_s =
		acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_STATS(events_complete_per_s), NULL);
	p->live.recording = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_recording), NULL) != 0;
	p->live.data_files = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_files), NULL);
	p->live.data_bytes_written =
		acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_bytes_written), NULL);
	p->live.data_write_ns = acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER(data_write_ns), NULL);
	p->live.data_free_bytes =
		acct_value(r, CNT_GROUP_TOTALS, CNT_BUILDER_STATS(data_free_bytes), NULL);
}

/* A reader's STATS: its holds and the frames it verified. */
static void peerlink_reader_stats(struct peer *p, const struct ctl_report *r)
{
	p->held_ns = acct_value(r, CNT_GROUP_TOTALS, CNT_READER_SOURCE(held_ns), NULL);
	p->held_count = acct_value(r, CNT_GROUP_TOTALS, CNT_READER_SOURCE(held_count), NULL);
	p->verified = acct_value(r, CNT_GROUP_TOTALS, CNT_READER_SOURCE(frames_verified), NULL);
}

/* A source's STATS: where it is in its run. */
static void peerlink_source_stats(struct peer *p, const struct ctl_report *r)
{
	bool found;
	uint64_t positions =
		acct_value(r, CNT_GROUP_TOTALS, CNT_SOURCE_STATS(send_positions), &found);
	if (!found)
		return;   /* its first STATS: the clock groups only */
	p->sent.seen = true;
	p->sent.run_second = acct_value(r, CNT_GROUP_TOTALS, CNT_SOURCE_STATS(run_second), NULL);
	p->sent.send_positions = positions;
	p->sent.last_event_sent =
		acct_value(r, CNT_GROUP_TOTALS, CNT_SOURCE_STATS(last_event_sent), NULL);
}

static void peerlink_on_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
			     void *arg)
{
	(void)c;
	struct peerlink_slot *slot = arg;
	struct peerlink *l = slot->link;
	struct peer *p = slot->peer;
	p->last_heard_ns = clk_monotonic_ns();
	switch (msg->type) {
	case CTL_END:
		/* Only data and final reports are progress: clock answers keep
		 * coming from a peer that is stuck. */
		l->hooks.progress(l->hooks.ctx, clk_monotonic_ns());
		clocks_on_report(l->clocks, p, &msg->u.report, true);
		if (p->report == NULL)
			p->report = malloc(sizeof *p->report);
		if (p->report != NULL)
			*p->report = msg->u.report;
		p->reported = true;
		l->hooks.reported(l->hooks.ctx, p, msg->u.report.status);
		break;
	case CTL_STATS:
		clocks_on_report(l->clocks, p, &msg->u.report, false);
		if (p->role == CTL_ROLE_READER)
			peerlink_reader_stats(p, &msg->u.report);
		else if (p->role == CTL_ROLE_BUILDER)
			peerlink_builder_stats(p, &msg->u.report);
		else
			peerlink_source_stats(p, &msg->u.report);
		break;
	case CTL_PONG:
		clocks_on_pong(l->clocks, p, &msg->u.pong, rx_ns);
		break;
	case CTL_STOP:
		if (p->role == CTL_ROLE_READER && msg->u.stop.source == CTL_STOP_ALL) {
			peerlink_on_reader_fault(l, p, msg->u.stop.reason);
			break;
		}
		if (p->role == CTL_ROLE_READER) {
			peerlink_on_source_given_up(l, p, msg->u.stop.source);
			break;
		}
		/* A source's answer to the drained stop's proposal: the hub's. */
		if (p->role == CTL_ROLE_SOURCE && l->hooks.message != NULL &&
		    l->hooks.message(l->hooks.ctx, p, msg))
			break;
		log_warn("Ignoring a stop message from %s %u", ctl_role_name(p->role), p->id);
		break;
	default:
		if (l->hooks.message != NULL && l->hooks.message(l->hooks.ctx, p, msg))
			break;
		log_warn("Ignoring a %s message from %s %u", ctl_type_name(msg->type),
			 ctl_role_name(p->role), p->id);
		break;
	}
}

static void peerlink_on_close(struct msgconn *c, const char *reason, void *arg)
{
	struct peerlink_slot *slot = arg;
	struct peerlink *l = slot->link;
	struct peer *p = slot->peer;
	msgconn_free(c);
	p->conn = NULL;
	if (!l->hooks.running(l->hooks.ctx)) {
		l->hooks.closed(l->hooks.ctx);
		return;
	}
	if (!p->reported) {
		char why[CTL_MAX_TEXT + 64];
		snprintf(why, sizeof why, "lost its control connection before reporting (%s)", reason);
		peerlink_gone(l, p, why);
	}
}

static const struct msgconn_ops peerlink_ops = {
	.on_message = peerlink_on_message,
	.on_close = peerlink_on_close,
};

/* Tells the peers that depend on p that it is gone: a reader's sources
 * stop, a source's reader drops it. A reader's data connection is cut
 * where it would not end by itself. */
static void peerlink_tell_dependents(struct peerlink *l, struct peer *p)
{
	struct ctl_msg stop = { .type = CTL_STOP, .u.stop.last_event = CTL_STOP_NOW };
	snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason, "%s %u %s", ctl_role_name(p->role),
		 p->id, p->stalled ? "stalled" : p->stuck ? "is stuck" :
		 p->refused ? "stopped the run for a fault" : "is gone");
	if (p->role == CTL_ROLE_READER) {
		enum ingest_data_state st = dataview_reader_state(l->data, p->id);
		/* A dead reader's data connection ends by itself, and its
		 * transport says how; a stalled one's must be cut here. */
		if (st == INGEST_DATA_WAITING || ((p->stalled || p->stuck) && st == INGEST_DATA_STREAMING))
			dataview_cut(l->data, p->id);
		stop.u.stop.source = CTL_STOP_ALL;
		for (uint16_t s = 0; s < l->peers->sources; s++)
			if (dataview_reader_of_source(l->data, s) == (int32_t)p->id && peer_source(l->peers, s)->conn != NULL)
				msgconn_send(peer_source(l->peers, s)->conn, &stop);
	} else if (p->role == CTL_ROLE_SOURCE) {
		int32_t r = dataview_reader_of_source(l->data, (uint16_t)p->id);
		stop.u.stop.source = p->id;
		if (r >= 0 && peer_reader(l->peers, r)->conn != NULL)
			msgconn_send(peer_reader(l->peers, r)->conn, &stop);
	}
}

/* A peer died or stalled before its final report. What it held is counted
 * as lost with it (metrics.json, equations), the peers that depend on it are
 * told to stop or to drop it so the run can still end, and nothing waits for
 * it any more. */
void peerlink_gone(struct peerlink *l, struct peer *p, const char *why)
{
	if (p->lost || p->reported)
		return;
	p->lost = true;
	peerlink_error(l, "%s %u (%s, pid %u on %s) %s; what it held is counted as lost with it",
		    ctl_role_title(p->role), p->id, p->address, p->pid, p->host, why);
	if (p->conn != NULL) {
		msgconn_free(p->conn);
		p->conn = NULL;
	}
	peerlink_tell_dependents(l, p);
	l->hooks.lost(l->hooks.ctx, p);
}

void peerlink_attach(struct peerlink *l, struct peer *p, int fd, const struct msgseal *seal,
		  const char *peer)
{
	p->conn = msgconn_new(l->base, fd, seal, peer, &peerlink_ops, &l->slots[peer_index(l->peers, p)]);
}

struct peerlink *peerlink_create(const struct peerlink_config *cfg)
{
	struct peerlink *l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->base = cfg->base;
	l->peers = cfg->peers;
	l->data = cfg->data;
	l->clocks = cfg->clocks;
	l->hooks = cfg->hooks;
	l->slots = calloc(peer_count(cfg->peers) + 1, sizeof *l->slots);
	if (l->slots == NULL) {
		free(l);
		return NULL;
	}
	for (uint32_t i = 0; i < peer_count(cfg->peers); i++)
		l->slots[i] = (struct peerlink_slot){ l, peer_at(cfg->peers, i) };
	return l;
}

void peerlink_destroy(struct peerlink *l)
{
	if (l == NULL)
		return;
	for (uint32_t i = 0; i < peer_count(l->peers); i++) {
		struct peer *p = peer_at(l->peers, i);
		msgconn_free(p->conn);
		p->conn = NULL;
	}
	free(l->slots);
	free(l);
}
