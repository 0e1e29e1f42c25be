/* One greeting on one fd, either side: read message by message, never past
 * the one expected; one deadline from the start; the client's answer to
 * the listener's challenge and its verdict. The listener's doors and
 * verdicts are handshake_listen.c's, the client's retries
 * handshake_dial.c's. See handshake.h. */
#include "io/handshake_internal.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void greet_free(struct greet *g, bool close_fd)
{
	if (g->ev != NULL)
		event_free(g->ev);
	if (g->ev_deadline != NULL)
		event_free(g->ev_deadline);
	if (close_fd && g->fd >= 0)
		close(g->fd);
	greet_door_leave(g);
	free(g);
}

void greet_drop(struct greet *g)
{
	greet_accept_cb cb = g->accept_cb;
	void *arg = g->arg;
	char peer[CTL_MAX_TEXT];
	snprintf(peer, sizeof peer, "%s", g->peer);
	greet_free(g, true);
	cb(-1, NULL, peer, arg);
}

void greet_cancel(struct greet *g)
{
	if (g != NULL)
		greet_free(g, true);
}

/* Whether a failure of the connection itself (not of what was said on it)
 * is worth another attempt: the listener may have shed us while busy. */
static bool greet_errno_transient(int err)
{
	return err == ECONNRESET || err == EPIPE || err == ECONNABORTED || err == ETIMEDOUT;
}

static void greet_client_done(struct greet *g, int fd, const struct ctl_msg *reply,
			      const char *why, bool transient)
{
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
	if (dial != NULL)
		greet_dial_on_greeted(dial, fd, reply != NULL ? &copy : NULL, why, transient);
	else
		cb(fd, reply != NULL ? &copy : NULL, arg);
}

static void greet_fail(struct greet *g, const char *why, bool transient)
{
	if (!g->listener) {
		greet_client_done(g, -1, NULL, why, transient);
		return;
	}
	greet_door_log(g->door, "Greeting with %s failed: %s", g->peer, why);
	greet_drop(g);
}

static void greet_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct greet *g = arg;
	char why[96];
	if (g->listener)
		snprintf(why, sizeof why,
			 "no complete greeting within the handshake timeout (%" PRIu64 " ms)",
			 g->timeout_ms);
	else
		snprintf(why, sizeof why, "no answer within the connect timeout (%" PRIu64 " ms left)",
			 g->timeout_ms);
	if (g->door != NULL)
		g->door->timed_out++;
	greet_fail(g, why, true);
}
/* Reads toward the end of the one message expected, never past it. true
 * when g->msg holds it; false when more bytes are due, or when g failed
 * (and is gone). */
static bool greet_read_message(struct greet *g, int fd)
{
	ssize_t n = read(fd, g->buf + g->have, g->need - g->have);
	if (n == 0) {
		greet_fail(g, "connection closed during the greeting", true);
		return false;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			greet_fail(g, strerror(errno), greet_errno_transient(errno));
		return false;
	}
	g->have += (size_t)n;
	if (g->have < g->need)
		return false;
	size_t need = 0;
	char err[256];
	long used = ctl_decode(g->buf, g->have, &g->msg, &need, err, sizeof err);
	if (used < 0) {
		/* Tell a client what the codec refused (a host name with a quote,
		 * say), so its log says why; err quotes the peer's bytes escaped. */
		if (g->listener) {
			event_free(g->ev);
			g->ev = NULL;
			greet_refuse(g->door, g->fd, g->peer, "bad_message", "%s", err);
			g->fd = -1;
		}
		greet_fail(g, err, false);
		return false;
	}
	if (used == 0) {
		if (need > sizeof g->buf) {
			snprintf(err, sizeof err, "greeting of %zu bytes is larger than %zu", need,
				 sizeof g->buf);
			greet_fail(g, err, false);
			return false;
		}
		g->need = need;
		return false;
	}
	return true;
}

/* The client's side of a complete message: the challenge is answered with
 * the HELLO, proving the run key on this very connection; then WELCOME or
 * ERROR is the verdict. */
static void greet_on_client_message(struct greet *g)
{
	char err[96];
	if (!g->challenged) {
		if (g->msg.type == CTL_CHALLENGE) {
			g->challenged = true;
			struct ctl_msg hello = { .type = CTL_HELLO };
			hello.u.hello = g->hello;
			auth_sign_hello(g->msg.u.challenge.nonce, &hello.u.hello);
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

static void greet_on_event(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct greet *g = arg;
	if (!greet_read_message(g, fd))
		return;
	if (g->listener)
		greet_on_hello(g);
	else
		greet_on_client_message(g);
}

struct greet *greet_new(struct event_base *base, int fd, const char *peer, uint64_t timeout_ms,
			void *arg)
{
	struct greet *g = calloc(1, sizeof *g);
	if (g == NULL) {
		close(fd);
		return NULL;
	}
	g->fd = fd;
	g->need = CTL_LENGTH_BYTES;
	g->arg = arg;
	g->timeout_ms = timeout_ms;
	g->started_ns = clk_monotonic_ns();
	snprintf(g->peer, sizeof g->peer, "%s", peer);
	/* The deadline is one timer from the start, not a timeout on the read
	 * event: libevent re-arms that one each time a byte arrives, and a
	 * greeting dribbled a byte at a time would last for ever. */
	g->ev = event_new(base, fd, EV_READ | EV_PERSIST, greet_on_event, g);
	g->ev_deadline = evtimer_new(base, greet_on_deadline, g);
	struct timeval tv = { .tv_sec = (time_t)(timeout_ms / 1000),
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	event_add(g->ev, NULL);
	evtimer_add(g->ev_deadline, &tv);
	return g;
}

int greet_send(int fd, const struct ctl_msg *msg)
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

void greet_hello_init(struct ctl_hello *hello, enum ctl_role role, uint32_t id,
		      enum ctl_channel channel, uint32_t run_id, const uint16_t *sources,
		      size_t count)
{
	memset(hello, 0, sizeof *hello);
	hello->role = role;
	hello->id = id;
	hello->channel = channel;
	hello->run_id = run_id;
	hello->protocol = CTL_PROTOCOL_VERSION;
	hello->pid = (uint32_t)getpid();
	hello->rail = 0;
	hello->rails = 1;
	if (count > CTL_MAX_SOURCE_LIST)
		count = CTL_MAX_SOURCE_LIST;
	hello->source_count = (uint32_t)count;
	if (count > 0)
		memcpy(hello->sources, sources, count * sizeof sources[0]);
	net_host_name(hello->host, sizeof hello->host);
}
