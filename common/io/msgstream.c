#include "io/msgstream.h"

#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct msgconn {
	struct bufferevent *bev;
	const struct msgconn_ops *ops;
	void *arg;
	bool closing;
	bool dispatching;   /* inside a callback: a free is deferred */
	bool freed;
	char peer[CTL_MAX_TEXT];
	struct msgseal seal;
	struct ctl_msg msg;
	uint8_t encode_buf[MSGSEAL_HEADER_BYTES + CTL_LENGTH_BYTES + CTL_MAX_MESSAGE_BYTES];
};

static uint64_t msgconn_refused;

uint64_t msgconn_refused_total(void)
{
	return msgconn_refused;
}

/* The verdict on one complete message at p (want bytes: seal header, then
 * length and body): its seal, then its decoding into c->msg. The bytes used,
 * or <= 0 with err set. */
static long msgconn_take(struct msgconn *c, const uint8_t *p, size_t want, char *err, size_t len)
{
	uint64_t seq;
	enum msgseal_verdict v = msgseal_open(&c->seal, p, p + MSGSEAL_HEADER_BYTES,
					      want - MSGSEAL_HEADER_BYTES, &seq);
	if (v != MSGSEAL_OK) {
		msgconn_refused++;
		snprintf(err, len, "%s (sequence %" PRIu64 ", expected %" PRIu64 ")",
			 msgseal_verdict_text(v), seq, c->seal.received);
		return -1;
	}
	size_t need;
	long used = ctl_decode(p + MSGSEAL_HEADER_BYTES, want - MSGSEAL_HEADER_BYTES, &c->msg, &need,
			       err, len);
	if (used == 0)
		snprintf(err, len, "incomplete message of %zu bytes", want);
	return used <= 0 ? used : used + (long)MSGSEAL_HEADER_BYTES;
}

static void msgconn_on_read(struct bufferevent *bev, void *arg)
{
	struct msgconn *c = arg;
	uint64_t rx_ns = clk_realtime_ns();
	struct evbuffer *in = bufferevent_get_input(bev);
	for (;;) {
		size_t avail = evbuffer_get_length(in);
		const size_t head = MSGSEAL_HEADER_BYTES + CTL_LENGTH_BYTES;
		if (avail < head)
			return;
		uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)head) + MSGSEAL_HEADER_BYTES;
		size_t body = ((size_t)p[0] << 24) | ((size_t)p[1] << 16) | ((size_t)p[2] << 8) | p[3];
		size_t want = body + head;
		if (body > CTL_MAX_MESSAGE_BYTES)
			want = head; /* fails its seal, or ctl_decode names the error */
		if (avail < want)
			return;
		p = evbuffer_pullup(in, (ev_ssize_t)want);
		char err[256];
		long used = msgconn_take(c, p, want, err, sizeof err);
		c->dispatching = true;
		if (used <= 0) {
			log_warn("Bad control message from %s: %s", c->peer, err);
			c->ops->on_close(c, err, c->arg);
		} else {
			evbuffer_drain(in, (size_t)used);
			c->ops->on_message(c, &c->msg, rx_ns, c->arg);
		}
		c->dispatching = false;
		if (c->freed || used <= 0) {
			if (c->freed)
				msgconn_free(c);
			return;
		}
	}
}

static void msgconn_on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct msgconn *c = arg;
	char reason[128];
	if (what & BEV_EVENT_EOF)
		snprintf(reason, sizeof reason, "closed by peer");
	else if (what & BEV_EVENT_ERROR)
		snprintf(reason, sizeof reason, "%s", strerror(EVUTIL_SOCKET_ERROR()));
	else
		return;
	if (c->closing) {
		msgconn_free(c);
		return;
	}
	c->ops->on_close(c, reason, c->arg);
}

static void msgconn_on_write(struct bufferevent *bev, void *arg)
{
	struct msgconn *c = arg;
	if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		msgconn_free(c);
}

struct msgconn *msgconn_new(struct event_base *base, int fd, const struct msgseal *seal,
			    const char *peer, const struct msgconn_ops *ops, void *arg)
{
	struct msgconn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		free(c);
		return NULL;
	}
	c->ops = ops;
	c->arg = arg;
	c->seal = *seal;
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	bufferevent_setcb(c->bev, msgconn_on_read, msgconn_on_write, msgconn_on_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return c;
}

int msgconn_send(struct msgconn *c, const struct ctl_msg *msg)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) > MSGCONN_MAX_PENDING_OUTPUT) {
		log_warn("Control peer %s is not reading; %s not sent", c->peer,
			 ctl_type_name(msg->type));
		return -ENOBUFS;
	}
	uint8_t *m = c->encode_buf + MSGSEAL_HEADER_BYTES;
	size_t n = ctl_encode(msg, m, sizeof c->encode_buf - MSGSEAL_HEADER_BYTES);
	if (n == 0) {
		log_error("Control message %s to %s does not fit %u bytes", ctl_type_name(msg->type),
			  c->peer, CTL_MAX_MESSAGE_BYTES);
		return -EMSGSIZE;
	}
	msgseal_seal(&c->seal, m, n, c->encode_buf);
	return bufferevent_write(c->bev, c->encode_buf, MSGSEAL_HEADER_BYTES + n) == 0 ? 0 : -ENOMEM;
}

void msgconn_close_when_flushed(struct msgconn *c)
{
	c->closing = true;
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		msgconn_free(c);
}

void msgconn_free(struct msgconn *c)
{
	if (c == NULL)
		return;
	if (c->dispatching) {
		c->freed = true;
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		return;
	}
	bufferevent_free(c->bev);
	sodium_memzero(&c->seal, sizeof c->seal);
	free(c);
}

const char *msgconn_peer(const struct msgconn *c)
{
	return c->peer;
}

int msgconn_write_now(struct msgconn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) == 0)
		return 0;
	/* A socket bufferevent freezes the front of its output, and
	 * evbuffer_write on a frozen buffer writes nothing and fails without
	 * setting errno; libevent's own write callback thaws it for the write,
	 * as this does. */
	evbuffer_unfreeze(out, 1);
	errno = 0;
	int n = evbuffer_write(out, bufferevent_getfd(c->bev));
	int err = errno;
	evbuffer_freeze(out, 1);
	if (n < 0 && err != EAGAIN && err != EINTR)
		return err != 0 ? -err : -EIO;
	return 0;
}

int msgconn_fd(const struct msgconn *c)
{
	return c->bev != NULL ? (int)bufferevent_getfd(c->bev) : -1;
}
