/* Interval arithmetic of clock bounds; see interval.h. */
#include "core/interval.h"

#include "core/saturate.h"

struct ivl ivl_around(int64_t center_ns, int64_t half_ns)
{
	if (half_ns < 0)
		half_ns = 0;
	return (struct ivl){ sat_sub_i64(center_ns, half_ns), sat_add_i64(center_ns, half_ns) };
}

bool ivl_intersect(struct ivl a, struct ivl b, struct ivl *out)
{
	struct ivl r = { a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi };
	if (r.lo > r.hi)
		return false;
	*out = r;
	return true;
}

struct ivl ivl_hull(struct ivl a, struct ivl b)
{
	return (struct ivl){ a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi };
}

/* hi - lo as unsigned: the width of any int64 interval fits. */
static uint64_t ivl_width(struct ivl a)
{
	return (uint64_t)a.hi - (uint64_t)a.lo;
}

int64_t ivl_mid(struct ivl a)
{
	return (int64_t)((uint64_t)a.lo + ivl_width(a) / 2);
}

int64_t ivl_half(struct ivl a)
{
	/* From the rounded-down midpoint the far end is ceil(width / 2). */
	uint64_t h = ivl_width(a) / 2 + (ivl_width(a) & 1);
	return h > INT64_MAX ? INT64_MAX : (int64_t)h;
}

const char *ivl_basis_name(enum ivl_basis b)
{
	switch (b) {
	case IVL_BASIS_INBAND:
		return "in band";
	case IVL_BASIS_CHRONY:
		return "chrony";
	case IVL_BASIS_BOTH:
		return "both";
	case IVL_BASIS_UNION:
		return "union (inconsistent)";
	case IVL_BASIS_NONE:
		break;
	}
	return "none";
}

static bool ivl_inside(struct ivl inner, struct ivl outer)
{
	return inner.lo >= outer.lo && inner.hi <= outer.hi;
}

struct ivl_estimate ivl_combine(bool have_inband, struct ivl inband, bool have_chrony,
				struct ivl chrony)
{
	struct ivl_estimate e = { .basis = IVL_BASIS_NONE };
	if (have_inband && have_chrony) {
		if (!ivl_intersect(inband, chrony, &e.range)) {
			e.range = ivl_hull(inband, chrony);
			e.basis = IVL_BASIS_UNION;
		} else if (ivl_inside(inband, chrony)) {
			e.basis = IVL_BASIS_INBAND;
		} else if (ivl_inside(chrony, inband)) {
			e.basis = IVL_BASIS_CHRONY;
		} else {
			e.basis = IVL_BASIS_BOTH;
		}
	} else if (have_inband) {
		e.range = inband;
		e.basis = IVL_BASIS_INBAND;
	} else if (have_chrony) {
		e.range = chrony;
		e.basis = IVL_BASIS_CHRONY;
	} else {
		return e;
	}
	e.offset_ns = ivl_mid(e.range);
	e.bound_ns = ivl_half(e.range);
	return e;
}
