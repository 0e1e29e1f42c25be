/* Saturating integer arithmetic for times and bounds: a result beyond the
 * type's range sticks at its limit instead of wrapping, so a garbage
 * timestamp gives a huge bound (which nothing trusts), never a small one.
 * Header-only: these sit on per-fragment and per-sample paths. */
#ifndef ES_CORE_SATURATE_H
#define ES_CORE_SATURATE_H

#include <stdint.h>

static inline int64_t sat_add_i64(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return a < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static inline int64_t sat_sub_i64(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return a < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static inline uint64_t sat_add_u64(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* |a - b| without overflow: the distance between any two int64 fits in
 * uint64. */
static inline uint64_t abs_diff_i64(int64_t a, int64_t b)
{
	return a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

#endif
