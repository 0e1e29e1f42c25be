/* UDP clock probes with kernel timestamps; see probe.h for the exchange
 * and docs/CLOCKS.md for why the bound still holds with these stamps. */
#include "io/probe.h"

#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <event2/event.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Room for the stamps and an extended error with its offender address. */
#define PRB_CMSG_BYTES 512
/* A looped-back send carries the packet with its headers. */
#define PRB_ERRQ_BYTES 256

/* ---- wire format ---- */

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

void prb_encode(const struct prb_msg *m, uint8_t buf[PRB_MSG_SIZE])
{
	buf[0] = (uint8_t)(PRB_MAGIC >> 24);
	buf[1] = (uint8_t)(PRB_MAGIC >> 16);
	buf[2] = (uint8_t)(PRB_MAGIC >> 8);
	buf[3] = (uint8_t)PRB_MAGIC;
	buf[4] = PRB_VERSION;
	buf[5] = m->type;
	buf[6] = 0;
	buf[7] = m->flags;
	put_u64(buf + 8, m->token);
	put_u64(buf + 16, m->sequence);
	put_u64(buf + 24, m->t2_ns);
	put_u64(buf + 32, m->t3_ns);
}

bool prb_decode(struct prb_msg *m, const uint8_t *buf, size_t len)
{
	uint32_t magic;

	if (len != PRB_MSG_SIZE)
		return false;
	magic = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
	if (magic != PRB_MAGIC || buf[4] != PRB_VERSION || buf[6] != 0)
		return false;
	if (buf[5] < PRB_PROBE || buf[5] > PRB_FOLLOWUP)
		return false;
	m->type = buf[5];
	m->flags = buf[7];
	m->token = get_u64(buf + 8);
	m->sequence = get_u64(buf + 16);
	m->t2_ns = get_u64(buf + 24);
	m->t3_ns = get_u64(buf + 32);
	return true;
}

const char *prb_stamp_name(enum prb_stamp s)
{
	return s == PRB_STAMP_HARDWARE ? "hardware" : s == PRB_STAMP_SOFTWARE ? "kernel software"
									       : "user space";
}

/* ---- stamps ---- */

static bool ts_to_ns(const struct timespec *ts, int64_t *ns)
{
	if (ts->tv_sec == 0 && ts->tv_nsec == 0)
		return false;
	if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000 ||
	    ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return false;
	*ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
	return true;
}

bool prb_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			  enum prb_stamp *kind)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)mh); c != NULL;
	     c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		struct scm_timestamping st;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPING ||
		    c->cmsg_len < CMSG_LEN(sizeof st))
			continue;
		memcpy(&st, CMSG_DATA(c), sizeof st);
		/* ts[1] is deprecated and always zero. */
		if (hardware && ts_to_ns(&st.ts[2], ns)) {
			*kind = PRB_STAMP_HARDWARE;
			return true;
		}
		if (ts_to_ns(&st.ts[0], ns)) {
			*kind = PRB_STAMP_SOFTWARE;
			return true;
		}
		return false;
	}
	return false;
}

bool prb_tx_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			     enum prb_stamp *kind)
{
	bool is_send_stamp = false;

	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)mh); c != NULL;
	     c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		struct sock_extended_err ee;

		if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
		      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) ||
		    c->cmsg_len < CMSG_LEN(sizeof ee))
			continue;
		memcpy(&ee, CMSG_DATA(c), sizeof ee);
		is_send_stamp = ee.ee_errno == ENOMSG && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING &&
				ee.ee_info == SCM_TSTAMP_SND;
	}
	return is_send_stamp && prb_stamp_from_cmsgs(mh, hardware, ns, kind);
}

/* ---- sockets ---- */

static bool prb_env_set(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && strcmp(v, "1") == 0;
}

/* Hardware stamps are on the device's clock, which equals CLOCK_REALTIME
 * only where something (phc2sys) keeps it there: asked for only then. */
