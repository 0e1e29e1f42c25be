#include "data/link_shm.h"
#include "data/link_shm_internal.h"

#include "data/ingest.h"
#include "data/link.h"
#include "data/ringkeep.h"
#include "snapshot.h"

#include "sys/clock.h"
#include "io/handshake.h"
#include "sys/log.h"
#include "io/net.h"
#include "io/shmlink.h"
#include "io/shmring.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* Closes a reader's ring (a blocked reader wakes and stops), its eventfds
 * and socket, and unlinks the segment name. The link stays for the report. */
static void link_shm_link_close(struct link_shm_link *l)
{
	if (l->ev_data != NULL) {
		event_free(l->ev_data);
		l->ev_data = NULL;
	}
	if (l->ev_sock != NULL) {
		event_free(l->ev_sock);
		l->ev_sock = NULL;
	}
	if (l->ev_attach != NULL) {
		event_free(l->ev_attach);
		l->ev_attach = NULL;
	}
	/* The frames kept in the ring are copied out before it goes. */
	ringkeep_own_all(&l->keep);
	ringkeep_free(&l->keep);
	if (l->ring_open) {
		/* CLOSED wakes a reader waiting for space: it stops forwarding. */
		shr_close(&l->ring, l->space_efd);
		l->ring_open = false;
	}
	link_shm_unlink(l);
	if (l->data_efd >= 0)
		close(l->data_efd);
	if (l->space_efd >= 0)
		close(l->space_efd);
	if (l->sock >= 0)
		close(l->sock);
	l->data_efd = l->space_efd = l->sock = -1;
}

static void link_shm_close(struct ingest_reader *rd)
{
	link_shm_link_close(rd->link_state);
}

static void link_shm_describe(const struct ingest_reader *rd, struct snapshot_link *info)
{
	const struct link_shm_link *l = rd->link_state;
	info->segment = l->segment;
	info->ring_capacity_bytes = l->set->capacity_bytes;
	info->attached = l->attached;
	info->peer_died = l->peer_died;
	info->wakeups = l->wakeups;
}


static const struct link_ops link_shm_ops = {
	.transport = "shm",
	.close = link_shm_close,
	.describe = link_shm_describe,
	.resume = link_shm_resume,
};

/* The reader's end of the link is gone (socket closed, or process gone).
 * What it committed is still good: drain it first. A ring it had detached
 * then ends cleanly; otherwise the reader died mid-run. */
static void link_shm_peer_gone(struct link_shm_link *l, const char *why)
{
	struct ingest_reader *rd = l->rd;
	struct ingest *g = rd->ing;
	if (rd->state != INGEST_DATA_STREAMING)
		return;
	if (l->attached)
		link_shm_drain(l, UINT64_MAX);
	char left[CTL_MAX_TEXT + 256];
	snprintf(left, sizeof left, "(pid %u on %s) left ring %s before confirming its attach (%s)",
		 l->pid, l->host, l->segment, why);
	/* A peer that took the slot and left before attaching carried
	 * nothing: the real reader may still come. */
	if (!l->attached && ingest_release(rd, left)) {
		ingest_after_frames(g);
		return;
	}
	if (rd->state == INGEST_DATA_STREAMING) {
		l->peer_died = true;
		if (l->attached)
			ingest_error(g, "Reader %u (pid %u on %s) died: shared-memory peer gone (%s); %" PRIu64 " frames received from it through ring %s",
				 rd->id, l->pid, l->host, why, rd->frames_received, l->segment);
		else
			ingest_error(g, "Reader %u (pid %u on %s) left shared-memory ring %s before confirming its attach (%s); see its log",
				 rd->id, l->pid, l->host, l->segment, why);
		ingest_close(rd, INGEST_DATA_FAILED);
	}
	ingest_after_frames(g);
}

/* The reader has not said "attached" within the handshake timeout of its
 * WELCOME: a reader that never will (or a local process holding the window
 * open) must not keep the segment's name in /dev/shm, nor the slot. */
static void link_shm_on_attach_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct link_shm_link *l = arg;
	struct ingest_reader *rd = l->rd;
	struct ingest *g = rd->ing;
	char why[CTL_MAX_TEXT + 256];
	if (l->attached)
		return;
	l->set->door.timed_out++;
	l->set->refused++;
	snprintf(why, sizeof why,
		 "(pid %u on %s) did not confirm its attach to ring %s within the handshake timeout (%" PRIu64 " ms): segment removed",
		 l->pid, l->host, l->segment, ingest_options(g)->handshake_timeout_ms);
	if (!ingest_release(rd, why)) {
		ingest_error(g, "Reader %u's data connection from %s %s, data path closed", rd->id,
			 rd->address, why);
		ingest_close(rd, INGEST_DATA_FAILED);
	}
	ingest_after_frames(g);
}

static void link_shm_on_sock(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct link_shm_link *l = arg;
	struct ingest_reader *rd = l->rd;
	char why[96];
	int rc = link_shm_read_sock(l, why, sizeof why);
	if (rc == 0)
		return;
	if (rc == -EPIPE) {
		event_del(l->ev_sock);
		link_shm_peer_gone(l, why);
		return;
	}
	ingest_close(rd, INGEST_DATA_FAILED);
	ingest_after_frames(rd->ing);
}

