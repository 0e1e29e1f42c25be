/* The builder's end of the shared-memory data path (docs/SHM.md): the
 * abstract Unix socket co-located readers greet, one ring per such reader
 * (created here, consumed here), and the watch over each reader's liveness.
 * Records are fed to the same per-frame path as TCP data (bd_reader_take).
 * Private to builderd. */
#ifndef ES_BD_SHM_H
#define ES_BD_SHM_H

#include <stdbool.h>
#include <stdint.h>

struct bd;
struct bd_reader;

/* What metrics.json says about a reader's ring. */
struct bshm_info {
	const char *segment;          /* "/es-NAME-r<id>" */
	uint64_t capacity_bytes;
	bool attached;                /* the reader attached (the name was then unlinked) */
	bool peer_died;               /* it vanished without closing the ring */
	uint64_t wakeups;             /* data eventfd wake-ups */
};

/* Listens on "\0es-<opt.shm_name>" when that is set (else does nothing) and
 * settles the ring capacity from opt.shm_capacity_bytes and the largest
 * fragment. 0 or -errno (logged). */
int bshm_start(struct bd *b);

/* Closes the listener and every ring; unlinks every segment name still in
 * /dev/shm. Safe when bshm_start() was not called or failed. */
void bshm_stop(struct bd *b);

/* From the builder's tick: a reader whose process is gone without closing
 * its ring is reported even if its socket's end were somehow held open. */
void bshm_tick(struct bd *b, uint64_t now_ns);

/* Closes a reader's ring (a blocked reader wakes and stops), its eventfds
 * and socket, and unlinks the segment name. The link stays for the report. */
void bshm_reader_close(struct bd_reader *rd);

/* Frees a reader's link; from bd_destroy(). */
void bshm_reader_free(struct bd_reader *rd);

/* The ring capacity every co-located reader gets; 0 without --shm-listen. */
uint64_t bshm_capacity_bytes(const struct bd *b);

/* false when the reader does not use shared memory. */
bool bshm_reader_info(const struct bd_reader *rd, struct bshm_info *info);

#endif
