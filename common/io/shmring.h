/* Single-producer single-consumer ring of length-prefixed records in a POSIX
 * shared-memory segment: the hop from a co-located readoutd (producer) to
 * builderd (consumer, creator of the segment). docs/SHM.md describes the
 * layout and the wake-up protocol.
 *
 * The segment is the only memory the ring uses: struct shr_ring lives in the
 * caller's storage, and reserve/commit/peek/release never allocate, never
 * block and never make a system call. Wake-ups are eventfds, so both sides
 * can sit in a libevent loop; the notify helpers write an eventfd only when
 * the other side has announced that it is about to sleep. */
#ifndef ES_IO_SHMRING_H
#define ES_IO_SHMRING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHR_MAGIC 0x4553534852494e47ULL /* "ESSHRING" */
#define SHR_VERSION 1u
#define SHR_CACHE_LINE_BYTES 64u
#define SHR_HEADER_BYTES 192u
/* Capacity is a power of two in this range; a record takes at most half of
 * it (see shr_max_payload()), so 4 MiB holds the largest fragment frame. */
#define SHR_MIN_CAPACITY_BYTES 4096ULL
#define SHR_MAX_CAPACITY_BYTES (1ULL << 30)
/* Each record starts with one 8-byte word: payload length (low 32 bits) and
 * a tag, the low 32 bits of (record position / 8), that lets the consumer
 * prove the word was written for this position and not left over from an
 * earlier lap or reached through a corrupt length. Records are 8-aligned. */
#define SHR_RECORD_PREFIX_BYTES 8u
#define SHR_WRAP_LEN 0xffffffffu /* length word of a wrap marker */
/* The producer goes back to offset 0 early when that leaves it at least
 * capacity / SHR_REWIND_DIVISOR (and the backlog) to write into before
 * the consumer reaches the wrap; see rewind_now() and SHM.md. */
#define SHR_REWIND_DIVISOR 8u
#define SHR_REWIND_CHECKS 64u  /* looks at the consumer's tail this often a lap */

/* shr_create() returns this (not an error) when it removed a segment of the
 * same name left by an earlier run or a crashed builder. */
#define SHR_REPLACED 1

enum shr_state {
	SHR_STATE_INIT = 0,     /* creator still initialising */
	SHR_STATE_READY = 1,    /* waiting for the producer */
	SHR_STATE_ATTACHED = 2, /* producer attached */
	SHR_STATE_DETACHED = 3, /* producer closed: no more records will come */
	SHR_STATE_CLOSED = 4,   /* consumer closed: nothing will be read */
};

/* The segment's first SHR_HEADER_BYTES, shared by both processes. Each of the
 * three cache lines has one writer (apart from the rare clearing of a wake
 * target by the waker), so the hot path moves only the line whose counter
 * changed. */
struct shr_header {
	/* Line 0: identity, written by the creator before state becomes READY. */
	uint64_t magic;
	uint32_t version;
	uint32_t header_bytes;
	uint64_t capacity_bytes;
	uint32_t run_id;
	_Atomic uint32_t state;      /* enum shr_state */
	uint64_t created_ns;         /* CLOCK_REALTIME, for reports */

	/* Line 1: the producer's. head = bytes ever published (records and wrap
	 * padding), monotonic, a multiple of 8. */
	_Alignas(64) _Atomic uint64_t head;
	_Atomic uint64_t producer_heartbeat;
	_Atomic uint64_t producer_start; /* /proc starttime, tells pid reuse */
	/* Non-zero while the producer sleeps: wake it once tail reaches this. */
	_Atomic uint64_t producer_wake_tail;
	_Atomic int32_t producer_pid;    /* 0: none attached */

	/* Line 2: the consumer's. tail = bytes ever released; head - tail is
	 * what the producer must not overwrite. */
	_Alignas(64) _Atomic uint64_t tail;
	_Atomic uint64_t consumer_heartbeat;
	_Atomic uint64_t consumer_start;
	/* Non-zero while the consumer sleeps: wake it once head reaches this. */
	_Atomic uint64_t consumer_wake_head;
	_Atomic int32_t consumer_pid;
};

/* One side's view of a ring. Lives in the caller's storage; the fields are
 * private to the ring's own files (shmring*.c): other modules and tests use
 * the functions below (shr_capacity(), shr_header() and the other hooks),
 * never a field. */
