#include "io/ctlclient.h"

#include "sys/clock.h"
#include "core/clockoffset.h"
#include "io/chronyc.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "wire/counters.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "io/probe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctllink {
	struct event_base *base;
	struct greet_dial *dial;
	struct msgconn *conn;
	const struct ctllink_ops *ops;
	void *arg;
	char what[64];
	struct ctl_hello hello;
	struct ctl_msg reply;
	struct ctl_msg report;      /* STATS at start, END with the clock groups */
	struct cks_chrony chrony;   /* this host's, as last read */
	struct prb_responder *probe; /* answers the builder's clock probes */
};

/* Reads this host's chrony state. Runs chronyc (milliseconds, at most
 * CKS_CHRONYC_TIMEOUT_MS), so only at the start and the end of a run. */
static void ctllink_read_chrony(struct ctllink *l, const char *when)
{
	int rc = cks_chrony_read(&l->chrony, cks_chrony_socket());
	const char *who = ctl_role_title(l->hello.role);

	if (rc < 0)
		log_info("%s %u: no chrony state at %s of run %u (%s); the builder reports no chrony bound for this host",
			 who, l->hello.id, when, l->hello.run_id, l->chrony.reason);
	else if (!l->chrony.synchronised)
		log_info("%s %u: chrony not synchronised at %s of run %u (leap status %s)", who,
			 l->hello.id, when, l->hello.run_id, l->chrony.leap);
	else
		log_debug("%s %u: chrony at %s of run %u: offset %.9f s, root delay %.9f s, root dispersion %.9f s",
			  who, l->hello.id, when, l->hello.run_id, l->chrony.offset_s,
			  l->chrony.root_delay_s, l->chrony.root_dispersion_s);
}

/* The builder's clock bookkeeping needs this host's chrony state and any
 * offset injected with --clock-offset-ns: a peer on the builder's host
 * shares its clock only without one (docs/CLOCKS.md). */
static void ctllink_add_clock_groups(struct ctllink *l, struct ctl_report *r)
{
	int64_t injected = clk_offset_ns();
	/* Fault injection: a clock off by --clock-offset-ns that the daemon
	 * does not own up to, as a host steered by chrony to a wrong reference
	 * would be (docs/CLOCKS.md); the builder's chrony interval is then
	 * wrong and its in-band one right. */
	const char *undeclared = getenv(CTLLINK_UNDECLARED_OFFSET_ENV);
	if (undeclared != NULL && strcmp(undeclared, "1") == 0)
		injected = 0;
	struct ctl_group *g = ctl_report_group(r, CNT_GROUP_CLOCK);
	bool ok = ctl_group_set(g, CNT_CLOCK(injected_offset_ns),
				injected < 0 ? 0 - (uint64_t)injected : (uint64_t)injected) &&
		  ctl_group_set(g, CNT_CLOCK(injected_offset_negative), injected < 0);

	if (!ok || !cks_chrony_encode(&l->chrony, clk_monotonic_ns(),
				      ctl_report_group(r, CKS_CHRONY_GROUP)))
		log_warn("%s %u: no room for the clock groups in its report; the builder will not know this host's clock state",
			 ctl_role_title(l->hello.role), l->hello.id);
}

static void ctllink_on_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
			       void *arg)
{
	(void)c;
	struct ctllink *l = arg;
	switch (msg->type) {
	case CTL_PING:
		l->reply.type = CTL_PONG;
		l->reply.u.pong.sequence = msg->u.ping.sequence;
		l->reply.u.pong.t1_ns = msg->u.ping.t1_ns;
		l->reply.u.pong.t2_ns = rx_ns;
		l->reply.u.pong.t3_ns = clk_realtime_ns();
		msgconn_send(l->conn, &l->reply);
		break;
	case CTL_CREDIT:
		if (l->ops->on_credit != NULL)
			l->ops->on_credit(msg->u.credit.limit, l->arg);
		break;
	case CTL_BYE:
		l->ops->on_bye(msg->u.bye.status, l->arg);
		break;
	case CTL_STOP:
		if (msg->u.stop.last_event != CTL_STOP_NOW && l->ops->on_drain != NULL)
			l->ops->on_drain(msg->u.stop.last_event, msg->u.stop.confirm, msg->u.stop.reason,
					 l->arg);
		else if (l->ops->on_stop != NULL)
			l->ops->on_stop(msg->u.stop.source, msg->u.stop.reason, l->arg);
		break;
	case CTL_START:
		if (l->ops->on_start != NULL) {
			uint64_t mono = clk_monotonic_ns(), real = clk_realtime_true_ns();
			uint64_t at = msg->u.start.at_realtime_ns;
			/* The absolute start unless our clock is too far off the
			 * builder's for it to make sense (more than 10 s). */
			uint64_t start = mono + msg->u.start.delay_ns;
			if (at != 0 && at + 10000000000u > real && at < real + 10000000000u)
				start = at >= real ? mono + (at - real) : mono - (real - at);
			l->ops->on_start(start, l->arg);
		}
		break;
	case CTL_ERROR:
		log_error("builder reports: %s (%s)", msg->u.error.reason, msg->u.error.code);
		break;
	default:
		if (l->ops->on_message != NULL)
			l->ops->on_message(msg, l->arg);
		else
			log_warn("Ignoring unexpected %s from the builder", ctl_type_name(msg->type));
		break;
	}
}

