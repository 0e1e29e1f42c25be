/* A builder's control link to its hub (--role builder, docs/BUILDERS.md):
 * dials the hub's control port with the peers' client (io/ctlclient: the
 * greeting with HELLO role builder, the clock probes answered, the host's
 * clock state reported), hands the hub's ROUTING, ASSIGN, LOST, CLOCK, STOP
 * and BYE to the builder, and sends its TOKENs and END. Private to builderd. */
#ifndef ES_BD_HUBLINK_H
#define ES_BD_HUBLINK_H

#include "options.h"

#include "wire/control.h"

#include <stdint.h>

struct event_base;
struct hublink;

struct hublink_ops {
	void (*ready)(void *arg);                                  /* welcomed */
	void (*routing)(const struct ctl_routing *r, void *arg);
	void (*assign)(const struct ctl_assign *a, void *arg);
	void (*lost)(const struct ctl_lost *l, void *arg);         /* a builder given up */
	void (*stop)(const char *reason, void *arg);               /* the hub says stop */
	void (*bye)(int32_t status, void *arg);
	/* Refused, unreachable, or lost before BYE. */
	void (*gone)(const char *reason, void *arg);
	/* How a source's timestamps are put on this builder's clock
	 * (docs/BUILDERS.md, Latency: off(s) - off(b)), for output_set_clock(). */
	void (*clock)(const struct ctl_clock *c, void *arg);
};

/* Dials opt->hub_host:hub_port (giving up after --peer-timeout-ms). NULL
 * when it cannot even start (logged). */
struct hublink *hublink_start(struct event_base *base, const struct options *opt,
			      const struct hublink_ops *ops, void *arg);
void hublink_free(struct hublink *h);

/* A TOKEN with the next sequence, written to the socket at once
 * (ctllink_write_now); -ENOTCONN before the link is up. */
int hublink_send_token(struct hublink *h, uint32_t slots, uint64_t decided,
		       uint64_t decided_below);

/* A STATS (group "": CNT_LIST_BUILDER_STATS and the counters it names);
 * -ENOTCONN before the link is up. */
int hublink_send_stats(struct hublink *h, const struct ctl_msg *stats);

/* The END report (the link adds the host's clock groups). */
int hublink_send_end(struct hublink *h, const struct ctl_msg *end);

uint64_t hublink_tokens_sent(const struct hublink *h);

/* The hub has closed the link (ctllink_peer_closed): a TOKEN sent now
 * would never be read. */
bool hublink_hub_closed(const struct hublink *h);

/* After a gap in the builder's loop: sends stats and waits (at most
 * timeout_ns) for the hub's kernel to acknowledge them; false when the hub
 * closed the link (it gave this builder up) or did not answer in time. */
bool hublink_hub_answers(struct hublink *h, const struct ctl_msg *stats, uint64_t timeout_ns);

#endif
