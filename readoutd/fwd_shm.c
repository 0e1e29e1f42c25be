/* The shared-memory forwarder of one builder: each frame routed to it
 * copied once into its ring, the builder woken once per flush. The Unix socket carries
 * the greeting and the eventfds, then stays open as the liveness signal. */
#include "forward.h"

#include "config.h"
#include "sys/log.h"
#include "wire/control.h"
#include "wire/frame.h"
#include "io/handshake.h"
#include "io/shmlink.h"
#include "io/shmring.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fwd_shm {
	struct event_base *base;
	const struct rdr_options *opt;
	uint32_t dest;
	struct fwd_conn conn;
	struct fwd_feed feed;
	struct fwd_events ev;
	void *arg;
	struct greet_dial *dial;     /* until the builder welcomes us */
	int sock;
	int data_efd, space_efd;     /* builder sleeps on data, we on space */
	struct event *ev_sock, *ev_space;
	struct shr_ring ring;
	bool attached;
	bool blocked;                /* ring full: waiting for the space eventfd */
	bool closed;                 /* nothing more can reach the builder */
	bool injected;               /* --shm-inject done: forward nothing more */
	char segment[96];
	char peer[300];
	struct iovec iov[64];        /* runs of frames taken per pass */
	uint64_t ring_records;
	uint64_t ring_full_waits;
	uint64_t bytes_forwarded;
};

/* Nothing more can reach the builder through the ring: rather than let the
 * sources fill our buffers and wait for a watchdog, the reader stops them
 * now and reports, so the run ends at once and by name. */
static void shm_lost(struct fwd_shm *m)
{
	m->closed = true;
	m->blocked = false;
	if (m->ev_space != NULL)
		event_del(m->ev_space);
	m->ev.on_failed(m->arg, FWD_LOST);
}

static void shm_failed(struct fwd_shm *m, const char *what, int rc)
{
	log_error("Reader %u: shared-memory ring %s to the builder: %s (%s); forwarding stops",
		  m->opt->id, m->segment, what, shr_strerror(rc));
	shm_lost(m);
}

/* A shared-memory path that cannot be set up: like a refused TCP greeting,
 * the reader cannot forward anything and stops. */
static void shm_abort(struct fwd_shm *m)
{
	m->ev.on_failed(m->arg, FWD_REFUSED);
}

/* Test hook (--shm-inject): puts one damaged record where the next frame
 * would go, then forwards nothing more, so that the builder's checks of a
 * ring meet real damage. The frame itself stays in its buffer (held at
 * end), so the books do not count it as forwarded. */
static void shm_inject(struct fwd_shm *m, const uint8_t *frame)
{
	struct shr_ring *ring = &m->ring;
	enum rdr_shm_inject kind = m->opt->shm_inject;
	uint32_t len = (uint32_t)frm_frame_bytes(frame);
	void *dst;
	int rc = shr_reserve(ring, kind == RDR_SHM_INJECT_LENGTH ? 0 : len, &dst);
	if (rc < 0) {
		/* Full: try again once the builder made room. */
		if (rc == -EAGAIN && shr_wait_space(ring, len)) {
			m->blocked = true;
			event_add(m->ev_space, NULL);
		}
		return;
	}
	const char *what = "record";
	switch (kind) {
	case RDR_SHM_INJECT_RECORD:
		memcpy(dst, frame, len);
		shr_commit(ring, len - 1);
		what = "record one byte shorter than its frame";
		break;
	case RDR_SHM_INJECT_CRC:
		memcpy(dst, frame, len);
		((uint8_t *)dst)[len - 1] ^= 0x5a;
		shr_commit(ring, len);
		what = "frame with a flipped byte";
		break;
	case RDR_SHM_INJECT_LENGTH:
		shr_commit_bad_length(ring, 0x7ffffff0u);
		what = "record length of 2147483632 bytes";
		break;
	case RDR_SHM_INJECT_HEAD:
		shr_publish_head_ahead(ring, 3 * shr_capacity(ring) + 4);
		what = "head counter three laps ahead and misaligned";
		break;
	case RDR_SHM_INJECT_NONE:
		return;
	}
	m->injected = true;
	log_info("Reader %u injected a %s into ring %s after %" PRIu64 " records", m->opt->id, what,
		 m->segment, m->ring_records);
	shr_notify_consumer(ring, m->data_efd);
}

