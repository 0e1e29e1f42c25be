#include "io/handshake.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct greet {
	struct event *ev;          /* readable */
	struct event *ev_deadline; /* one shot: the whole greeting's deadline */
	int fd;
	bool listener;
	bool challenged;           /* client: the listener's nonce has arrived */
	char nonce[CTL_NONCE_TEXT];
	struct ctl_hello hello;    /* client: sent once challenged */
	char peer[CTL_MAX_TEXT];
	char address[CTL_MAX_TEXT]; /* listener: the peer's address, for its share */
	uint64_t timeout_ms;
	uint64_t started_ns;       /* listener: the accept, for the eviction order */
	struct greet_door *door;   /* listener: NULL outside any door */
	struct greet *prev, *next; /* in door->greetings */
	struct greet_dial *dial;   /* client: the dial it is an attempt of */
	size_t have;
	size_t need;
	greet_accept_cb accept_cb;
	greet_connect_cb connect_cb;
	void *arg;
	struct ctl_msg msg;
	uint8_t buf[CTL_LENGTH_BYTES + 4096];
};

/* The door whose accept callback is running: greet_reply_error() is called
 * from there and logs within that listener's rate limit. */
static struct greet_door *greet_door_now;

static int greet_send(int fd, const struct ctl_msg *msg);
static void greet_dial_on_greeted(struct greet_dial *d, int fd, const struct ctl_msg *reply,
				  const char *why, bool transient);

/* ---- log rate limit ---------------------------------------------------- */

#define GREET_LOG_WINDOW_NS 1000000000u

static void greet_door_flush_log(struct greet_door *d)
{
	if (d->log_suppressed == 0)
		return;
	log_warn("Greetings refused or failed on %s: %" PRIu64 " more in the last second, not logged one by one (every one is counted in refused_connections)",
		 d->name, d->log_suppressed);
	d->log_suppressed = 0;
}

static void greet_door_on_log_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	greet_door_flush_log(arg);
}

/* A refusal or failure line of a listener: the first GREET_LOG_PER_SECOND
 * of a second are printed, the others summed up when the second ends, so a
 * flood of bad greetings cannot flood the log. */
