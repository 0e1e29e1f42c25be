/* The builder's end of the TCP data path: the data port readers greet, and
 * each reader's connection read in batches into ingest's per-frame path
 * (ingest_take). One of the links of link.h. Private to builderd. */
#ifndef ES_BD_TCP_H
#define ES_BD_TCP_H

#include <stdint.h>

struct ingest;

/* Listens on --listen (the port is put in *port) with a read buffer per
 * reader of a batch plus the largest frame, and hands the listener to
 * ingest, which stops it. 0 or -errno (logged). */
int link_tcp_start(struct ingest *g, uint16_t *port);

#endif
