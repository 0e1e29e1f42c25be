/* The clock probe socket (io/probe.h): a non-blocking UDP socket on the
 * local address of a control connection, asking the kernel for
 * SO_TIMESTAMPING stamps of what it receives and sends, and the stamps read
 * back from the control messages of a received message or of the error
 * queue. Where the kernel gives no stamp a clock_gettime(CLOCK_REALTIME)
 * read stands in: the user-space fallback. Every stamp handed out carries
 * the daemon's injected --clock-offset-ns, as its every clock read does. */
#ifndef ES_IO_PROBESOCK_H
#define ES_IO_PROBESOCK_H

#include "wire/probemsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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

struct prb_sock {
	int fd;
	bool kernel;        /* the kernel took the request for stamps */
	bool hardware;      /* hardware stamps were asked for too */
};

/* The local and the peer address of the control connection ctl_fd (IPv4
 * or IPv6): 0 or -errno (-EAFNOSUPPORT for a Unix socket). */
int prb_sock_addresses(int ctl_fd, struct sockaddr_storage *local, socklen_t *local_len,
		       struct sockaddr_storage *peer);

/* Opens s on local (its port replaced by 0: any) with kernel stamps asked
 * for. 0, or -errno with the reason logged naming what. */
int prb_sock_open(struct prb_sock *s, const struct sockaddr_storage *local, socklen_t len,
		  const char *what);

/* The port s is bound to, 0 when it cannot be told. */
uint16_t prb_sock_port(const struct prb_sock *s);

/* Reads one datagram of at most cap bytes into buf (*n its length) with
 * its receive time in *rx_ns (the kernel's stamp, else now) and origin in
 * *kind; from, when not NULL, gets the sender (*from_len in and out).
 * 1 when a datagram was read, 0 when none is waiting, else -errno (an
 * ICMP error, -ECONNREFUSED, on a connected socket whose peer is gone). */
int prb_sock_recv(const struct prb_sock *s, uint8_t *buf, size_t cap, size_t *n,
		  struct sockaddr_storage *from, socklen_t *from_len, int64_t *rx_ns,
		  enum prb_stamp *kind);

/* Reads one message from the error queue: a send stamp and the tail of the
 * packet it belongs to, which is our datagram, decoded into *m with the
 * stamp in *ns and *kind. false when the queue is empty; *ok false for a
 * message that is not such a stamp. */
bool prb_sock_tx_stamp(const struct prb_sock *s, struct prb_msg *m, int64_t *ns,
		       enum prb_stamp *kind, bool *ok);

/* Whether a and b hold the same IP address (ports aside). */
bool prb_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* Closes s; safe on a socket never opened (fd -1) or closed. */
void prb_sock_close(struct prb_sock *s);

#endif
