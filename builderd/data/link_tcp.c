#include "data/link_tcp.h"

#include "data/ingest.h"
#include "data/link.h"
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

/* One connection (rail) of a reader's link. */
struct link_tcp_conn {
	struct ingest_reader *rd;
	uint32_t rail;
	int fd;
	struct event *ev_read;
	uint8_t *buf;
	size_t cap, start, end;
	bool eof;          /* read 0 while a frame was held */
	bool unconsumed;   /* the turn ended with whole frames left in buf */
	bool held;         /* its head frame is of an event not yet assigned */
	bool ended;        /* the reader closed it after whole frames */
};

struct link_tcp;

/* The data port on one rail's address. */
struct link_tcp_listener {
	struct link_tcp *t;
	int fd;
	struct event *ev_accept;
	struct greet_door door;
};

struct link_tcp {
	struct ingest *ing;
	struct link_tcp_listener lis[CTL_MAX_RAILS];
	uint32_t listeners;            /* --listen addresses, one per rail */
	uint32_t doors;                /* of lis[], initialised */
	uint64_t refused;              /* the doors', handed to ingest */
	size_t cap;                    /* of each buffer */
	uint32_t readers;
	struct link_tcp_conn *conns;       /* [readers x CTL_MAX_RAILS], reader-major */
};

static void link_tcp_conn_close(struct link_tcp_conn *c)
{
	if (c->ev_read != NULL) {
		event_free(c->ev_read);
		c->ev_read = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
}

/* Every connection of the link: one rail failing is the link failing. */
static void link_tcp_close(struct ingest_reader *rd)
{
	struct link_tcp_conn *conns = rd->link_state;
	for (uint32_t k = 0; k < CTL_MAX_RAILS; k++) {
		link_tcp_conn_close(&conns[k]);
		conns[k].held = false;
	}
}

static void link_tcp_describe(const struct ingest_reader *rd, struct snapshot_link *l)
{
	(void)rd;
	(void)l;
}

static void link_tcp_resume(struct ingest_reader *rd);

static const struct link_ops link_tcp_ops = {
	.transport = "tcp",
	.close = link_tcp_close,
	.describe = link_tcp_describe,
	.resume = link_tcp_resume,
};

/* rd->held: some connection of the link holds a frame not yet assigned. */
static void link_tcp_sync_held(struct ingest_reader *rd)
{
	const struct link_tcp_conn *conns = rd->link_state;
	rd->held = false;
	for (uint32_t k = 0; k < CTL_MAX_RAILS; k++)
		rd->held = rd->held || conns[k].held;
}

/* The reader closed connection c after whole frames: the link is over
 * once every rail of it is. */
static void link_tcp_conn_ended(struct link_tcp_conn *c)
{
	struct ingest_reader *rd = c->rd;
	const struct link_tcp_conn *conns = rd->link_state;
	c->ended = true;
	link_tcp_conn_close(c);
	uint32_t every = (1u << rd->rails) - 1u;
	if ((rd->rails_greeted & every) != every)
		return;
	for (uint32_t k = 0; k < rd->rails; k++)
		if (!conns[k].ended)
			return;
	ingest_close(rd, INGEST_DATA_CLOSED);
}

/* Feeds every whole frame in the buffer to ingest. eof: the reader closed
 * its end after these bytes. A frame of an event not yet assigned
 * (c->held) stays in the buffer with everything after it, and the
 * connection is not read until ingest resumes it (link_tcp_resume). */
static void link_tcp_consume(struct link_tcp_conn *c, bool eof, uint64_t now)
{
	struct ingest_reader *rd = c->rd;
	struct ingest *g = rd->ing;
	c->unconsumed = false;
	rd->held = false;   /* this connection's verdict only, below */
	while (c->start < c->end) {
		if (clk_monotonic_ns() - now >= INGEST_TURN_NS && !eof) {
			/* The rest on the next turn, before any read. */
			c->unconsumed = true;
			event_active(c->ev_read, EV_READ, 0);
			break;
		}
		size_t frame_bytes;
		enum frm_status st = ingest_take_rail(rd, c->rail, c->buf + c->start, c->end - c->start,
					      false, &frame_bytes, now);
		if (st == FRM_NEED_MORE)
			break;
		if (st != FRM_OK) {
			ingest_close(rd, INGEST_DATA_FAILED);
			ingest_after_frames(g);
			return;
		}
		c->start += frame_bytes;
	}
	c->held = rd->held;
	link_tcp_sync_held(rd);
	if (c->held) {
		c->eof = eof;
		if (c->ev_read != NULL)
			event_del(c->ev_read);
		ingest_after_frames(g);
		return;
	}
	if (eof && ingest_release(rd, "closed"))
		return;
	if (eof && c->start < c->end) {
		ingest_error(g, "Reader %u (%s) closed its data connection (rail %u) inside a frame (%zu bytes)",
			  rd->id, rd->rail[c->rail].address, c->rail, c->end - c->start);
		ingest_close(rd, INGEST_DATA_FAILED);
	} else if (eof) {
		link_tcp_conn_ended(c);
	}
	ingest_after_frames(g);
}

/* Reads at most a batch and feeds every whole frame to ingest. */
static void link_tcp_on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct link_tcp_conn *c = arg;
	struct ingest_reader *rd = c->rd;
	struct snapshot_rail *rail = &rd->rail[c->rail];
	struct ingest *g = rd->ing;
	const struct options *opt = ingest_options(g);
	if (!ingest_may_take(g, clk_monotonic_ns()))
		return;
	if (c->unconsumed) {
		link_tcp_consume(c, false, clk_monotonic_ns());
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
	rail->read_calls++;
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		if (ingest_release(rd, strerror(errno)))
			return;
		ingest_error(g, "Data connection of reader %u (%s, rail %u) failed: %s", rd->id,
			  rail->address, c->rail, strerror(errno));
		ingest_close(rd, INGEST_DATA_FAILED);
		ingest_after_frames(g);
		return;
	}
	uint64_t now = clk_monotonic_ns();
	ingest_progress(g, now);
	c->end += (size_t)n;
	rd->bytes_received += (uint64_t)n;
	rail->bytes_received += (uint64_t)n;
	link_tcp_consume(c, n == 0, now);
}

