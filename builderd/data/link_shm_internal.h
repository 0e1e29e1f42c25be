/* The shared-memory link's state, shared by its set-up and liveness
 * (data/link_shm.c) and its records' path (data/link_shm_data.c). Private
 * to those two. */
#ifndef ES_BD_LINK_SHM_INTERNAL_H
#define ES_BD_LINK_SHM_INTERNAL_H

#include "data/ingest.h"
#include "data/ringkeep.h"

#include "io/handshake.h"
#include "io/shmring.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

/* Bytes taken from a ring before handing them back to the reader: small
 * enough that a reader waiting on a full ring restarts early, large enough
 * that the release's cache line does not bounce per record. */
#define LINK_SHM_RELEASE_BYTES (64u << 10)
/* How often the tick looks at the readers' processes. */
#define LINK_SHM_ALIVE_CHECK_NS 100000000u

struct link_shm_link {
	struct link_shm *set;
	struct ingest_reader *rd;
	struct shr_ring ring;
	bool ring_open;
	bool named;                 /* the segment name is still in /dev/shm */
	bool attached;
	bool peer_died;
	bool suspect;               /* looked dead at the previous check */
	char segment[96];
	int sock, data_efd, space_efd;
	struct event *ev_sock, *ev_data;
	struct event *ev_attach;    /* the deadline of the reader's "attached" */
	uint32_t pid;
	char host[CTL_MAX_TEXT];
	uint64_t wakeups;
	/* --role builder: the record peeked and held for an unassigned event
	 * (rd->held); it and those before it stay unreleased, so valid. */
	const void *held_rec;
	uint32_t held_len;
	uint64_t held_at;           /* the ring position before it */
	/* --record-keep in-place: the records the recorder refers to where they
	 * lie, oldest first; none is handed back while referred to. */
	struct ringkeep keep;
};

struct link_shm {
	struct ingest *ing;
	int listen_fd;
	struct event *ev_accept;
	struct greet_door door;
	uint64_t refused;           /* the door's and the ring set-ups' */
	uint32_t readers;
	struct link_shm_link **links;   /* [readers], kept for the report once made */
	char sock_name[96];
	uint64_t capacity_bytes;
	uint64_t alive_checked_ns;
};

/* Takes records from the ring into the builder core, at most budget bytes
 * in one go so that other readers and the tick get their turn. Ends with
 * the wake-up armed (empty), the data event re-activated (budget spent) or
 * the data path closed (the reader's end of stream, or a corrupt ring). */
void link_shm_drain(struct link_shm_link *l, uint64_t budget);
/* The reader's commit woke the builder. */
void link_shm_on_data(evutil_socket_t fd, short what, void *arg);
/* An assign passed the held record: drain on from it. */
void link_shm_resume(struct ingest_reader *rd);
/* The segment's name removed from /dev/shm (once). */
void link_shm_unlink(struct link_shm_link *l);
/* The reader's byte on the socket, "attached", or its end. */
int link_shm_read_sock(struct link_shm_link *l, char *why, size_t why_len);

#endif
