/* The serving hub's peers (serve_session_internal.h): the session port every
 * serving peer joins, each peer's link and last STATE, a configure's
 * arguments per peer, and the peers as /state shows them. */
#include "serve/serve_session_internal.h"

#include "options.h"
#include "hub/hub.h"
#include "io/session.h"

#include "io/msgstream.h"
#include "io/net.h"
#include "sys/log.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void serve_session_peer_name(const struct serve_peer *p, char *out, size_t len)
{
	snprintf(out, len, "%s %u", ctl_role_name(p->role), p->id);
}

static struct serve_peer *serve_find(struct serve_session *hs, enum ctl_role role, uint32_t id)
{
	for (size_t i = 0; i < hs->n_peers; i++)
		if (hs->peers[i].role == role && hs->peers[i].id == id)
			return &hs->peers[i];
	return NULL;
}

void serve_session_send(struct serve_peer *p, const struct ctl_msg *m)
{
	if (p->link != NULL && msgconn_send(p->link, m) < 0) {
		char name[48];
		serve_session_peer_name(p, name, sizeof name);
		log_warn("Cannot send %s to %s's session link", ctl_type_name(m->type), name);
	}
}

void serve_session_order_all(struct serve_session *hs, enum ctl_type type, const char *reason)
{
	struct ctl_msg m = { .type = type };
	snprintf(m.u.order.reason, sizeof m.u.order.reason, "%s", reason);
	for (size_t i = 0; i < hs->n_peers; i++)
		serve_session_send(&hs->peers[i], &m);
}

static void serve_on_link_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
				void *arg)
{
	(void)c;
	(void)rx_ns;
	struct serve_peer *p = arg;
	if (msg->type == CTL_STATE)
		p->hs->on_peer_state(p->hs, p, &msg->u.state);
	else
		log_warn("Unexpected %s on a session link; ignored", ctl_type_name(msg->type));
}

static void serve_on_link_close(struct msgconn *c, const char *reason, void *arg)
{
	struct serve_peer *p = arg;
	struct serve_session *hs = p->hs;
	char name[48];
	serve_session_peer_name(p, name, sizeof name);
	if (hs->quit)
		log_info("%s's session link closed: %s", name, reason);
	else
		log_warn("Lost %s's session link: %s", name, reason);
	msgconn_free(c);
	p->link = NULL;
	p->last = (struct ctl_state){ 0 };
	hs->session_lost++;
	hs->on_peer_left(hs, p);
}

static const struct msgconn_ops serve_link_ops = {
	.on_message = serve_on_link_message,
	.on_close = serve_on_link_close,
};

static void serve_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
			   const char *peer, void *arg)
{
	struct serve_session *hs = arg;
	if (fd < 0) {
		hs->refused++;
		return;
	}
	struct serve_peer *p = serve_find(hs, h->role, h->id);
	if (h->channel != CTL_CHANNEL_SESSION) {
		greet_reply_error(fd, peer, "wrong_channel", "%s %u greeted the hub's session port as a %s connection",
				  ctl_role_name(h->role), h->id, ctl_channel_name(h->channel));
	} else if (p == NULL) {
		greet_reply_error(fd, peer, "unknown_peer",
				  "%s %u is not a peer of this hub (%u sources, %u readers, %u builders)",
				  ctl_role_name(h->role), h->id, hs->opt->sources, hs->opt->readers,
				  hs->opt->role == ROLE_HUB ? hs->opt->builders : 0);
	} else if (p->link != NULL) {
		greet_reply_error(fd, peer, "duplicate_id", "%s %u has a session link already (pid %u on %s)",
				  ctl_role_name(h->role), h->id, p->pid, p->host);
	} else if (greet_reply_welcome(fd, 0, CTL_ROLE_BUILDER, 0) < 0) {
		close(fd);
		return;
	} else {
		p->link = msgconn_new(hs->base, fd, seal, peer, &serve_link_ops, p);
		if (p->link == NULL) {
			close(fd);
			return;
		}
		p->pid = h->pid;
		snprintf(p->host, sizeof p->host, "%s", h->host);
		p->last = (struct ctl_state){ 0 };
		p->answered = true;
		log_info("%s %u joined the session from %s (pid %u on %s)", ctl_role_title(h->role),
			 h->id, peer, h->pid, h->host);
		return;
	}
	hs->refused++;
}

static void serve_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct serve_session *hs = arg;
	greet_accept_all(&hs->door, fd, serve_on_greeted, hs);
}