/* An assign passed the held frames: each connection holding one takes
 * what its buffer holds, then reads on (or ends, if the reader closed it
 * meanwhile). */
static void link_tcp_resume(struct ingest_reader *rd)
{
	struct link_tcp_conn *conns = rd->link_state;
	for (uint32_t k = 0; k < CTL_MAX_RAILS && rd->state == INGEST_DATA_STREAMING; k++) {
		struct link_tcp_conn *c = &conns[k];
		if (!c->held)
			continue;
		c->held = false;
		if (c->ev_read != NULL && !c->eof)
			event_add(c->ev_read, NULL);
		link_tcp_consume(c, c->eof, clk_monotonic_ns());
	}
}

static void link_tcp_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
                            const char *peer, void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct link_tcp_listener *lis = arg;
	struct link_tcp *t = lis->t;
	struct ingest *g = t->ing;
	const struct options *opt = ingest_options(g);
	if (fd < 0) {
		ingest_refused(g);
		return;
	}
	struct ingest_reader *rd = ingest_admit_rail(g, fd, h, peer, t->listeners,
					      (uint32_t)(lis - t->lis));
	if (rd == NULL)
		return;
	if (greet_reply_welcome(fd, opt->run_id, CTL_ROLE_BUILDER, ingest_builder_id(g)) < 0) {
		close(fd);
		return;
	}
	struct link_tcp_conn *c = &t->conns[(size_t)rd->id * CTL_MAX_RAILS + h->rail];
	c->fd = fd;
	c->start = c->end = 0;
	c->eof = c->held = c->ended = c->unconsumed = false;
	rd->link_state = &t->conns[(size_t)rd->id * CTL_MAX_RAILS];
	net_tune(fd, (int)opt->socket_buffer_bytes);
	rd->rail[h->rail].socket_buffer_bytes = net_receive_buffer(fd);
	c->ev_read = event_new(ingest_base(g), fd, EV_READ | EV_PERSIST, link_tcp_on_readable, c);
	event_add(c->ev_read, NULL);
	if (!opt->quiet && h->rails > 1)
		log_info("Reader %u data connected from %s (pid %u on %s), rail %u of %u", h->id,
			 peer, h->pid, h->host, h->rail, h->rails);
	else if (!opt->quiet)
		log_info("Reader %u data connected from %s (pid %u on %s)", h->id, peer, h->pid,
			 h->host);
	ingest_started(rd, &link_tcp_ops, h, peer);
}

static void link_tcp_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct link_tcp_listener *lis = arg;
	greet_accept_all(&lis->door, fd, link_tcp_on_greeted, lis);
}

