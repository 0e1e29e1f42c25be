/* Building and reading the groups of counters of a STATS or END report;
 * see control.h. */
#include "wire/control_table.h"

#include <string.h>

struct ctl_group *ctl_report_group(struct ctl_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->group_count && i < CTL_MAX_GROUPS; i++) {
		if (strcmp(r->groups[i].name, name) == 0)
			return &r->groups[i];
	}
	size_t n = strlen(name);
	if (r->group_count >= CTL_MAX_GROUPS || !ctl_name_ok(name))
		return NULL;
	struct ctl_group *g = &r->groups[r->group_count++];
	memcpy(g->name, name, n + 1);
	g->count = 0;
	return g;
}

const struct ctl_group *ctl_report_find(const struct ctl_report *r, const char *name)
{
	if (r == NULL)
		return NULL;
	for (uint32_t i = 0; i < r->group_count && i < CTL_MAX_GROUPS; i++) {
		if (strcmp(r->groups[i].name, name) == 0)
			return &r->groups[i];
	}
	return NULL;
}

/* g and r may be NULL below, so that a group refused by a full report can be
 * passed on without a check at every call: the counter is then refused too. */
bool ctl_group_set(struct ctl_group *g, const char *name, uint64_t value)
{
	if (g == NULL)
		return false;
	for (uint32_t i = 0; i < g->count && i < CTL_MAX_COUNTERS; i++) {
		if (strcmp(g->counters[i].name, name) == 0) {
			g->counters[i].value = value;
			return true;
		}
	}
	size_t n = strlen(name);
	if (g->count >= CTL_MAX_COUNTERS || !ctl_name_ok(name))
		return false;
	struct ctl_counter *c = &g->counters[g->count++];
	memcpy(c->name, name, n + 1);
	c->value = value;
	return true;
}

bool ctl_group_get(const struct ctl_group *g, const char *name, uint64_t *value)
{
	if (g == NULL)
		return false;
	for (uint32_t i = 0; i < g->count && i < CTL_MAX_COUNTERS; i++) {
		if (strcmp(g->counters[i].name, name) == 0) {
			*value = g->counters[i].value;
			return true;
		}
	}
	return false;
}
