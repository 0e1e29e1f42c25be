#include "builder/hublink.h"

#include "io/ctlclient.h"
#include "io/handshake.h"
#include "sys/log.h"

#include <errno.h>
#include <stdlib.h>

struct hublink {
	struct ctllink *ctl;
	const struct hublink_ops *ops;
	void *arg;
	uint32_t id;
	uint64_t tokens_sent;
	struct ctl_msg token;
};

static void hublink_on_ready(void *arg)
{
	struct hublink *h = arg;
	h->ops->ready(h->arg);
}

static void hublink_on_start(uint64_t start_mono_ns, void *arg)
{
	(void)start_mono_ns;
	(void)arg;
	/* START is the sources'; a builder builds whatever arrives. */
}

static void hublink_on_bye(int32_t status, void *arg)
{
	struct hublink *h = arg;
	h->ops->bye(status, h->arg);
}

static void hublink_on_stop(uint32_t source, const char *reason, void *arg)
{
	struct hublink *h = arg;
	if (source == CTL_STOP_ALL)
		h->ops->stop(reason, h->arg);
	/* A source dropped is its reader's business: its fragments just
	 * stop coming, and the core's timeouts decide its events. */
}

static void hublink_on_lost(const char *reason, void *arg)
{
	struct hublink *h = arg;
	h->ops->gone(reason, h->arg);
}

/* The builder role's messages. */
static void hublink_on_other(const struct ctl_msg *msg, void *arg)
{
	struct hublink *h = arg;
	switch (msg->type) {
	case CTL_ROUTING:
		h->ops->routing(&msg->u.routing, h->arg);
		break;
	case CTL_ASSIGN:
		h->ops->assign(&msg->u.assign, h->arg);
		break;
	case CTL_LOST:
		h->ops->lost(&msg->u.lost, h->arg);
		break;
	case CTL_CLOCK:
		h->ops->clock(&msg->u.clock, h->arg);
		break;
	default:
		log_warn("Builder %u: ignoring unexpected %s from the hub", h->id,
			 ctl_type_name(msg->type));
		break;
	}
}

static const struct ctllink_ops hublink_ctl_ops = {
	.on_ready = hublink_on_ready,
	.on_start = hublink_on_start,
	.on_bye = hublink_on_bye,
	.on_stop = hublink_on_stop,
	.on_lost = hublink_on_lost,
	.on_message = hublink_on_other,
};

struct hublink *hublink_start(struct event_base *base, const struct options *opt,
			      const struct hublink_ops *ops, void *arg)
{
	struct hublink *h = calloc(1, sizeof *h);
	if (h == NULL)
		return NULL;
	h->ops = ops;
	h->arg = arg;
	h->id = opt->builder_id;
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_BUILDER, opt->builder_id, CTL_CHANNEL_CONTROL,
			 opt->run_id, NULL, 0);
	/* The hub's event manager queues a batch per rail (core/evm). */
	hello.rails = opt->listen_count > 1 ? opt->listen_count : 1;
	h->ctl = ctllink_start(base, opt->hub_host, opt->hub_port, &hello, opt->peer_timeout_ms,
			       &hublink_ctl_ops, h);
	if (h->ctl == NULL) {
		log_error("Builder %u cannot dial its hub at %s:%u", opt->builder_id, opt->hub_host,
			  (unsigned)opt->hub_port);
		free(h);
		return NULL;
	}
	return h;
}

void hublink_free(struct hublink *h)
{
	if (h == NULL)
		return;
	ctllink_free(h->ctl);
	free(h);
}

int hublink_send_token(struct hublink *h, uint32_t slots, uint64_t decided,
		       uint64_t decided_below)
{
	h->token.type = CTL_TOKEN;
	h->token.u.token = (struct ctl_token){ .slots = slots, .decided = decided,
					       .decided_below = decided_below,
					       .sequence = h->tokens_sent };
	int rc = ctllink_send(h->ctl, &h->token);
	if (rc == 0) {
		h->tokens_sent++;
		/* Out of the process at once: a TOKEN queued here when a
		 * SIGSTOP lands would otherwise leave only after the hub gave
		 * this builder up, and the builder's fence would pass the
		 * hub's (docs/BUILDERS.md, "A given-up builder is fenced"). */
		ctllink_write_now(h->ctl);
	}
	return rc;
}

int hublink_send_stats(struct hublink *h, const struct ctl_msg *stats)
{
	return ctllink_send(h->ctl, stats);
}

int hublink_send_end(struct hublink *h, const struct ctl_msg *end)
{
	return ctllink_send(h->ctl, end);
}

uint64_t hublink_tokens_sent(const struct hublink *h)
{
	return h->tokens_sent;
}

bool hublink_hub_closed(const struct hublink *h)
{
	return ctllink_peer_closed(h->ctl);
}

bool hublink_hub_answers(struct hublink *h, const struct ctl_msg *stats, uint64_t timeout_ns)
{
	return !ctllink_peer_closed(h->ctl) && ctllink_send(h->ctl, stats) == 0 &&
	       ctllink_acked(h->ctl, timeout_ns);
}
