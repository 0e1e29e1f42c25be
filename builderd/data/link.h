/* A reader's data link as ingest sees it (tcp.c, shm.c): the link greets
 * the reader, moves its bytes into ingest_take() and, through these, stops and
 * describes itself. A new transport is one more of these. Private to
 * builderd. */
#ifndef ES_BD_LINK_H
#define ES_BD_LINK_H

#include <stdint.h>

struct ingest_reader;
struct snapshot;
struct snapshot_link;

struct link_ops {
	const char *transport;                 /* "tcp", "shm": metrics.json */
	/* Stops carrying: events, fds, the ring. The link's per-reader state
	 * stays for the report; the link module frees it when it stops. */
	void (*close)(struct ingest_reader *rd);
	/* Adds the link's own figures to the report's view of the path. */
	void (*describe)(const struct ingest_reader *rd, struct snapshot_link *l);
	/* rd->held was cleared (an assign came): takes the held frame again
	 * and reads on. */
	void (*resume)(struct ingest_reader *rd);
};

/* A link's listener, as ingest holds it once the run's wiring started it
 * (ingest_add_link): ticked, counted in reports, stopped with ingest. */
struct link_listener_ops {
	/* From the builder's tick (may be NULL). */
	void (*tick)(void *listener, uint64_t now_ns);
	/* Adds its greeting counters and memory to a report. */
	void (*report)(const void *listener, struct snapshot *s);
	/* Closes the listener and every path of it; frees it. */
	void (*stop)(void *listener);
};

#endif