/* Refuses a reader whose ring cannot be set up; the run goes on and fails
 * by name when that reader's data never arrives. */
static void link_shm_refuse(struct ingest *g, struct link_shm_link *l, int fd, const char *peer,
			const char *what, int rc)
{
	ingest_error(g, "Reader %u: cannot set up shared-memory ring %s: %s: %s", l->rd->id, l->segment,
		 what, shr_strerror(rc));
	greet_reply_error(fd, peer, "shm_failed", "the builder cannot set up ring %s: %s: %s",
			  l->segment, what, shr_strerror(rc));
	l->set->refused++;
}

static void link_shm_on_greeted(int fd, const struct ctl_hello *h, const struct msgseal *seal,
                            const char *peer, void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct link_shm *set = arg;
	struct ingest *g = set->ing;
	if (fd < 0) {
		set->refused++;
		return;
	}
	struct ingest_reader *rd = ingest_admit(g, fd, h, peer);
	if (rd == NULL)
		return;
	struct link_shm_link *l = set->links[rd->id];
	if (l == NULL)
		l = set->links[rd->id] = calloc(1, sizeof *l);
	if (l == NULL) {
		greet_reply_error(fd, peer, "no_memory", "the builder is out of memory");
		set->refused++;
		return;
	}
	ringkeep_free(&l->keep);
	memset(l, 0, sizeof *l);
	l->set = set;
	l->rd = rd;
	l->sock = l->data_efd = l->space_efd = -1;
	l->pid = h->pid;
	snprintf(l->host, sizeof l->host, "%s", h->host);
	shl_segment_name(l->segment, sizeof l->segment, ingest_options(g)->shm_name, rd->id);
	/* The ring is the reader's link from here: a refusal below is
	 * reported as a ring that was never attached. */
	rd->link = &link_shm_ops;
	rd->link_state = l;
	int rc = shr_create(&l->ring, l->segment, ingest_options(g)->run_id, set->capacity_bytes);
	if (rc < 0) {
		link_shm_refuse(g, l, fd, peer, "cannot create the segment", rc);
		return;
	}
	l->ring_open = l->named = true;
	if (rc == SHR_REPLACED)
		log_warn("Replaced shared-memory segment %s left by an earlier run or a crashed builder; its contents were not read",
			 l->segment);
	rc = shr_eventfds(&l->data_efd, &l->space_efd);
	if (rc < 0) {
		link_shm_refuse(g, l, fd, peer, "cannot create eventfds", rc);
		link_shm_link_close(l);
		return;
	}
	if (ingest_keeps_in_place(g) &&
	    ringkeep_init(&l->keep, g, ingest_options(g)->max_inflight * (uint32_t)h->source_count) < 0) {
		link_shm_refuse(g, l, fd, peer, "no memory for the frames kept in place", -ENOMEM);
		link_shm_link_close(l);
		return;
	}
	/* Asleep from the start: the reader's first commit must wake us. */
	shr_wait_data(&l->ring);
	if (greet_reply_welcome(fd, ingest_options(g)->run_id, CTL_ROLE_BUILDER, ingest_builder_id(g)) < 0 ||
	    (rc = shr_send_fds(fd, l->data_efd, l->space_efd)) < 0) {
		log_warn("Reader %u (%s) left during the shared-memory handshake", rd->id, peer);
		close(fd);
		link_shm_link_close(l);
		return;
	}
	l->sock = fd;
	l->ev_sock = event_new(ingest_base(g), fd, EV_READ | EV_PERSIST, link_shm_on_sock, l);
	l->ev_data = event_new(ingest_base(g), l->data_efd, EV_READ | EV_PERSIST, link_shm_on_data, l);
	l->ev_attach = evtimer_new(ingest_base(g), link_shm_on_attach_deadline, l);
	uint64_t t = ingest_options(g)->handshake_timeout_ms;
	struct timeval deadline = { .tv_sec = (time_t)(t / 1000),
				    .tv_usec = (suseconds_t)(t % 1000) * 1000 };
	event_add(l->ev_sock, NULL);
	event_add(l->ev_data, NULL);
	evtimer_add(l->ev_attach, &deadline);
	if (!ingest_options(g)->quiet)
		log_info("Reader %u data through shared-memory ring %s of %" PRIu64 " bytes (pid %u on %s)",
			 rd->id, l->segment, l->ring.capacity_bytes, h->pid, h->host);
	ingest_started(rd, &link_shm_ops, h, peer);
}

static void link_shm_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct link_shm *set = arg;
	greet_accept_all(&set->door, fd, link_shm_on_greeted, set);
}

/* Segments of this NAME whose builder died before it could remove them
 * (killed between creating a ring and its reader's attach): removed at
 * start, whatever reader they were for, so none outlives the next run. */
