/* The builder core's lanes: each source's progress per connection that
 * carries it, and the skip rule's question asked of the lane of the event
 * in question (core/rails.h). */
#include "core/builder.h"
#include "core/builder_internal.h"

#include <errno.h>

int bld_set_source_lanes(struct bld *b, uint16_t src, uint32_t lanes)
{
	if (src >= b->cfg.sources || lanes < 1 || lanes > RAILS_MAX)
		return -EINVAL;
	b->lanes[src] = (uint8_t)lanes;
	return 0;
}

void bld_set_lane_span(struct bld *b, uint64_t span, uint64_t offset)
{
	b->cfg.lane_span = span;
	b->cfg.lane_offset = offset;
	b->lane_span = span != 0 ? span : 1;
}

uint32_t bld_lane_of(const struct bld *b, uint16_t src, uint64_t event_id)
{
	if (src >= b->cfg.sources || event_id < b->cfg.first_event)
		return 0;
	return bld_lane(b, src, event_id - b->cfg.first_event);
}

bool bld_absent_sources_passed(const struct bld *b, uint64_t rel, const uint64_t *present)
{
	for (uint32_t src = 0; src < b->cfg.sources; src++) {
		if (present != NULL && (present[src / 64u] >> (src % 64u)) & 1u)
			continue;
		if (*bld_progress(b, (uint16_t)src, rel) <= rel + 1)
			return false;
	}
	return true;
}
