/* The greeting that opens every connection, data or control: the listener
 * sends CHALLENGE (a nonce), the client answers HELLO with its proof of the
 * run key (common/auth.h), the listener answers WELCOME or ERROR. A listener
 * with no run key accepts loopback peers only. Both sides read message by
 * message, byte-exact, so nothing that follows the greeting is ever
 * swallowed. Each side gives up after a handshake timeout. */
#ifndef ES_GREET_H
#define ES_GREET_H

#include "ctl.h"

#include <stdint.h>

struct event_base;
struct greet;

/* Listener side: hello is NULL with fd < 0 when the peer failed to greet
 * (closed, timed out, sent something that is not a HELLO: already logged and
 * the fd closed). Otherwise the callee must answer with greet_reply_welcome()
 * or greet_reply_error() and owns fd. */
typedef void (*greet_accept_cb)(int fd, const struct ctl_hello *hello, const char *peer,
				void *arg);

/* Reads a HELLO from a freshly accepted fd. */
struct greet *greet_accept(struct event_base *base, int fd, const char *peer,
			   uint64_t timeout_ms, greet_accept_cb cb, void *arg);

/* Client side: fd >= 0 and reply->type == CTL_WELCOME on success; fd < 0
 * with reply NULL when the connection failed, or reply an ERROR (logged,
 * fd closed) when refused. */
typedef void (*greet_connect_cb)(int fd, const struct ctl_msg *reply, void *arg);

/* Sends hello on a connected fd and waits for the answer. */
struct greet *greet_connect(struct event_base *base, int fd, const char *what,
			    const struct ctl_hello *hello, uint64_t timeout_ms,
			    greet_connect_cb cb, void *arg);

/* Abandons a greeting in progress and closes its fd; NULL is allowed. */
void greet_cancel(struct greet *g);

/* Answers a HELLO. The fd is fresh, so a message this small always fits in
 * its send buffer. greet_reply_error() also logs the refusal and closes fd. */
int greet_reply_welcome(int fd, uint32_t run_id, enum ctl_role role, uint32_t id);
void greet_reply_error(int fd, const char *peer, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Number of greetings in progress, for the connection cap. */
unsigned greet_in_progress(void);

/* Greetings a process holds at once; past it new connections are closed
 * so strangers cannot pile them up. */
#define GREET_MAX_IN_PROGRESS 64u

/* Accepts every connection waiting on listen_fd and starts its greeting
 * (greet_accept), closing those past GREET_MAX_IN_PROGRESS with a log line
 * and a count in *refused. */
void greet_accept_all(struct event_base *base, int listen_fd, uint64_t timeout_ms,
		      greet_accept_cb cb, void *arg, uint64_t *refused);

#endif
