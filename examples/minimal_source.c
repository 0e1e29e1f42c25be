/* minimal_source: the smallest peer of a run, to show how a program uses
 * common/. It takes the place of one sourced: it joins a run of real
 * daemons (builderd, readoutd), sends its fragments and reports, and the
 * run's books balance with it as with sourced.
 *
 *   minimal_source --id 1 --run 3 --events 1000 --payload 32 --seed 9 \
 *       --data 127.0.0.1:READER_PORT --control 127.0.0.1:BUILDER_CONTROL_PORT \
 *       [--run-key-file KEY]
 *
 * In the order it happens:
 *  1. greet_hello_init() (io/handshake) fills the HELLO that says who we are.
 *  2. ctllink_start() (io/ctlclient) dials builderd's control port, answers
 *     its CHALLENGE with that HELLO (signed with the run key, sys/auth),
 *     answers clock PINGs by itself, and calls us back on WELCOME, START,
 *     BYE or when the link is lost.
 *  3. greet_dial_start() (io/handshake) dials readoutd's data port with the
 *     same HELLO on the data channel, retrying while the reader is busy or
 *     not up yet; we get the welcomed socket.
 *  4. On START, each event's fragment is encoded with frm_encode()
 *     (wire/frame) around gen_payload()'s bytes (core/gen, so that
 *     analysis/refbuild.py can rebuild the run), then the END frame.
 *  5. Once the reader has every byte, the END report (wire/control) carries
 *     the counters the books need (core/acct: generated = omitted + sent +
 *     abandoned, frames on wire = received by the reader), each named by
 *     its symbol in wire/counters.
 *  6. builderd's BYE ends the program with the run's status.
 *
 * sourced does more: pacing, the seed's faults, batches written in place,
 * STOP, /metrics. This queues every frame in a bufferevent at once, which
 * is fine for a few thousand. */
#include "core/gen.h"
#include "io/ctlclient.h"
#include "io/handshake.h"
#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "sys/opt.h"
#include "wire/counters.h"
#include "wire/frame.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct example {
	struct event_base *base;
	uint32_t id, run, payload;
	uint64_t events, seed;
	char data_host[256], control_host[256];
	uint16_t data_port, control_port;
	struct ctllink *ctl;           /* to builderd's control port */
	struct greet_dial *dial;       /* to readoutd's data port, until welcomed */
	struct bufferevent *data;      /* the welcomed data connection */
	struct event *start_timer;
	uint64_t start_ns;             /* START's time on the monotonic clock; 0 before */
	bool sent;                     /* every frame queued */
	uint64_t frames_wire;
	int status;
	struct ctl_msg report;         /* 78 kB: not on the stack */
};

static void ex_fail(struct example *x, const char *what)
{
	log_error("Source %u: %s", x->id, what);
	x->status = 1;
	event_base_loopexit(x->base, NULL);
}

/* 5. The final counters, named by the source's list in wire/counters.h
 * (CNT_LIST_SOURCE). A real peer counts as it goes; here every fragment
 * was sent, none omitted or abandoned. */
static void ex_send_report(struct example *x)
{
	struct ctl_msg *m = &x->report;
	memset(m, 0, sizeof *m);
	m->type = CTL_END;
	struct ctl_group *g = ctl_report_group(&m->u.report, CNT_GROUP_TOTALS);
	ctl_group_set(g, CNT_SOURCE(events), x->events);
	ctl_group_set(g, CNT_SOURCE(frags_sent), x->events);
	ctl_group_set(g, CNT_SOURCE(frags_omitted), 0);
	ctl_group_set(g, CNT_SOURCE(frags_abandoned), 0);
	ctl_group_set(g, CNT_SOURCE(frames_wire), x->frames_wire);
	if (ctllink_send(x->ctl, m) < 0)
		ex_fail(x, "could not send its final counters");
	else
		log_info("Source %u: %" PRIu64 " fragments sent; END reported", x->id, x->events);
}

/* The output buffer ran dry: once every frame is with the kernel, close
 * the stream (the reader reads to its end) and report. */
static void ex_on_written(struct bufferevent *bev, void *arg)
{
	struct example *x = arg;
	if (!x->sent)
		return;
	bufferevent_free(bev);
	x->data = NULL;
	ex_send_report(x);
}

static void ex_on_data_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;   /* BEV_EVENT_ERROR or BEV_EVENT_EOF: nothing else is enabled */
	ex_fail(arg, "the reader closed the data connection");
}

/* 4. Every fragment, then the END frame that closes the stream. */
static void ex_send_fragments(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct example *x = arg;
	uint8_t *frame = malloc(FRM_HEADER_BYTES + x->payload);
	if (frame == NULL) {
		ex_fail(x, "out of memory");
		return;
	}
	for (uint64_t e = 0; e < x->events; e++) {
		struct frm_header h = {
			.source_id = (uint16_t)x->id, .run_id = x->run, .event_id = e,
			.sequence = e, .timestamp_ns = clk_realtime_ns(), .payload_len = x->payload,
		};
		gen_payload(frame + FRM_HEADER_BYTES, x->payload, x->seed, x->run, e,
			    (uint16_t)x->id);
		size_t n = frm_encode_in_place(frame, &h);
		bufferevent_write(x->data, frame, n);
		x->frames_wire++;
	}
	struct frm_header end = {
		.flags = FRM_FLAG_END, .source_id = (uint16_t)x->id, .run_id = x->run,
		.event_id = x->events, .sequence = x->events, .timestamp_ns = clk_realtime_ns(),
	};
	bufferevent_write(x->data, frame, frm_encode(frame, &end, NULL));
	free(frame);
	x->sent = true;
	log_info("Source %u: %" PRIu64 " fragments of %u B queued", x->id, x->events, x->payload);
}

