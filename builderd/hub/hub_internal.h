/* What run.c and hub_report.c share: the run's state. Private to
 * builderd's run. */
#ifndef ES_BD_HUB_INTERNAL_H
#define ES_BD_HUB_INTERNAL_H

#include "hub/dataview.h"
#include "options.h"
#include "peer.h"
#include "hub/watchdog.h"

#include <stdbool.h>
#include <stdint.h>

struct acct;
struct snapshot;
struct ctl_report;

#define HUB_TICK_US 2000u
#define HUB_MAX_ERRORS 64u

enum hub_phase { HUB_RUNNING, HUB_FINISHED };

/* The run's hub: what the run owes its peers (START, credits, BYE), the
 * tick that drives the watchdog and the progress line, and the end of the
 * run. The control port's greetings are ctlport.c's, each peer's control
 * link and its loss peerlink.c's; the data side is behind ingest.h. */
struct hub {
	struct event_base *base;
	struct options opt;
	enum hub_phase phase;
	int status;
	struct event *ev_tick;
	struct event *ev_linger;          /* after BYE: the loop ends then at the latest */
	struct ctlport *ctlport;          /* ctlport.c: the control port and its greetings */
	struct ingest *ing;                  /* ingest.c: readers' data, core, records; NULL in role hub */
	struct fleet *fleet;              /* fleet.c, role hub: the builders' reports */
	struct manager *mgr;                  /* manager.c, role hub: the event manager */
	struct dataview data;              /* the data side as books, watchdog, peerlink see it */
	bool role_hub;                       /* --role hub: builds nothing, manages builders */
	struct clocks *clocks;               /* clocks.c: the exchanges, offsets and bounds */
	struct watchdog wd;                     /* watchdog.c: stalled and stuck peers */
	struct peerlink *plink;              /* peerlink.c: each peer's control link, its loss */
	int64_t *source_offsets_ns;
	struct peer_table peers;          /* every source and reader */
	uint64_t start_ns;
	uint64_t last_progress_ns;
	uint64_t wind_up_ns;              /* the watchdog fired: gathering final counters */
	struct progress *prog;                /* progress.c: the rate, the progress line */
	uint64_t credits_sent;
	uint32_t open_conns;              /* after the run: peers still flushing BYE */
	char *errors[HUB_MAX_ERRORS];
	uint32_t error_count;
	uint32_t errors_dropped;
	uint64_t end_ns;
	bool started;                     /* START sent to the sources */
	/* A serving hub holds START (hub_hold_start): when every peer is in,
	 * on_ready is called once and START waits for hub_release_start. */
	void (*on_ready)(void *arg);
	void *on_ready_arg;
	bool ready_told;
	bool start_released;
	bool books_balanced;              /* the run's books closed and balanced */
	uint64_t started_ns;              /* when START was sent; 0 before */
	uint64_t first_built_ns;          /* the tick that saw the first decided event; 0 before */
	uint64_t drain_ns;                /* the operator's drained stop asked; 0: none */
	uint64_t drain_proposed;          /* the proposal sent to the sources */
	uint64_t drain_last_event;        /* the final stop: the highest answer */
	bool drain_final;                 /* the final STOP sent */
	uint64_t fault_ns;                /* a peer stopped the run for a fault; 0: none */
	char fault_reason[CTL_MAX_TEXT];  /* the STOP's reason then */
	bool fault_builders_told;
	uint64_t books_ns;                /* the books closed (hub_finish) */
	struct prom_server *prom;         /* --metrics-listen */
	struct snapshot_link *snap_links;   /* [readers], for reports */
	char host[256];                   /* the builder's host name */
};

/* A peer stopped the run for a fault it found (plink's fault hook): every
 * source is told to stop now, the manager assigns nothing more, and the
 * run ends the normal way once the others have reported (docs/BUILDERS.md,
 * "A reader that finds a fault"). */
void hub_stop_at_fault(struct hub *b, const struct peer *p);

/* After such a stop, p (joining late, or any peer at the stop) is told to
 * stop too; nothing without one. */
void hub_fault_tell(struct hub *b, struct peer *p);

/* The builders of such a stop before START, once no reader will dial them
 * any more (every one reported or gone): told to stop, once. */
void hub_fault_tell_builders(struct hub *b);

/* A source's answer to the drained stop's proposal (a STOP from it):
 * the last event it will have generated. */
void hub_drain_answer(struct hub *b, struct peer *p, uint64_t last_event);

/* The drained stop's final STOP, once every source has answered, reported
 * or is gone, or at the answers' deadline (from the tick). */
void hub_drain_settle(struct hub *b, uint64_t now);

/* The run's figures for a report: the hub's own, then the data side's.
 * self (may be NULL) gets the builder process's own counters. */
void hub_snapshot_fill(struct hub *b, struct snapshot *s, struct ctl_report *self);

/* metrics.json and the summary. */
void hub_report(struct hub *b, const struct acct *a);

/* The port file and the "listening" lines the launcher reads back; a hub
 * has no data port. */
int hub_announce(struct hub *b, uint16_t data_port, uint16_t control_port);

void hub_log_waiting(const struct hub *b);

/* Events decided so far: the core's complete ones, or in role hub what the
 * builders' tokens said. */
uint64_t hub_events_done(const struct hub *b);

#endif
