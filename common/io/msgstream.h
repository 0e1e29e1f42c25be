/* A control connection after its greeting: length-prefixed control messages
 * both ways over a bufferevent, each sealed (io/msgseal: a sequence number
 * and a tag under the session key the greeting made). Incoming messages are
 * checked, then decoded into one buffer owned by the connection (no
 * allocation per message); a message that fails its seal ("control message
 * failed authentication", "control message out of sequence"), a malformed
 * one, or a peer that lets its output pile up past a bound closes the
 * connection with a reason, as a dead peer's would. */
#ifndef ES_IO_MSGSTREAM_H
#define ES_IO_MSGSTREAM_H

#include "io/msgseal.h"
#include "wire/control.h"

#include <stdint.h>

struct event_base;
struct msgconn;

struct msgconn_ops {
	/* One message; rx_realtime_ns is when its bytes were read (clk). */
	void (*on_message)(struct msgconn *c, const struct ctl_msg *msg, uint64_t rx_realtime_ns,
			   void *arg);
	/* The connection ended: reason is "closed by peer", a decode error or a
	 * socket error. The callee frees the connection. */
	void (*on_close)(struct msgconn *c, const char *reason, void *arg);
};

/* Output the peer has not read yet beyond which it is declared stuck. */
#define MSGCONN_MAX_PENDING_OUTPUT (4u << 20)

/* Takes ownership of a greeted fd and a copy of the seal its greeting
 * handed over (greet_accept_cb, greet_connect_cb). peer names it in log
 * lines. */
struct msgconn *msgconn_new(struct event_base *base, int fd, const struct msgseal *seal,
			    const char *peer, const struct msgconn_ops *ops, void *arg);

/* Messages this process refused for their seal (a bad tag, or out of
 * sequence), over all its connections: each one closed its connection. */
uint64_t msgconn_refused_total(void);

/* Queues one message; -EMSGSIZE when it cannot be encoded, -ENOBUFS when the
 * peer is not reading. */
int msgconn_send(struct msgconn *c, const struct ctl_msg *msg);

/* Writes what is queued to the socket now rather than at the loop's next
 * turn, as much as the socket takes (the rest stays queued): a message that
 * has left the process before a SIGSTOP is one the peer can read while
 * this process is stopped. 0, or -errno (the loop reports a broken socket
 * as usual). */
int msgconn_write_now(struct msgconn *c);

/* Closes once everything queued is written (then on_close is not called). */
void msgconn_close_when_flushed(struct msgconn *c);

void msgconn_free(struct msgconn *c);

const char *msgconn_peer(const struct msgconn *c);

/* The connection's socket, for questions about its addresses (never read
 * or write it); -1 when none. */
int msgconn_fd(const struct msgconn *c);

#endif
