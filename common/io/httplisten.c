#include "io/httplisten.h"

#include "io/net.h"
#include "io/ratelog.h"
#include "sys/log.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One connection through the door. Its bufferevent is ours (made in
 * httplisten_on_new_bev) and we hold a reference to it, so that asking it
 * whether evhttp still has it is always safe; the connection is evhttp's. */
struct httpconn {
	struct httplisten *l;
	struct bufferevent *bev;
	struct evhttp_connection *evcon; /* NULL until found */
	char address[64];
	struct event *ev_deadline;
	struct httpconn *prev, *next;
};

struct httplisten {
	struct event_base *base;
	struct evhttp *http;
	struct evconnlistener *lev;
	char name[64];
	struct httpconn *open;          /* through the door, newest first */
	struct httpconn *arriving;      /* accepted, their connection not found yet */
	unsigned open_count, arriving_count;
	struct event *ev_arrivals;      /* the next turn of the loop: find them */
	struct event *ev_resume;        /* the end of an accept backoff */
	uint64_t backoff_ms;
	bool backing_off, full;         /* why accepting is paused */
	struct ratelog log;
	struct httplisten_stats stats;
	struct httplisten *next_listener;
};

/* Every listener open, so that the accept error callback, whose argument
 * is evhttp's, finds its own from the evconnlistener. */
static struct httplisten *listeners;

static bool httplisten_has(const struct httpconn *c)
{
	/* evhttp frees a bufferevent with its callbacks cleared; while it has
	 * the connection, the callbacks' argument is the connection. */
	void *cbarg = NULL;
	bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
	return c->evcon != NULL && cbarg == c->evcon;
}

static void httpconn_unlink(struct httpconn **list, struct httpconn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		*list = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void httpconn_push(struct httpconn **list, struct httpconn *c)
{
	c->next = *list;
	if (c->next != NULL)
		c->next->prev = c;
	*list = c;
}

static void httplisten_resume(struct httplisten *l)
{
	if (!l->backing_off && !l->full)
		evconnlistener_enable(l->lev);
}

/* Out of the door: our reference dropped (the last one when evhttp is done
 * with it, which closes the socket). */
static void httpconn_forget(struct httpconn *c)
{
	struct httplisten *l = c->l;
	httpconn_unlink(&l->open, c);
	l->open_count--;
	if (c->ev_deadline != NULL)
		event_free(c->ev_deadline);
	bufferevent_decref(c->bev);
	free(c);
}

static void httplisten_on_close(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	httpconn_forget(arg);
}

/* Closes c's connection now (its deadline, or room for a newcomer). */
static void httpconn_close(struct httpconn *c)
{
	if (httplisten_has(c)) {
		evhttp_connection_set_closecb(c->evcon, NULL, NULL);
		evhttp_connection_free(c->evcon);
	}
	httpconn_forget(c);
}

static void httplisten_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct httpconn *c = arg;
	struct httplisten *l = c->l;
	if (httplisten_has(c)) {
		l->stats.timed_out++;
		ratelog_warn(&l->log, "Closed the connection from %s to %s: the request was not "
				      "done %u ms after the accept", c->address, l->name,
			     HTTPLISTEN_DEADLINE_MS);
	}
	httpconn_close(c);
}

/* The oldest connection through the door, of address or (NULL) of any. */
static struct httpconn *httplisten_oldest(struct httplisten *l, const char *address)
{
	struct httpconn *best = NULL;
	for (struct httpconn *c = l->open; c != NULL; c = c->next)
		if (address == NULL || strcmp(c->address, address) == 0)
			best = c;   /* the list is newest first */
	return best;
}

static unsigned httplisten_count_of(const struct httplisten *l, const char *address)
{
	unsigned n = 0;
	for (const struct httpconn *c = l->open; c != NULL; c = c->next)
		n += strcmp(c->address, address) == 0;
	return n;
}

/* Makes room for a newcomer from address: the oldest of its address when
 * its share is full, the oldest of all when the listener is. */
