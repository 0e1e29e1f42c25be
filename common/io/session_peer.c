/* A peer serving many runs (io/session.h, docs/RUNCONTROL.md): the session
 * link to its hub, greeted once and kept; a run object made at each
 * configure and ended when its run is over, each transition answered with
 * a STATE; reset, shutdown, the hub's loss and signals end what runs. */
#include "io/session.h"

#include "io/handshake.h"
#include "io/msgstream.h"
#include "io/net.h"
#include "sys/log.h"
#include "sys/notify.h"

#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#define SESSION_DIAL_TIMEOUT_MS 10000u
/* Time for a last STATE to be written before the process exits. */
#define SESSION_LINGER_US 100000

struct peer_session {
	struct event_base *base;
	const struct daemon_def *def;
	struct run_slot *slot;
	struct greet_dial *dial;
	struct msgconn *link;
	bool quit;
	int exit_status;
	int32_t last_status;
	uint32_t ignore_configure;      /* --session-ignore-configure: its run, 0: none */
	char args[CTL_MAX_ARGS_TEXT];
};

static void session_send_state(struct peer_session *ps, bool accepted, const char *reason)
{
	if (ps->link == NULL)
		return;
	struct ctl_msg m = { .type = CTL_STATE };
	uint32_t run = run_slot_run(ps->slot);
	m.u.state = (struct ctl_state){
		.run = run, .accepted = accepted, .status = ps->last_status,
		.state = run != 0 ? CTL_SESSION_CONFIGURED : CTL_SESSION_IDLE,
	};
	snprintf(m.u.state.reason, sizeof m.u.state.reason, "%s", reason);
	if (msgconn_send(ps->link, &m) < 0)
		log_warn("Cannot send the hub our state (%s)", reason);
}

/* Ends the process once what runs has ended. */
static void session_quit(struct peer_session *ps, int status, const char *why)
{
	if (!ps->quit)
		notify_stopping();
	ps->quit = true;
	ps->exit_status = status;
	if (run_slot_object(ps->slot) != NULL) {
		run_slot_stop(ps->slot, why);
		return;                 /* the run object exits the loop when it is done */
	}
	const struct timeval linger = { 0, SESSION_LINGER_US };
	event_base_loopexit(ps->base, &linger);
}

static void session_configure(struct peer_session *ps, const struct ctl_configure *c)
{
	char *args[256], err[CTL_MAX_TEXT];
	snprintf(ps->args, sizeof ps->args, "%s", c->args);
	int n = session_split_args(ps->args, args, 256);
	if (n < 0) {
		session_send_state(ps, false, "more than 256 arguments");
		return;
	}
	net_kept_rewind();
	if (!run_slot_configure(ps->slot, c->run, n, args, err, sizeof err)) {
		log_warn("Configure of run %u refused: %s", c->run, err);
		session_send_state(ps, false, err);
		return;
	}
	log_info("Configured for run %u", c->run);
	notify_status("configured for run %u", c->run);
	if (c->run == ps->ignore_configure) {
		log_warn("Test hook: the configure of run %u is not answered", c->run);
		return;
	}
	session_send_state(ps, true, "");
}

static void session_on_message(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_ns,
			       void *arg)
{
	(void)c;
	(void)rx_ns;
	struct peer_session *ps = arg;
	switch (msg->type) {
	case CTL_CONFIGURE:
		session_configure(ps, &msg->u.configure);
		break;
	case CTL_RESET:
		log_info("Reset by the hub: %s", msg->u.order.reason);
		run_slot_stop(ps->slot, msg->u.order.reason);
		if (run_slot_object(ps->slot) == NULL)
			notify_status("idle");  /* else once the run object has ended */
		session_send_state(ps, true, "");
		break;
	case CTL_SHUTDOWN:
		log_info("Shut down by the hub: %s", msg->u.order.reason);
		session_send_state(ps, true, "shutting down");
		session_quit(ps, 0, msg->u.order.reason);
		break;
	default:
		log_warn("Unexpected %s on the session link; ignored", ctl_type_name(msg->type));
		break;
	}
}

static void session_on_close(struct msgconn *c, const char *reason, void *arg)
{
	struct peer_session *ps = arg;
	log_error("Lost the hub's session link: %s", reason);
	msgconn_free(c);
	ps->link = NULL;
	session_quit(ps, 1, "the hub is gone");
}

static const struct msgconn_ops session_link_ops = {
	.on_message = session_on_message,
	.on_close = session_on_close,
};

static void session_on_dialed(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
			      void *arg)
{
	struct peer_session *ps = arg;
	ps->dial = NULL;
	if (fd < 0) {
		log_error("Cannot join the hub's session: %s", reply != NULL &&
			  reply->type == CTL_ERROR ? reply->u.error.reason : "unreachable");
		session_quit(ps, 1, "no hub");
		return;
	}
	ps->link = msgconn_new(ps->base, fd, seal, "the hub's session port", &session_link_ops, ps);
	if (ps->link == NULL) {
		session_quit(ps, 1, "out of memory");
		return;
	}
	log_info("Joined the hub's session; waiting for a configure");
	notify_ready("joined the hub's session; idle");
	session_send_state(ps, true, "");
}

static void session_on_signal(void *arg, const char *why)
{
	session_quit(arg, 0, why);
}

int session_peer_main(const struct daemon_def *def, const struct daemon_options *d,
		      struct event_base *base, int argc, char **argv)
{
	struct peer_session ps = { .base = base, .def = def,
				   .ignore_configure = d->session_ignore_configure };
	net_keep_listeners();
	if (def->prepare != NULL && !def->prepare(def->opts))
		return 1;
	ps.slot = run_slot_new(def, base, argc, argv);
	if (ps.slot == NULL)
		return 1;
	struct ctl_hello hello;
	greet_hello_init(&hello, def->session_role, *def->session_id, CTL_CHANNEL_SESSION, 0, NULL,
			 0);
	ps.dial = greet_dial_start(base, "the hub's session port", d->session_host,
				   d->session_port, false, &hello, SESSION_DIAL_TIMEOUT_MS, -1,
				   session_on_dialed, &ps);
	for (;;) {
		daemon_run(base, session_on_signal, &ps);
		if (run_slot_object(ps.slot) != NULL) {
			uint32_t run = run_slot_run(ps.slot);
			ps.last_status = run_slot_finish(ps.slot);
			/* A second loopexit the run asked for would end the next
			 * run at once: let it fire now, with nothing to end. */
			event_base_loop(base, EVLOOP_NONBLOCK);
			log_info("Run %u over (status %d)", run, ps.last_status);
			notify_status("run %u over (status %d)", run, ps.last_status);
			session_send_state(&ps, true, "run over");
			if (ps.quit) {
				const struct timeval linger = { 0, SESSION_LINGER_US };
				event_base_loopexit(base, &linger);
				daemon_run(base, session_on_signal, &ps);
			}
		}
		if (ps.quit)
			break;
	}
	greet_dial_cancel(ps.dial);
	msgconn_free(ps.link);
	run_slot_free(ps.slot);
	net_close_kept();
	return ps.exit_status;
}