static void ctllink_on_close(struct msgconn *c, const char *reason, void *arg)
{
	struct ctllink *l = arg;
	msgconn_free(c);
	l->conn = NULL;
	l->ops->on_lost(reason, l->arg);
}

static const struct msgconn_ops ctllink_conn_ops = {
	.on_message = ctllink_on_message,
	.on_close = ctllink_on_close,
};

static void ctllink_on_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
			       void *arg)
{
	struct ctllink *l = arg;
	l->dial = NULL;
	if (fd < 0) {
		char why[CTL_MAX_TEXT + 64];
		snprintf(why, sizeof why, "%s (%s)", reply->u.error.reason, reply->u.error.code);
		l->ops->on_lost(why, l->arg);
		return;
	}
	/* The probe socket sits on the control connection's local address,
	 * which reaches the builder; without one the builder probes over the
	 * control connection (docs/CLOCKS.md). */
	prb_responder_free(l->probe);
	l->probe = prb_responder_start(l->base, fd, l->what);
	l->conn = msgconn_new(l->base, fd, seal, l->what, &ctllink_conn_ops, l);
	/* First message: the clock state read at start, before any data, and
	 * where to send clock probes. */
	memset(&l->report, 0, sizeof l->report);
	l->report.type = CTL_STATS;
	ctllink_add_clock_groups(l, &l->report.u.report);
	if (l->probe != NULL) {
		struct ctl_group *g = ctl_report_group(&l->report.u.report, CNT_GROUP_PROBE);
		if (!ctl_group_set(g, CNT_PROBE(udp_port), prb_responder_port(l->probe)) ||
		    !ctl_group_set(g, CNT_PROBE(token), prb_responder_token(l->probe)))
			log_warn("%s %u: no room for the probe group in its report; clock probes go over the control connection",
				 ctl_role_title(l->hello.role), l->hello.id);
	}
	if (l->conn != NULL)
		msgconn_send(l->conn, &l->report);
	l->ops->on_ready(l->arg);
}

struct ctllink *ctllink_start(struct event_base *base, const char *host, uint16_t port,
			      const struct ctl_hello *hello, uint64_t connect_timeout_ms,
			      const struct ctllink_ops *ops, void *arg)
{
	struct ctllink *l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->base = base;
	l->ops = ops;
	l->arg = arg;
	l->hello = *hello;
	l->hello.channel = CTL_CHANNEL_CONTROL;
	snprintf(l->what, sizeof l->what, "builder control %s:%u", host, (unsigned)port);
	ctllink_read_chrony(l, "start");
	l->dial = greet_dial_start(base, "the builder's control port", host, port, false, &l->hello, connect_timeout_ms,
				   0, ctllink_on_greeted, l);
	if (l->dial == NULL) {
		free(l);
		return NULL;
	}
	return l;
}

int ctllink_send(struct ctllink *l, const struct ctl_msg *msg)
{
	if (l->conn == NULL)
		return -ENOTCONN;
	if (msg->type != CTL_END)
		return msgconn_send(l->conn, msg);
	/* The END carries the host's chrony state at the end of the run. */
	ctllink_read_chrony(l, "end");
	if (msg != &l->report)
		l->report = *msg;
	ctllink_add_clock_groups(l, &l->report.u.report);
	return msgconn_send(l->conn, &l->report);
}

void ctllink_free(struct ctllink *l)
{
	if (l == NULL)
		return;
	greet_dial_cancel(l->dial);
	msgconn_free(l->conn);
	prb_responder_free(l->probe);
	free(l);
}

bool ctllink_peer_closed(const struct ctllink *l)
{
	return l != NULL && l->conn != NULL && net_peer_closed(msgconn_fd(l->conn));
}

bool ctllink_acked(struct ctllink *l, uint64_t timeout_ns)
{
	return l != NULL && l->conn != NULL && msgconn_write_now(l->conn) == 0 &&
	       net_sent_acked(msgconn_fd(l->conn), timeout_ns);
}

int ctllink_write_now(struct ctllink *l)
{
	return l->conn != NULL ? msgconn_write_now(l->conn) : -ENOTCONN;
}
