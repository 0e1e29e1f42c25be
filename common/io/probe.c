/* UDP clock probes: the peer's responder and the builder's prober, over
 * the probe socket (probesock.h) in the datagram of wire/probemsg.h; see
 * probe.h for the exchange and docs/CLOCKS.md for why the bound still holds
 * with these stamps. */
#include "io/probe.h"

#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

/* ---- responder ---- */

struct prb_responder {
	struct prb_sock sock;
	struct event *ev;
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

	while (prb_sock_tx_stamp(&r->sock, &m, &ns, &kind, &ok)) {
		uint8_t buf[PRB_MSG_SIZE];

		if (!ok || m.type != PRB_REPLY || m.token != r->token)
			continue;
		m.type = PRB_FOLLOWUP;
		m.flags = PRB_F_FOLLOWUP | (kind == PRB_STAMP_HARDWARE ? PRB_F_HARDWARE : 0);
		m.t3_ns = (uint64_t)ns;
		m.t2_ns = 0;
		prb_encode(&m, buf);
		/* The builder is who the REPLY went to: the last prober. */
		sendto(r->sock.fd, buf, sizeof buf, 0, (struct sockaddr *)&r->builder,
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
		struct sockaddr_storage from;
		socklen_t from_len = sizeof from;
		enum prb_stamp kind;
		struct prb_msg m;
		int64_t t2;
		size_t n;

		if (prb_sock_recv(&r->sock, buf, sizeof buf, &n, &from, &from_len, &t2, &kind) <= 0)
			break;
		if (!prb_decode(&m, buf, n) || m.type != PRB_PROBE || m.token != r->token ||
		    !prb_same_ip(&from, &r->builder)) {
			r->refused++;
			continue;
		}
		/* Replies go back to the port the probe came from. */
		r->builder = from;
		m.type = PRB_REPLY;
		m.flags = (kind != PRB_STAMP_USER ? PRB_F_T2_KERNEL : 0) |
			  (kind == PRB_STAMP_HARDWARE ? PRB_F_HARDWARE : 0) |
			  (r->sock.kernel ? PRB_F_FOLLOWUP : 0);
		m.t2_ns = (uint64_t)t2;
		/* t3 as late as possible: the user-space fallback of the send
		 * stamp, used when no FOLLOWUP comes. */
		m.t3_ns = clk_realtime_ns();
		prb_encode(&m, buf);
		if (sendto(fd, buf, PRB_MSG_SIZE, 0, (struct sockaddr *)&from, from_len) ==
		    (ssize_t)PRB_MSG_SIZE)
			r->answered++;
		/* Software send stamps are queued while sendto runs: the
		 * FOLLOWUP leaves right behind the REPLY. */
		prb_responder_followups(r);
	}
}

struct prb_responder *prb_responder_start(struct event_base *base, int ctl_fd, const char *what)
{
	struct prb_responder *r = calloc(1, sizeof *r);
	struct sockaddr_storage local;
	socklen_t len;
	int rc;

	if (r == NULL)
		return NULL;
	r->sock.fd = -1;
	snprintf(r->what, sizeof r->what, "%s", what);
	rc = prb_sock_addresses(ctl_fd, &local, &len, &r->builder);
	if (rc < 0) {
		log_info("%s: no clock probe socket (control connection: %s); clock probes go over the control connection",
			 what, strerror(-rc));
		goto fail;
	}
	if (prb_sock_open(&r->sock, &local, len, what) < 0)
		goto fail;
	r->port = prb_sock_port(&r->sock);
	if (getrandom(&r->token, sizeof r->token, 0) != (ssize_t)sizeof r->token || r->port == 0)
		goto fail;
	r->ev = event_new(base, r->sock.fd, EV_READ | EV_PERSIST, prb_responder_on_read, r);
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
	prb_sock_close(&r->sock);
	free(r);
}

/* ---- prober ---- */

struct prb_slot {
	uint64_t sequence;         /* 0: free */
	bool replied;
	struct prb_exchange x;
};

struct prb_prober {
	struct prb_sock sock;
	struct event *ev;
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

	while (prb_sock_tx_stamp(&p->sock, &m, &ns, &kind, &ok)) {
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
	(void)fd;
	(void)what;

	prb_prober_tx_stamps(p);
	for (;;) {
		uint8_t buf[PRB_MSG_SIZE + 1];
		enum prb_stamp kind;
		struct prb_msg m;
		struct prb_slot *s;
		int64_t rx;
		size_t n;
		int rc = prb_sock_recv(&p->sock, buf, sizeof buf, &n, NULL, NULL, &rx, &kind);

		/* ECONNREFUSED: the peer's port is closed (it exited); its
		 * probes count as lost. */
		if (rc == -ECONNREFUSED)
			continue;
		if (rc <= 0)
			break;
		if (!prb_decode(&m, buf, n) || m.token != p->token ||
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
	p->sock.fd = -1;
	p->token = token;
	p->cb = cb;
	p->arg = arg;
	snprintf(p->what, sizeof p->what, "%s", what);
	rc = prb_sock_addresses(ctl_fd, &local, &len, &peer);
	if (rc < 0) {
		log_info("%s: no clock probe socket (control connection: %s)", what, strerror(-rc));
		goto fail;
	}
	if (prb_sock_open(&p->sock, &local, len, what) < 0)
		goto fail;
	if (peer.ss_family == AF_INET)
		((struct sockaddr_in *)&peer)->sin_port = htons(peer_port);
	else
		((struct sockaddr_in6 *)&peer)->sin6_port = htons(peer_port);
	if (connect(p->sock.fd, (struct sockaddr *)&peer, len) < 0) {
		log_info("%s: cannot connect the clock probe socket: %s", what, strerror(errno));
		goto fail;
	}
	p->ev = event_new(base, p->sock.fd, EV_READ | EV_PERSIST, prb_prober_on_read, p);
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
	if (send(p->sock.fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
		int rc = -errno;
		s->sequence = 0;
		return rc;
	}
	p->st.sent++;
	/* A software stamp is queued before send() returns. */
	if (p->sock.kernel)
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
	prb_sock_close(&p->sock);
	free(p);
}