#define PRB_HARDWARE_ENV "ES_PROBE_HARDWARE"

/* A non-blocking UDP socket on local (port 0) with kernel stamps asked
 * for; *kernel says whether the kernel took the request. */
static int prb_socket(const struct sockaddr_storage *local, socklen_t len, bool *kernel,
		      bool *hardware, const char *what)
{
	struct sockaddr_storage ss = *local;
	int fd, rc;

	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		return -EAFNOSUPPORT;
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		log_warn("%s: cannot create the clock probe socket: %s", what, strerror(errno));
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		rc = -errno;
		log_warn("%s: cannot bind the clock probe socket: %s", what, strerror(errno));
		close(fd);
		return rc;
	}
	*kernel = false;
	*hardware = false;
	if (!prb_env_set(PRB_USER_STAMPS_ENV)) {
		unsigned flags = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
				 SOF_TIMESTAMPING_TX_SOFTWARE;
		if (prb_env_set(PRB_HARDWARE_ENV))
			flags |= SOF_TIMESTAMPING_RAW_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE |
				 SOF_TIMESTAMPING_TX_HARDWARE;
		if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0) {
			*kernel = true;
			*hardware = (flags & SOF_TIMESTAMPING_RAW_HARDWARE) != 0;
		} else {
			log_info("%s: no kernel timestamps for clock probes (%s); user-space stamps instead",
				 what, strerror(errno));
		}
	}
	return fd;
}

/* The stamp of the message just received, else now from user space; plus
 * the injected offset either way, as every clock read of the daemon. */
static int64_t prb_rx_time(const struct msghdr *mh, bool kernel, bool hardware,
			   enum prb_stamp *kind)
{
	int64_t ns;

	if (kernel && prb_stamp_from_cmsgs(mh, hardware, &ns, kind))
		return ns + clk_offset_ns();
	*kind = PRB_STAMP_USER;
	return (int64_t)clk_realtime_ns();
}

/* Reads one message from the error queue: a send stamp and the tail of the
 * packet it belongs to, which is our datagram. false when the queue is
 * empty; *ok false for a message that is not such a stamp. */
static bool prb_read_errqueue(int fd, bool hardware, struct prb_msg *m, int64_t *ns,
			      enum prb_stamp *kind, bool *ok)
{
	uint8_t data[PRB_ERRQ_BYTES];
	union {
		char buf[PRB_CMSG_BYTES];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = data, .iov_len = sizeof data };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof control.buf };
	ssize_t n = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);

	*ok = false;
	if (n < 0)
		return errno == EINTR;
	if ((mh.msg_flags & MSG_TRUNC) || (size_t)n < PRB_MSG_SIZE)
		return true;
	if (!prb_tx_stamp_from_cmsgs(&mh, hardware, ns, kind))
		return true;
	*ok = prb_decode(m, data + n - PRB_MSG_SIZE, PRB_MSG_SIZE);
	*ns += clk_offset_ns();
	return true;
}

static bool prb_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

/* ---- responder ---- */

struct prb_responder {
	int fd;
	struct event *ev;
	bool kernel;
	bool hardware;
	uint16_t port;
	uint64_t token;
	struct sockaddr_storage builder;   /* only probes from this address */
	uint64_t answered;
	uint64_t refused;
	char what[64];
};

static void prb_responder_followups(struct prb_responder *r)
{
	struct prb_msg m;
	enum prb_stamp kind;
	int64_t ns;
	bool ok;

	while (prb_read_errqueue(r->fd, r->hardware, &m, &ns, &kind, &ok)) {
		uint8_t buf[PRB_MSG_SIZE];

		if (!ok || m.type != PRB_REPLY || m.token != r->token)
			continue;
		m.type = PRB_FOLLOWUP;
		m.flags = PRB_F_FOLLOWUP | (kind == PRB_STAMP_HARDWARE ? PRB_F_HARDWARE : 0);
		m.t3_ns = (uint64_t)ns;
		m.t2_ns = 0;
		prb_encode(&m, buf);
		/* The builder is who the REPLY went to: the last prober. */
		sendto(r->fd, buf, sizeof buf, 0, (struct sockaddr *)&r->builder,
		       r->builder.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							: sizeof(struct sockaddr_in));
	}
}

