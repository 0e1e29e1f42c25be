/* The ring's records: the producer's reserve and commit, the consumer's
 * peek and release, the sleep and wake-up handshake, liveness and the test
 * hooks. The segment they live in is shmring_segment.c's; see shmring.h
 * and docs/SHM.md. */
#include "io/shmring.h"

#include "io/shmguard.h"
#include "sys/proclive.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static uint64_t align8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static uint32_t pos_tag(uint64_t pos)
{
	return (uint32_t)(pos >> 3);
}

/* -EFAULT once the segment was found cut short; sticky like -EPROTO. */
static int shr_check_truncated(struct shr_ring *r)
{
	if (shg_truncated(r->guard))
		r->err = -EFAULT;
	return r->err;
}

int shr_status(struct shr_ring *r)
{
	return r->hdr != NULL ? shr_check_truncated(r) : 0;
}

uint32_t shr_max_payload(const struct shr_ring *r)
{
	return (uint32_t)(r->capacity_bytes / 2 - SHR_RECORD_PREFIX_BYTES);
}

/* Bytes a record of len needs at the producer's position, wrap padding
 * included. Half-capacity records always fit once the consumer catches up:
 * padding is wasted only when the record does not fit before the end,
 * i.e. when the record starts beyond the first half of a lap. */
static uint64_t record_need(const struct shr_ring *r, uint32_t len, bool rewind, uint64_t *skip)
{
	uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len);
	uint64_t off = r->pos & r->mask;
	uint64_t room = r->capacity_bytes - off;
	*skip = rec > room || (rewind && rec <= off) ? room : 0;
	return *skip + rec;
}

/* Sticky: after one impossible value nothing in the ring can be trusted.
 * A value read from pages the segment lost reads as zero and looks
 * impossible too: truncation, if that is what happened, is the cause. */
static int corrupt(struct shr_ring *r)
{
	if (shr_check_truncated(r) < 0)
		return r->err;
	r->err = -EPROTO;
	return -EPROTO;
}

/* Reloads the consumer's tail; a tail the producer could not have allowed
 * means the segment is corrupt, and writing on would overwrite unread data. */
static int load_tail(struct shr_ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
	if (tail & 7 || tail > r->pos || r->pos - tail > r->capacity_bytes)
		return corrupt(r);
	r->peer_pos = tail;
	return 0;
}

/* Whether the next record of len bytes goes back to offset 0 now. The
 * producer wraps early once its offset leaves, after what the consumer has
 * still to read and the record, room for at least that backlog again and
 * for an eighth of the ring. Until the consumer passes the wrap the
 * padding counts as used, so that room is what the producer can write
 * meanwhile; it is large enough that the early wrap almost never makes the
 * producer wait. The ring then cycles through about twice its backlog (an
 * eighth of it when the consumer keeps up) instead of its whole
 * capacity: those pages stay in cache and the rest of the segment is never
 * faulted in, and a process's resident memory counts only the ring pages
 * it touched. A backlog that keeps growing stops the early wraps and gets
 * the whole capacity. The consumer's line, which it keeps writing, is read
 * once per 1/64 of the ring crossed (64 KiB of a 4 MiB ring), not per
 * record. */
static int rewind_now(struct shr_ring *r, uint32_t len, bool *rewind)
{
	*rewind = false;
	uint64_t off = r->pos & r->mask;
	/* Capacities are powers of two: a shift, not a division per record. */
	uint64_t chunk = r->pos >> __builtin_ctzll(r->capacity_bytes / SHR_REWIND_CHECKS);
	uint64_t room = r->capacity_bytes / SHR_REWIND_DIVISOR;
	if (off < room || chunk == r->rewind_chunk)
		return 0;
	r->rewind_chunk = chunk;
	int rc = load_tail(r);
	if (rc < 0)
		return rc;
	uint64_t backlog = r->pos - r->peer_pos;
	uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len);
	if (backlog > room)
		room = backlog;
	*rewind = off >= backlog + rec + room;
	return 0;
}

int shr_reserve(struct shr_ring *r, uint32_t len, void **ptr)
{
	uint64_t skip;
	if (shr_check_truncated(r))
		return r->err;
	if (r->reserved)
		return -EBUSY;
	if (len > shr_max_payload(r))
		return -EMSGSIZE;
	/* Checked every time, not only when full: a record written after the
	 * builder left would be counted as forwarded but never received. The
	 * line is read-only while both run, so the load costs no traffic. */
	if (atomic_load_explicit(&r->hdr->state, memory_order_relaxed) == SHR_STATE_CLOSED)
		return -EPIPE;
	bool rewind;
	int rc = rewind_now(r, len, &rewind);
	if (rc < 0)
		return rc;
	uint64_t need = record_need(r, len, rewind, &skip);
	if (r->pos + need - r->peer_pos > r->capacity_bytes) {
		rc = load_tail(r);
		if (rc < 0)
			return rc;
		if (r->pos + need - r->peer_pos > r->capacity_bytes)
			return -EAGAIN;
	}
	r->res_skip = skip;
	r->res_len = len;
	r->reserved = true;
	*ptr = r->data + ((r->pos + skip) & r->mask) + SHR_RECORD_PREFIX_BYTES;
	return 0;
}

