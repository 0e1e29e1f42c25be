/* The books of rails (docs/BUILDERS.md, "Rails"): a reader-builder link of
 * several TCP connections balances per connection and as a whole. */
#include "core/acct.h"
#include "core/acct_internal.h"

#include "wire/counters.h"

#include <stdio.h>

/* One side of a link: its rails' counters and the link's own total. */
struct acct_link_side {
	uint32_t rails;                       /* rail groups found */
	uint64_t rail[CTL_MAX_RAILS];
	uint64_t wrong[CTL_MAX_RAILS];
	bool fits;                            /* the rails' sum fits in 64 bits */
	uint64_t sum;
	uint64_t link;
	bool link_known;
};

static void acct_side_sum(struct acct_link_side *s)
{
	s->sum = 0;
	s->fits = true;
	for (uint32_t k = 0; k < s->rails; k++)
		s->fits = acct_sum(&s->sum, s->rail[k]) && s->fits;
}

/* The rail groups "<link>.rail.K" of report r, K from 0 while present. */
static void acct_read_rails(const struct ctl_report *r, const char *link, const char *name,
			    const char *wrong, struct acct_link_side *s)
{
	char group[CNT_GROUP_BYTES];
	s->rails = 0;
	for (uint32_t k = 0; k < CTL_MAX_RAILS; k++) {
		bool found, fw;
		cnt_group_rail(group, link, k);
		uint64_t v = acct_value(r, group, name, &found);
		if (!found)
			break;
		s->rail[k] = v;
		s->wrong[k] = wrong != NULL ? acct_value(r, group, wrong, &fw) : 0;
		s->rails = k + 1;
	}
	acct_side_sum(s);
}

/* The equations of one link, reader side rs and builder side bs. */
static void acct_link_rails(struct acct *a, uint32_t reader, uint32_t builder,
			    const struct acct_link_side *rs, const struct acct_link_side *bs)
{
	uint32_t rails = rs->rails > bs->rails ? rs->rails : bs->rails;
	if (rails == 0)
		return;
	char note[128];
	for (uint32_t k = 0; k < rails; k++) {
		bool known = k < rs->rails && k < bs->rails;
		snprintf(note, sizeof note, "rail %u of the link is in the %s's report only", k,
			 k < rs->rails ? "reader" : "builder");
		acct_add(a, k < rs->rails ? rs->rail[k] : 0, k < bs->rails ? bs->rail[k] : 0, known,
			 note, ACCT_HOP_RAIL, reader, builder, k);
	}
	snprintf(note, sizeof note, rs->fits ? "no link counters from reader %u" : ACCT_OVERFLOW_NOTE,
		 reader);
	acct_add(a, rs->sum, rs->link, rs->fits && rs->link_known && rs->rails > 0, note,
		 ACCT_RAILS_READER, reader, builder);
	snprintf(note, sizeof note, bs->fits ? "no link counters from builder %u" : ACCT_OVERFLOW_NOTE,
		 builder);
	acct_add(a, bs->sum, bs->link, bs->fits && bs->link_known && bs->rails > 0, note,
		 ACCT_RAILS_BUILDER, builder, reader);
	uint64_t wrong = 0;
	bool fits = true;
	for (uint32_t k = 0; k < bs->rails; k++)
		fits = acct_sum(&wrong, bs->wrong[k]) && fits;
	acct_add(a, wrong, 0, fits && bs->rails > 0, fits ? "no rail counters from the builder"
							    : ACCT_OVERFLOW_NOTE,
		 ACCT_WRONG_RAIL, builder, reader);
}

/* The one builder of --role both: its side is what it read itself. */
static void acct_rails_one_builder(struct acct *a, const struct acct_reader *rd)
{
	struct acct_link_side rs, bs = { .rails = rd->rails, .link = rd->frames_received_by_builder,
					 .link_known = true };
	char link[CNT_GROUP_BYTES];
	cnt_group_peer(link, CTL_ROLE_BUILDER, 0);
	acct_read_rails(rd->report, link, CNT_READER_RAIL(frames_forwarded), NULL, &rs);
	rs.link = acct_value(rd->report, CNT_GROUP_TOTALS, CNT_READER_SOURCE(frames_forwarded),
			     &rs.link_known);
	if (bs.rails > CTL_MAX_RAILS)
		bs.rails = CTL_MAX_RAILS;
	for (uint32_t k = 0; k < bs.rails; k++) {
		bs.rail[k] = rd->rail_frames_received[k];
		bs.wrong[k] = rd->rail_frames_wrong[k];
	}
	acct_side_sum(&bs);
	acct_link_rails(a, rd->id, 0, &rs, &bs);
}

int acct_rails(struct acct *a, const struct acct_run *run, const struct acct_reader *rd)
{
	if (run->builder_count == 0) {
		acct_rails_one_builder(a, rd);
		return 0;
	}
	char rlink[CNT_GROUP_BYTES], blink[CNT_GROUP_BYTES];
	cnt_group_peer(blink, CTL_ROLE_READER, rd->id);
	for (size_t i = 0; i < run->builder_count; i++) {
		const struct acct_builder *b = &run->builders[i];
		if (b->report == NULL && b->gone)
			continue;
		struct acct_link_side rs, bs;
		cnt_group_peer(rlink, CTL_ROLE_BUILDER, b->id);
		acct_read_rails(rd->report, rlink, CNT_READER_RAIL(frames_forwarded), NULL, &rs);
		rs.link = acct_value(rd->report, rlink, CNT_READER_LINK(frames_forwarded),
				     &rs.link_known);
		acct_read_rails(b->report, blink, CNT_BUILDER_RAIL(frames_received),
				CNT_BUILDER_RAIL(frames_wrong_rail), &bs);
		bs.link = acct_value(b->report, blink, CNT_BUILDER_LINK(frames_received),
				     &bs.link_known);
		acct_link_rails(a, rd->id, b->id, &rs, &bs);
	}
	return 0;
}

size_t acct_rails_cap(const struct acct_run *run)
{
	size_t builders = run->builder_count > 0 ? run->builder_count : 1;
	return builders * (CTL_MAX_RAILS + 3u);
}
