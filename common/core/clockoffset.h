/* Clock offsets between hosts and how far to trust them (docs/CLOCKS.md).
 *
 * Two independent sources:
 *  - the in-band estimator: builderd's PING/PONG four-timestamp exchanges
 *    with a peer, best sample of a sliding window, bound = delay/2 widened by
 *    a drift bound as the sample ages. Pure: no clock reads, no I/O, no
 *    allocation; every function takes the builder's "now".
 *  - chrony's tracking state of each host (chronyc -c tracking), which
 *    bounds that host's clock against its reference.
 *
 * Sign convention everywhere: offset = peer clock minus builder clock, so a
 * peer timestamp on the builder's clock is peer_ts - offset. Times are
 * CLOCK_REALTIME nanoseconds since the Unix epoch held in int64_t (good until
 * 2262); arithmetic saturates or rejects rather than wraps. */
#ifndef ES_CORE_CLOCKOFFSET_H
#define ES_CORE_CLOCKOFFSET_H

#include <stdbool.h>
#include <stdint.h>

struct ctl_group;

/* Samples the estimator keeps: at builderd's PING every 200 ms, 3.2 s of
 * history (two bursts of 8 while a run starts), enough to ride out a burst
 * of queueing without letting old samples linger: at 100 ppm a 3 s old
 * sample has widened by 300 us and long lost to any fresh one. */
#define CKS_WINDOW 32

/* Relative drift assumed between two clocks when chrony cannot tell us
 * better, in ppm. Commodity crystals are specified to a few tens of ppm
 * each; two of them off in opposite directions stay within 100 ppm. It is a
 * working assumption, not a hard limit (the kernel accepts +-500 ppm). */
#define CKS_DEFAULT_DRIFT_PPM 100.0

/* Largest drift bound accepted, in ppm; beyond it a clock is broken. */
#define CKS_MAX_DRIFT_PPM 1e6

/* Returned by cks_chrony_bound_ns() when chrony gives no bound. */
#define CKS_NO_BOUND INT64_C(-1)

/* How long cks_chrony_read() waits for chronyc before killing it. */
#define CKS_CHRONYC_TIMEOUT_MS 2000

/* One accepted exchange. */
struct cks_sample {
	int64_t offset_ns;  /* peer - builder, ((t2-t1)+(t3-t4))/2 */
	int64_t delay_ns;   /* (t4-t1)-(t3-t2), >= 0 */
	int64_t taken_ns;   /* t1, builder clock: the sample's age starts here */
};

/* Fixed ring of the last CKS_WINDOW samples of one peer. Embed it (no
 * allocation); fields are read-only outside clocksync.c except the counters,
 * which the owner may reset. */
struct cks_estimator {
	struct cks_sample samples[CKS_WINDOW];
	unsigned count;      /* valid samples, <= CKS_WINDOW */
	unsigned next;       /* slot the next sample overwrites */
	double drift_ppm;    /* relative frequency bound widening old samples */
	uint64_t accepted;   /* samples stored */
	uint64_t rejected;   /* impossible samples refused by cks_add_sample() */
	uint64_t evicted;    /* samples pushed out of the full window */
};

/* Empties the window, zeroes the counters and sets the drift bound to
 * CKS_DEFAULT_DRIFT_PPM. Call before first use. */
void cks_reset(struct cks_estimator *est);

/* Sets the drift bound in ppm used to widen aged samples. NaN, negative or
 * above CKS_MAX_DRIFT_PPM: -EINVAL and the bound is unchanged. */
int cks_set_drift_ppm(struct cks_estimator *est, double drift_ppm);

/* Adds one exchange: t1 builder send, t2 peer receive, t3 peer send,
 * t4 builder receive. Returns 0, -EINVAL for an impossible exchange
 * (t4 < t1, t3 < t2, or negative delay: the peer claims to have held the
 * PING longer than the round trip) or -ERANGE when the differences overflow
 * int64 (garbage timestamps); refused samples only bump est->rejected.
 * A full window evicts its oldest sample. */
int cks_add_sample(struct cks_estimator *est, int64_t t1_ns, int64_t t2_ns, int64_t t3_ns,
		   int64_t t4_ns);

/* The offset of the sample with the smallest bound at now_ns, where a
 * sample's bound is ceil(delay/2) + drift_ppm * |now_ns - taken_ns|; ties go
 * to the newest sample. The true offset lies within offset +- bound as long
 * as the drift bound holds. Returns 0 or -ENODATA when the window is empty.
 * The bound saturates at INT64_MAX. */
int cks_estimate(const struct cks_estimator *est, int64_t now_ns, int64_t *offset_ns,
		 int64_t *bound_ns);

/* Every sample in the window holds the true offset within its own bound
 * at now_ns, so the offset lies in the intersection of all their intervals,
 * which is never wider than the best one's and narrower wherever samples
 * with delay on different sides cut off different ends. Sets [*lo_ns,
 * *hi_ns] and returns 0; -ENODATA when the window is empty; -ERANGE when
 * the intervals do not all overlap (a drift bound or a sample that cannot
 * be true), and then sets the best sample's interval. */
int cks_estimate_range(const struct cks_estimator *est, int64_t now_ns, int64_t *lo_ns,
		       int64_t *hi_ns);

/* Bound of one sample at now_ns (the quantity cks_estimate() minimises). */
int64_t cks_sample_bound_ns(const struct cks_sample *s, double drift_ppm, int64_t now_ns);

/* A peer timestamp converted to the builder's clock: peer_ts - offset,
 * saturating at the int64 limits instead of wrapping. */
int64_t cks_correct(int64_t peer_ts_ns, int64_t offset_ns);

