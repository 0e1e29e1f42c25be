/* One greeting on one fd, either side: read message by message, never past
 * the one expected; one deadline from the start; what was read handed to
 * the greeting's side (handshake_listen.c: the listener's doors and
 * verdicts; handshake_dial.c: the client's answer, its dial and retries),
 * which this file never calls by name. See handshake.h. */
#include "io/handshake_internal.h"

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
	if (g->side->on_free != NULL)
		g->side->on_free(g);
	free(g);
}

void greet_cancel(struct greet *g)
{
	if (g != NULL)
		greet_free(g, true);
}

/* The listener may have shed us while busy. */
bool greet_errno_transient(int err)
{
	return err == ECONNRESET || err == EPIPE || err == ECONNABORTED || err == ETIMEDOUT;
}

void greet_fail(struct greet *g, const char *why, bool transient)
{
	g->side->on_failed(g, why, transient);
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
		if (g->side->on_bad_message != NULL)
			g->side->on_bad_message(g, err);
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

static void greet_on_event(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct greet *g = arg;
	if (greet_read_message(g, fd))
		g->side->on_message(g);
}

struct greet *greet_new(struct event_base *base, int fd, const char *peer, uint64_t timeout_ms,
			const struct greet_side *side, void *arg)
{
	struct greet *g = calloc(1, sizeof *g);
	if (g == NULL) {
		close(fd);
		return NULL;
	}
	g->side = side;
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
