#include "greet.h"

#include "auth.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct greet {
	struct event *ev;
	int fd;
	bool listener;
	bool challenged;           /* client: the listener's nonce has arrived */
	char nonce[CTL_NONCE_TEXT];
	struct ctl_hello hello;    /* client: sent once challenged */
	char peer[CTL_MAX_TEXT];
	size_t have;
	size_t need;
	greet_accept_cb accept_cb;
	greet_connect_cb connect_cb;
	void *arg;
	struct ctl_msg msg;
	uint8_t buf[CTL_LENGTH_BYTES + 4096];
};

static unsigned greet_count;

static int greet_send(int fd, const struct ctl_msg *msg);

unsigned greet_in_progress(void)
{
	return greet_count;
}

static void greet_free(struct greet *g, bool close_fd)
{
	if (g->ev != NULL)
		event_free(g->ev);
	if (close_fd && g->fd >= 0)
		close(g->fd);
	greet_count--;
	free(g);
}

void greet_cancel(struct greet *g)
{
	if (g != NULL)
		greet_free(g, true);
}

static void greet_fail(struct greet *g, const char *why)
{
	log_warn("Greeting with %s failed: %s", g->peer, why);
	if (g->listener) {
		greet_accept_cb cb = g->accept_cb;
		void *arg = g->arg;
		char peer[CTL_MAX_TEXT];
		snprintf(peer, sizeof peer, "%s", g->peer);
		greet_free(g, true);
		cb(-1, NULL, peer, arg);
	} else {
		greet_connect_cb cb = g->connect_cb;
		void *arg = g->arg;
		greet_free(g, true);
		cb(-1, NULL, arg);
	}
}

static void greet_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct greet *g = arg;
	if (what & EV_TIMEOUT) {
		greet_fail(g, "no greeting within the handshake timeout");
		return;
	}
	/* Read no further than the end of the one message expected. */
	ssize_t n = read(fd, g->buf + g->have, g->need - g->have);
	if (n == 0) {
		greet_fail(g, "connection closed during the greeting");
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		greet_fail(g, strerror(errno));
		return;
	}
	g->have += (size_t)n;
	if (g->have < g->need)
		return;
	size_t need = 0;
	char err[256];
	long used = ctl_decode(g->buf, g->have, &g->msg, &need, err, sizeof err);
	if (used < 0) {
		/* Tell a client what the codec refused (a host name with a quote,
		 * say), so its log says why; err quotes the peer's bytes escaped. */
		if (g->listener) {
			event_free(g->ev);
			g->ev = NULL;
			greet_reply_error(g->fd, g->peer, "bad_message", "%s", err);
			g->fd = -1;
		}
		greet_fail(g, err);
		return;
	}
	if (used == 0) {
		if (need > sizeof g->buf) {
			snprintf(err, sizeof err, "greeting of %zu bytes is larger than %zu", need,
				 sizeof g->buf);
			greet_fail(g, err);
			return;
		}
		g->need = need;
		return;
	}
	if (!g->listener && !g->challenged) {
		if (g->msg.type == CTL_CHALLENGE) {
			/* Prove the run key on this very connection, then wait for
			 * the verdict. */
			g->challenged = true;
			struct ctl_msg hello = { .type = CTL_HELLO };
			hello.u.hello = g->hello;
			auth_sign_hello(g->msg.u.challenge.nonce, &hello.u.hello);
			int rc = greet_send(g->fd, &hello);
			if (rc < 0) {
				greet_fail(g, strerror(-rc));
				return;
			}
			g->have = 0;
			g->need = CTL_LENGTH_BYTES;
			return;
		}
		if (g->msg.type != CTL_ERROR) {
			snprintf(err, sizeof err, "expected challenge, got %s", ctl_type_name(g->msg.type));
			greet_fail(g, err);
			return;
		}
	}
	event_free(g->ev);
	g->ev = NULL;
	int conn = g->fd;
	if (g->listener) {
		if (g->msg.type != CTL_HELLO) {
			snprintf(err, sizeof err, "expected hello, got %s", ctl_type_name(g->msg.type));
			greet_reply_error(conn, g->peer, "expected_hello", "%s", err);
			g->fd = -1;
			greet_fail(g, err);
			return;
		}
		const struct ctl_hello *h = &g->msg.u.hello;
		if (auth_have_key() && !auth_check_hello(g->nonce, h)) {
			greet_reply_error(conn, g->peer, "auth_failed",
					  "%s %u from %s did not prove the run key; give every daemon "
					  "of the run the same --run-key-file",
					  ctl_role_name(h->role), h->id, g->peer);
			g->fd = -1;
			greet_fail(g, "authentication failed");
			return;
		}
		if (!auth_have_key() && !net_fd_is_loopback(conn)) {
			greet_reply_error(conn, g->peer, "auth_required",
					  "%s %u from %s is not on this host and this daemon has no "
					  "run key; start every daemon with --run-key-file",
					  ctl_role_name(h->role), h->id, g->peer);
			g->fd = -1;
			greet_fail(g, "no run key for a remote peer");
			return;
		}
		greet_accept_cb cb = g->accept_cb;
		void *cb_arg = g->arg;
		char peer[CTL_MAX_TEXT];
		snprintf(peer, sizeof peer, "%s", g->peer);
		struct ctl_hello hello = *h;
		greet_free(g, false);
		cb(conn, &hello, peer, cb_arg);
		return;
	}
	greet_connect_cb cb = g->connect_cb;
	void *cb_arg = g->arg;
	struct ctl_msg reply = g->msg;
	if (reply.type == CTL_ERROR) {
		log_error("%s refused us: %s (%s)", g->peer, reply.u.error.reason, reply.u.error.code);
		greet_free(g, true);
		cb(-1, &reply, cb_arg);
		return;
	}
	if (reply.type != CTL_WELCOME) {
		snprintf(err, sizeof err, "expected welcome, got %s", ctl_type_name(reply.type));
		greet_fail(g, err);
		return;
	}
	greet_free(g, false);
	cb(conn, &reply, cb_arg);
}

