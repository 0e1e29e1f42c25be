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
 * Wire format: every datagram is PRB_MSG_SIZE bytes, big-endian:
 *   magic u32 "ESPB" | version u8 | type u8 | flags u16 |
 *   token u64 | sequence u64 | t2_ns u64 | t3_ns u64
 * The token is chosen at random by the peer and told to the builder over the
 * authenticated control connection; the peer answers only PROBEs carrying
 * it, from the builder's address. */
#ifndef ES_IO_PROBE_H
#define ES_IO_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct msghdr;

#define PRB_MAGIC UINT32_C(0x45535042) /* "ESPB" */
#define PRB_VERSION 1u
#define PRB_MSG_SIZE 40u

enum prb_type { PRB_PROBE = 1, PRB_REPLY = 2, PRB_FOLLOWUP = 3 };

/* REPLY: t2 is the kernel's receive stamp (else a user-space read). */
#define PRB_F_T2_KERNEL 0x01u
/* REPLY: a FOLLOWUP with the kernel's send stamp of this REPLY will come
 * (the peer's socket has send stamps on). FOLLOWUP: t3 is that stamp. */
#define PRB_F_FOLLOWUP 0x02u
/* t2 (REPLY) or t3 (FOLLOWUP) is a hardware stamp. */
#define PRB_F_HARDWARE 0x04u

struct prb_msg {
	uint8_t type;        /* enum prb_type */
	uint8_t flags;       /* PRB_F_* */
	uint64_t token;
	uint64_t sequence;
	uint64_t t2_ns;      /* REPLY */
	uint64_t t3_ns;      /* REPLY: user-space read; FOLLOWUP: kernel stamp */
};

/* Writes m into buf. */
void prb_encode(const struct prb_msg *m, uint8_t buf[PRB_MSG_SIZE]);

/* Reads one datagram: false unless it is exactly PRB_MSG_SIZE bytes with the
 * magic, the version and a known type. */
bool prb_decode(struct prb_msg *m, const uint8_t *buf, size_t len);

/* Where a stamp came from. */
enum prb_stamp { PRB_STAMP_USER, PRB_STAMP_SOFTWARE, PRB_STAMP_HARDWARE };

/* Name for metrics.json: "user space", "kernel software", "hardware". */
const char *prb_stamp_name(enum prb_stamp s);

/* The SCM_TIMESTAMPING stamp among the control messages of a received
 * message: the hardware one (ts[2]) when hardware is true and it is set,
 * else the software one (ts[0]) when set. CLOCK_REALTIME ns in *ns (no
 * injected offset), its origin in *kind. false when there is none: the
 * caller falls back to a user-space read. */
bool prb_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			  enum prb_stamp *kind);

/* For a message read from the error queue: true when it is the send stamp
 * of a packet (sock_extended_err of origin SO_EE_ORIGIN_TIMESTAMPING, info
 * SCM_TSTAMP_SND) and carries a stamp, read as prb_stamp_from_cmsgs()
 * does. Scheduling or acknowledgement stamps and real errors: false. */
bool prb_tx_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			     enum prb_stamp *kind);

/* Set to 1 in a daemon's environment: its probe socket asks the kernel for
 * no stamps, so every stamp it takes is the user-space fallback. For tests,
 * as --clock-offset-ns is. */
#define PRB_USER_STAMPS_ENV "ES_PROBE_USER_STAMPS"

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
