/* The listener's side of the greeting: each listener's door (a cap on
 * greetings in progress, a share per peer address, the eviction of the
 * greeting that has come least far), the challenge, the verdict on a HELLO,
 * refusals and their rate-limited log. See handshake.h. */
#include "io/handshake_internal.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"
#include "wire/counters.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The door whose accept callback is running: greet_reply_error() is called
 * from there and logs within that listener's rate limit. */
static struct greet_door *greet_door_now;

/* A refusal or failure line of a listener, within its door's rate. */
static void greet_door_log(struct greet_door *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void greet_door_log(struct greet_door *d, const char *fmt, ...)
{
	char line[2 * CTL_MAX_TEXT + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (d == NULL)
		log_warn("%s", line);
	else
		ratelog_warn(&d->log, "%s", line);
}

/* ---- doors --------------------------------------------------------------- */

/* One descriptor held back, for the moment accept fails for want of them
 * (EMFILE, ENFILE): the listening socket then stays readable and the loop
 * would spin on an accept that cannot succeed, so the spare is let go, the
 * waiting connection accepted and closed at once (a client retries a
 * closed greeting) and the spare taken again. One per process, for every
 * door: the loop is single-threaded. */
static int greet_spare_fd = -1;

static void greet_spare_take(void)
{
	if (greet_spare_fd < 0)
		greet_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Out of descriptors (err) with connections waiting on listen_fd: each is
 * accepted on the spare's descriptor and closed, refused and counted. */
static void greet_door_shed(struct greet_door *d, int listen_fd, int err)
{
	while (greet_spare_fd >= 0) {
		close(greet_spare_fd);
		greet_spare_fd = -1;
		char peer[CTL_MAX_TEXT];
		int conn = net_accept(listen_fd, peer, sizeof peer);
		if (conn >= 0)
			close(conn);
		greet_spare_take();
		if (conn < 0)
			return;
		(*d->refused)++;
		greet_door_log(d, "Refused %s on %s: %s; closed at once", peer, d->name,
			       strerror(err));
	}
}

void greet_door_init(struct greet_door *door, struct event_base *base, const char *name,
		     const char *self, uint64_t timeout_ms, uint64_t *refused)
{
	memset(door, 0, sizeof *door);
	door->base = base;
	snprintf(door->name, sizeof door->name, "%s", name);
	snprintf(door->self, sizeof door->self, "%s", self);
	door->timeout_ms = timeout_ms;
	door->refused = refused;
	greet_spare_take();
	char what[sizeof door->log.what];
	snprintf(what, sizeof what, "Greetings refused or failed on %s", door->name);
	/* Every daemon with a door counts its refusals under this one name. */
	ratelog_init(&door->log, base, what, CNT_READER(refused_connections));
}

void greet_door_close(struct greet_door *door)
{
	while (door->greetings != NULL)
		greet_free(door->greetings, true);
	ratelog_close(&door->log);
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

static void greet_door_leave(struct greet *g)
{
	struct greet_door *d = g->door;
	if (d == NULL)
		return;
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
	g->door = NULL;
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
			 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	greet_refuse_v(d, fd, peer, code, fmt, ap);
	va_end(ap);
}


/* A listener's greeting ended as failed: fd closed (unless already -1),
 * reported so to its accept callback. */
static void greet_drop(struct greet *g)
{
	greet_accept_cb cb = g->accept_cb;
	void *arg = g->arg;
	char peer[CTL_MAX_TEXT];
	snprintf(peer, sizeof peer, "%s", g->peer);
	greet_free(g, true);
	cb(-1, NULL, NULL, peer, arg);
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
		/* The seal of what follows, should the daemon welcome it. */
		unsigned char key[AUTH_SESSION_KEY_BYTES];
		struct msgseal seal;
		auth_session_key(g->nonce, &hello, key);
		msgseal_init(&seal, key, false);
		sodium_memzero(key, sizeof key);
		greet_free(g, false);
		greet_door_now = d;
		cb(conn, &hello, &seal, peer, cb_arg);
		greet_door_now = NULL;
		sodium_memzero(&seal, sizeof seal);
		return;
	}
	/* Refused here: the fd is closed, the daemon only counts it. */
	g->fd = -1;
	greet_drop(g);
}

static void greet_listener_failed(struct greet *g, const char *why, bool transient)
{
	(void)transient;
	greet_door_log(g->door, "Greeting with %s failed: %s", g->peer, why);
	greet_drop(g);
}

/* Tell the client what the codec refused (a host name with a quote, say),
 * so its log says why; err quotes the peer's bytes escaped. */
static void greet_listener_bad_message(struct greet *g, const char *err)
{
	event_free(g->ev);
	g->ev = NULL;
	greet_refuse(g->door, g->fd, g->peer, "bad_message", "%s", err);
	g->fd = -1;
}

static const struct greet_side greet_listener_side = {
	.on_message = greet_on_hello,
	.on_failed = greet_listener_failed,
	.on_bad_message = greet_listener_bad_message,
	.on_free = greet_door_leave,
};

static struct greet *greet_accept_in(struct greet_door *door, struct event_base *base, int fd,
				     const char *peer, uint64_t timeout_ms, greet_accept_cb cb,
				     void *arg)
{
	struct greet *g = greet_new(base, fd, peer, timeout_ms, &greet_listener_side, arg);
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
		greet_drop(g);
		return NULL;
	}
	return g;
}

struct greet *greet_accept(struct event_base *base, int fd, const char *peer,
			   uint64_t timeout_ms, greet_accept_cb cb, void *arg)
{
	return greet_accept_in(NULL, base, fd, peer, timeout_ms, cb, arg);
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
	greet_drop(g);
}

void greet_accept_all(struct greet_door *door, int listen_fd, greet_accept_cb cb, void *arg)
{
	for (;;) {
		char peer[CTL_MAX_TEXT];
		int conn = net_accept(listen_fd, peer, sizeof peer);
		if (conn == -EMFILE || conn == -ENFILE)
			greet_door_shed(door, listen_fd, -conn);
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
