/* The reader's data port: listens, greets every connection (the caps and
 * deadline of io/handshake), checks a source's HELLO against the topology
 * and the state of its slot, and hands a welcomed connection to the intake. */
#ifndef ES_READOUTD_DOOR_H
#define ES_READOUTD_DOOR_H

#include <stdint.h>

struct event_base;
struct intake;
struct rdr_options;

struct door;

/* Listens on opt's data address; *port: the port bound. */
struct door *door_open(struct event_base *base, const struct rdr_options *opt,
		       struct intake *in, uint16_t *port);
/* Stops accepting: the run is over. */
void door_close(struct door *d);
/* Connections refused (for any reason), refused as busy, timed out greeting. */
void door_counts(const struct door *d, uint64_t *refused, uint64_t *busy, uint64_t *evicted,
		 uint64_t *timed_out);
void door_destroy(struct door *d);

#endif