/* Copies the frames of one gathered run into the ring, one record each:
 * 0, or why it stopped (-EAGAIN full, -ECANCELED the injection, other
 * -errno). */
static int shm_copy_run(struct fwd_shm *m, const struct iovec *run, uint32_t *len, bool *moved)
{
	const uint8_t *p = run->iov_base;
	size_t left = run->iov_len;
	while (left > 0) {
		void *dst;
		if (m->opt->shm_inject != RDR_SHM_INJECT_NONE &&
		    m->ring_records >= m->opt->shm_inject_after) {
			shm_inject(m, p);
			return -ECANCELED;
		}
		*len = (uint32_t)frm_frame_bytes(p);
		int rc = shr_reserve(&m->ring, *len, &dst);
		if (rc < 0)
			return rc;
		memcpy(dst, p, *len);
		shr_commit(&m->ring, *len);
		/* The buffers stay put until moved(): p is still good. */
		m->feed.consumed(m->feed.arg, m->dest, *len);
		m->ring_records++;
		m->bytes_forwarded += *len;
		*moved = true;
		p += *len;
		left -= *len;
	}
	return 0;
}

/* Copies the frames routed to this builder into the ring and wakes it once
 * per flush, not per frame. A full ring stops the flush until the builder
 * makes room (the space eventfd): the sources' buffers then fill, their
 * reads pause and TCP pushes back on them. */
static void shm_flush(void *self)
{
	struct fwd_shm *m = self;
	if (!m->attached || m->blocked || m->closed || m->injected)
		return;
	bool moved = false;
	for (;;) {
		int rc = 0;
		uint32_t len = 0;
		int nrun = m->feed.gather(m->feed.arg, m->dest, m->iov, (int)(sizeof m->iov / sizeof m->iov[0]));
		for (int k = 0; k < nrun && rc == 0; k++)
			rc = shm_copy_run(m, &m->iov[k], &len, &moved);
		/* Before sleeping too: a builder asleep must see what we put. */
		if (moved) {
			int nrc = shr_notify_consumer(&m->ring, m->data_efd);
			if (nrc < 0) {
				shm_failed(m, "cannot wake the builder", nrc);
				return;
			}
		}
		if (rc == 0 && nrun == (int)(sizeof m->iov / sizeof m->iov[0]))
			continue;   /* more runs than one pass takes */
		if (rc == -EAGAIN) {
			if (!shr_wait_space(&m->ring, len))
				continue;   /* room appeared meanwhile */
			m->ring_full_waits++;
			m->blocked = true;
			event_add(m->ev_space, NULL);
		} else if (rc == -EPIPE) {
			shm_failed(m, "the builder closed it", rc);
		} else if (rc == -ECANCELED) {
			/* The injection settled the ring's fate (or waits for room). */
		} else if (rc < 0) {
			shm_failed(m, "cannot write to it", rc);
		}
		break;
	}
	if (moved)
		m->feed.moved(m->feed.arg);
}

static void shm_on_space(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct fwd_shm *m = arg;
	shr_clear_wakeup(fd);
	m->blocked = false;
	m->ev.on_progress(m->arg);
}

/* A builder killed before it read our "attached" never removed the name,
 * nor did one that died before we attached: we are the last to know. */
static void shm_remove_orphan(struct fwd_shm *m)
{
	int32_t pid;
	if (shr_remove_orphan(m->segment, &pid) > 0)
		log_warn("Reader %u removed segment %s: the builder that created it (pid %d) is gone",
			 m->opt->id, m->segment, (int)pid);
}