static void httplisten_make_room(struct httplisten *l, const char *address)
{
	struct httpconn *victim = NULL;
	char limit[160];
	if (httplisten_count_of(l, address) >= HTTPLISTEN_MAX_PER_ADDRESS) {
		victim = httplisten_oldest(l, address);
		snprintf(limit, sizeof limit, "at most %u connections from %s at once",
			 HTTPLISTEN_MAX_PER_ADDRESS, address);
	} else if (l->open_count >= HTTPLISTEN_MAX_CONNECTIONS) {
		victim = httplisten_oldest(l, NULL);
		snprintf(limit, sizeof limit, "at most %u connections at once",
			 HTTPLISTEN_MAX_CONNECTIONS);
	}
	if (victim == NULL)
		return;
	l->stats.evicted++;
	ratelog_warn(&l->log, "Closed the connection from %s to %s, the oldest: %s takes %s",
		     victim->address, l->name, l->name, limit);
	httpconn_close(victim);
}

/* An accepted connection's evhttp connection found: through the door. */
static void httplisten_admit(struct httplisten *l, struct httpconn *c)
{
	char *host = NULL;
	ev_uint16_t port = 0;
	evhttp_connection_get_peer(c->evcon, &host, &port);
	snprintf(c->address, sizeof c->address, "%s", host != NULL ? host : "?");
	httplisten_make_room(l, c->address);
	c->ev_deadline = evtimer_new(l->base, httplisten_on_deadline, c);
	struct timeval tv = { .tv_sec = HTTPLISTEN_DEADLINE_MS / 1000u,
			      .tv_usec = (HTTPLISTEN_DEADLINE_MS % 1000u) * 1000 };
	if (c->ev_deadline != NULL)
		evtimer_add(c->ev_deadline, &tv);
	evhttp_connection_set_closecb(c->evcon, httplisten_on_close, c);
	httpconn_push(&l->open, c);
	l->open_count++;
	l->stats.accepted++;
}

static void httplisten_on_arrivals(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct httplisten *l = arg;
	while (l->arriving != NULL) {
		struct httpconn *c = l->arriving;
		httpconn_unlink(&l->arriving, c);
		l->arriving_count--;
		void *cbarg = NULL;
		bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
		c->evcon = cbarg;
		if (c->evcon == NULL || evhttp_connection_get_bufferevent(c->evcon) != c->bev) {
			/* evhttp let it go already (out of memory at its start). */
			bufferevent_decref(c->bev);
			free(c);
			continue;
		}
		httplisten_admit(l, c);
	}
	l->backoff_ms = HTTPLISTEN_BACKOFF_MIN_MS;
	l->full = false;
	httplisten_resume(l);
}

/* evhttp asks for each accepted connection's bufferevent here, just before
 * it gives it the socket and makes the connection around it. */
static struct bufferevent *httplisten_on_new_bev(struct event_base *base, void *arg)
{
	struct httplisten *l = arg;
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct httpconn *c = bev != NULL ? calloc(1, sizeof *c) : NULL;
	if (c == NULL)
		return bev;   /* evhttp makes its own, or fails: not past the door */
	c->l = l;
	c->bev = bev;
	bufferevent_incref(bev);
	httpconn_push(&l->arriving, c);
	l->arriving_count++;
	event_active(l->ev_arrivals, EV_TIMEOUT, 0);
	/* No more accepts this turn than the door can hold: the rest wait in
	 * the kernel's backlog until the arrivals went through it. */
	if (l->open_count + l->arriving_count > HTTPLISTEN_MAX_CONNECTIONS) {
		l->full = true;
		evconnlistener_disable(l->lev);
	}
	return bev;
}

static void httplisten_on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct httplisten *l = arg;
	l->backing_off = false;
	httplisten_resume(l);
}

/* accept failed for a reason libevent does not retry by itself (EMFILE,
 * ENFILE, ENOBUFS, ENOMEM: out of descriptors or memory): the socket stays
 * readable, so retrying at once would spin; pause instead, longer each
 * time until an accept succeeds. */
