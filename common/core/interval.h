/* Closed intervals of clock offsets and how two independent bounds on one
 * offset combine (docs/CLOCKS.md). Pure: no I/O, no clock reads, no
 * allocation; arithmetic saturates at the int64 limits. */
#ifndef ES_CORE_INTERVAL_H
#define ES_CORE_INTERVAL_H

#include <stdbool.h>
#include <stdint.h>

/* [lo, hi] in ns, lo <= hi. */
struct ivl {
	int64_t lo;
	int64_t hi;
};

/* center +- half (half >= 0; a negative half is taken as 0). */
struct ivl ivl_around(int64_t center_ns, int64_t half_ns);

/* The common part of a and b: false when they are disjoint. Touching
 * intervals ([0, 5] and [5, 9]) share their end point. */
bool ivl_intersect(struct ivl a, struct ivl b, struct ivl *out);

/* The smallest interval holding both. */
struct ivl ivl_hull(struct ivl a, struct ivl b);

/* The midpoint, rounded toward lo, and the half-width rounded up, so that
 * mid +- half holds the whole interval. */
int64_t ivl_mid(struct ivl a);
int64_t ivl_half(struct ivl a);

/* What a combined estimate stands on. */
enum ivl_basis {
	IVL_BASIS_NONE,      /* neither bound is available */
	IVL_BASIS_INBAND,    /* the in-band interval alone, or it lies inside chrony's */
	IVL_BASIS_CHRONY,    /* chrony's alone, or it lies inside the in-band one */
	IVL_BASIS_BOTH,      /* each cuts off part of the other */
	IVL_BASIS_UNION,     /* disjoint: one of them is wrong, the hull of both */
};

/* "in band", "chrony", "both", "union (inconsistent)", "none". */
const char *ivl_basis_name(enum ivl_basis b);

struct ivl_estimate {
	enum ivl_basis basis;
	int64_t offset_ns;   /* the midpoint applied */
	int64_t bound_ns;    /* its half-width: the uncertainty */
	struct ivl range;
};

/* Combines the in-band interval (when have_inband) with chrony's (when
 * have_chrony): both hold, so the offset lies in their intersection; when
 * they are disjoint one of them is wrong and the estimate is their hull,
 * with basis IVL_BASIS_UNION. */
struct ivl_estimate ivl_combine(bool have_inband, struct ivl inband, bool have_chrony,
				struct ivl chrony);

#endif