static struct greet *greet_new(struct event_base *base, int fd, const char *peer,
			       uint64_t timeout_ms, void *arg)
{
	struct greet *g = calloc(1, sizeof *g);
	if (g == NULL) {
		close(fd);
		return NULL;
	}
	greet_count++;
	g->fd = fd;
	g->need = CTL_LENGTH_BYTES;
	g->arg = arg;
	snprintf(g->peer, sizeof g->peer, "%s", peer);
	g->ev = event_new(base, fd, EV_READ | EV_PERSIST, greet_on_event, g);
	struct timeval tv = { .tv_sec = (time_t)(timeout_ms / 1000),
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	event_add(g->ev, &tv);
	return g;
}

struct greet *greet_accept(struct event_base *base, int fd, const char *peer,
			   uint64_t timeout_ms, greet_accept_cb cb, void *arg)
{
	struct greet *g = greet_new(base, fd, peer, timeout_ms, arg);
	if (g == NULL)
		return NULL;
	g->listener = true;
	g->accept_cb = cb;
	/* Every connection is challenged, key or not, so a client never has to
	 * guess whether to prove anything. */
	auth_new_nonce(g->nonce);
	struct ctl_msg challenge = { .type = CTL_CHALLENGE };
	memcpy(challenge.u.challenge.nonce, g->nonce, sizeof g->nonce);
	if (greet_send(fd, &challenge) < 0) {
		log_warn("Cannot challenge %s: %s", peer, strerror(errno));
		greet_free(g, true);
		cb(-1, NULL, peer, arg);
		return NULL;
	}
	return g;
}

static int greet_send(int fd, const struct ctl_msg *msg)
{
	uint8_t buf[CTL_LENGTH_BYTES + 4096];
	size_t n = ctl_encode(msg, buf, sizeof buf);
	if (n == 0)
		return -EMSGSIZE;
	ssize_t w = write(fd, buf, n);
	if (w < 0)
		return -errno;
	return (size_t)w == n ? 0 : -EAGAIN;
}

struct greet *greet_connect(struct event_base *base, int fd, const char *what,
			    const struct ctl_hello *hello, uint64_t timeout_ms,
			    greet_connect_cb cb, void *arg)
{
	struct greet *g = greet_new(base, fd, what, timeout_ms, arg);
	if (g == NULL) {
		cb(-1, NULL, arg);
		return NULL;
	}
	g->connect_cb = cb;
	g->hello = *hello;
	return g;
}

int greet_reply_welcome(int fd, uint32_t run_id, enum ctl_role role, uint32_t id)
{
	struct ctl_msg msg = { .type = CTL_WELCOME };
	msg.u.welcome.run_id = run_id;
	msg.u.welcome.role = role;
	msg.u.welcome.id = id;
	return greet_send(fd, &msg);
}

void greet_reply_error(int fd, const char *peer, const char *code, const char *fmt, ...)
{
	struct ctl_msg msg = { .type = CTL_ERROR };
	snprintf(msg.u.error.code, sizeof msg.u.error.code, "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg.u.error.reason, sizeof msg.u.error.reason, fmt, ap);
	va_end(ap);
	log_warn("Refused %s: %s", peer, msg.u.error.reason);
	greet_send(fd, &msg);
	close(fd);
}

void greet_accept_all(struct event_base *base, int listen_fd, uint64_t timeout_ms,
		      greet_accept_cb cb, void *arg, uint64_t *refused)
{
	for (;;) {
		char peer[CTL_MAX_TEXT];
		int conn = net_accept(listen_fd, peer, sizeof peer);
		if (conn < 0)
			return;
		if (greet_count >= GREET_MAX_IN_PROGRESS) {
			log_warn("Refusing %s: too many connections greeting at once (%u)", peer,
				 GREET_MAX_IN_PROGRESS);
			close(conn);
			(*refused)++;
			continue;
		}
		greet_accept(base, conn, peer, timeout_ms, cb, arg);
	}
}
