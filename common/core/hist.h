/* Log-linear latency histogram with fixed counters: values below 16 have a
 * bucket each, then every power of two is split into 16 equal buckets, so a
 * bucket is at most 1/16 (6.25 %) wide relative to its value. No allocation;
 * adding is O(1). */
#ifndef ES_CORE_HIST_H
#define ES_CORE_HIST_H

#include <stdint.h>

#define HIST_SUB_BUCKETS 16u
/* 16 exact buckets, then 16 per power of two from 2^4 to 2^63. */
#define HIST_BUCKETS (16u + 60u * HIST_SUB_BUCKETS)

struct hist {
	uint64_t counts[HIST_BUCKETS];
	uint64_t samples;
	uint64_t max;   /* exact */
	uint64_t min;   /* exact; UINT64_MAX when empty */
	uint64_t sum;   /* wraps only past 584 years of nanoseconds */
};

/* Empties the histogram. */
void hist_reset(struct hist *h);

/* Counts one value. */
void hist_add(struct hist *h, uint64_t value);

/* Adds every count of src into dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* Bucket index of a value, and the inclusive value range of a bucket. */
unsigned hist_bucket_of(uint64_t value);
uint64_t hist_bucket_lower(unsigned bucket);
uint64_t hist_bucket_upper(unsigned bucket);

/* The upper edge of the bucket holding the q-quantile (0 < q <= 1), i.e. the
 * smallest bucket upper edge with at least ceil(q * samples) values at or
 * below it, capped at the exact max. 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);

#endif
