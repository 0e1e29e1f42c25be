/* The builder's end of the shared-memory data path (docs/SHM.md): the
 * abstract Unix socket co-located readers greet, one ring per such reader
 * (created here, consumed here), and the watch over each reader's liveness.
 * Records are fed to ingest's per-frame path (ingest_take) like TCP data; one
 * of the links of link.h. Private to builderd. */
#ifndef ES_BD_SHM_H
#define ES_BD_SHM_H

struct ingest;

/* Listens on "\0es-<opt.shm_name>" when that is set (else does nothing),
 * settles the ring capacity from opt.shm_capacity_bytes and the largest
 * fragment, and hands the listener to ingest, which ticks and stops it.
 * 0 or -errno (logged). */
int link_shm_start(struct ingest *g);

#endif
