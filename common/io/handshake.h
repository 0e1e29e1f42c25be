/* The greeting that opens every connection, data or control: the listener
 * sends CHALLENGE (a nonce), the client answers HELLO with its proof of the
 * run key (common/sys/auth.h) and a nonce of its own, the listener answers
 * WELCOME or ERROR. Both ends of a welcomed greeting get the connection's
 * seal (io/msgseal), keyed by both nonces and the HELLO, for the control
 * messages that follow. A listener with no run key accepts loopback peers
 * only. Both sides read message by
 * message, byte-exact, so nothing that follows the greeting is ever
 * swallowed. A greeting has a deadline from its start (the listener's
 * handshake timeout, the client's connect timeout), however its bytes
 * trickle in. Each listener admits greetings through a door of its own
 * (struct greet_door): a cap per listener and a share per peer address;
 * when either is full a newcomer is still let in and the greeting that has
 * come least far for longest (idle before partial, then the oldest) is
 * evicted, so that idle connections to one port, or from one address,
 * cannot keep the others out. docs/PROTOCOL.md, "Greeting". */
#ifndef ES_IO_HANDSHAKE_H
#define ES_IO_HANDSHAKE_H

#include "io/msgseal.h"
#include "io/ratelog.h"
#include "wire/control.h"

#include <stdbool.h>
#include <stdint.h>

struct event;
struct event_base;
struct greet;

/* Greetings one listener holds at once; past it a newcomer takes the
 * place of the greeting that has come least far for longest (evicted, told
 * "busy"), so strangers cannot pile them up. */
#define GREET_MAX_IN_PROGRESS 64u

/* Greetings one peer address (an IP address; every Unix-socket peer is one
 * address) holds at once on one listener: a quarter, so one address alone
 * never fills the door; past it a newcomer evicts one of its address's. */
#define GREET_MAX_PER_ADDRESS (GREET_MAX_IN_PROGRESS / 4u)

/* The ERROR code of a refusal a client should retry: the listener was too
 * busy to greet it (its greeting was evicted to make room). */
#define GREET_BUSY_CODE "busy"

struct greet_address {
	char address[CTL_MAX_TEXT];
	unsigned greetings;
};

/* One listener's admission state. Embedded in the daemon's state; set up
 * with greet_door_init(), ended with greet_door_close(). */
struct greet_door {
	struct event_base *base;
	char name[64];                 /* "the builder's data port", for log lines */
	char self[32];                 /* "the builder", "reader 0": refusals say who speaks what */
	uint64_t timeout_ms;           /* the deadline of a greeting, from accept */
	uint64_t *refused;             /* the daemon's refused_connections, +1 per refusal */
	uint64_t busy;                 /* told busy: evicted, or refused at the cap */
	uint64_t evicted;              /* of them, evicted to make room for a newcomer */
	uint64_t timed_out;            /* dropped at the deadline */
	unsigned in_progress;
	struct greet_address addresses[GREET_MAX_IN_PROGRESS];
	struct greet *greetings;       /* in progress, for greet_door_close() */
	/* Refusal and failure lines, RATELOG_PER_SECOND a second logged,
	 * the rest summed up when the second is over. */
	struct ratelog log;
};

void greet_door_init(struct greet_door *door, struct event_base *base, const char *name,
		     const char *self, uint64_t timeout_ms, uint64_t *refused);

/* Abandons every greeting in progress (closing their fds) and logs what the
 * rate limit still holds back. */
void greet_door_close(struct greet_door *door);

/* Listener side: hello is NULL with fd < 0 when the peer failed to greet
 * (closed, timed out, sent something that is not a HELLO, spoke another
 * protocol version: already logged, the fd closed). Otherwise the callee
 * must answer with greet_reply_welcome() or greet_reply_error() and owns fd;
 * seal (valid during the call; copy it) is the connection's, for the
 * control messages that follow a WELCOME (msgconn_new). */
