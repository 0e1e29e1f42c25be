/* The TCP forwarder of one data connection (one rail of a builder's link):
 * the frames of the lanes routed to it, from every source's buffer, in one
 * writev straight from the receive buffers; a short write leaves a frame
 * half sent, which is finished before anything else goes (the feed keeps
 * where it stopped). */
#include "forward.h"

#include "config.h"
#include "sys/log.h"
#include "wire/control.h"
#include "io/handshake.h"
#include "io/net.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct fwd_tcp {
	struct event_base *base;
	uint32_t reader_id;
	uint32_t dest;
	struct fwd_conn conn;
	char name[48];               /* "the builder", "builder 3 (rail 1 of 2)" */
	struct fwd_feed feed;
	struct fwd_events ev;
	void *arg;
	struct greet_dial *dial;     /* until the builder welcomes us */
	int fd;
	struct event *ev_write;
	bool blocked;                /* socket full: waiting for EV_WRITE */
	bool closed;                 /* the connection failed */
	char peer[300];
	struct iovec iov[IOV_MAX];
	uint64_t writev_calls;
	uint64_t bytes_forwarded;
	uint64_t socket_buffer_bytes;  /* SO_SNDBUF granted, read once connected */
};

static void tcp_flush(void *self)
{
	struct fwd_tcp *t = self;
	if (t->fd < 0 || t->blocked || t->closed)
		return;
	for (;;) {
		int niov = t->feed.gather(t->feed.arg, t->dest, t->iov, IOV_MAX);
		if (niov == 0)
			return;
		ssize_t n = writev(t->fd, t->iov, niov);
		t->writev_calls++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				t->blocked = true;
				event_add(t->ev_write, NULL);
				return;
			}
			log_error("Reader %u: data connection to %s %s failed: %s",
				  t->reader_id, t->name, t->peer, strerror(errno));
			t->closed = true;
			t->ev.on_failed(t->arg, FWD_BROKEN);
			return;
		}
		t->bytes_forwarded += (uint64_t)n;
		t->feed.consumed(t->feed.arg, t->dest, (size_t)n);
		t->feed.moved(t->feed.arg);
		/* After a short write the loop tries once more; EAGAIN then arms
		 * the write event. */
	}
}

static void tcp_on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fwd_tcp *t = arg;
	t->blocked = false;
	t->ev.on_progress(t->arg);
}

static int tcp_open(struct fwd_tcp *t, int fd)
{
	t->ev_write = event_new(t->base, fd, EV_WRITE, tcp_on_writable, t);
	if (t->ev_write == NULL) {
		close(fd);
		return -ENOMEM;
	}
	t->fd = fd;
	t->socket_buffer_bytes = net_send_buffer(fd);
	return 0;
}

static void tcp_on_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal, void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct fwd_tcp *t = arg;
	t->dial = NULL;
	char why[CTL_MAX_TEXT + 128];
	if (fd < 0) {
		log_error("Reader %u: %s did not accept our data connection: %s (%s)",
			  t->reader_id, t->name, reply->u.error.reason, reply->u.error.code);
		if (!fwd_refused_by_builder(reply)) {
			t->ev.on_failed(t->arg, FWD_REFUSED);
			return;
		}
		snprintf(why, sizeof why, "%s refused our data connection: %s (%s)", t->name,
			 reply->u.error.reason, reply->u.error.code);
		t->closed = true;
		t->ev.on_refused(t->arg, why);
		return;
	}
	if (!fwd_welcome_is_ours(t->conn, reply)) {
		fwd_crossed(t->reader_id, t->conn, reply, t->peer, why, sizeof why);
		close(fd);
		t->closed = true;
		t->ev.on_refused(t->arg, why);
		return;
	}
	if (tcp_open(t, fd) < 0) {
		log_error("Reader %u: no memory for the data connection to %s", t->reader_id, t->name);
		t->ev.on_failed(t->arg, FWD_REFUSED);
		return;
	}
	t->ev.on_progress(t->arg);
}

static struct fwd_tcp *tcp_new(struct event_base *base, const struct rdr_options *opt,
			       struct fwd_conn c, const struct fwd_feed *feed,
			       const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	t->base = base;
	t->reader_id = opt->id;
	t->feed = *feed;
	t->ev = *ev;
	t->arg = arg;
	t->dest = c.dest;
	t->conn = c;
	t->fd = -1;
	fwd_builder_name(opt, c, t->name, sizeof t->name);
	const struct rdr_rail *rail = &opt->links[c.link].rail[c.rail];
	snprintf(t->peer, sizeof t->peer, "%s:%u", rail->host, (unsigned)rail->port);
	return t;
}

static void tcp_destroy(void *self);

void *fwd_tcp_dial(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		   const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = tcp_new(base, opt, c, feed, ev, arg);
	if (t == NULL)
		return NULL;
	struct ctl_hello hello;
	fwd_data_hello(opt, c.rail, rdr_link_rails(opt, c.link), &hello);
	char what[80];
	snprintf(what, sizeof what, "%s's data port", t->name);
	const struct rdr_rail *rail = &opt->links[c.link].rail[c.rail];
	t->dial = greet_dial_start(base, what, rail->host, rail->port, false, &hello,
				   opt->connect_timeout_ms, (int)opt->socket_buffer_bytes,
				   tcp_on_greeted, t);
	if (t->dial == NULL) {
		tcp_destroy(t);
		return NULL;
	}
	return t;
}

void *fwd_tcp_adopt(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		    int fd, const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = tcp_new(base, opt, c, feed, ev, arg);
	if (t == NULL) {
		close(fd);
		return NULL;
	}
	if (tcp_open(t, fd) < 0) {
		tcp_destroy(t);
		return NULL;
	}
	return t;
}

static bool tcp_closed(const void *self)
{
	return ((const struct fwd_tcp *)self)->closed;
}

static void tcp_finish(void *self)
{
	struct fwd_tcp *t = self;
	/* A link given up while still dialling: it never opens. */
	greet_dial_cancel(t->dial);
	t->dial = NULL;
	if (t->fd >= 0) {
		shutdown(t->fd, SHUT_WR);
		close(t->fd);
		t->fd = -1;
	}
}

static void tcp_stats(const void *self, struct fwd_stats *st)
{
	const struct fwd_tcp *t = self;
	st->writev_calls = t->writev_calls;
	st->bytes_forwarded = t->bytes_forwarded;
	st->socket_buffer_bytes = t->socket_buffer_bytes;
}

static void tcp_destroy(void *self)
{
	struct fwd_tcp *t = self;
	greet_dial_cancel(t->dial);
	if (t->ev_write)
		event_free(t->ev_write);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

const struct fwd_impl fwd_tcp_impl = {
	.flush = tcp_flush,
	.closed = tcp_closed,
	.finish = tcp_finish,
	.stats = tcp_stats,
	.destroy = tcp_destroy,
};
