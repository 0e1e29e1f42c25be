/* The client's side: the answer to the listener's challenge and its
 * verdict; dial a listener, greet, and retry a greeting cut for a
 * transient reason with backoff until the deadline. See handshake.h. */
#include "io/handshake_internal.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"

#include <event2/event.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct greet_dial {
	struct event_base *base;
	struct net_dial *dial;
	struct greet *greet;
	struct event *ev_retry;
	struct net_target target;
	char peer[CTL_MAX_TEXT];   /* "<what> at host:port", for log lines */
	int buffer_bytes;
	struct ctl_hello hello;
	uint64_t started_ns;
	uint64_t deadline_ns;
	uint64_t backoff_ms;
	unsigned attempts;
	struct ctl_msg last;       /* CTL_ERROR: what the last attempt ended with */
	greet_connect_cb cb;
	void *arg;
};

static void greet_dial_attempt(struct greet_dial *d);
static void greet_dial_on_greeted(struct greet_dial *d, int fd, const struct ctl_msg *reply,
				  const struct msgseal *seal, const char *why, bool transient);

static void greet_client_done(struct greet *g, int fd, const struct ctl_msg *reply,
			      const char *why, bool transient)
{
	/* Welcomed: the seal of what follows, keyed by the challenge and the
	 * HELLO as sent (its nonce and proof). */
	struct msgseal seal;
	if (fd >= 0) {
		unsigned char key[AUTH_SESSION_KEY_BYTES];
		auth_session_key(g->nonce, &g->hello, key);
		msgseal_init(&seal, key, true);
		sodium_memzero(key, sizeof key);
	}
	greet_connect_cb cb = g->connect_cb;
	struct greet_dial *dial = g->dial;
	void *arg = g->arg;
	if (dial == NULL) {
		if (reply != NULL && reply->type == CTL_ERROR)
			log_error("%s refused us: %s (%s)", g->peer, reply->u.error.reason,
				  reply->u.error.code);
		else if (fd < 0)
			log_warn("Greeting with %s failed: %s", g->peer, why);
	}
	struct ctl_msg copy;
	if (reply != NULL)
		copy = *reply;
	greet_free(g, fd < 0);
	const struct msgseal *sealed = fd >= 0 ? &seal : NULL;
	if (dial != NULL)
		greet_dial_on_greeted(dial, fd, reply != NULL ? &copy : NULL, sealed, why, transient);
	else
		cb(fd, reply != NULL ? &copy : NULL, sealed, arg);
	if (sealed != NULL)
		sodium_memzero(&seal, sizeof seal);
}

static void greet_client_failed(struct greet *g, const char *why, bool transient)
{
	greet_client_done(g, -1, NULL, why, transient);
}

/* The client's side of a complete message: the challenge is answered with
 * the HELLO, with a fresh nonce of ours, proving the run key on this very
 * connection; then WELCOME or ERROR is the verdict. The challenge and the
 * HELLO as sent are kept: they make the session key. */
static void greet_on_client_message(struct greet *g)
{
	char err[96];
	if (!g->challenged) {
		if (g->msg.type == CTL_CHALLENGE) {
			g->challenged = true;
			memcpy(g->nonce, g->msg.u.challenge.nonce, sizeof g->nonce);
			auth_new_nonce(g->hello.nonce);
			auth_sign_hello(g->nonce, &g->hello);
			struct ctl_msg hello = { .type = CTL_HELLO };
			hello.u.hello = g->hello;
			int rc = greet_send(g->fd, &hello);
			if (rc < 0) {
				greet_fail(g, strerror(-rc), greet_errno_transient(-rc));
				return;
			}
			g->have = 0;
			g->need = CTL_LENGTH_BYTES;
			return;
		}
		if (g->msg.type != CTL_ERROR) {
			snprintf(err, sizeof err, "expected challenge, got %s", ctl_type_name(g->msg.type));
			greet_fail(g, err, false);
			return;
		}
	}
	struct ctl_msg reply = g->msg;
	if (reply.type == CTL_ERROR) {
		greet_client_done(g, -1, &reply, reply.u.error.reason,
				  strcmp(reply.u.error.code, GREET_BUSY_CODE) == 0);
		return;
	}
	if (reply.type != CTL_WELCOME) {
		snprintf(err, sizeof err, "expected welcome, got %s", ctl_type_name(reply.type));
		greet_fail(g, err, false);
		return;
	}
	greet_client_done(g, g->fd, &reply, NULL, false);
}

static const struct greet_side greet_client_side = {
	.on_message = greet_on_client_message,
	.on_failed = greet_client_failed,
};

struct greet *greet_connect(struct event_base *base, int fd, const char *what,
			    const struct ctl_hello *hello, uint64_t timeout_ms,
			    greet_connect_cb cb, void *arg)
{
	struct greet *g = greet_new(base, fd, what, timeout_ms, &greet_client_side, arg);
	if (g == NULL) {
		cb(-1, NULL, NULL, arg);
		return NULL;
	}
	g->connect_cb = cb;
	g->hello = *hello;
	return g;
}

static uint64_t greet_dial_left_ms(const struct greet_dial *d)
{
	uint64_t now = clk_monotonic_ns();
	return now >= d->deadline_ns ? 0 : (d->deadline_ns - now + 999999u) / 1000000u;
}

static void greet_dial_finish(struct greet_dial *d, int fd, const struct ctl_msg *reply,
			      const struct msgseal *seal)
{
	greet_connect_cb cb = d->cb;
	void *arg = d->arg;
	struct ctl_msg copy = *reply;
	greet_dial_cancel(d);
	cb(fd, &copy, seal, arg);
}