typedef void (*greet_accept_cb)(int fd, const struct ctl_hello *hello, const struct msgseal *seal,
				const char *peer, void *arg);

/* Accepts every connection waiting on listen_fd and starts its greeting.
 * When the door's cap or the newcomer's address share is full, the
 * greeting in progress that has come least far (no byte of its HELLO, then
 * part of one) for longest, of that address or of the whole door, is
 * evicted: told GREET_BUSY_CODE, closed, and reported to cb as failed
 * (fd < 0), so that the daemon counts it in refused_connections. When
 * accept fails for want of descriptors, each waiting connection is
 * accepted on a descriptor held back for this and closed at once (counted
 * in refused_connections, logged within the rate), so that the listening
 * socket does not stay readable and the loop spin. */
void greet_accept_all(struct greet_door *door, int listen_fd, greet_accept_cb cb, void *arg);

/* Reads a HELLO from a freshly accepted fd, outside any door's cap (for
 * tests): the deadline is timeout_ms from now. */
struct greet *greet_accept(struct event_base *base, int fd, const char *peer,
			   uint64_t timeout_ms, greet_accept_cb cb, void *arg);

/* Client side: fd >= 0 and reply->type == CTL_WELCOME on success, with
 * seal (valid during the call; copy it) the connection's, for the control
 * messages that follow (msgconn_new); fd < 0 with reply NULL when the
 * connection failed, or reply an ERROR (logged, fd closed) when refused,
 * and seal NULL. */
typedef void (*greet_connect_cb)(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
				 void *arg);

/* Sends hello on a connected fd and waits for the answer, at most
 * timeout_ms in all. One attempt: clients use greet_dial_start(). */
struct greet *greet_connect(struct event_base *base, int fd, const char *what,
			    const struct ctl_hello *hello, uint64_t timeout_ms,
			    greet_connect_cb cb, void *arg);

/* Abandons a greeting in progress and closes its fd; NULL is allowed. */
void greet_cancel(struct greet *g);

/* Answers a HELLO. The fd is fresh, so a message this small always fits in
 * its send buffer. greet_reply_error() also logs the refusal (within the
 * listener's log rate limit when called from its accept callback) and
 * closes fd. */
int greet_reply_welcome(int fd, uint32_t run_id, enum ctl_role role, uint32_t id);
void greet_reply_error(int fd, const char *peer, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The HELLO this process greets with: role, id, channel and run as given;
 * this protocol version, pid and host name (net_host_name); a reader's
 * count sources (at most CTL_MAX_SOURCE_LIST; NULL with 0 for other roles).
 * The nonce and the proof are filled per connection, when the listener's
 * challenge comes. */
void greet_hello_init(struct ctl_hello *hello, enum ctl_role role, uint32_t id,
		      enum ctl_channel channel, uint32_t run_id, const uint16_t *sources,
		      size_t count);

/* Every client's way in: dials host:port (TCP) or the abstract Unix socket
 * "\0name", greets, and retries a greeting cut for a transient reason (the
 * listener was busy, the greeting timed out, the connection was reset or
 * closed) with backoff (10 ms doubling to 500 ms) until timeout_ms has
 * passed since the start. A refusal for any other reason is final at once.
 * On giving up it logs what the listener said last (its code and message).
 * cb gets the welcomed fd, or fd < 0 and an ERROR: the listener's last
 * refusal, or one made here (code "unreachable" or "greeting_failed") that
 * says why. When buffer_bytes >= 0 the fd is tuned with net_tune() once
 * connected. */
struct greet_dial;
struct greet_dial *greet_dial_start(struct event_base *base, const char *what, const char *host,
				    uint16_t port, bool unix_socket, const struct ctl_hello *hello,
				    uint64_t timeout_ms, int buffer_bytes, greet_connect_cb cb,
				    void *arg);

/* Stops a dial in progress (no callback); NULL is allowed. */
void greet_dial_cancel(struct greet_dial *d);

#endif