/* A host's chrony tracking state: the fields of `chronyc -c tracking`
 * (chrony 4.3, client.c process_cmd_tracking), in its order. */
struct cks_chrony {
	bool available;          /* a tracking line was read and parsed */
	bool synchronised;       /* available, leap status not "Not synchronised" */
	char reason[128];        /* why not available: chronyc's own words */
	uint32_t ref_id;         /* 1: reference ID, hex */
	char reference[64];      /* 2: reference IP or refclock name; may be empty */
	int stratum;             /* 3 */
	double ref_time_s;       /* 4: last reference update, Unix seconds */
	double offset_s;         /* 5: "System time": NTP time - system time,
				  *    > 0 when the system clock is slow */
	double last_offset_s;    /* 6: > 0 when the clock was ahead */
	double rms_offset_s;     /* 7 */
	double frequency_ppm;    /* 8: > 0 is printed "fast" */
	double residual_freq_ppm; /* 9 */
	double skew_ppm;         /* 10: error bound of the frequency */
	double root_delay_s;     /* 11 */
	double root_dispersion_s; /* 12 */
	double update_interval_s; /* 13 */
	char leap[32];           /* 14: Normal, Insert second, Delete second,
				  *     Not synchronised */
	uint64_t read_mono_ns;   /* CLOCK_MONOTONIC when chronyc was run */
	uint64_t read_age_ns;    /* decoded: how old the read was when sent */
};

/* Parses one line of `chronyc -c tracking` (trailing newline allowed) into
 * *c. On failure returns false, sets available = false and says why in
 * c->reason; never fills in a guess. */
bool cks_chrony_parse(struct cks_chrony *c, const char *line);

/* Runs `chronyc -c [-h socket] tracking` (socket NULL: chronyc's default)
 * and parses its answer, killing chronyc after CKS_CHRONYC_TIMEOUT_MS.
 * Blocks: call at start and end of a run, not on a hot path. Returns 0 when
 * a tracking line was parsed, else -errno with available = false and
 * c->reason set: -ENOENT chronyc missing, -ECONNREFUSED chronyd not
 * answering ("506 Cannot talk to daemon"), -ETIMEDOUT, -EBADMSG output that
 * does not parse. */
int cks_chrony_read(struct cks_chrony *c, const char *socket);

/* cks_chrony_read() with the command given in full (argv[0] looked up in
 * PATH) and its own timeout; lets tests stand in for chronyc. */
int cks_chrony_run(struct cks_chrony *c, char *const argv[], int timeout_ms);

/* Environment variable naming the chronyd command socket every daemon's
 * chrony read uses (chronyc -h); unset or empty: chronyc's default. Lets
 * daemons sharing a file system each ask their own chronyd, as in a test
 * with one chronyd per network namespace. */
#define CKS_SOCKET_ENV "ES_CHRONY_SOCKET"

/* The socket named by CKS_SOCKET_ENV, NULL for chronyc's default. */
const char *cks_chrony_socket(void);

/* chrony's bound on the host clock's error against its reference:
 * |offset| + root dispersion + root delay / 2, in ns rounded up.
 * CKS_NO_BOUND when chrony was not read or the host is not synchronised:
 * an unsynchronised chronyd reports placeholder delays, not a bound. */
int64_t cks_chrony_bound_ns(const struct cks_chrony *c);

/* Drift bound in ppm between the clocks of two chrony-disciplined hosts:
 * each host's skew + |residual frequency| + the rate at which chronyd is
 * slewing away its pending correction (|offset| / update interval). Falls
 * back to CKS_DEFAULT_DRIFT_PPM unless both hosts are synchronised and the
 * result is finite and at most CKS_MAX_DRIFT_PPM. */
double cks_drift_ppm_from_chrony(const struct cks_chrony *peer, const struct cks_chrony *builder);

/* Report group in which a peer sends its host's chrony state to builderd:
 * in its first STATS (read at start) and in its END (read at end). */
#define CKS_CHRONY_GROUP "chrony"

/* Writes *c into g as counters, which are unsigned integers: times in ns,
 * rates in ppb, the update interval in ms, each quantity that may be
 * negative (offset, frequency, residual frequency) as its magnitude plus a
 * "<name>_negative" flag. Exact for what chronyc prints
 * (9 decimals of seconds, 3 of ppm, 1 of the interval). An unavailable
 * state is sent as available = 0 alone: its reason is text, which counters
 * cannot carry. false when g is NULL or full. */
bool cks_chrony_encode(const struct cks_chrony *c, struct ctl_group *g);

/* cks_chrony_encode() also sends "read_age_ns": how long before the
 * encoding chronyc was run, so that the receiver knows from when the bound
 * holds and widens it by drift from then. */

/* Reads a group written by cks_chrony_encode(). false, with available =
 * false and a reason, when g is NULL or lacks "available"; true otherwise,
 * even for a state sent as unavailable (then with a generic reason). The
 * reference name, ref time and the last and RMS offsets are not carried and
 * stay zero. */
bool cks_chrony_decode(struct cks_chrony *c, const struct ctl_group *g);

enum cks_verdict {
	CKS_UNKNOWN,      /* a bound is missing (negative) */
	CKS_CONSISTENT,   /* the in-band and chrony intervals overlap */
	CKS_INCONSISTENT, /* at least one of the bounds is wrong */
};

/* Whether an in-band offset +- bound agrees with chrony: both hosts are
 * within their chrony bounds of a common reference, so the true offset is
 * within bound_a + bound_b of zero; consistent when
 * |offset| <= bound_inband + chrony_bound_a + chrony_bound_b. */
enum cks_verdict cks_check_consistent(int64_t offset_ns, int64_t bound_inband_ns,
				      int64_t chrony_bound_a_ns, int64_t chrony_bound_b_ns);

#endif
