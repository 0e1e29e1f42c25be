#include "hub/ctlport.h"

#include "snapshot.h"

#include "io/handshake.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "wire/control.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct ctlport {
	const struct options *opt;
	struct peer_table *peers;
	struct ctlport_hooks hooks;
	int fd;
	struct event *ev_accept;
	struct greet_door door;
	uint64_t refused;          /* connections refused at the greeting */
};

/* Common checks of every HELLO; false after refusing it. */
static bool ctlport_check_hello(struct ctlport *c, int fd, const struct ctl_hello *h,
				const char *peer, enum ctl_channel channel)
{
	const struct options *opt = c->opt;
	/* The protocol version is checked with the greeting (common/io/handshake.c),
	 * by every listener alike. */
	if (h->run_id != opt->run_id) {
		greet_reply_error(fd, peer, "wrong_run", "%s %u is in run %u but the builder is in run %u",
				  ctl_role_name(h->role), h->id, h->run_id, opt->run_id);
	} else if (h->channel != channel) {
		greet_reply_error(fd, peer, "wrong_channel", "%s %u greeted the %s port as a %s connection",
				  ctl_role_name(h->role), h->id,
				  ctl_channel_name(channel), ctl_channel_name(h->channel));
	} else if (!c->hooks.running(c->hooks.ctx)) {
		greet_reply_error(fd, peer, "run_over", "run %u is over", opt->run_id);
	} else if (h->role == CTL_ROLE_BUILDER && opt->role != ROLE_HUB) {
		/* A --role both builderd is the one builder of its run. */
		greet_reply_error(fd, peer, "unknown_peer",
				  "builder %u greeted the builder of run %u, which builds the run itself (--role %s); builders connect to a --role hub",
				  h->id, opt->run_id, options_role_names[opt->role]);
	} else if (peer_find(c->peers, h->role, h->id) == NULL) {
		char builders[48] = "";
		if (opt->role == ROLE_HUB)
			snprintf(builders, sizeof builders, ", %u builders", opt->builders);
		greet_reply_error(fd, peer, "unknown_peer",
				  "%s %u is not part of run %u (%u sources, %u readers%s)",
				  ctl_role_name(h->role), h->id, opt->run_id, opt->sources,
				  opt->readers, builders);
	} else {
		return true;
	}
	c->refused++;
	return false;
}

static void ctlport_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
			       const char *peer, void *arg)
{
	struct ctlport *c = arg;
	if (fd < 0) {
		c->refused++;
		return;
	}
	if (!ctlport_check_hello(c, fd, h, peer, CTL_CHANNEL_CONTROL))
		return;
	struct peer *p = peer_find(c->peers, h->role, h->id);
	if (p->connected && p->conn != NULL) {
		greet_reply_error(fd, peer, "duplicate_id", "%s %u is already connected from %s (pid %u)",
				  ctl_role_name(h->role), h->id, p->address, p->pid);
		c->refused++;
		return;
	}
	if (p->connected) {
		/* Its share of the run is booked (reported, or counted lost):
		 * a second one would be counted twice. */
		greet_reply_error(fd, peer, "peer_left",
				  "%s %u was connected from %s (pid %u) and left run %u %s; it cannot rejoin",
				  ctl_role_name(h->role), h->id, p->address, p->pid, c->opt->run_id,
				  p->reported ? "after its final report" : "before it, counted as lost");
		c->refused++;
		return;
	}
	if (greet_reply_welcome(fd, c->opt->run_id, CTL_ROLE_BUILDER, 0) < 0) {
		close(fd);
		return;
	}
	p->connected = true;
	p->pid = h->pid;
	p->rails = h->rails;
	snprintf(p->host, sizeof p->host, "%s", h->host);
	snprintf(p->address, sizeof p->address, "%s", peer);
	net_tune(fd, 0);
	c->hooks.joined(c->hooks.ctx, p, fd, h, seal, peer);
}

static void ctlport_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct ctlport *c = arg;
	greet_accept_all(&c->door, fd, ctlport_on_greeted, c);
}

struct ctlport *ctlport_open(struct event_base *base, const struct options *opt,
			     struct peer_table *peers, const struct ctlport_hooks *hooks,
			     uint16_t *port)
{
	struct ctlport *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->opt = opt;
	c->peers = peers;
	c->hooks = *hooks;
	greet_door_init(&c->door, base, "the builder's control port", "the builder",
			opt->handshake_timeout_ms, &c->refused);
	c->fd = net_listen(opt->control_host, opt->control_port, port);
	if (c->fd < 0)
		goto fail;
	c->ev_accept = event_new(base, c->fd, EV_READ | EV_PERSIST, ctlport_on_accept, c);
	if (c->ev_accept == NULL || event_add(c->ev_accept, NULL) < 0)
		goto fail;
	return c;
fail:
	ctlport_close(c);
	return NULL;
}

void ctlport_close(struct ctlport *c)
{
	if (c == NULL)
		return;
	if (c->ev_accept != NULL)
		event_free(c->ev_accept);
	if (c->fd >= 0)
		close(c->fd);
	greet_door_close(&c->door);
	free(c);
}

void ctlport_snapshot(const struct ctlport *c, struct snapshot *s)
{
	if (c == NULL)
		return;
	s->refused_connections = c->refused;
	s->control_refused = msgconn_refused_total();
	s->greetings_busy = c->door.busy;
	s->greetings_evicted = c->door.evicted;
	s->greetings_timed_out = c->door.timed_out;
}