static void prb_responder_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct prb_responder *r = arg;
	(void)what;

	prb_responder_followups(r);
	for (;;) {
		uint8_t buf[PRB_MSG_SIZE + 1];
		union {
			char buf[PRB_CMSG_BYTES];
			struct cmsghdr align;
		} control;
		struct sockaddr_storage from;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov,
				     .msg_iovlen = 1, .msg_control = control.buf,
				     .msg_controllen = sizeof control.buf };
		enum prb_stamp kind;
		struct prb_msg m;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		int64_t t2 = prb_rx_time(&mh, r->kernel, r->hardware, &kind);
		if (!prb_decode(&m, buf, (size_t)n) || m.type != PRB_PROBE || m.token != r->token ||
		    !prb_same_ip(&from, &r->builder)) {
			r->refused++;
			continue;
		}
		/* Replies go back to the port the probe came from. */
		r->builder = from;
		m.type = PRB_REPLY;
		m.flags = (kind != PRB_STAMP_USER ? PRB_F_T2_KERNEL : 0) |
			  (kind == PRB_STAMP_HARDWARE ? PRB_F_HARDWARE : 0) |
			  (r->kernel ? PRB_F_FOLLOWUP : 0);
		m.t2_ns = (uint64_t)t2;
		/* t3 as late as possible: the user-space fallback of the send
		 * stamp, used when no FOLLOWUP comes. */
		m.t3_ns = clk_realtime_ns();
		prb_encode(&m, buf);
		if (sendto(fd, buf, PRB_MSG_SIZE, 0, (struct sockaddr *)&from, mh.msg_namelen) ==
		    (ssize_t)PRB_MSG_SIZE)
			r->answered++;
		/* Software send stamps are queued while sendto runs: the
		 * FOLLOWUP leaves right behind the REPLY. */
		prb_responder_followups(r);
	}
}

static int prb_local_and_peer(int ctl_fd, struct sockaddr_storage *local, socklen_t *local_len,
			      struct sockaddr_storage *peer)
{
	socklen_t plen = sizeof *peer;

