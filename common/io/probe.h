/* Clock probes over UDP with kernel timestamps (docs/CLOCKS.md).
 *
 * The builder's four-timestamp exchanges with a peer travel on a dedicated
 * UDP socket on each side rather than on the control connection: a TCP
 * stream coalesces messages, and a datagram can carry the kernel's own
 * SO_TIMESTAMPING stamps, taken when the packet passes the network device,
 * so that the time either process takes to get scheduled no longer counts as
 * network delay.
 *
 * One exchange, NTP-style, two-step for the peer's send stamp:
 *
 *   builder  PROBE(seq)          ->  peer      t1 = builder's TX stamp
 *   builder  <-  REPLY(seq,t2,t3u)  peer      t2 = peer's RX stamp of PROBE
 *   builder  <-  FOLLOWUP(seq,t3)   peer      t3 = peer's TX stamp of REPLY
 *                                            t4 = builder's RX stamp of REPLY
 *
 * Each stamp is the kernel's where the kernel gives one (hardware when the
 * socket asked for them and the device gives them, else software) and a
 * clock_gettime(CLOCK_REALTIME) read where it does not (t1 just before the
 * send, t2 just after the receive, t3u just before the send of the REPLY, t4
 * just after its receive): the user-space fallback. Kernel stamps are
 * CLOCK_REALTIME too; both get the daemon's injected --clock-offset-ns.
 *
 * The datagram is wire/probemsg.h's, the socket and its stamps
 * io/probesock.h's; this module is the two ends of the exchange. */
#ifndef ES_IO_PROBE_H
#define ES_IO_PROBE_H

#include "io/probesock.h"
#include "wire/probemsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* One completed exchange, builder clock for t1 and t4, peer clock for t2
 * and t3, each with its origin. */
struct prb_exchange {
	uint64_t sequence;
	int64_t t1_ns, t2_ns, t3_ns, t4_ns;
	enum prb_stamp stamp[4];   /* of t1 .. t4 */
};

/* ---- peer side: answers the builder's probes ---- */

/* A peer's first STATS says where its probe socket is in the group
 * CNT_GROUP_PROBE (wire/counters.h); without it, the builder probes over
 * the control connection. */

struct prb_responder;

/* Opens the probe socket of a peer daemon on the local address of its
 * control connection ctl_fd (port 0: any), answering only probes with its
 * token from the address ctl_fd is connected to. NULL with the reason
 * logged when no socket can be had: the builder then probes over the
 * control connection. what names the daemon in log lines. */
struct prb_responder *prb_responder_start(struct event_base *base, int ctl_fd, const char *what);

uint16_t prb_responder_port(const struct prb_responder *r);
uint64_t prb_responder_token(const struct prb_responder *r);

/* Counters: probes answered, datagrams refused (bad format, token or
 * sender), answers sent without a FOLLOWUP (no send stamp came). */
uint64_t prb_responder_answered(const struct prb_responder *r);
uint64_t prb_responder_refused(const struct prb_responder *r);

void prb_responder_free(struct prb_responder *r);

/* ---- builder side: one prober per peer ---- */

struct prb_prober;

typedef void (*prb_exchange_cb)(const struct prb_exchange *x, void *arg);

/* Opens a probe socket on the local address of the control connection
 * ctl_fd, connected to the peer's address on that connection with the
 * peer's probe port. Every completed exchange goes to cb. NULL with a
 * logged reason on failure. */
struct prb_prober *prb_prober_start(struct event_base *base, int ctl_fd, uint16_t peer_port,
				    uint64_t token, const char *what, prb_exchange_cb cb,
				    void *arg);

/* Sends the PROBE of one exchange; 0 or -errno. An exchange still waiting
 * for its FOLLOWUP from PRB_PENDING sequences ago is completed first with
 * the peer's user-space t3. */
int prb_prober_send(struct prb_prober *p, uint64_t sequence);

/* Completes every exchange answered but still waiting for its FOLLOWUP,
 * with the peer's user-space t3: at the end of a run. */
void prb_prober_flush(struct prb_prober *p);

/* Exchanges in flight the prober remembers; a probe older than that which
 * was never answered is forgotten (counted as lost). */
#define PRB_PENDING 32u

struct prb_prober_stats {
	uint64_t sent;
	uint64_t replies;
	uint64_t followups;
	uint64_t no_followup;   /* completed with the user-space t3 */
	uint64_t refused;       /* datagrams not matching an exchange */
	uint64_t lost;          /* probes never answered */
};

void prb_prober_stats(const struct prb_prober *p, struct prb_prober_stats *s);

void prb_prober_free(struct prb_prober *p);

#endif