static void greet_dial_set_last(struct greet_dial *d, const struct ctl_msg *reply, const char *code,
				const char *why)
{
	if (reply != NULL && reply->type == CTL_ERROR) {
		d->last = *reply;
		return;
	}
	memset(&d->last, 0, sizeof d->last);
	d->last.type = CTL_ERROR;
	snprintf(d->last.u.error.code, sizeof d->last.u.error.code, "%s", code);
	snprintf(d->last.u.error.reason, sizeof d->last.u.error.reason, "%.*s",
		 (int)sizeof d->last.u.error.reason - 1, why);
}

static void greet_dial_on_greeted(struct greet_dial *d, int fd, const struct ctl_msg *reply,
				  const struct msgseal *seal, const char *why, bool transient)
{
	d->greet = NULL;
	if (fd >= 0) {
		greet_dial_finish(d, fd, reply, seal);
		return;
	}
	greet_dial_set_last(d, reply, "greeting_failed", why);
	const char *code = d->last.u.error.code, *reason = d->last.u.error.reason;
	bool refused = reply != NULL;
	if (!transient) {
		if (refused)
			log_error("Refused by %s: %s (%s)", d->peer, reason, code);
		else
			log_warn("Greeting with %s failed: %s", d->peer, reason);
		greet_dial_finish(d, -1, &d->last, NULL);
		return;
	}
	uint64_t left = greet_dial_left_ms(d);
	if (left <= d->backoff_ms) {
		log_error("Gave up greeting %s after %u attempts in %.1f s; it said last: %s (%s)",
			  d->peer, d->attempts, (double)(clk_monotonic_ns() - d->started_ns) / 1e9,
			  reason, code);
		greet_dial_finish(d, -1, &d->last, NULL);
		return;
	}
	if (d->attempts == 1)
		log_info("Greeting with %s cut (%s: %s); retrying with backoff for up to %" PRIu64 " ms",
			 d->peer, code, reason, left);
	struct timeval tv = { .tv_sec = (time_t)(d->backoff_ms / 1000),
			      .tv_usec = (suseconds_t)(d->backoff_ms % 1000) * 1000 };
	if (d->backoff_ms < 500)
		d->backoff_ms *= 2;
	evtimer_add(d->ev_retry, &tv);
}

static void greet_dial_on_dialed(int fd, void *arg)
{
	struct greet_dial *d = arg;
	d->dial = NULL;
	if (fd < 0) {
		/* net_dial has logged its give-up. */
		char why[CTL_MAX_TEXT + 64];
		snprintf(why, sizeof why, "%s unreachable: %s", d->peer, strerror(-fd));
		greet_dial_set_last(d, NULL, "unreachable", why);
		greet_dial_finish(d, -1, &d->last, NULL);
		return;
	}
	if (d->buffer_bytes >= 0)
		net_tune(fd, d->buffer_bytes);
	uint64_t left = greet_dial_left_ms(d);
	struct greet *g = greet_new(d->base, fd, d->peer, left ? left : 1, &greet_client_side, d);
	if (g == NULL) {
		greet_dial_set_last(d, NULL, "greeting_failed", "out of memory");
		greet_dial_finish(d, -1, &d->last, NULL);
		return;
	}
	g->dial = d;
	g->hello = d->hello;
	d->greet = g;
}

static void greet_dial_attempt(struct greet_dial *d)
{
	d->attempts++;
	uint64_t left = greet_dial_left_ms(d);
	if (left == 0)
		left = 1;
	d->dial = net_dial_target(d->base, &d->target, left, greet_dial_on_dialed, d);
	if (d->dial == NULL) {
		greet_dial_set_last(d, NULL, "greeting_failed", "out of memory");
		greet_dial_finish(d, -1, &d->last, NULL);
	}
}

static void greet_dial_on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	greet_dial_attempt(arg);
}

struct greet_dial *greet_dial_start(struct event_base *base, const char *what, const char *host,
				    uint16_t port, bool unix_socket, const struct ctl_hello *hello,
				    uint64_t timeout_ms, int buffer_bytes, greet_connect_cb cb,
				    void *arg)
{
	struct greet_dial *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->base = base;
	net_target_init(&d->target, what, host, port, unix_socket);
	/* Cut, if ever, for the log line only: the dial uses the target. */
	snprintf(d->peer, sizeof d->peer, "%.63s at %.180s", what, d->target.name);
	d->buffer_bytes = buffer_bytes;
	d->hello = *hello;
	d->started_ns = clk_monotonic_ns();
	d->deadline_ns = d->started_ns + timeout_ms * 1000000u;
	d->backoff_ms = 10;
	d->cb = cb;
	d->arg = arg;
	d->ev_retry = evtimer_new(base, greet_dial_on_retry, d);
	if (d->ev_retry == NULL) {
		free(d);
		return NULL;
	}
	/* The first attempt runs from the loop so the callback never fires
	 * before greet_dial_start() has returned. */
	struct timeval zero = { 0, 0 };
	evtimer_add(d->ev_retry, &zero);
	return d;
}

void greet_dial_cancel(struct greet_dial *d)
{
	if (d == NULL)
		return;
	net_dial_cancel(d->dial);
	greet_cancel(d->greet);
	if (d->ev_retry != NULL)
		event_free(d->ev_retry);
	free(d);
}