/* The Unix socket carries nothing after the handshake: readable means the
 * builder closed it or died. */
static void shm_on_sock(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct fwd_shm *m = arg;
	uint8_t byte;
	ssize_t n = read(fd, &byte, 1);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	event_del(m->ev_sock);
	if (!m->attached)
		return;     /* our stream is over: the builder may leave */
	if (n > 0)
		log_error("Reader %u: the builder sent an unexpected byte 0x%02x on the shared-memory socket %s",
			  m->opt->id, byte, m->peer);
	else
		log_error("Reader %u: the builder (%s) closed the shared-memory link of ring %s before our data ended",
			  m->opt->id, m->peer, m->segment);
	if (n == 0)
		shm_remove_orphan(m);
	shm_lost(m);
}

/* Maps the builder's ring and checks it holds our largest frame: 0 or -1
 * (logged, and the ring closed). */
static int shm_map(struct fwd_shm *m)
{
	int rc = shr_attach(&m->ring, m->segment, m->opt->run_id);
	if (rc < 0) {
		log_error("Reader %u cannot attach to the builder's ring %s: %s", m->opt->id,
			  m->segment, shr_strerror(rc));
		/* Nobody else knows of it: left here, it would stay in /dev/shm
		 * until the next builder of this name. */
		if (rc == -EOWNERDEAD)
			shm_remove_orphan(m);
		return -1;
	}
	uint64_t max_frame = (uint64_t)m->opt->max_fragment_bytes + FRM_HEADER_BYTES;
	if (max_frame > shr_max_payload(&m->ring)) {
		log_error("Reader %u: the builder's ring %s of %" PRIu64 " bytes holds frames of up to %u bytes, fewer than a fragment of --max-fragment %u needs; raise the builder's --shm-capacity or lower --max-fragment",
			  m->opt->id, m->segment, shr_capacity(&m->ring), shr_max_payload(&m->ring),
			  m->opt->max_fragment_bytes);
		shr_close(&m->ring, m->data_efd);
		return -1;
	}
	/* Said before the builder hears it, so a log read once the builder
	 * has our answer has this line. */
	if (!m->opt->quiet)
		log_info("Reader %u forwards through shared-memory ring %s (%" PRIu64 " bytes)",
			 m->opt->id, m->segment, shr_capacity(&m->ring));
	uint8_t ack = SHL_ATTACHED_BYTE;
	if (write(m->sock, &ack, 1) != 1) {
		log_error("Reader %u: the builder left during the shared-memory handshake (%s)",
			  m->opt->id, strerror(errno));
		shr_close(&m->ring, m->data_efd);
		return -1;
	}
	return 0;
}

static void shm_attach(struct fwd_shm *m)
{
	if (shm_map(m) < 0) {
		shm_abort(m);
		return;
	}
	m->attached = true;
	m->ev_space = event_new(m->base, m->space_efd, EV_READ, shm_on_space, m);
	m->ev_sock = event_new(m->base, m->sock, EV_READ | EV_PERSIST, shm_on_sock, m);
	event_add(m->ev_sock, NULL);
	m->ev.on_progress(m->arg);
}

/* The eventfds follow the WELCOME on the socket, possibly a moment later. */
static void shm_on_fds(evutil_socket_t fd, short what, void *arg)
{
	struct fwd_shm *m = arg;
	if (what & EV_TIMEOUT) {
		log_error("Reader %u: the builder sent no eventfds for ring %s within the handshake timeout",
			  m->opt->id, m->segment);
		shm_abort(m);
		return;
	}
	int rc = shr_recv_fds(fd, &m->data_efd, &m->space_efd);
	if (rc == -EAGAIN || rc == -EINTR)
		return;
	event_free(m->ev_sock);
	m->ev_sock = NULL;
	if (rc < 0) {
		log_error("Reader %u: the builder's eventfds for ring %s did not arrive: %s",
			  m->opt->id, m->segment, shr_strerror(rc));
		shm_abort(m);
		return;
	}
	shm_attach(m);
}