static void link_tcp_stop(void *arg)
{
	struct link_tcp *t = arg;
	if (t == NULL)
		return;
	for (uint32_t k = 0; k < t->doors; k++) {
		struct link_tcp_listener *lis = &t->lis[k];
		if (lis->ev_accept)
			event_free(lis->ev_accept);
		if (lis->fd >= 0)
			close(lis->fd);
		greet_door_close(&lis->door);
	}
	for (size_t i = 0; t->conns && i < (size_t)t->readers * CTL_MAX_RAILS; i++) {
		link_tcp_conn_close(&t->conns[i]);
		free(t->conns[i].buf);
	}
	free(t->conns);
	free(t);
}

static void link_tcp_report(const void *arg, struct snapshot *s)
{
	const struct link_tcp *t = arg;
	s->read_buffers_bytes += (uint64_t)t->readers * t->listeners * t->cap;
	for (uint32_t k = 0; k < t->listeners; k++) {
		s->greetings_busy += t->lis[k].door.busy;
		s->greetings_evicted += t->lis[k].door.evicted;
		s->greetings_timed_out += t->lis[k].door.timed_out;
	}
	s->refused_connections += t->refused;
}

static const struct link_listener_ops link_tcp_listener_ops = {
	.report = link_tcp_report,
	.stop = link_tcp_stop,
};

/* Rail k's door on --listen's k-th address: rail 0 on the port asked, the
 * others on the one it got. */
static int link_tcp_listen_rail(struct link_tcp *t, uint32_t k, uint16_t *port)
{
	const struct options *opt = ingest_options(t->ing);
	struct link_tcp_listener *lis = &t->lis[k];
	char name[64];
	snprintf(name, sizeof name, k == 0 ? "the builder's data port" : "the builder's data port (rail %u)",
		 k);
	greet_door_init(&lis->door, ingest_base(t->ing), name, "the builder", opt->handshake_timeout_ms,
			&t->refused);
	t->doors++;
	uint16_t bound = 0;
	lis->fd = net_listen(opt->listen_hosts[k], k == 0 ? opt->listen_port : *port, &bound);
	if (lis->fd < 0) {
		if (k > 0)
			log_error("Rail %u's data address %s cannot take port %u, which rail 0 (%s) listens on; every rail's --listen takes the same port: give one free on every address",
				  k, opt->listen_hosts[k], (unsigned)*port, opt->listen_hosts[0]);
		return lis->fd;
	}
	if (k == 0)
		*port = bound;
	lis->ev_accept = event_new(ingest_base(t->ing), lis->fd, EV_READ | EV_PERSIST, link_tcp_on_accept, lis);
	event_add(lis->ev_accept, NULL);
	return 0;
}

int link_tcp_start(struct ingest *g, uint16_t *port)
{
	const struct options *opt = ingest_options(g);
	struct link_tcp *t = calloc(1, sizeof *t);
	if (t == NULL)
		return -ENOMEM;
	int rc = -ENOMEM;
	t->ing = g;
	t->readers = opt->readers;
	t->listeners = opt->listen_count;
	t->cap = (size_t)opt->batch_bytes + opt->max_fragment_bytes + FRM_HEADER_BYTES;
	for (uint32_t k = 0; k < CTL_MAX_RAILS; k++) {
		t->lis[k].t = t;
		t->lis[k].fd = -1;
	}
	t->conns = calloc((size_t)opt->readers * CTL_MAX_RAILS + 1, sizeof *t->conns);
	if (t->conns == NULL)
		goto fail;
	for (uint32_t r = 0; r < opt->readers; r++) {
		for (uint32_t k = 0; k < CTL_MAX_RAILS; k++) {
			struct link_tcp_conn *c = &t->conns[(size_t)r * CTL_MAX_RAILS + k];
			c->rd = ingest_reader_at(g, r);
			c->rail = k;
			c->fd = -1;
			c->cap = t->cap;
			/* A buffer for each rail the builder listens on. */
			c->buf = k < t->listeners ? malloc(t->cap) : NULL;
			if (k < t->listeners && c->buf == NULL)
				goto fail;
		}
	}
	for (uint32_t k = 0; k < t->listeners; k++) {
		rc = link_tcp_listen_rail(t, k, port);
		if (rc < 0)
			goto fail;
	}
	rc = ingest_add_link(g, &link_tcp_listener_ops, t);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	link_tcp_stop(t);
	return rc;
}
