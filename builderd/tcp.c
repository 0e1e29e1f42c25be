#include "tcp.h"

#include "ingest.h"
#include "link.h"
#include "snapshot.h"

#include "io/handshake.h"
#include "io/net.h"
#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A reader's connection. */
struct btcp_conn {
	int fd;
	struct event *ev_read;
	uint8_t *buf;
	size_t cap, start, end;
	bool eof;          /* read 0 while a frame was held */
	bool unconsumed;   /* the turn ended with whole frames left in buf */
};

struct btcp {
	struct ing *ing;
	int listen_fd;
	struct event *ev_accept;
	struct greet_door door;
	uint64_t refused;              /* the door's, handed to ingest */
	size_t cap;                    /* of each buffer */
	uint32_t readers;
	struct btcp_conn *conns;       /* [readers] */
};

static void btcp_close(struct bd_reader *rd)
{
	struct btcp_conn *c = rd->link_state;
	if (c->ev_read != NULL) {
		event_free(c->ev_read);
		c->ev_read = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
}

static void btcp_describe(const struct bd_reader *rd, struct bd_snapshot_link *l)
{
	(void)rd;
	(void)l;
}

static void btcp_resume(struct bd_reader *rd);

static const struct bd_link_ops btcp_ops = {
	.transport = "tcp",
	.close = btcp_close,
	.describe = btcp_describe,
	.resume = btcp_resume,
};

/* Feeds every whole frame in the buffer to ingest. eof: the reader closed
 * its end after these bytes. A frame of an event not yet assigned
 * (rd->held) stays in the buffer with everything after it, and the
 * connection is not read until ingest resumes it (btcp_resume). */
static void btcp_consume(struct bd_reader *rd, struct btcp_conn *c, bool eof, uint64_t now)
{
	struct ing *g = rd->ing;
	c->unconsumed = false;
	while (c->start < c->end) {
		if (clk_monotonic_ns() - now >= ING_TURN_NS && !eof) {
			/* The rest on the next turn, before any read. */
			c->unconsumed = true;
			event_active(c->ev_read, EV_READ, 0);
			break;
		}
		size_t frame_bytes;
		enum frm_status st = ing_take(rd, c->buf + c->start, c->end - c->start, false,
					      &frame_bytes, now);
		if (st == FRM_NEED_MORE)
			break;
		if (st != FRM_OK) {
			ing_close(rd, BD_DATA_FAILED);
			ing_after_frames(g);
			return;
		}
		c->start += frame_bytes;
	}
	if (rd->held) {
		c->eof = eof;
		if (c->ev_read != NULL)
			event_del(c->ev_read);
		ing_after_frames(g);
		return;
	}
	if (eof && ing_release(rd, "closed"))
		return;
	if (eof) {
		if (c->start < c->end)
			ing_error(g, "Reader %u (%s) closed its data connection inside a frame (%zu bytes)",
				  rd->id, rd->address, c->end - c->start);
		ing_close(rd, c->start < c->end ? BD_DATA_FAILED : BD_DATA_CLOSED);
	}
	ing_after_frames(g);
}

/* Reads at most a batch and feeds every whole frame to ingest. */
static void btcp_on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct bd_reader *rd = arg;
	struct btcp_conn *c = rd->link_state;
	struct ing *g = rd->ing;
	const struct bd_options *opt = ing_options(g);
	if (c->unconsumed) {
		btcp_consume(rd, c, false, clk_monotonic_ns());
		return;
	}
	if (c->start > 0) {
		/* Only the tail of a frame cut by the last read moves. */
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	/* At most a batch per read: the buffer's pages beyond a batch and the
	 * frame in progress are only touched by a fragment that large. */
	size_t room = c->cap - c->end;
	if (room > opt->batch_bytes)
		room = opt->batch_bytes;
	ssize_t n = read(fd, c->buf + c->end, room);
	rd->read_calls++;
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		if (ing_release(rd, strerror(errno)))
			return;
		ing_error(g, "Data connection of reader %u (%s) failed: %s", rd->id, rd->address,
			  strerror(errno));
		ing_close(rd, BD_DATA_FAILED);
		ing_after_frames(g);
		return;
	}
	uint64_t now = clk_monotonic_ns();
	ing_progress(g, now);
	c->end += (size_t)n;
	rd->bytes_received += (uint64_t)n;
	btcp_consume(rd, c, n == 0, now);
}