static void httplisten_on_accept_error(struct evconnlistener *lev, void *arg)
{
	(void)arg;   /* evhttp's */
	int err = EVUTIL_SOCKET_ERROR();
	struct httplisten *l = listeners;
	while (l != NULL && l->lev != lev)
		l = l->next_listener;
	if (l == NULL)
		return;
	l->stats.accept_backoffs++;
	ratelog_warn(&l->log, "Cannot accept a connection on %s: %s; accepting again in %u ms",
		     l->name, strerror(err), (unsigned)l->backoff_ms);
	l->backing_off = true;
	evconnlistener_disable(lev);
	struct timeval tv = { .tv_sec = (time_t)(l->backoff_ms / 1000u),
			      .tv_usec = (suseconds_t)(l->backoff_ms % 1000u) * 1000 };
	evtimer_add(l->ev_resume, &tv);
	l->backoff_ms *= 2;
	if (l->backoff_ms > HTTPLISTEN_BACKOFF_MAX_MS)
		l->backoff_ms = HTTPLISTEN_BACKOFF_MAX_MS;
}

/* The listener's own parts; 0 or -ENOMEM (what was made is freed by
 * httplisten_close). */
static int httplisten_build(struct httplisten *l, struct event_base *base, int fd)
{
	l->http = evhttp_new(base);
	if (l->http == NULL) {
		close(fd);
		return -ENOMEM;
	}
	/* With the socket given, evhttp neither binds nor listens again (a
	 * backlog of 0): it fails only when it cannot allocate. */
	struct evhttp_bound_socket *bound = evhttp_accept_socket_with_handle(l->http, fd);
	if (bound == NULL) {
		close(fd);
		return -ENOMEM;
	}
	l->lev = evhttp_bound_socket_get_listener(bound);
	l->ev_arrivals = event_new(base, -1, 0, httplisten_on_arrivals, l);
	l->ev_resume = evtimer_new(base, httplisten_on_resume, l);
	if (l->ev_arrivals == NULL || l->ev_resume == NULL)
		return -ENOMEM;
	evconnlistener_set_error_cb(l->lev, httplisten_on_accept_error);
	evhttp_set_bevcb(l->http, httplisten_on_new_bev, l);
	return 0;
}

int httplisten_open(struct event_base *base, const char *host, uint16_t port, const char *name,
		    struct httplisten **out, uint16_t *bound_port)
{
	int fd = net_listen(host, port, bound_port);
	if (fd < 0)
		return fd;
	struct httplisten *l = calloc(1, sizeof *l);
	if (l == NULL) {
		close(fd);
		return -ENOMEM;
	}
	l->base = base;
	snprintf(l->name, sizeof l->name, "%s", name);
	l->backoff_ms = HTTPLISTEN_BACKOFF_MIN_MS;
	char what[sizeof l->log.what];
	snprintf(what, sizeof what, "Connections refused or closed on %s", name);
	ratelog_init(&l->log, base, what, "the listener's counters");
	l->next_listener = listeners;
	listeners = l;
	int rc = httplisten_build(l, base, fd);
	if (rc < 0) {
		httplisten_close(l);
		return rc;
	}
	*out = l;
	return 0;
}

struct evhttp *httplisten_http(struct httplisten *l)
{
	return l->http;
}

void httplisten_stats(const struct httplisten *l, struct httplisten_stats *out)
{
	*out = l->stats;
	out->log_suppressed = l->log.suppressed_total;
	out->open = l->open_count;
}

void httplisten_warn(struct httplisten *l, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	ratelog_warn(&l->log, "%s", line);
}

void httplisten_close(struct httplisten *l)
{
	if (l == NULL)
		return;
	for (struct httplisten **p = &listeners; *p != NULL; p = &(*p)->next_listener)
		if (*p == l) {
			*p = l->next_listener;
			break;
		}
	/* Out of the door first, then evhttp closes every connection. */
	while (l->open != NULL) {
		struct httpconn *c = l->open;
		if (httplisten_has(c))
			evhttp_connection_set_closecb(c->evcon, NULL, NULL);
		httpconn_forget(c);
	}
	while (l->arriving != NULL) {
		struct httpconn *c = l->arriving;
		httpconn_unlink(&l->arriving, c);
		bufferevent_decref(c->bev);
		free(c);
	}
	if (l->http != NULL)
		evhttp_free(l->http);
	if (l->ev_arrivals != NULL)
		event_free(l->ev_arrivals);
	if (l->ev_resume != NULL)
		event_free(l->ev_resume);
	ratelog_close(&l->log);
	free(l);
}
