/* A peer daemon's control link to builderd: connects with retry, greets,
 * answers clock PINGs by itself, reports the host's clock state (chrony at
 * start and end, the injected offset) and hands CREDIT, BYE and ERROR to
 * the daemon. One per sourced and readoutd. docs/CLOCKS.md. */
#ifndef ES_IO_CTLCLIENT_H
#define ES_IO_CTLCLIENT_H

#include "wire/control.h"

#include <stdint.h>

struct event_base;
struct ctllink;

/* Set to 1 in a daemon's environment: it reports an injected offset of 0
 * whatever its --clock-offset-ns, for the test of an estimate whose chrony
 * interval is wrong (docs/CLOCKS.md). */
#define CTLLINK_UNDECLARED_OFFSET_ENV "ES_CLOCK_OFFSET_UNDECLARED"

struct ctllink_ops {
	void (*on_ready)(void *arg);                        /* welcomed */
	void (*on_credit)(uint64_t limit, void *arg);       /* may be NULL */
	/* The run starts at start_mono_ns on the monotonic clock; may be NULL. */
	void (*on_start)(uint64_t start_mono_ns, void *arg);
	void (*on_bye)(int32_t status, void *arg);
	/* The builder says stop (source == CTL_STOP_ALL) or drop a source. */
	void (*on_stop)(uint32_t source, const char *reason, void *arg);
	/* The operator's drained stop (a STOP with last_event, not
	 * CTL_STOP_NOW): generate up to last_event, then end; with confirm,
	 * the stop's proposal: answer where it will end, hold there for the
	 * final one. NULL: such a STOP goes to on_stop. */
	void (*on_drain)(uint64_t last_event, bool confirm, const char *reason, void *arg);
	/* Refused, unreachable, or lost before BYE: the daemon cannot finish
	 * its run properly. */
	void (*on_lost)(const char *reason, void *arg);
	/* Any other message (ROUTING, ASSIGN, LOST of several builders); may
	 * be NULL: then it is logged as unexpected and ignored. */
	void (*on_message)(const struct ctl_msg *msg, void *arg);
};

struct ctllink *ctllink_start(struct event_base *base, const char *host, uint16_t port,
			      const struct ctl_hello *hello, uint64_t connect_timeout_ms,
			      const struct ctllink_ops *ops, void *arg);

/* Sends a message (STATS or END); -ENOTCONN before the link is ready. An
 * END gets two more report groups, "chrony" (this host's chrony state, read
 * now) and "clock" (the injected --clock-offset-ns); the first STATS, sent
 * by the link itself once welcomed, carries the same read at start. */
int ctllink_send(struct ctllink *l, const struct ctl_msg *msg);

/* Writes the messages queued to the socket now (msgconn_write_now). 0 or
 * -errno; -ENOTCONN before the link is up. */
int ctllink_write_now(struct ctllink *l);

/* true once the other side has closed the connection: a FIN or a reset
 * waiting in the kernel, even behind messages not read yet. A builder asks
 * before each TOKEN, so that one its hub gave up while it was stopped sends
 * nothing the hub will never read (docs/BUILDERS.md, "A given-up builder is
 * fenced"). false before the link is up. */
bool ctllink_peer_closed(const struct ctllink *l);

/* Whether the other side's kernel acknowledged every byte sent so far,
 * waiting at most timeout_ns: true when it did, false when the connection
 * was reset or closed, or nothing came in time. A peer that closed its
 * socket answers new bytes with a reset, even when its FIN cannot reach
 * us (our receive window full of messages sent while we were stopped), so
 * a message sent just before this tells a live peer from a gone one within
 * a round trip. Blocks the caller: for rare checks only. */
bool ctllink_acked(struct ctllink *l, uint64_t timeout_ns);

void ctllink_free(struct ctllink *l);

#endif
