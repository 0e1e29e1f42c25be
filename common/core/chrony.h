/* A host's chrony state (docs/CLOCKS.md): one line of `chronyc -c tracking`
 * parsed, the bound it puts on the host clock's error, and the state carried
 * to builderd as counters of a report group. Pure: the text and the time are
 * passed in; running chronyc is io/chronyc's. */
#ifndef ES_CORE_CHRONY_H
#define ES_CORE_CHRONY_H

#include <stdbool.h>
#include <stdint.h>

struct ctl_group;

/* Returned by cks_chrony_bound_ns() when chrony gives no bound. */
#define CKS_NO_BOUND INT64_C(-1)

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

/* Says why c holds no state: formats c->reason (cut to its size) and
 * clears available and synchronised; the other fields are left alone. */
void cks_chrony_set_reason(struct cks_chrony *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* chrony's bound on the host clock's error against its reference:
 * |offset| + root dispersion + root delay / 2, in ns rounded up.
 * CKS_NO_BOUND when chrony was not read or the host is not synchronised:
 * an unsynchronised chronyd reports placeholder delays, not a bound. */
int64_t cks_chrony_bound_ns(const struct cks_chrony *c);

/* Report group in which a peer sends its host's chrony state to builderd:
 * in its first STATS (read at start) and in its END (read at end). */
#define CKS_CHRONY_GROUP "chrony"

/* Writes *c into g as counters, which are unsigned integers: times in ns,
 * rates in ppb, the update interval in ms, each quantity that may be
 * negative (offset, frequency, residual frequency) as its magnitude plus a
 * "<name>_negative" flag. Exact for what chronyc prints
 * (9 decimals of seconds, 3 of ppm, 1 of the interval). An unavailable
 * state is sent as available = 0 alone: its reason is text, which counters
 * cannot carry. false when g is NULL or full.
 *
 * It also sends "read_age_ns": now_mono_ns (CLOCK_MONOTONIC, the caller's
 * reading at the encoding) minus c->read_mono_ns, so that the receiver
 * knows from when the bound holds and widens it by drift from then; left
 * out when read_mono_ns is 0 (not read by chronyc). */
bool cks_chrony_encode(const struct cks_chrony *c, uint64_t now_mono_ns, struct ctl_group *g);

/* Reads a group written by cks_chrony_encode(). false, with available =
 * false and a reason, when g is NULL or lacks "available"; true otherwise,
 * even for a state sent as unavailable (then with a generic reason). The
 * reference name, ref time and the last and RMS offsets are not carried and
 * stay zero. */
bool cks_chrony_decode(struct cks_chrony *c, const struct ctl_group *g);

#endif