/* Ends the open reservation: its wrap marker if it has one, then its
 * record word with length_word, and head moved advance bytes past the
 * word. Release: payload and prefix are visible before the new head. */
static void publish(struct shr_ring *r, uint32_t length_word, uint64_t advance)
{
	uint64_t pos = r->pos;
	if (r->res_skip) {
		*(volatile uint64_t *)(r->data + (pos & r->mask)) =
			SHR_WRAP_LEN | (uint64_t)pos_tag(pos) << 32;
		pos += r->res_skip;
	}
	*(volatile uint64_t *)(r->data + (pos & r->mask)) =
		length_word | (uint64_t)pos_tag(pos) << 32;
	pos += advance;
	r->pos = pos;
	r->reserved = false;
	atomic_store_explicit(&r->hdr->head, pos, memory_order_release);
}

int shr_commit(struct shr_ring *r, uint32_t len)
{
	if (!r->reserved || len > r->res_len)
		return -EINVAL;
	if (shr_check_truncated(r)) {
		r->reserved = false;
		return r->err;
	}
	publish(r, len, align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len));
	return 0;
}

int shr_peek(struct shr_ring *r, const void **ptr, uint32_t *len)
{
	if (shr_check_truncated(r))
		return r->err;
	for (;;) {
		if (r->pos == r->peer_pos) {
			struct shr_header *h = r->hdr;
			uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
			uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
			if (head & 7 || head < r->pos || head - r->released > r->capacity_bytes)
				return corrupt(r);
			r->peer_pos = head;
			if (head == r->pos)
				return state == SHR_STATE_DETACHED ? -EPIPE : -EAGAIN;
		}
		uint64_t off = r->pos & r->mask;
		/* One load: the word checked is the word used, whatever the
		 * other process writes meanwhile. */
		uint64_t word = *(const volatile uint64_t *)(r->data + off);
		uint32_t n = (uint32_t)word;
		if ((uint32_t)(word >> 32) != pos_tag(r->pos))
			return corrupt(r);
		if (n == SHR_WRAP_LEN) {
			/* Padding at offset 0 would be a whole lap: never written. */
			uint64_t skip = r->capacity_bytes - off;
			if (off == 0 || r->peer_pos - r->pos < skip)
				return corrupt(r);
			r->pos += skip;
			continue;
		}
		uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)n);
		if (n > shr_max_payload(r) || off + rec > r->capacity_bytes ||
		    r->peer_pos - r->pos < rec)
			return corrupt(r);
		*ptr = r->data + off + SHR_RECORD_PREFIX_BYTES;
		*len = n;
		r->pos += rec;
		return 0;
	}
}

void shr_release_to(struct shr_ring *r, uint64_t pos)
{
	if (pos > r->pos)
		pos = r->pos;
	if (pos <= r->released || r->err)
		return;
	r->released = pos;
	/* Release: our reads of the records finish before the producer may
	 * reuse their bytes. */
	atomic_store_explicit(&r->hdr->tail, pos, memory_order_release);
}

uint64_t shr_read_position(const struct shr_ring *r)
{
	return r->pos;
}

uint64_t shr_released_position(const struct shr_ring *r)
{
	return r->released;
}

void shr_release(struct shr_ring *r)
{
	shr_release_to(r, r->pos);
}

/* The other half of the handshake in shr_notify_*(): the waiter stores its
 * target, fences, loads the counter; the waker stores the counter, fences,
 * loads the target. With a seq_cst fence on each side at least one of them
 * sees the other's store, so either the waiter does not sleep or the waker
 * writes the eventfd (whose count survives until the waiter polls). */
