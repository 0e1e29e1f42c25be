/* The reader's numbers as others read them: the END report with every
 * counter (per source and summed) that becomes metrics.json, the STATS the
 * builder hears every second, and /metrics (Prometheus) and /status (JSON).
 * Built from the intake's and the forwarder's views, never their state. */
#ifndef ES_READOUTD_METRICS_H
#define ES_READOUTD_METRICS_H

#include "forward.h"
#include "intake.h"

#include <stdbool.h>
#include <stdint.h>

struct ctl_msg;
struct evbuffer;

/* What the reader itself adds to the report. */
struct rmet_reader {
	uint32_t id;
	uint32_t run_id;
	int status;
	bool routing;                  /* several builders: per-link groups */
	uint64_t credits_received;
	uint64_t buffer_bytes;
	uint64_t refused_connections;  /* the data port's (door.c) */
	uint64_t greetings_busy;
	uint64_t greetings_evicted;
	uint64_t greetings_timed_out;
};

/* The forwarders of every builder link, in link order (intake_link_count()). */
typedef const struct fwd *const *rmet_fwds;

/* Fills m with the END report of the run (call intake_close_books() first);
 * *total gets the counters summed over the sources. With several builders
 * each link has a group "builder.B" (CNT_LIST_READER_LINK). */
void rmet_end_report(struct ctl_msg *m, const struct rmet_reader *rd, const struct intake *in,
		     rmet_fwds f, struct rdr_counters *total);

/* The n forwarders' stats summed (shm and the ring's from any over shm). */
void rmet_fwd_total(rmet_fwds f, uint32_t n, struct fwd_stats *st);

/* Fills m with the once-a-second STATS: how much this reader holds back. */
void rmet_stats(struct ctl_msg *m, const struct intake *in);

/* /metrics (json false) or /status (json true). */
void rmet_exposition(struct evbuffer *out, bool json, const struct rmet_reader *rd,
		     const struct intake *in, rmet_fwds f);

#endif
