#include "core/hist.h"

#include <math.h>
#include <string.h>

/* log2 of 16: the first power of two split into sub-buckets. */
#define HIST_SPLIT_SHIFT 4u

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned hist_bucket_of(uint64_t value)
{
	if (value < HIST_SUB_BUCKETS)
		return (unsigned)value;
	/* The top bit picks the power of two, the next four bits the sub-bucket. */
	unsigned power = 63u - (unsigned)__builtin_clzll(value);
	unsigned sub = (unsigned)(value >> (power - HIST_SPLIT_SHIFT)) & (HIST_SUB_BUCKETS - 1u);
	return HIST_SUB_BUCKETS + (power - HIST_SPLIT_SHIFT) * HIST_SUB_BUCKETS + sub;
}

uint64_t hist_bucket_lower(unsigned bucket)
{
	if (bucket < HIST_SUB_BUCKETS)
		return bucket;
	if (bucket >= HIST_BUCKETS)
		bucket = HIST_BUCKETS - 1u;
	unsigned power = HIST_SPLIT_SHIFT + (bucket - HIST_SUB_BUCKETS) / HIST_SUB_BUCKETS;
	uint64_t sub = (bucket - HIST_SUB_BUCKETS) % HIST_SUB_BUCKETS;
	return (HIST_SUB_BUCKETS + sub) << (power - HIST_SPLIT_SHIFT);
}

uint64_t hist_bucket_upper(unsigned bucket)
{
	if (bucket < HIST_SUB_BUCKETS)
		return bucket;
	if (bucket >= HIST_BUCKETS)
		bucket = HIST_BUCKETS - 1u;
	unsigned power = HIST_SPLIT_SHIFT + (bucket - HIST_SUB_BUCKETS) / HIST_SUB_BUCKETS;
	/* The last bucket ends at UINT64_MAX, so lower + width would overflow;
	 * adding width - 1 does not. */
	uint64_t width = UINT64_C(1) << (power - HIST_SPLIT_SHIFT);
	return hist_bucket_lower(bucket) + (width - 1u);
}

void hist_add(struct hist *h, uint64_t value)
{
	h->counts[hist_bucket_of(value)]++;
	h->samples++;
	h->sum += value;
	if (value > h->max)
		h->max = value;
	if (value < h->min)
		h->min = value;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->samples += src->samples;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
	if (src->min < dst->min)
		dst->min = src->min;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	if (h->samples == 0)
		return 0;
	/* Out-of-range q is clamped rather than rejected: a report asking for
	 * p0 or p100.1 still gets the min bucket or the max. */
	double want = ceil(q * (double)h->samples);
	uint64_t rank;
	if (!(want >= 1.0))
		rank = 1;
	else if (want >= (double)h->samples)
		rank = h->samples;
	else
		rank = (uint64_t)want;

	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			uint64_t upper = hist_bucket_upper(i);
			return upper < h->max ? upper : h->max;
		}
	}
	return h->max;
}