static void link_shm_sweep(const struct options *opt)
{
	char prefix[96];
	int n = snprintf(prefix, sizeof prefix, "es-%s-r", opt->shm_name);
	DIR *dir = opendir("/dev/shm");
	if (dir == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL) {
		if (strncmp(e->d_name, prefix, (size_t)n) != 0 || e->d_name[n] == '\0' ||
		    strspn(e->d_name + n, "0123456789") != strlen(e->d_name + n))
			continue;
		char segment[300];
		snprintf(segment, sizeof segment, "/%s", e->d_name);
		int32_t pid;
		int rc = shr_remove_orphan(segment, &pid);
		if (rc > 0)
			log_warn("Removed shared-memory segment %s left by builder pid %d, which is gone",
				 segment, (int)pid);
		else if (rc < 0)
			log_warn("Cannot look at shared-memory segment %s: %s", segment, strerror(-rc));
	}
	closedir(dir);
}

static void link_shm_stop(void *arg)
{
	struct link_shm *s = arg;
	if (s == NULL)
		return;
	for (uint32_t r = 0; s->links && r < s->readers; r++) {
		if (s->links[r] != NULL)
			link_shm_link_close(s->links[r]);
		free(s->links[r]);
	}
	if (s->ev_accept)
		event_free(s->ev_accept);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	greet_door_close(&s->door);
	free(s->links);
	free(s);
}

/* From the builder's tick: a reader whose process is gone without closing
 * its ring is reported even if its socket's end were somehow held open. */
static void link_shm_tick(void *arg, uint64_t now_ns)
{
	struct link_shm *s = arg;
	if (s == NULL || now_ns - s->alive_checked_ns < LINK_SHM_ALIVE_CHECK_NS)
		return;
	s->alive_checked_ns = now_ns;
	for (uint32_t r = 0; r < s->readers; r++) {
		struct link_shm_link *l = s->links[r];
		/* A held ring is not drained, so a reader that detached
		 * cleanly (its pid cleared) would look dead: the assign that
		 * resumes it finds the ring's end. */
		if (l == NULL || l->rd->link_state != l || !l->attached || !l->ring_open ||
		    l->rd->state != INGEST_DATA_STREAMING || l->rd->held)
			continue;
		/* A clean close clears the pid a moment before it marks the
		 * ring detached: only a second look in a row says dead. */
		/* A reader that closed its ring cleanly may leave records a slow
		 * builder has yet to read: the drain meets its end. */
		if (shr_peer_alive(&l->ring) || shr_producer_detached(&l->ring)) {
			l->suspect = false;
		} else if (!l->suspect) {
			l->suspect = true;
		} else {
			link_shm_peer_gone(l, "its process is gone");
			if (!ingest_running(s->ing))
				return;
		}
	}
}

static void link_shm_report(const void *arg, struct snapshot *snap)
{
	const struct link_shm *s = arg;
	snap->shm_capacity_bytes = s->capacity_bytes;
	snap->greetings_busy += s->door.busy;
	snap->greetings_evicted += s->door.evicted;
	snap->greetings_timed_out += s->door.timed_out;
	snap->refused_connections += s->refused;
}

static const struct link_listener_ops link_shm_listener_ops = {
	.tick = link_shm_tick,
	.report = link_shm_report,
	.stop = link_shm_stop,
};

int link_shm_start(struct ingest *g)
{
	const struct options *opt = ingest_options(g);
	if (opt->shm_name[0] == '\0')
		return 0;
	struct link_shm *s = calloc(1, sizeof *s);
	if (s == NULL)
		return -ENOMEM;
	int rc = ingest_add_link(g, &link_shm_listener_ops, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	s->ing = g;
	s->listen_fd = -1;
	s->readers = opt->readers;
	greet_door_init(&s->door, ingest_base(g), "the builder's shared-memory socket", "the builder",
			opt->handshake_timeout_ms, &s->refused);
	s->links = calloc(opt->readers + 1, sizeof *s->links);
	if (s->links == NULL)
		return -ENOMEM;
	bool raised;
	uint64_t requested = opt->shm_capacity_bytes ? opt->shm_capacity_bytes
						     : SHL_DEFAULT_CAPACITY_BYTES;
	s->capacity_bytes = shl_capacity(requested, opt->max_fragment_bytes, &raised);
	if (raised && opt->shm_capacity_bytes != 0)
		log_warn("Shared-memory ring capacity %" PRIu64 " bytes raised to %" PRIu64
			 ": a power of two holding two frames of --max-fragment %u",
			 requested, s->capacity_bytes, opt->max_fragment_bytes);
	shl_socket_name(s->sock_name, sizeof s->sock_name, opt->shm_name);
	s->listen_fd = net_listen_unix(s->sock_name);
	if (s->listen_fd < 0)
		return s->listen_fd;
	/* After the listen: holding the name, we are the only builder of it. */
	link_shm_sweep(opt);
	s->ev_accept = event_new(ingest_base(g), s->listen_fd, EV_READ | EV_PERSIST, link_shm_on_accept, s);
	event_add(s->ev_accept, NULL);
	if (!opt->quiet)
		log_info("Run %u: co-located readers greet @%s for shared-memory rings of %" PRIu64 " bytes",
			 opt->run_id, s->sock_name, s->capacity_bytes);
	return 0;
}

