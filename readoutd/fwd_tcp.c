/* The TCP forwarder: every source's verified frames in one writev, straight
 * from the receive buffers; a short write leaves a frame half sent, which
 * is finished before anything else goes. */
#include "forward.h"

#include "reader.h"
#include "sys/log.h"
#include "wire/control.h"
#include "io/handshake.h"

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
	struct fwd_feed feed;
	struct fwd_events ev;
	void *arg;
	struct greet_dial *dial;     /* until the builder welcomes us */
	int fd;
	struct event *ev_write;
	bool blocked;                /* socket full: waiting for EV_WRITE */
	bool closed;                 /* the connection failed */
	char peer[300];
	int partial_source;          /* source whose frame is half written, or -1 */
	int order[RDR_MAX_SOURCES + 1];
	struct iovec iov[RDR_MAX_SOURCES + 1];
	uint64_t writev_calls;
	uint64_t bytes_forwarded;
};

/* Gathers every source's pending bytes, the half-written frame first. */
static int tcp_gather(struct fwd_tcp *t)
{
	size_t nsrc = t->feed.count(t->feed.arg);
	int niov = 0;
	const uint8_t *p;
	if (t->partial_source >= 0) {
		size_t len = t->feed.pending(t->feed.arg, (size_t)t->partial_source, &p);
		t->order[niov] = t->partial_source;
		t->iov[niov++] = (struct iovec){ (void *)p, len };
	}
	for (size_t i = 0; i < nsrc && niov < IOV_MAX; i++) {
		if ((int)i == t->partial_source)
			continue;
		size_t len = t->feed.pending(t->feed.arg, i, &p);
		if (len == 0)
			continue;
		t->order[niov] = (int)i;
		t->iov[niov++] = (struct iovec){ (void *)p, len };
	}
	return niov;
}

/* Hands n written bytes back to the sources, in the order they went. */
static void tcp_written(struct fwd_tcp *t, int niov, size_t n)
{
	t->bytes_forwarded += (uint64_t)n;
	t->partial_source = -1;
	for (int k = 0; k < niov; k++) {
		size_t len = t->iov[k].iov_len;
		size_t take = n < len ? n : len;
		if (take > 0)
			t->feed.consumed(t->feed.arg, (size_t)t->order[k], take);
		n -= take;
		if (take < len && take > 0)
			t->partial_source = t->order[k];
	}
	t->feed.moved(t->feed.arg);
}

static void tcp_flush(void *self)
{
	struct fwd_tcp *t = self;
	if (t->fd < 0 || t->blocked || t->closed)
		return;
	for (;;) {
		int niov = tcp_gather(t);
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
			log_error("Reader %u: data connection to the builder %s failed: %s",
				  t->reader_id, t->peer, strerror(errno));
			t->closed = true;
			t->ev.on_failed(t->arg, FWD_BROKEN);
			return;
		}
		tcp_written(t, niov, (size_t)n);
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
	return 0;
}

static void tcp_on_greeted(int fd, const struct ctl_msg *reply, void *arg)
{
	struct fwd_tcp *t = arg;
	t->dial = NULL;
	if (fd < 0) {
		log_error("Reader %u: the builder did not accept our data connection: %s (%s)",
			  t->reader_id, reply->u.error.reason, reply->u.error.code);
		t->ev.on_failed(t->arg, FWD_REFUSED);
		return;
	}
	if (tcp_open(t, fd) < 0) {
		log_error("Reader %u: no memory for the data connection to the builder", t->reader_id);
		t->ev.on_failed(t->arg, FWD_REFUSED);
		return;
	}
	t->ev.on_progress(t->arg);
}

static struct fwd_tcp *tcp_new(struct event_base *base, const struct rdr_options *opt,
			       const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	t->base = base;
	t->reader_id = opt->id;
	t->feed = *feed;
	t->ev = *ev;
	t->arg = arg;
	t->fd = -1;
	t->partial_source = -1;
	snprintf(t->peer, sizeof t->peer, "%s:%u", opt->builder_host, (unsigned)opt->builder_port);
	return t;
}

static void tcp_destroy(void *self);

void *fwd_tcp_dial(struct event_base *base, const struct rdr_options *opt,
		   const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = tcp_new(base, opt, feed, ev, arg);
	if (t == NULL)
		return NULL;
	struct ctl_hello hello;
	fwd_data_hello(opt, &hello);
	t->dial = greet_dial_start(base, "the builder's data port", opt->builder_host,
				   opt->builder_port, false, &hello, opt->connect_timeout_ms,
				   (int)opt->socket_buffer_bytes, tcp_on_greeted, t);
	if (t->dial == NULL) {
		tcp_destroy(t);
		return NULL;
	}
	return t;
}

void *fwd_tcp_adopt(struct event_base *base, const struct rdr_options *opt, int fd,
		    const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_tcp *t = tcp_new(base, opt, feed, ev, arg);
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