struct shr_ring {
	struct shr_header *hdr;
	uint8_t *data;
	size_t map_bytes;
	uint64_t capacity_bytes;
	uint64_t mask;
	uint64_t pos;       /* producer: head; consumer: read cursor */
	uint64_t peer_pos;  /* producer: last tail seen; consumer: last head seen */
	uint64_t released;  /* consumer: tail last published */
	uint64_t res_skip;  /* producer: wrap padding before the reserved record */
	uint64_t rewind_chunk; /* producer: last 1/SHR_REWIND_CHECKS of a lap checked */
	uint32_t res_len;   /* producer: bytes reserved */
	bool reserved;
	bool producer;
	int err;            /* sticky -EPROTO (corrupt) or -EFAULT (truncated) */
	int guard;          /* slot in the SIGBUS guard, -1 when unguarded */
};

/* Consumer side (builderd). Creates segment name ("/name", no other '/')
 * with capacity_bytes of data for run_id and maps it. A segment already
 * under that name is unlinked first (its users keep their mapping but are
 * cut off) and SHR_REPLACED is returned instead of 0. -EINVAL for a bad
 * name or capacity, -ENOSPC when /dev/shm cannot hold the ring. */
int shr_create(struct shr_ring *r, const char *name, uint32_t run_id, uint64_t capacity_bytes);

/* Producer side (readoutd). Maps segment name and claims the producer slot.
 * Refuses with: -ENOENT no such segment; -EBADMSG corrupt header (magic,
 * header size, impossible counters, segment shorter than a header);
 * -EPROTONOSUPPORT other layout version; -ESTALE another run; -ESHUTDOWN
 * a closed or finished ring; -EOWNERDEAD a creator that is no longer
 * running; -ERANGE capacity not a
 * valid power of two or not matching the segment size; -EBUSY another
 * producer attached; -EAGAIN creator not finished (retry). */
int shr_attach(struct shr_ring *r, const char *name, uint32_t run_id);

/* Leaves the ring: the producer marks it DETACHED (the consumer drains what
 * is left, then shr_peek() returns -EPIPE), the consumer marks it CLOSED
 * (shr_reserve() returns -EPIPE). peer_efd, if >= 0, is the eventfd the
 * peer sleeps on; it is written so a sleeping peer notices. Unmaps; the
 * segment name stays until shr_unlink(). Safe on a zeroed or closed ring. */
void shr_close(struct shr_ring *r, int peer_efd);

/* Removes segment name; mappings stay valid. The creator calls it once the
 * producer has attached, or at exit. 0 also when the name is already gone. */
int shr_unlink(const char *name);

/* Removes segment name if it is a ring whose creator is no longer running
 * (a builder killed before it could remove the name), telling the creator's
 * pid: 1 when removed, 0 when the name is absent, not a ring or its creator
 * lives, -errno when it cannot be looked at. The ring is only looked at,
 * never written to. */
int shr_remove_orphan(const char *name, int32_t *creator_pid);

/* Largest payload a record may carry: half the capacity minus the prefix,
 * which guarantees a reservation fits once the consumer catches up. */
uint32_t shr_max_payload(const struct shr_ring *r);

/* Producer: reserves a record of len payload bytes and points *ptr at them
 * (8-aligned) so the payload is written once, in place. Nothing is visible
 * to the consumer until shr_commit(). -EAGAIN: ring full (backpressure; see
 * shr_wait_space()); -EMSGSIZE: len > shr_max_payload(); -EPIPE: consumer
 * closed; -EPROTO: the consumer's tail is impossible; -EBUSY: a reservation
 * is already open. */
int shr_reserve(struct shr_ring *r, uint32_t len, void **ptr);

/* Producer: publishes the reserved record with its final length, at most
 * the reserved one. Does not wake the consumer: call shr_notify_consumer()
 * after a batch of commits, and always before the producer goes idle. */
int shr_commit(struct shr_ring *r, uint32_t len);

/* Consumer: the next unread record, in order. *ptr stays valid (and is not
 * overwritten) until shr_release(), so a run of records can be taken and
 * released at once. -EAGAIN: nothing more yet; -EPIPE: empty and the
 * producer has detached; -EPROTO: an impossible length, tag or counter,
 * sticky; nothing outside the mapping is ever read. */
int shr_peek(struct shr_ring *r, const void **ptr, uint32_t *len);

/* Consumer: hands every record peeked so far back to the producer. Call
 * shr_notify_producer() afterwards. */
void shr_release(struct shr_ring *r);

/* Consumer: the ring's stream position past the last record peeked (where
 * the next one starts, or its wrap padding), and the position handed back
 * so far. Positions only grow. */
