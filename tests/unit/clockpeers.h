/* Peers for the unit tests of builderd's clock modules (test_clocks.c,
 * test_clockreport.c): each a real control connection over loopback TCP
 * between the builder's end (a peer of a real peer table, whose PONGs go
 * to clocks_on_pong as hub.c routes them) and the peer's end, which answers
 * every PING as io/ctlclient does, its clock offset_ns ahead of ours, or
 * not at all when mute. A peer may open a real UDP probe socket
 * (prb_responder) and say so in a STATS, as a daemon does. */
#ifndef ES_TEST_CLOCKPEERS_H
#define ES_TEST_CLOCKPEERS_H

#include <check.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "seals.h"
#include "wire/counters.h"
#include "builderd/clock/clocks.h"
#include "builderd/peer.h"
#include "io/msgstream.h"
#include "io/probe.h"
#include "sys/clock.h"
#include "wire/control.h"

struct fake_peer {
	struct clocks *clocks;
	struct peer *bp;              /* the builder's end */
	struct msgconn *conn;            /* the peer's end */
	struct prb_responder *responder; /* its probe socket, when it has one */
	int64_t offset_ns;               /* its clock ahead of ours */
	bool mute;                       /* answers no PING */
	uint64_t pings;                  /* PINGs it received */
	struct ctl_msg reply;
};

/* A connected TCP pair on loopback. */
static inline void clockpeers_tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	*a = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(*a, 0);
	ck_assert_int_eq(connect(*a, (struct sockaddr *)&sa, sizeof sa), 0);
	*b = accept(l, NULL, NULL);
	ck_assert_int_ge(*b, 0);
	close(l);
}

static inline void clockpeers_builder_message(struct msgconn *c, const struct ctl_msg *msg,
					      uint64_t rx_ns, void *arg)
{
	(void)c;
	struct fake_peer *f = arg;
	if (msg->type == CTL_PONG)
		clocks_on_pong(f->clocks, f->bp, &msg->u.pong, rx_ns);
}

static inline void clockpeers_builder_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)reason;
	struct fake_peer *f = arg;
	msgconn_free(c);
	f->bp->conn = NULL;
}

static inline void clockpeers_peer_message(struct msgconn *c, const struct ctl_msg *msg,
					   uint64_t rx_ns, void *arg)
{
	struct fake_peer *f = arg;
	if (msg->type != CTL_PING)
		return;
	f->pings++;
	if (f->mute)
		return;
	f->reply.type = CTL_PONG;
	f->reply.u.pong.sequence = msg->u.ping.sequence;
	f->reply.u.pong.t1_ns = msg->u.ping.t1_ns;
	f->reply.u.pong.t2_ns = rx_ns + (uint64_t)f->offset_ns;
	f->reply.u.pong.t3_ns = clk_realtime_ns() + (uint64_t)f->offset_ns;
	msgconn_send(c, &f->reply);
}

static inline void clockpeers_peer_close(struct msgconn *c, const char *reason, void *arg)
{
	(void)reason;
	struct fake_peer *f = arg;
	msgconn_free(c);
	f->conn = NULL;
}

static const struct msgconn_ops clockpeers_builder_ops = {
	.on_message = clockpeers_builder_message,
	.on_close = clockpeers_builder_close,
};

static const struct msgconn_ops clockpeers_peer_ops = {
	.on_message = clockpeers_peer_message,
	.on_close = clockpeers_peer_close,
};

/* Connects bp as hub.c does once a peer is greeted, and tells the clocks
 * it joined. */
static inline void clockpeers_join(struct fake_peer *f, struct event_base *base, struct clocks *clocks,
				   struct peer *bp, const char *host, int64_t offset_ns)
{
	int peer_fd, builder_fd;
	clockpeers_tcp_pair(&peer_fd, &builder_fd);
	f->clocks = clocks;
	f->bp = bp;
	f->offset_ns = offset_ns;
	bp->connected = true;
	snprintf(bp->host, sizeof bp->host, "%s", host);
	struct msgseal peer_seal, builder_seal;
	test_seal_pair(&peer_seal, &builder_seal);
	bp->conn = msgconn_new(base, builder_fd, &builder_seal, "builder end", &clockpeers_builder_ops, f);
	f->conn = msgconn_new(base, peer_fd, &peer_seal, "peer end", &clockpeers_peer_ops, f);
	ck_assert_ptr_nonnull(bp->conn);
	ck_assert_ptr_nonnull(f->conn);
	clocks_peer_joined(clocks, bp);
}

/* A STATS (final false) or END from the peer: its "clock" group with the
 * offset it declares, and with probe true, its probe socket. */
static inline void clockpeers_report(struct fake_peer *f, struct event_base *base, bool final,
				     int64_t declared_ns, bool probe)
{
	struct ctl_report *r = calloc(1, sizeof *r);
	ck_assert_ptr_nonnull(r);
	struct ctl_group *g = ctl_report_group(r, "clock");
	ck_assert(ctl_group_set(g, "injected_offset_ns",
				declared_ns < 0 ? 0 - (uint64_t)declared_ns : (uint64_t)declared_ns));
	ck_assert(ctl_group_set(g, "injected_offset_negative", declared_ns < 0));
	if (probe) {
		f->responder = prb_responder_start(base, msgconn_fd(f->conn), "test peer");
		ck_assert_ptr_nonnull(f->responder);
		g = ctl_report_group(r, CNT_GROUP_PROBE);
		ck_assert(ctl_group_set(g, "udp_port", prb_responder_port(f->responder)));
		ck_assert(ctl_group_set(g, "token", prb_responder_token(f->responder)));
	}
	clocks_on_report(f->clocks, f->bp, r, final);
	free(r);
}

/* Both ends closed, the probe socket too. */
static inline void clockpeers_free(struct fake_peer *f)
{
	prb_responder_free(f->responder);
	f->responder = NULL;
	if (f->conn != NULL)
		msgconn_free(f->conn);
	f->conn = NULL;
	if (f->bp != NULL && f->bp->conn != NULL)
		msgconn_free(f->bp->conn);
	if (f->bp != NULL)
		f->bp->conn = NULL;
}

struct clockpeers_wait {
	bool (*done)(void *arg);
	void *arg;
	bool expired;
};

static inline void clockpeers_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	((struct clockpeers_wait *)arg)->expired = true;
}

/* Runs the loop until done(arg) or timeout_ms; true when done. done NULL:
 * runs for timeout_ms. */
static inline bool clockpeers_run(struct event_base *base, bool (*done)(void *arg), void *arg,
				  unsigned timeout_ms)
{
	struct clockpeers_wait w = { done, arg, false };
	struct event *deadline = evtimer_new(base, clockpeers_on_deadline, &w);
	struct timeval tv = { timeout_ms / 1000u, (timeout_ms % 1000u) * 1000 };
	ck_assert_ptr_nonnull(deadline);
	evtimer_add(deadline, &tv);
	while (!w.expired && (done == NULL || !done(arg)))
		event_base_loop(base, EVLOOP_ONCE);
	event_free(deadline);
	return done != NULL && done(arg);
}

#endif
