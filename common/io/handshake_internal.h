/* What the greeting's own files share, and nothing else includes:
 * handshake_greeting.c (one greeting on one fd), handshake_listen.c (the
 * listener's doors and verdicts) and handshake_dial.c (the client's dial
 * and retry). The contracts are handshake.h's. */
#ifndef ES_IO_HANDSHAKE_INTERNAL_H
#define ES_IO_HANDSHAKE_INTERNAL_H

#include "io/handshake.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* handshake_greeting.c: a greeting on fd with its deadline timeout_ms from now,
 * reading from the loop (NULL, fd closed, when out of memory); its end
 * (events freed, out of its door, fd closed if close_fd); a listener's
 * greeting ended as failed (its fd closed unless already -1) and reported
 * so to its accept callback; one message written whole to a fresh fd (0 or
 * -errno, -EAGAIN for a short write). */
struct greet *greet_new(struct event_base *base, int fd, const char *peer, uint64_t timeout_ms,
			void *arg);
void greet_free(struct greet *g, bool close_fd);
void greet_drop(struct greet *g);
int greet_send(int fd, const struct ctl_msg *msg);

/* handshake_listen.c: a listener's log line within its door's rate limit
 * (d NULL: unlimited); an ERROR sent on fd, logged so, and fd closed; g
 * taken out of its door's counts and list; the listener's verdict on the
 * complete HELLO in g->msg (frees g). */
void greet_door_log(struct greet_door *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void greet_refuse(struct greet_door *d, int fd, const char *peer, const char *code,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void greet_door_leave(struct greet *g);
void greet_on_hello(struct greet *g);

/* handshake_dial.c: the end of one attempt of dial d: fd welcomed (>= 0),
 * or refused (reply an ERROR) or failed for why, worth a retry when
 * transient. */
void greet_dial_on_greeted(struct greet_dial *d, int fd, const struct ctl_msg *reply,
			   const char *why, bool transient);

#endif