/* Both connections up and START heard: send at the run's start. */
static void ex_maybe_start(struct example *x)
{
	if (x->start_ns == 0 || x->data == NULL || x->start_timer != NULL)
		return;
	uint64_t now = clk_monotonic_ns(), wait = x->start_ns > now ? x->start_ns - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u / 1000) };
	x->start_timer = evtimer_new(x->base, ex_send_fragments, x);
	evtimer_add(x->start_timer, &tv);
}

/* 3. The reader's answer to our data HELLO. */
static void ex_on_data_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal,
			       void *arg)
{
	(void)seal;   /* seals control messages; a data connection carries frames */
	struct example *x = arg;
	x->dial = NULL;
	if (fd < 0) {
		log_error("Source %u: the reader refused us: %s (%s)", x->id, reply->u.error.reason,
			  reply->u.error.code);
		ex_fail(x, "no data connection");
		return;
	}
	x->data = bufferevent_socket_new(x->base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(x->data, NULL, ex_on_written, ex_on_data_event, x);
	bufferevent_enable(x->data, EV_WRITE);
	ex_maybe_start(x);
}

/* 2. What the control link hands us. */
static void ex_on_ready(void *arg)
{
	log_info("Source %u: welcomed by the builder", ((struct example *)arg)->id);
}

static void ex_on_start(uint64_t start_mono_ns, void *arg)
{
	struct example *x = arg;
	x->start_ns = start_mono_ns;
	ex_maybe_start(x);
}

static void ex_on_bye(int32_t status, void *arg)
{
	struct example *x = arg;
	log_info("Source %u: the builder ended the run with status %d", x->id, status);
	x->status = x->status ? x->status : (status != 0);
	event_base_loopexit(x->base, NULL);
}

static void ex_on_lost(const char *reason, void *arg)
{
	log_error("Lost the builder's control connection: %s", reason);
	ex_fail(arg, "no control link");
}

static const struct ctllink_ops ex_ops = {
	.on_ready = ex_on_ready, .on_start = ex_on_start, .on_bye = ex_on_bye,
	.on_lost = ex_on_lost,
};

static int ex_options(struct example *x, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "id", required_argument, NULL, 'i' }, { "run", required_argument, NULL, 'r' },
		{ "events", required_argument, NULL, 'n' }, { "payload", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' }, { "data", required_argument, NULL, 'd' },
		{ "control", required_argument, NULL, 'c' },
		{ "run-key-file", required_argument, NULL, 'k' }, { NULL, 0, NULL, 0 },
	};
	bool ok = true;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && ok) {
		switch (c) {
		case 'i': ok = opt_u32("--id", optarg, 0, UINT16_MAX, &x->id); break;
		case 'r': ok = opt_u32("--run", optarg, 0, UINT32_MAX, &x->run); break;
		case 'n': ok = opt_u64("--events", optarg, 1, 1000000, &x->events); break;
		case 'p': ok = opt_u32("--payload", optarg, 0, 65536, &x->payload); break;
		case 's': ok = opt_u64("--seed", optarg, 0, UINT64_MAX, &x->seed); break;
		case 'd':
			ok = opt_hostport("--data", optarg, x->data_host, sizeof x->data_host,
					  &x->data_port, false);
			break;
		case 'c':
			ok = opt_hostport("--control", optarg, x->control_host, sizeof x->control_host,
					  &x->control_port, false);
			break;
		case 'k': ok = auth_load_key_file(optarg) == 0; break;
		default: ok = false; break;
		}
	}
	ok = ok && x->data_port != 0 && x->control_port != 0 && optind == argc;
	if (!ok)
		fprintf(stderr, "usage: minimal_source --id N --run N --events N --payload BYTES "
			"--seed N --data HOST:PORT --control HOST:PORT [--run-key-file PATH]\n");
	return ok ? 0 : 2;
}

int main(int argc, char **argv)
{
	static struct example x = { .run = 1, .events = 1000, .payload = 32 };
	if (ex_options(&x, argc, argv) != 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);   /* a closed socket is an error return, not a signal */
	log_init("minimal_source", (int)x.id, LOG_LEVEL_INFO);
	x.base = event_base_new();
	if (x.base == NULL)
		return 1;
	/* 1. Who we are: the same HELLO on both channels. */
	struct ctl_hello hello;
	greet_hello_init(&hello, CTL_ROLE_SOURCE, x.id, CTL_CHANNEL_CONTROL, x.run, NULL, 0);
	x.ctl = ctllink_start(x.base, x.control_host, x.control_port, &hello, 10000, &ex_ops, &x);
	hello.channel = CTL_CHANNEL_DATA;
	x.dial = greet_dial_start(x.base, "the reader's data port", x.data_host, x.data_port, false,
				  &hello, 10000, 0, ex_on_data_greeted, &x);
	if (x.ctl == NULL || x.dial == NULL)
		x.status = 1;
	else
		event_base_dispatch(x.base);
	greet_dial_cancel(x.dial);
	if (x.data != NULL)
		bufferevent_free(x.data);
	if (x.start_timer != NULL)
		event_free(x.start_timer);
	ctllink_free(x.ctl);
	event_base_free(x.base);
	return x.status;
}