bool shr_wait_data(struct shr_ring *r)
{
	struct shr_header *h = r->hdr;
	if (r->err)
		return false;
	/* Any record: the builder's latency matters more than its wake-ups,
	 * and the producer already batches its notifications. */
	atomic_store_explicit(&h->consumer_wake_head, r->pos + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->head, memory_order_relaxed) != r->pos ||
	    atomic_load_explicit(&h->state, memory_order_relaxed) >= SHR_STATE_DETACHED) {
		atomic_store_explicit(&h->consumer_wake_head, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

bool shr_wait_space(struct shr_ring *r, uint32_t len)
{
	struct shr_header *h = r->hdr;
	uint64_t skip;
	if (r->err)
		return false;
	uint64_t need = record_need(r, len, false, &skip);
	/* Woken per release, a producer behind a slow consumer would sleep
	 * and wake once per batch; a quarter ring of slack makes that once
	 * per many records. The target never exceeds head, which the tail
	 * reaches whenever the consumer empties the ring. */
	uint64_t want = r->pos + need + r->capacity_bytes / 4;
	want = want > r->capacity_bytes ? want - r->capacity_bytes : 1;
	if (want > r->pos)
		want = r->pos ? r->pos : 1;
	atomic_store_explicit(&h->producer_wake_tail, want, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (load_tail(r) < 0 || r->pos + need - r->peer_pos <= r->capacity_bytes ||
	    atomic_load_explicit(&h->state, memory_order_relaxed) == SHR_STATE_CLOSED) {
		atomic_store_explicit(&h->producer_wake_tail, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

static int wake(_Atomic uint64_t *target, uint64_t reached, int efd)
{
	atomic_thread_fence(memory_order_seq_cst);
	/* Plain load first: while the peer is busy the target's line stays
	 * shared and no locked instruction or system call is issued. */
	uint64_t t = atomic_load_explicit(target, memory_order_relaxed);
	if (!t || reached < t)
		return 0;
	/* A target replaced meanwhile is cleared too: that wake-up is only
	 * spurious, the waiter rechecks and sleeps again. */
	if (!atomic_exchange_explicit(target, 0, memory_order_relaxed))
		return 0;
	uint64_t one = 1;
	if (write(efd, &one, sizeof one) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int shr_notify_consumer(struct shr_ring *r, int data_efd)
{
	return wake(&r->hdr->consumer_wake_head, r->pos, data_efd);
}

int shr_notify_producer(struct shr_ring *r, int space_efd)
{
	return wake(&r->hdr->producer_wake_tail, r->released, space_efd);
}

bool shr_peer_alive(const struct shr_ring *r)
{
	const struct shr_header *h = r->hdr;
	if (!h)
		return false;
	/* pid is stored after the start time with release: acquire here so a
	 * set pid comes with its start time. */
	if (r->producer)
		return proclive_alive(atomic_load_explicit(&h->consumer_pid, memory_order_acquire),
				     atomic_load_explicit(&h->consumer_start, memory_order_relaxed));
	return proclive_alive(atomic_load_explicit(&h->producer_pid, memory_order_acquire),
			     atomic_load_explicit(&h->producer_start, memory_order_relaxed));
}

bool shr_producer_detached(const struct shr_ring *r)
{
	return r->hdr != NULL &&
	       atomic_load_explicit(&r->hdr->state, memory_order_acquire) == SHR_STATE_DETACHED;
}

void shr_heartbeat(struct shr_ring *r)
{
	_Atomic uint64_t *beat = r->producer ? &r->hdr->producer_heartbeat :
					       &r->hdr->consumer_heartbeat;
	/* One writer per counter: load and store, no locked add. */
	atomic_store_explicit(beat, atomic_load_explicit(beat, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

uint64_t shr_peer_heartbeat(const struct shr_ring *r)
{
	return atomic_load_explicit(r->producer ? &r->hdr->consumer_heartbeat :
						  &r->hdr->producer_heartbeat,
				    memory_order_relaxed);
}

uint64_t shr_capacity(const struct shr_ring *r)
{
	return r->hdr != NULL ? r->capacity_bytes : 0;
}

uint64_t shr_fill_bytes(const struct shr_ring *r)
{
	if (r->hdr == NULL)
		return 0;
	uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
	uint64_t head = r->producer ? r->pos
				    : atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
	return head - tail;
}

struct shr_header *shr_header(const struct shr_ring *r)
{
	return r->hdr;
}

size_t shr_map_bytes(const struct shr_ring *r)
{
	return r->map_bytes;
}

uint64_t shr_record_offset(const struct shr_ring *r, const void *payload)
{
	return (uint64_t)((const uint8_t *)payload - r->data) - SHR_RECORD_PREFIX_BYTES;
}

int shr_commit_bad_length(struct shr_ring *r, uint32_t length_word)
{
	if (!r->reserved)
		return -EINVAL;
	/* The reservation proved the prefix free. */
	publish(r, length_word, SHR_RECORD_PREFIX_BYTES);
	return 0;
}

void shr_publish_head_ahead(struct shr_ring *r, uint64_t bytes)
{
	atomic_store_explicit(&r->hdr->head, r->pos + bytes, memory_order_release);
}

const char *shr_strerror(int rc)
{
	switch (rc) {
	case 0:
		return "ok";
	case SHR_REPLACED:
		return "replaced a stale segment";
	case -EBADMSG:
		return "corrupt segment header or descriptor message";
	case -EPROTONOSUPPORT:
		return "segment layout version mismatch";
	case -ESTALE:
		return "segment of another run";
	case -ESHUTDOWN:
		return "ring already closed: its stream is over";
	case -EOWNERDEAD:
		return "the builder that created the segment is no longer running";
	case -ERANGE:
		return "capacity does not match segment size";
	case -EPROTO:
		return "impossible record length or counter in ring";
	case -EFAULT:
		return "segment truncated while mapped";
	case -EBUSY:
		return "ring already has a producer";
	case -EPIPE:
		return "peer closed the ring";
	case -EAGAIN:
		return "would block";
	case -EMSGSIZE:
		return "record larger than half the ring";
	default:
		return rc < 0 ? strerror(-rc) : "unknown";
	}
}