/* An assign passed the held frame: take what the buffer holds, then read
 * on (or end, if the reader closed meanwhile). */
static void btcp_resume(struct bd_reader *rd)
{
	struct btcp_conn *c = rd->link_state;
	if (c->ev_read != NULL && !c->eof)
		event_add(c->ev_read, NULL);
	btcp_consume(rd, c, c->eof, clk_monotonic_ns());
}

static void btcp_on_greeted(int fd, const struct ctl_hello *h, const char *peer, void *arg)
{
	struct btcp *t = arg;
	struct ing *g = t->ing;
	const struct bd_options *opt = ing_options(g);
	if (fd < 0) {
		ing_refused(g);
		return;
	}
	struct bd_reader *rd = ing_admit(g, fd, h, peer);
	if (rd == NULL)
		return;
	if (greet_reply_welcome(fd, opt->run_id, CTL_ROLE_BUILDER, ing_builder_id(g)) < 0) {
		close(fd);
		return;
	}
	struct btcp_conn *c = &t->conns[rd->id];
	c->fd = fd;
	c->start = c->end = 0;
	c->eof = false;
	rd->link_state = c;
	net_tune(fd, (int)opt->socket_buffer_bytes);
	c->ev_read = event_new(ing_base(g), fd, EV_READ | EV_PERSIST, btcp_on_readable, rd);
	event_add(c->ev_read, NULL);
	if (!opt->quiet)
		log_info("Reader %u data connected from %s (pid %u on %s)", h->id, peer, h->pid, h->host);
	ing_started(rd, &btcp_ops, h, peer);
}

static void btcp_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct btcp *t = arg;
	greet_accept_all(&t->door, fd, btcp_on_greeted, t);
}

static void btcp_stop(void *arg)
{
	struct btcp *t = arg;
	if (t == NULL)
		return;
	if (t->ev_accept)
		event_free(t->ev_accept);
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	greet_door_close(&t->door);
	for (uint32_t r = 0; t->conns && r < t->readers; r++) {
		if (t->conns[r].ev_read)
			event_free(t->conns[r].ev_read);
		if (t->conns[r].fd >= 0)
			close(t->conns[r].fd);
		free(t->conns[r].buf);
	}
	free(t->conns);
	free(t);
}

static void btcp_report(const void *arg, struct bd_snapshot *s)
{
	const struct btcp *t = arg;
	s->read_buffers_bytes += (uint64_t)t->readers * t->cap;
	s->greetings_busy += t->door.busy;
	s->greetings_evicted += t->door.evicted;
	s->greetings_timed_out += t->door.timed_out;
	s->refused_connections += t->refused;
}

static const struct bd_listener_ops btcp_listener_ops = {
	.report = btcp_report,
	.stop = btcp_stop,
};

int btcp_start(struct ing *g, uint16_t *port)
{
	const struct bd_options *opt = ing_options(g);
	struct btcp *t = calloc(1, sizeof *t);
	if (t == NULL)
		return -ENOMEM;
	int rc = -ENOMEM;
	t->ing = g;
	t->listen_fd = -1;
	t->readers = opt->readers;
	t->cap = (size_t)opt->batch_bytes + opt->max_fragment_bytes + FRM_HEADER_BYTES;
	greet_door_init(&t->door, ing_base(g), "the builder's data port", "the builder",
			opt->handshake_timeout_ms, &t->refused);
	t->conns = calloc(opt->readers + 1, sizeof *t->conns);
	if (t->conns == NULL)
		goto fail;
	for (uint32_t r = 0; r < opt->readers; r++) {
		t->conns[r].fd = -1;
		t->conns[r].cap = t->cap;
		t->conns[r].buf = malloc(t->cap);
		if (t->conns[r].buf == NULL)
			goto fail;
	}
	t->listen_fd = net_listen(opt->listen_host, opt->listen_port, port);
	if (t->listen_fd < 0) {
		rc = t->listen_fd;
		goto fail;
	}
	t->ev_accept = event_new(ing_base(g), t->listen_fd, EV_READ | EV_PERSIST, btcp_on_accept, t);
	event_add(t->ev_accept, NULL);
	rc = ing_add_link(g, &btcp_listener_ops, t);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	btcp_stop(t);
	return rc;
}
