/* The shared-memory link's records' path: each record taken from the
 * reader's ring into the builder core, handed back once read, or once the
 * recorder no longer refers to it where it lies (data/ringkeep.h). */
#include "data/link_shm_internal.h"

#include "data/ingest.h"
#include "data/ringkeep.h"

#include "sys/clock.h"
#include "sys/log.h"
#include "io/shmlink.h"
#include "io/shmring.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void link_shm_handback(struct link_shm_link *l);

void link_shm_unlink(struct link_shm_link *l)
{
	if (!l->named)
		return;
	int rc = shr_unlink(l->segment);
	if (rc < 0)
		log_warn("Cannot remove shared-memory segment %s: %s", l->segment, strerror(-rc));
	l->named = false;
}

/* After the handshake the socket carries one byte, the reader's "attached";
 * then only its closing, the instant sign that the reader is gone. Reads
 * what waits: 0 when nothing more does, -EPIPE at the socket's end (why
 * says how), -EPROTO after a byte that has no business there (reported). */
int link_shm_read_sock(struct link_shm_link *l, char *why, size_t why_len)
{
	struct ingest_reader *rd = l->rd;
	for (;;) {
		uint8_t buf[16];
		ssize_t n = read(l->sock, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			snprintf(why, why_len, "its socket %s", n == 0 ? "closed" : strerror(errno));
			return -EPIPE;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == SHL_ATTACHED_BYTE && !l->attached) {
				/* Both processes map it now: the name has served its
				 * purpose, and without it nothing is left in /dev/shm
				 * whoever dies. */
				l->attached = true;
				link_shm_unlink(l);
				if (l->ev_attach != NULL)
					evtimer_del(l->ev_attach);
				continue;
			}
			ingest_error(rd->ing, "Reader %u (pid %u on %s) sent an unexpected byte 0x%02x on its shared-memory socket; closing ring %s",
				 rd->id, l->pid, l->host, buf[i], l->segment);
			return -EPROTO;
		}
	}
}

/* The next record: the one held for an assign first, then the ring's.
 * *at: the ring position before it. */
static int link_shm_next(struct link_shm_link *l, const void **rec, uint32_t *len, uint64_t *at)
{
	if (l->held_rec == NULL) {
		*at = shr_read_position(&l->ring);
		return shr_peek(&l->ring, rec, len);
	}
	*rec = l->held_rec;
	*len = l->held_len;
	*at = l->held_at;
	l->held_rec = NULL;
	return 0;
}

/* Hands back to the reader what was read, but the records the recorder
 * keeps in place (data/ringkeep.h) and the one held for an assign. */
static void link_shm_release(struct link_shm_link *l)
{
	ringkeep_release(&l->keep, &l->ring, l->held_rec != NULL ? l->held_at : shr_read_position(&l->ring));
}

/* After the output's flush let go of records kept in place: they go back
 * to the reader now, not at its next record. */
static void link_shm_handback(struct link_shm_link *l)
{
	if (l->ring_open && ringkeep_release(&l->keep, &l->ring, l->held_rec != NULL ? l->held_at :
						 shr_read_position(&l->ring)))
		shr_notify_producer(&l->ring, l->space_efd);
}

/* The ring gave no more records: its end (rc -EPIPE, the reader detached
 * after its last one), or corruption. Closes the data path either way. */
static void link_shm_end(struct link_shm_link *l, int rc)
{
	struct ingest_reader *rd = l->rd;
	struct ingest *g = rd->ing;
	if (rc == -EPIPE) {
		/* The clean end of a TCP stream, if the reader confirmed its
		 * attach first. Its byte was sent before it detached, so it is
		 * on the socket by now if at all. */
		char why[96];
		if (!l->attached && link_shm_read_sock(l, why, sizeof why) == -EPROTO) {
			ingest_close(rd, INGEST_DATA_FAILED);
			return;
		}
		if (!l->attached)
			ingest_error(g, "Reader %u (pid %u on %s) left shared-memory ring %s before confirming its attach (it detached); see its log",
				 rd->id, l->pid, l->host, l->segment);
		ingest_close(rd, l->attached ? INGEST_DATA_CLOSED : INGEST_DATA_FAILED);
		return;
	}
	ingest_error(g, "Reader %u (pid %u on %s): shared-memory ring %s is corrupt: %s; closing it after %" PRIu64 " frames",
		 rd->id, l->pid, l->host, l->segment, shr_strerror(rc), rd->frames_received);
	ingest_close(rd, INGEST_DATA_FAILED);
}

void link_shm_drain(struct link_shm_link *l, uint64_t budget)
{
	struct ingest_reader *rd = l->rd;
	struct ingest *g = rd->ing;
	uint64_t now = clk_monotonic_ns();
	uint64_t taken = 0, unreleased = 0;
	int rc;
	if (rd->held)
		return;   /* ring left as it is until an assign resumes it */
	if (!ingest_may_take(g, now))
		return;
	rd->read_calls++;
	bool in_place = ringkeep_on(&l->keep);
	for (;;) {
		const void *rec;
		uint32_t len;
		uint64_t at;
		rc = link_shm_next(l, &rec, &len, &at);
		if (rc == 0) {
			size_t frame_bytes;
			struct ingest_in_place kept;
			enum frm_status st = ingest_take(rd, rec, len, true, &frame_bytes, now,
							 in_place ? &kept : NULL);
			if (st == FRM_NEED_MORE && rd->held) {
				/* Neither it nor what came before is released:
				 * the producer waits for the room, which is the
				 * hold's back-pressure. */
				l->held_rec = rec;
				l->held_len = len;
				l->held_at = at;
				break;
			}
			if (in_place)
				ringkeep_took(&l->keep, at, &kept, rec);
			if (st != FRM_OK) {
				if (shr_status(&l->ring) == -EFAULT)
					ingest_error(g, "Reader %u (pid %u on %s): shared-memory ring %s: %s while its record was read; the bad frame above came from the lost pages",
						 rd->id, l->pid, l->host, l->segment, shr_strerror(-EFAULT));
				ingest_close(rd, INGEST_DATA_FAILED);
				break;
			}
			rd->bytes_received += len;
			taken += len;
			unreleased += len;
			if (unreleased >= LINK_SHM_RELEASE_BYTES) {
				link_shm_release(l);
				shr_notify_producer(&l->ring, l->space_efd);
				unreleased = 0;
			}
			if (taken >= budget || clk_monotonic_ns() - now >= INGEST_TURN_NS) {
				link_shm_release(l);
				shr_notify_producer(&l->ring, l->space_efd);
				event_active(l->ev_data, EV_READ, 0);
				break;
			}
			continue;
		}
		link_shm_release(l);
		shr_notify_producer(&l->ring, l->space_efd);
		if (rc == -EAGAIN) {
			if (shr_wait_data(&l->ring))
				break;   /* asleep: the reader's next commit wakes us */
			continue;
		}
		link_shm_end(l, rc);
		break;
	}
	if (taken > 0)
		ingest_progress(g, now);
}

void link_shm_on_data(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct link_shm_link *l = arg;
	struct ingest *g = l->rd->ing;
	shr_clear_wakeup(fd);
	l->wakeups++;
	link_shm_drain(l, ingest_options(g)->batch_bytes);
	ingest_after_frames(g);
	link_shm_handback(l);
}


void link_shm_resume(struct ingest_reader *rd)
{
	struct link_shm_link *l = rd->link_state;
	if (!l->ring_open)
		return;
	link_shm_drain(l, ingest_options(rd->ing)->batch_bytes);
	ingest_after_frames(rd->ing);
	link_shm_handback(l);
}