static void greet_door_log(struct greet_door *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void greet_door_log(struct greet_door *d, const char *fmt, ...)
{
	char line[2 * CTL_MAX_TEXT + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (d == NULL) {
		log_warn("%s", line);
		return;
	}
	uint64_t now = clk_monotonic_ns();
	if (now - d->log_window_ns >= GREET_LOG_WINDOW_NS) {
		greet_door_flush_log(d);
		d->log_window_ns = now;
		d->log_lines = 0;
	}
	if (d->log_lines < GREET_LOG_PER_SECOND) {
		d->log_lines++;
		log_warn("%s", line);
		return;
	}
	d->log_suppressed++;
	if (d->ev_log != NULL && !evtimer_pending(d->ev_log, NULL)) {
		uint64_t left = d->log_window_ns + GREET_LOG_WINDOW_NS - now;
		struct timeval tv = { .tv_sec = (time_t)(left / 1000000000u),
				      .tv_usec = (suseconds_t)(left % 1000000000u) / 1000 };
		evtimer_add(d->ev_log, &tv);
	}
}

/* ---- doors --------------------------------------------------------------- */

void greet_door_init(struct greet_door *door, struct event_base *base, const char *name,
		     const char *self, uint64_t timeout_ms, uint64_t *refused)
{
	memset(door, 0, sizeof *door);
	door->base = base;
	snprintf(door->name, sizeof door->name, "%s", name);
	snprintf(door->self, sizeof door->self, "%s", self);
	door->timeout_ms = timeout_ms;
	door->refused = refused;
	door->ev_log = evtimer_new(base, greet_door_on_log_timer, door);
}

static void greet_free(struct greet *g, bool close_fd);

void greet_door_close(struct greet_door *door)
{
	while (door->greetings != NULL)
		greet_free(door->greetings, true);
	greet_door_flush_log(door);
	if (door->ev_log != NULL)
		event_free(door->ev_log);
	door->ev_log = NULL;
}

/* The address part of "host:port" (every Unix-socket peer is one address:
 * its pid is the peer's to choose). */
static void greet_address_of(const char *peer, char *buf, size_t len)
{
	if (strncmp(peer, "unix:", 5) == 0) {
		snprintf(buf, len, "unix");
		return;
	}
	const char *colon = strrchr(peer, ':');
	size_t n = colon != NULL ? (size_t)(colon - peer) : strlen(peer);
	snprintf(buf, len, "%.*s", (int)n, peer);
}

static struct greet_address *greet_door_address(struct greet_door *d, const char *address,
						bool add)
{
	struct greet_address *free_slot = NULL;
	for (size_t i = 0; i < GREET_MAX_IN_PROGRESS; i++) {
		struct greet_address *a = &d->addresses[i];
		if (a->greetings == 0) {
			if (free_slot == NULL)
				free_slot = a;
			continue;
		}
		if (strcmp(a->address, address) == 0)
			return a;
	}
	if (!add || free_slot == NULL)
		return NULL;
	snprintf(free_slot->address, sizeof free_slot->address, "%s", address);
	return free_slot;
}

/* ---- one greeting ---------------------------------------------------------- */

static void greet_free(struct greet *g, bool close_fd)
{
	if (g->ev != NULL)
		event_free(g->ev);
	if (g->ev_deadline != NULL)
		event_free(g->ev_deadline);
	if (close_fd && g->fd >= 0)
		close(g->fd);
	struct greet_door *d = g->door;
	if (d != NULL) {
		struct greet_address *a = greet_door_address(d, g->address, false);
		if (a != NULL)
			a->greetings--;
		d->in_progress--;
		if (g->prev != NULL)
			g->prev->next = g->next;
		else
			d->greetings = g->next;
		if (g->next != NULL)
			g->next->prev = g->prev;
	}
	free(g);
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
	greet_accept_cb cb = g->accept_cb;
	void *arg = g->arg;
	char peer[CTL_MAX_TEXT];
	snprintf(peer, sizeof peer, "%s", g->peer);
	greet_free(g, true);
	cb(-1, NULL, peer, arg);
}

static void greet_refuse_v(struct greet_door *d, int fd, const char *peer, const char *code,
			   const char *fmt, va_list ap)
{
	struct ctl_msg msg = { .type = CTL_ERROR };
	snprintf(msg.u.error.code, sizeof msg.u.error.code, "%s", code);
	vsnprintf(msg.u.error.reason, sizeof msg.u.error.reason, fmt, ap);
	greet_door_log(d, "Refused %s: %s", peer, msg.u.error.reason);
	greet_send(fd, &msg);
	close(fd);
}

static void greet_refuse(struct greet_door *d, int fd, const char *peer, const char *code,
			 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void greet_refuse(struct greet_door *d, int fd, const char *peer, const char *code,
			 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	greet_refuse_v(d, fd, peer, code, fmt, ap);
	va_end(ap);
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

/* The listener's verdict on a complete HELLO, before the daemon's own. */
static void greet_on_hello(struct greet *g)
{
	int conn = g->fd;
	struct greet_door *d = g->door;
	const struct ctl_hello *h = &g->msg.u.hello;
	const char *self = d != NULL ? d->self : "this daemon";
	if (g->msg.type != CTL_HELLO) {
		char err[96];
		snprintf(err, sizeof err, "expected hello, got %s", ctl_type_name(g->msg.type));
		greet_refuse(d, conn, g->peer, "expected_hello", "%s", err);
	} else if (auth_have_key() && !auth_check_hello(g->nonce, h)) {
		greet_refuse(d, conn, g->peer, "auth_failed",
			     "%s %u from %s did not prove the run key; give every daemon "
			     "of the run the same --run-key-file",
			     ctl_role_name(h->role), h->id, g->peer);
	} else if (!auth_have_key() && !net_fd_is_loopback(conn)) {
		greet_refuse(d, conn, g->peer, "auth_required",
			     "%s %u from %s is not on this host and this daemon has no "
			     "run key; start every daemon with --run-key-file",
			     ctl_role_name(h->role), h->id, g->peer);
	} else if (h->protocol != CTL_PROTOCOL_VERSION) {
		/* Every listener, the same words: nothing else in a HELLO of
		 * another version can be trusted to mean what it says here. */
		greet_refuse(d, conn, g->peer, "wrong_protocol", "%s %u speaks protocol %u, %s speaks %u",
			     ctl_role_name(h->role), h->id, h->protocol, self, CTL_PROTOCOL_VERSION);
	} else {
		greet_accept_cb cb = g->accept_cb;
		void *cb_arg = g->arg;
		char peer[CTL_MAX_TEXT];
		snprintf(peer, sizeof peer, "%s", g->peer);
		struct ctl_hello hello = *h;
		greet_free(g, false);
		greet_door_now = d;
		cb(conn, &hello, peer, cb_arg);
		greet_door_now = NULL;
		return;
	}
	/* Refused here: the fd is closed, the daemon only counts it. */
	greet_accept_cb cb = g->accept_cb;
	void *cb_arg = g->arg;
	char peer[CTL_MAX_TEXT];
	snprintf(peer, sizeof peer, "%s", g->peer);
	g->fd = -1;
	greet_free(g, false);
	cb(-1, NULL, peer, cb_arg);
}

static void greet_on_event(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct greet *g = arg;
	/* Read no further than the end of the one message expected. */
	ssize_t n = read(fd, g->buf + g->have, g->need - g->have);
	if (n == 0) {
		greet_fail(g, "connection closed during the greeting", true);
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		greet_fail(g, strerror(errno), greet_errno_transient(errno));
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
			greet_refuse(g->door, g->fd, g->peer, "bad_message", "%s", err);
			g->fd = -1;
		}
		greet_fail(g, err, false);
		return;
	}
	if (used == 0) {
		if (need > sizeof g->buf) {
			snprintf(err, sizeof err, "greeting of %zu bytes is larger than %zu", need,
				 sizeof g->buf);
			greet_fail(g, err, false);
			return;
		}
		g->need = need;
		return;
	}
	if (g->listener) {
		greet_on_hello(g);
		return;
	}
	if (!g->challenged) {
		if (g->msg.type == CTL_CHALLENGE) {
			/* Prove the run key on this very connection, then wait for
			 * the verdict. */
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

static struct greet *greet_new(struct event_base *base, int fd, const char *peer,
			       uint64_t timeout_ms, void *arg)
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

static struct greet *greet_accept_in(struct greet_door *door, struct event_base *base, int fd,
				     const char *peer, uint64_t timeout_ms, greet_accept_cb cb,
				     void *arg)
{
	struct greet *g = greet_new(base, fd, peer, timeout_ms, arg);
	if (g == NULL)
		return NULL;
	g->listener = true;
	g->accept_cb = cb;
	if (door != NULL) {
		g->door = door;
		door->in_progress++;
		greet_address_of(peer, g->address, sizeof g->address);
		struct greet_address *a = greet_door_address(door, g->address, true);
		if (a != NULL)
			a->greetings++;
		g->next = door->greetings;
		if (g->next != NULL)
			g->next->prev = g;
		door->greetings = g;
	}
	/* Every connection is challenged, key or not, so a client never has to
	 * guess whether to prove anything. */
	auth_new_nonce(g->nonce);
	struct ctl_msg challenge = { .type = CTL_CHALLENGE };
	memcpy(challenge.u.challenge.nonce, g->nonce, sizeof g->nonce);
	int rc = greet_send(fd, &challenge);
	if (rc < 0) {
		greet_door_log(door, "Cannot challenge %s: %s", peer, strerror(-rc));
		greet_free(g, true);
		cb(-1, NULL, peer, arg);
		return NULL;
	}
	return g;
}

struct greet *greet_accept(struct event_base *base, int fd, const char *peer,
			   uint64_t timeout_ms, greet_accept_cb cb, void *arg)
{
	return greet_accept_in(NULL, base, fd, peer, timeout_ms, cb, arg);
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
	va_list ap;
	va_start(ap, fmt);
	greet_refuse_v(greet_door_now, fd, peer, code, fmt, ap);
	va_end(ap);
}

/* How far a greeting in progress has come: the bytes of its HELLO read so
 * far, and those already waiting in the socket (a peer whose HELLO arrived
 * while the loop was accepting is not idle). */
static size_t greet_progress(const struct greet *g)
{
	int pending = 0;
	if (ioctl(g->fd, FIONREAD, &pending) < 0 || pending < 0)
		pending = 0;
	return g->have + (size_t)pending;
}

/* The greeting to evict when the door (address NULL) or one address's
 * share is full: an idle one (not a byte of its HELLO) before one that has
 * sent part of it, and of those the oldest. A peer that means to greet
 * sends its HELLO within a round trip of the challenge, so it is idle only
 * for that long; to keep it out, connections would have to come faster. */
static struct greet *greet_door_victim(struct greet_door *d, const char *address)
{
	struct greet *best = NULL;
	bool best_idle = false;
	for (struct greet *g = d->greetings; g != NULL; g = g->next) {
		if (address != NULL && strcmp(g->address, address) != 0)
			continue;
		bool idle = greet_progress(g) == 0;
		if (best == NULL || (idle && !best_idle) ||
		    (idle == best_idle && g->started_ns < best->started_ns)) {
			best = g;
			best_idle = idle;
		}
	}
	return best;
}

/* Makes room for a newcomer: the victim is told busy (it retries, like any
 * client turned away while the door was full) and closed; the daemon's
 * callback counts it in refused_connections. */
static void greet_evict(struct greet_door *d, struct greet *g, const char *limit)
{
	/* Whatever the peer has sent is read and dropped first, so that the
	 * close does not reset the connection before our ERROR is read. */
	uint8_t sink[512];
	while (read(g->fd, sink, sizeof sink) > 0)
		;
	int conn = g->fd;
	g->fd = -1;
	greet_refuse(d, conn, g->peer, GREET_BUSY_CODE,
		     "evicted: the door was full and this greeting was the oldest unfinished "
		     "(%s); retry later", limit);
	d->busy++;
	d->evicted++;
	greet_accept_cb cb = g->accept_cb;
	void *arg = g->arg;
	char peer[CTL_MAX_TEXT];
	snprintf(peer, sizeof peer, "%s", g->peer);
	greet_free(g, false);
	cb(-1, NULL, peer, arg);
}

void greet_accept_all(struct greet_door *door, int listen_fd, greet_accept_cb cb, void *arg)
{
	for (;;) {
		char peer[CTL_MAX_TEXT];
		int conn = net_accept(listen_fd, peer, sizeof peer);
		if (conn < 0)
			return;
		char address[CTL_MAX_TEXT];
		greet_address_of(peer, address, sizeof address);
		const struct greet_address *a = greet_door_address(door, address, false);
		unsigned mine = a != NULL ? a->greetings : 0;
		/* Full: the newcomer is let in and the greeting that has come
		 * least far for longest is put out, so that idle connections
		 * cannot hold the door until their deadline. Of one address's
		 * share, one of that address's; of the whole door, anyone's. */
		char limit[CTL_MAX_TEXT + 160];
		struct greet *victim = NULL;
		if (mine >= GREET_MAX_PER_ADDRESS) {
			snprintf(limit, sizeof limit, "%s holds at most %u greetings from %s at once",
				 door->name, GREET_MAX_PER_ADDRESS, address);
			victim = greet_door_victim(door, address);
		} else if (door->in_progress >= GREET_MAX_IN_PROGRESS) {
			snprintf(limit, sizeof limit, "%s holds at most %u greetings at once",
				 door->name, GREET_MAX_IN_PROGRESS);
			victim = greet_door_victim(door, NULL);
		}
		if (victim != NULL)
			greet_evict(door, victim, limit);
		if (door->in_progress < GREET_MAX_IN_PROGRESS &&
		    (victim != NULL || mine < GREET_MAX_PER_ADDRESS)) {
			greet_accept_in(door, door->base, conn, peer, door->timeout_ms, cb, arg);
			continue;
		}
		/* Not reached while the counts agree with the list; should they
		 * not, a refusal is still safe. */
		greet_refuse(door, conn, peer, GREET_BUSY_CODE, "%s is full; retry later", door->name);
		door->busy++;
		(*door->refused)++;
	}
}

/* ---- clients: dial, greet, retry ------------------------------------------ */

struct greet_dial {
	struct event_base *base;
	struct net_dial *dial;
	struct greet *greet;
	struct event *ev_retry;
	char what[64];             /* "the builder's control port", for net_dial */
	char host[256];
	uint16_t port;
	bool unix_socket;
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

static uint64_t greet_dial_left_ms(const struct greet_dial *d)
{
	uint64_t now = clk_monotonic_ns();
	return now >= d->deadline_ns ? 0 : (d->deadline_ns - now + 999999u) / 1000000u;
}

static void greet_dial_finish(struct greet_dial *d, int fd, const struct ctl_msg *reply)
{
	greet_connect_cb cb = d->cb;
	void *arg = d->arg;
	struct ctl_msg copy = *reply;
	greet_dial_cancel(d);
	cb(fd, &copy, arg);
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
				  const char *why, bool transient)
{
	d->greet = NULL;
	if (fd >= 0) {
		greet_dial_finish(d, fd, reply);
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
		greet_dial_finish(d, -1, &d->last);
		return;
	}
	uint64_t left = greet_dial_left_ms(d);
	if (left <= d->backoff_ms) {
		log_error("Gave up greeting %s after %u attempts in %.1f s; it said last: %s (%s)",
			  d->peer, d->attempts, (double)(clk_monotonic_ns() - d->started_ns) / 1e9,
			  reason, code);
		greet_dial_finish(d, -1, &d->last);
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
		greet_dial_finish(d, -1, &d->last);
		return;
	}
	if (d->buffer_bytes >= 0)
		net_tune(fd, d->buffer_bytes);
	uint64_t left = greet_dial_left_ms(d);
	struct greet *g = greet_new(d->base, fd, d->peer, left ? left : 1, d);
	if (g == NULL) {
		greet_dial_set_last(d, NULL, "greeting_failed", "out of memory");
		greet_dial_finish(d, -1, &d->last);
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
	d->dial = d->unix_socket ? net_dial_unix_start(d->base, d->what, d->host, left,
						       greet_dial_on_dialed, d)
				 : net_dial_start(d->base, d->what, d->host, d->port, left,
						  greet_dial_on_dialed, d);
	if (d->dial == NULL) {
		greet_dial_set_last(d, NULL, "greeting_failed", "out of memory");
		greet_dial_finish(d, -1, &d->last);
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
	snprintf(d->what, sizeof d->what, "%s", what);
	snprintf(d->host, sizeof d->host, "%s", host);
	d->port = port;
	d->unix_socket = unix_socket;
	if (unix_socket)
		snprintf(d->peer, sizeof d->peer, "%s at @%s", what, host);
	else
		snprintf(d->peer, sizeof d->peer, "%s at %s:%u", what, host, (unsigned)port);
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
	if (count > CTL_MAX_SOURCE_LIST)
		count = CTL_MAX_SOURCE_LIST;
	hello->source_count = (uint32_t)count;
	if (count > 0)
		memcpy(hello->sources, sources, count * sizeof sources[0]);
	net_host_name(hello->host, sizeof hello->host);
}