bool serve_session_peers_open(struct serve_session *hs, uint16_t *session_port)
{
	const struct options *o = hs->opt;
	size_t n = (size_t)o->sources + o->readers + (o->role == ROLE_HUB ? o->builders : 0);
	hs->session_fd = -1;
	if ((hs->peers = calloc(n, sizeof *hs->peers)) == NULL)
		return false;
	for (uint32_t i = 0; i < o->sources; i++)
		hs->peers[hs->n_peers++] = (struct serve_peer){ .role = CTL_ROLE_SOURCE, .id = i, .hs = hs };
	for (uint32_t i = 0; i < o->readers; i++)
		hs->peers[hs->n_peers++] = (struct serve_peer){ .role = CTL_ROLE_READER, .id = i, .hs = hs };
	for (uint32_t i = 0; o->role == ROLE_HUB && i < o->builders; i++)
		hs->peers[hs->n_peers++] = (struct serve_peer){ .role = CTL_ROLE_BUILDER, .id = i, .hs = hs };
	greet_door_init(&hs->door, hs->base, "the hub's session port", "the hub",
			o->handshake_timeout_ms, &hs->refused);
	hs->session_fd = net_listen(o->session_listen_host, o->session_listen_port, session_port);
	if (hs->session_fd < 0)
		return false;
	hs->ev_accept = event_new(hs->base, hs->session_fd, EV_READ | EV_PERSIST, serve_on_accept, hs);
	return hs->ev_accept != NULL && event_add(hs->ev_accept, NULL) == 0;
}

void serve_session_peers_close(struct serve_session *hs)
{
	if (hs->ev_accept != NULL)
		event_free(hs->ev_accept);
	if (hs->session_fd >= 0)
		close(hs->session_fd);
	greet_door_close(&hs->door);
	for (size_t i = 0; i < hs->n_peers; i++)
		msgconn_free(hs->peers[i].link);
	free(hs->peers);
}

/* ---- what the operator's endpoint asks ------------------------------------ */

size_t serve_session_peer_count(const struct serve_session *hs) { return hs->n_peers; }

struct serve_peer_view serve_session_peer_at(const struct serve_session *hs, size_t i)
{
	const struct serve_peer *p = &hs->peers[i];
	struct serve_peer_view v = { .role = p->role, .id = p->id, .linked = p->link != NULL,
				   .pid = p->pid, .run = p->last.run, .state = p->last.state };
	snprintf(v.host, sizeof v.host, "%s", p->host);
	return v;
}

json_t *serve_session_live(const struct serve_session *hs)
{
	struct hub *hub = run_slot_object(hs->slot);
	return hub != NULL ? hub_live_json(hub) : NULL;
}

void serve_session_configure_begin(struct serve_session *hs)
{
	hs->has_hub_args = false;
	for (size_t i = 0; i < hs->n_peers; i++)
		hs->peers[i].has_args = false;
}

bool serve_session_configure_arg(struct serve_session *hs, const char *key, const char *args, char *reason,
		       size_t len)
{
	char *text = NULL;
	bool *has = NULL;
	if (strcmp(key, "hub") == 0) {
		text = hs->hub_args;
		has = &hs->has_hub_args;
	} else {
		char role[16];
		unsigned id;
		char tail;
		if (sscanf(key, "%15[a-z].%u%c", role, &id, &tail) == 2) {
			for (size_t i = 0; i < hs->n_peers; i++) {
				struct serve_peer *p = &hs->peers[i];
				if (p->id == id && strcmp(ctl_role_name(p->role), role) == 0) {
					text = p->args;
					has = &p->has_args;
				}
			}
		}
	}
	if (text == NULL) {
		snprintf(reason, len, "args: \"%s\" is neither \"hub\" nor a peer of this hub", key);
		return false;
	}
	if (strlen(args) >= CTL_MAX_ARGS_TEXT) {
		snprintf(reason, len, "args: %s's arguments are %zu bytes, more than %u", key,
			 strlen(args), CTL_MAX_ARGS_TEXT - 1);
		return false;
	}
	snprintf(text, CTL_MAX_ARGS_TEXT, "%s", args);
	*has = true;
	return true;
}

bool serve_session_missing(const struct serve_session *hs, bool args, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < hs->n_peers && used + 1 < len; i++) {
		const struct serve_peer *p = &hs->peers[i];
		if (args ? p->has_args : p->link != NULL)
			continue;
		int n = snprintf(out + used, len - used, "%s%s %u", used ? ", " : "",
				 ctl_role_name(p->role), p->id);
		used += n > 0 ? (size_t)n : 0;
	}
	return out[0] != '\0';
}
