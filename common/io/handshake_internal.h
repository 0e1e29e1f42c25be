/* What the greeting's own files share, and nothing else includes:
 * handshake_greeting.c (one greeting on one fd, either side), and the two
 * sides that stand on it, handshake_listen.c (the listener's doors and
 * verdicts) and handshake_dial.c (the client's answer, dial and retry).
 * The core calls a side only through its struct greet_side. The contracts
 * are handshake.h's. */
#ifndef ES_IO_HANDSHAKE_INTERNAL_H
#define ES_IO_HANDSHAKE_INTERNAL_H

#include "io/handshake.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct greet;

/* What a side does with what the core reads. */
struct greet_side {
	/* g->msg holds the complete message the core waited for. */
	void (*on_message)(struct greet *g);
	/* The greeting failed for why (a retry may help when transient); the
	 * side ends g. */
	void (*on_failed)(struct greet *g, const char *why, bool transient);
	/* The codec refused the peer's bytes (err): the side may tell the peer
	 * before on_failed; NULL: nothing to tell. */
	void (*on_bad_message)(struct greet *g, const char *err);
	/* g is about to be freed: out of whatever of the side holds it; NULL:
	 * nothing holds it. */
	void (*on_free)(struct greet *g);
};

struct greet {
	const struct greet_side *side;
	struct event *ev;          /* readable */
	struct event *ev_deadline; /* one shot: the whole greeting's deadline */
	int fd;
	bool listener;
	bool challenged;           /* client: the listener's nonce has arrived */
	char nonce[CTL_NONCE_TEXT]; /* the challenge: sent (listener) or received (client) */
	struct ctl_hello hello;    /* client: sent once challenged, with its nonce and proof */
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

/* handshake_greeting.c: a greeting of side on fd with its deadline
 * timeout_ms from now, reading from the loop (NULL, fd closed, when out of
 * memory); its end (events freed, the side's on_free, fd closed if
 * close_fd); its failure, handed to the side; one message written whole to
 * a fresh fd (0 or -errno, -EAGAIN for a short write); whether a failure
 * of the connection itself (not of what was said on it) is worth another
 * attempt. */
struct greet *greet_new(struct event_base *base, int fd, const char *peer, uint64_t timeout_ms,
			const struct greet_side *side, void *arg);
void greet_free(struct greet *g, bool close_fd);
void greet_fail(struct greet *g, const char *why, bool transient);
int greet_send(int fd, const struct ctl_msg *msg);
bool greet_errno_transient(int err);

#endif