uint64_t shr_read_position(const struct shr_ring *r);
uint64_t shr_released_position(const struct shr_ring *r);

/* Consumer: hands back the records before stream position pos (at most
 * what was peeked), keeping later ones valid where they are: records kept
 * in place until their events are written (core/pins.h). */
void shr_release_to(struct shr_ring *r, uint64_t pos);

/* Announce-then-recheck before sleeping. Each stores its side's wake target
 * (the peer counter value it waits for), issues a full fence and looks
 * again: true means sleeping (polling the eventfd) is safe because the peer
 * is now bound to write it; false means work (or a state change) arrived
 * meanwhile and the caller must not sleep. The consumer waits for any
 * record; the producer for room for len plus a quarter of the ring, so a
 * slow consumer wakes it once per many records, not once per release. */
bool shr_wait_data(struct shr_ring *r);                 /* consumer */
bool shr_wait_space(struct shr_ring *r, uint32_t len);  /* producer */

/* After publishing (commits, or a release): a full fence, then, only if the
 * peer sleeps and its target is reached, clear the target and write 1 to its
 * eventfd. Costs a fence and a load, no system call, while the peer is busy. */
int shr_notify_consumer(struct shr_ring *r, int data_efd);
int shr_notify_producer(struct shr_ring *r, int space_efd);

/* Resets an eventfd that woke us; 0 also when it was not readable. */
int shr_clear_wakeup(int efd);

/* Two non-blocking close-on-exec eventfds: data (producer writes, consumer
 * sleeps on it) and space (the reverse). The creator makes them and sends
 * them with shr_send_fds(). */
int shr_eventfds(int *data_efd, int *space_efd);

/* Pass the two eventfds over a connected AF_UNIX socket (SCM_RIGHTS, one
 * message). The receiver owns the new descriptors. shr_recv_fds(): -EPIPE
 * when the peer closed, -EBADMSG when the message did not carry exactly two
 * descriptors (any that came are closed). */
int shr_send_fds(int sock, int data_efd, int space_efd);
int shr_recv_fds(int sock, int *data_efd, int *space_efd);

/* True while the other side's process exists: its pid is set, is not a
 * zombie and has the start time it recorded (so a reused pid is not taken
 * for it). False before the producer attaches and after a clean close.
 * Needs both processes in one PID namespace; otherwise use the heartbeat. */
bool shr_peer_alive(const struct shr_ring *r);

/* True once the producer closed cleanly (no more records will come; those
 * written are still to be read): its cleared pid is not a death then. */
bool shr_producer_detached(const struct shr_ring *r);

/* Liveness for hung (not dead) peers: each side bumps its counter from a
 * timer; the other compares shr_peer_heartbeat() between its own ticks. */
void shr_heartbeat(struct shr_ring *r);
uint64_t shr_peer_heartbeat(const struct shr_ring *r);

/* 0, or the ring's sticky error: -EFAULT once its segment was found cut
 * short (for example while the caller was reading a record it had peeked,
 * which then reads as zeros), -EPROTO once it was found corrupt. */
int shr_status(struct shr_ring *r);

/* What a ring holds, for reports and /metrics: its capacity in bytes (0
 * when not mapped), and the bytes published but not yet released as the
 * shared counters say (either side may ask). */
uint64_t shr_capacity(const struct shr_ring *r);
uint64_t shr_fill_bytes(const struct shr_ring *r);

/* Test hooks: the shared header and the mapping's extent, so tests and the
 * fuzz harness can damage a segment as another process could; the offset
 * of a peeked record's payload from the start of the data area, minus its
 * prefix. */
struct shr_header *shr_header(const struct shr_ring *r);
size_t shr_map_bytes(const struct shr_ring *r);
uint64_t shr_record_offset(const struct shr_ring *r, const void *payload);

/* Test hooks of a producer (readoutd's --shm-inject) that put damage in the
 * ring the consumer must detect. shr_commit_bad_length() publishes the open
 * reservation's record word with length_word for its length (the right
 * tag, so only the length can be blamed) and moves head past the word
 * alone; shr_publish_head_ahead() publishes a head counter bytes beyond
 * the producer's position. Both leave the ring unusable for the producer. */
int shr_commit_bad_length(struct shr_ring *r, uint32_t length_word);
void shr_publish_head_ahead(struct shr_ring *r, uint64_t bytes);

/* Short lowercase description of a return code of this module, e.g.
 * "segment of another run" for -ESTALE. */
const char *shr_strerror(int rc);

#endif