static void shm_on_greeted(int fd, const struct ctl_msg *reply, const struct msgseal *seal, void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct fwd_shm *m = arg;
	m->dial = NULL;
	if (fd < 0) {
		log_error("Reader %u: the builder did not accept our shared-memory data path: %s (%s)",
			  m->opt->id, reply->u.error.reason, reply->u.error.code);
		shm_abort(m);
		return;
	}
	if (!fwd_welcome_is_ours(m->conn, reply)) {
		char why[CTL_MAX_TEXT + 128];
		fwd_crossed(m->opt->id, m->conn, reply, m->peer, why, sizeof why);
		close(fd);
		m->closed = true;
		m->ev.on_refused(m->arg, why);
		return;
	}
	m->sock = fd;
	m->ev_sock = event_new(m->base, fd, EV_READ | EV_PERSIST, shm_on_fds, m);
	uint64_t ms = m->opt->handshake_timeout_ms;
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			      .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	event_add(m->ev_sock, &tv);
	/* Usually there already: no need to wait for the loop. */
	event_active(m->ev_sock, EV_READ, 0);
}

static void shm_destroy(void *self);

void *fwd_shm_dial(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		   const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_shm *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->base = base;
	m->opt = opt;
	m->dest = c.dest;
	m->conn = c;
	m->feed = *feed;
	m->ev = *ev;
	m->arg = arg;
	m->sock = m->data_efd = m->space_efd = -1;
	char sock_name[96];
	shl_socket_name(sock_name, sizeof sock_name, opt->links[c.link].shm);
	shl_segment_name(m->segment, sizeof m->segment, opt->links[c.link].shm, opt->id);
	snprintf(m->peer, sizeof m->peer, "@%s", sock_name);
	struct ctl_hello hello;
	fwd_data_hello(opt, 0, 1, &hello);
	m->dial = greet_dial_start(base, "the builder's shared-memory socket", sock_name, 0, true,
				   &hello, opt->connect_timeout_ms, -1, shm_on_greeted, m);
	if (m->dial == NULL) {
		shm_destroy(m);
		return NULL;
	}
	return m;
}

static bool shm_closed(const void *self)
{
	return ((const struct fwd_shm *)self)->closed;
}

/* The builder drains what is left, then sees the end of the stream; the
 * Unix socket stays open until we exit. */
static void shm_finish(void *self)
{
	struct fwd_shm *m = self;
	/* A link given up while still dialling: it never opens. */
	greet_dial_cancel(m->dial);
	m->dial = NULL;
	if (m->attached) {
		shr_close(&m->ring, m->data_efd);
		m->attached = false;
	}
}

static void shm_stats(const void *self, struct fwd_stats *st)
{
	const struct fwd_shm *m = self;
	st->shm = true;
	st->bytes_forwarded = m->bytes_forwarded;
	st->ring_records = m->ring_records;
	st->ring_full_waits = m->ring_full_waits;
	st->ring_capacity_bytes = shr_capacity(&m->ring);
	st->ring_fill_bytes = shr_fill_bytes(&m->ring);
	st->ring_name = m->segment;
}

static void shm_destroy(void *self)
{
	struct fwd_shm *m = self;
	greet_dial_cancel(m->dial);
	/* A ring still attached here was cut short (a stop before the end):
	 * detaching tells the builder no more records will come. */
	if (m->attached)
		shr_close(&m->ring, m->data_efd);
	if (m->ev_space)
		event_free(m->ev_space);
	if (m->ev_sock)
		event_free(m->ev_sock);
	if (m->data_efd >= 0)
		close(m->data_efd);
	if (m->space_efd >= 0)
		close(m->space_efd);
	if (m->sock >= 0)
		close(m->sock);
	free(m);
}

const struct fwd_impl fwd_shm_impl = {
	.flush = shm_flush,
	.closed = shm_closed,
	.finish = shm_finish,
	.stats = shm_stats,
	.destroy = shm_destroy,
};