	*local_len = sizeof *local;
	if (getsockname(ctl_fd, (struct sockaddr *)local, local_len) < 0 ||
	    getpeername(ctl_fd, (struct sockaddr *)peer, &plen) < 0)
		return -errno;
	if (local->ss_family != AF_INET && local->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	return 0;
}

static uint16_t prb_port_of(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

struct prb_responder *prb_responder_start(struct event_base *base, int ctl_fd, const char *what)
{
	struct prb_responder *r = calloc(1, sizeof *r);
	struct sockaddr_storage local;
	socklen_t len;
	int rc;

	if (r == NULL)
		return NULL;
	r->fd = -1;
	snprintf(r->what, sizeof r->what, "%s", what);
	rc = prb_local_and_peer(ctl_fd, &local, &len, &r->builder);
	if (rc < 0) {
		log_info("%s: no clock probe socket (control connection: %s); clock probes go over the control connection",
			 what, strerror(-rc));
		goto fail;
	}
	rc = prb_socket(&local, len, &r->kernel, &r->hardware, what);
	if (rc < 0)
		goto fail;
	r->fd = rc;
	r->port = prb_port_of(r->fd);
	if (getrandom(&r->token, sizeof r->token, 0) != (ssize_t)sizeof r->token || r->port == 0)
		goto fail;
	r->ev = event_new(base, r->fd, EV_READ | EV_PERSIST, prb_responder_on_read, r);
	if (r->ev == NULL || event_add(r->ev, NULL) < 0)
		goto fail;
	return r;
fail:
	prb_responder_free(r);
	return NULL;
}

uint16_t prb_responder_port(const struct prb_responder *r)
{
	return r->port;
}

uint64_t prb_responder_token(const struct prb_responder *r)
{
	return r->token;
}

uint64_t prb_responder_answered(const struct prb_responder *r)
{
	return r->answered;
}

uint64_t prb_responder_refused(const struct prb_responder *r)
{
	return r->refused;
}

void prb_responder_free(struct prb_responder *r)
{
	if (r == NULL)
		return;
	if (r->ev != NULL)
		event_free(r->ev);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

/* ---- prober ---- */

struct prb_slot {
	uint64_t sequence;         /* 0: free */
	bool replied;
	struct prb_exchange x;
};

struct prb_prober {
	int fd;
	struct event *ev;
	bool kernel;
	bool hardware;
	uint64_t token;
	prb_exchange_cb cb;
	void *arg;
	struct prb_slot slot[PRB_PENDING];
	struct prb_prober_stats st;
	char what[64];
};

static struct prb_slot *prb_find(struct prb_prober *p, uint64_t sequence)
{
	struct prb_slot *s = &p->slot[sequence % PRB_PENDING];
	return sequence != 0 && s->sequence == sequence ? s : NULL;
}

static void prb_complete(struct prb_prober *p, struct prb_slot *s)
{
	struct prb_exchange x = s->x;

	s->sequence = 0;
	p->cb(&x, p->arg);
}

/* Send stamps of our PROBEs: the kernel's t1. */
static void prb_prober_tx_stamps(struct prb_prober *p)
{
	struct prb_msg m;
	enum prb_stamp kind;
	int64_t ns;
	bool ok;

	while (prb_read_errqueue(p->fd, p->hardware, &m, &ns, &kind, &ok)) {
		struct prb_slot *s;

		if (!ok || m.type != PRB_PROBE || m.token != p->token)
			continue;
		s = prb_find(p, m.sequence);
		/* A stamp that comes after the reply is still the better t1:
		 * the exchange waits for its FOLLOWUP or was completed. */
		if (s != NULL) {
			s->x.t1_ns = ns;
			s->x.stamp[0] = kind;
		}
	}
}

static void prb_prober_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct prb_prober *p = arg;
	(void)what;

	prb_prober_tx_stamps(p);
	for (;;) {
		uint8_t buf[PRB_MSG_SIZE + 1];
		union {
			char buf[PRB_CMSG_BYTES];
			struct cmsghdr align;
		} control;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				     .msg_controllen = sizeof control.buf };
		enum prb_stamp kind;
		struct prb_msg m;
		struct prb_slot *s;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			/* ECONNREFUSED: the peer's port is closed (it exited);
			 * its probes count as lost. */
			if (errno == EINTR || errno == ECONNREFUSED)
				continue;
			break;
		}
		int64_t rx = prb_rx_time(&mh, p->kernel, p->hardware, &kind);
		if (!prb_decode(&m, buf, (size_t)n) || m.token != p->token ||
		    (s = prb_find(p, m.sequence)) == NULL) {
			p->st.refused++;
			continue;
		}
		if (m.type == PRB_REPLY && !s->replied) {
			p->st.replies++;
			s->replied = true;
			s->x.t2_ns = (int64_t)m.t2_ns;
			s->x.stamp[1] = !(m.flags & PRB_F_T2_KERNEL) ? PRB_STAMP_USER
					: (m.flags & PRB_F_HARDWARE)   ? PRB_STAMP_HARDWARE
								       : PRB_STAMP_SOFTWARE;
			s->x.t3_ns = (int64_t)m.t3_ns;
			s->x.stamp[2] = PRB_STAMP_USER;
			s->x.t4_ns = rx;
			s->x.stamp[3] = kind;
			if (!(m.flags & PRB_F_FOLLOWUP))
				prb_complete(p, s);
		} else if (m.type == PRB_FOLLOWUP && s->replied) {
			p->st.followups++;
			s->x.t3_ns = (int64_t)m.t3_ns;
			s->x.stamp[2] = (m.flags & PRB_F_HARDWARE) ? PRB_STAMP_HARDWARE
								   : PRB_STAMP_SOFTWARE;
			prb_complete(p, s);
		} else {
			p->st.refused++;
		}
	}
}

