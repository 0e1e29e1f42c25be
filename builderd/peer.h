/* The run's peers: every source, reader and (--role hub) builder builderd
 * expects, as one table (sources first, then readers, then builders) that
 * the hub, the clocks and the report walk alike. Private to builderd. */
#ifndef ES_BD_PEER_H
#define ES_BD_PEER_H

#include "wire/control.h"

#include <stdbool.h>
#include <stdint.h>

struct msgconn;

/* A daemon on the control channel. */
struct peer {
	enum ctl_role role;
	uint32_t id;
	bool connected;          /* greeted at least once */
	bool reported;           /* END received */
	bool lost;               /* control connection gone, or stalled, before END */
	bool stalled;            /* declared gone for not answering */
	bool stuck;              /* declared gone though it answers: no data, no END */
	bool refused;            /* a reader that stopped the run for a fault it found */
	uint64_t last_heard_ns;  /* last control message, monotonic */
	uint64_t held_ns;        /* reader: time its sources were held (its last STATS) */
	uint64_t held_count;     /* reader: times it held a source (its last STATS) */
	uint64_t verified;       /* reader: frames it verified (its last STATS) */
	struct {                 /* source: its last STATS (CNT_LIST_SOURCE_STATS) */
		bool seen;
		uint64_t run_second;     /* the whole second of the run it was taken at */
		uint64_t send_positions;
		uint64_t last_event_sent;
	} sent;
	bool drain_answered;     /* source: answered the drained stop's proposal */
	uint64_t drain_last;     /* its answer: the last event it will have generated */
	struct {                 /* builder: its last STATS (CNT_LIST_BUILDER_STATS) */
		bool seen;
		uint64_t events_complete;
		uint64_t events_expired;
		uint64_t events_accepted;
		uint64_t tokens_sent;
		uint64_t events_in_flight;
		uint64_t events_per_s;
		bool recording;          /* its event files (--record) */
		uint64_t data_files;
		uint64_t data_bytes_written;
		uint64_t data_write_ns;
		uint64_t data_free_bytes;
	} live;
	struct msgconn *conn;
	char host[CTL_MAX_TEXT];
	char address[CTL_MAX_TEXT];
	uint32_t pid;
	uint32_t rails;          /* builder: the rails it listens on (its control HELLO) */
	struct ctl_report *report;
	uint64_t credit_sent;    /* last limit sent to a reader */
	uint64_t credit_sent_ns;
	uint64_t credits;
};

struct peer_table {
	uint16_t sources;
	uint32_t readers;
	uint32_t builders;       /* 0 but in --role hub */
	struct peer *peers;   /* [sources + readers + builders] */
};

/* Allocates the table: every peer not connected, roles and ids set.
 * 0 or -ENOMEM. */
int peer_table_init(struct peer_table *t, uint16_t sources, uint32_t readers);

/* The same with builders 0 .. builders-1 after the readers (--role hub). */
int peer_table_init_builders(struct peer_table *t, uint16_t sources, uint32_t readers,
			     uint32_t builders);

/* Frees every peer's report and the table; the connections are the
 * caller's to free first. Safe on a table that failed to init. */
void peer_table_free(struct peer_table *t);

/* Sources plus readers plus builders. */
uint32_t peer_count(const struct peer_table *t);

/* The i-th peer, i < peer_count(): sources first, then readers, then
 * builders. */
struct peer *peer_at(const struct peer_table *t, uint32_t i);

/* The peer of that role and id; NULL when the run has none (a builder
 * outside --role hub, an id out of range). */
struct peer *peer_find(const struct peer_table *t, enum ctl_role role, uint32_t id);

/* Shorthands of peer_find() for an id known to be in range. */
struct peer *peer_source(const struct peer_table *t, uint32_t source);
struct peer *peer_reader(const struct peer_table *t, uint32_t reader);
struct peer *peer_builder(const struct peer_table *t, uint32_t builder);

/* The position of p in the table, for state kept per peer elsewhere. */
uint32_t peer_index(const struct peer_table *t, const struct peer *p);


/* How a peer lost before its END went: "stalled", "stuck" or "died". */
const char *peer_how_gone(const struct peer *p);

#endif
