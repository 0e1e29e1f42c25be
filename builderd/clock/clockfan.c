#include "clock/clockfan.h"

#include "core/saturate.h"

#include <math.h>

/* A bound at now_ns: grown by its drift since at_ns; -1 when unknown. */
static int64_t clockfan_bound_now(const struct output_clock *c, int64_t now_ns)
{
	if (c->bound_ns < 0)
		return CTL_CLOCK_UNBOUNDED;
	if (c->drift_ppm <= 0.0 || c->at_ns == 0)
		return c->bound_ns;
	double age = fabs((double)now_ns - (double)c->at_ns);
	double grown = (double)c->bound_ns + c->drift_ppm * age / 1e6;
	return grown >= (double)INT64_MAX ? INT64_MAX : (int64_t)ceil(grown);
}

void clockfan_message(struct ctl_clock *m, uint16_t source, const struct output_clock *src,
		      const struct output_clock *bld, int64_t now_ns)
{
	int64_t bs = clockfan_bound_now(src, now_ns), bb = clockfan_bound_now(bld, now_ns);
	double drift_ppb = (src->drift_ppm + bld->drift_ppm) * 1000.0;
	*m = (struct ctl_clock){
		.source = source,
		.offset_ns = sat_sub_i64(src->offset_ns, bld->offset_ns),
		.bound_ns = bs < 0 || bb < 0 ? CTL_CLOCK_UNBOUNDED : sat_add_i64(bs, bb),
		/* now on the builder's clock: the hub's plus the builder's offset */
		.at_ns = (uint64_t)sat_add_i64(now_ns, bld->offset_ns),
		.drift_ppb = drift_ppb <= 0.0 ? 0
			     : drift_ppb >= (double)UINT32_MAX ? UINT32_MAX
							       : (uint32_t)ceil(drift_ppb),
	};
}