struct prb_prober *prb_prober_start(struct event_base *base, int ctl_fd, uint16_t peer_port,
				    uint64_t token, const char *what, prb_exchange_cb cb,
				    void *arg)
{
	struct prb_prober *p = calloc(1, sizeof *p);
	struct sockaddr_storage local, peer;
	socklen_t len;
	int rc;

	if (p == NULL)
		return NULL;
	p->fd = -1;
	p->token = token;
	p->cb = cb;
	p->arg = arg;
	snprintf(p->what, sizeof p->what, "%s", what);
	rc = prb_local_and_peer(ctl_fd, &local, &len, &peer);
	if (rc < 0) {
		log_info("%s: no clock probe socket (control connection: %s)", what, strerror(-rc));
		goto fail;
	}
	rc = prb_socket(&local, len, &p->kernel, &p->hardware, what);
	if (rc < 0)
		goto fail;
	p->fd = rc;
	if (peer.ss_family == AF_INET)
		((struct sockaddr_in *)&peer)->sin_port = htons(peer_port);
	else
		((struct sockaddr_in6 *)&peer)->sin6_port = htons(peer_port);
	if (connect(p->fd, (struct sockaddr *)&peer, len) < 0) {
		log_info("%s: cannot connect the clock probe socket: %s", what, strerror(errno));
		goto fail;
	}
	p->ev = event_new(base, p->fd, EV_READ | EV_PERSIST, prb_prober_on_read, p);
	if (p->ev == NULL || event_add(p->ev, NULL) < 0)
		goto fail;
	return p;
fail:
	prb_prober_free(p);
	return NULL;
}

int prb_prober_send(struct prb_prober *p, uint64_t sequence)
{
	struct prb_slot *s = &p->slot[sequence % PRB_PENDING];
	struct prb_msg m = { .type = PRB_PROBE, .token = p->token, .sequence = sequence };
	uint8_t buf[PRB_MSG_SIZE];

	if (sequence == 0)
		return -EINVAL;
	if (s->sequence != 0) {
		if (s->replied) {
			p->st.no_followup++;
			prb_complete(p, s);
		} else {
			p->st.lost++;
		}
	}
	memset(s, 0, sizeof *s);
	s->sequence = sequence;
	s->x.sequence = sequence;
	prb_encode(&m, buf);
	/* The user-space t1, as late as possible; the kernel's stamp replaces
	 * it when it comes. */
	s->x.t1_ns = (int64_t)clk_realtime_ns();
	s->x.stamp[0] = PRB_STAMP_USER;
	if (send(p->fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
		int rc = -errno;
		s->sequence = 0;
		return rc;
	}
	p->st.sent++;
	/* A software stamp is queued before send() returns. */
	if (p->kernel)
		prb_prober_tx_stamps(p);
	return 0;
}

void prb_prober_flush(struct prb_prober *p)
{
	if (p == NULL)
		return;
	prb_prober_tx_stamps(p);
	for (unsigned i = 0; i < PRB_PENDING; i++) {
		if (p->slot[i].sequence != 0 && p->slot[i].replied) {
			p->st.no_followup++;
			prb_complete(p, &p->slot[i]);
		}
	}
}

void prb_prober_stats(const struct prb_prober *p, struct prb_prober_stats *s)
{
	*s = p->st;
}

void prb_prober_free(struct prb_prober *p)
{
	if (p == NULL)
		return;
	if (p->ev != NULL)
		event_free(p->ev);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}
