#include "wire/counters.h"

#include <stdio.h>
#include <string.h>

#define CNT_NAME_(name) #name,

const char *const cnt_source_names[CNT_SOURCE_COUNT] = { CNT_LIST_SOURCE(CNT_NAME_) };
const char *const cnt_source_stats_names[CNT_SOURCE_STATS_COUNT] = {
	CNT_LIST_SOURCE_STATS(CNT_NAME_)
};
const char *const cnt_reader_source_names[CNT_READER_SOURCE_COUNT] = {
	CNT_LIST_READER_SOURCE(CNT_NAME_)
};
const char *const cnt_reader_names[CNT_READER_COUNT] = { CNT_LIST_READER(CNT_NAME_) };
const char *const cnt_process_names[CNT_PROCESS_COUNT] = { CNT_LIST_PROCESS(CNT_NAME_) };
const char *const cnt_clock_names[CNT_CLOCK_COUNT] = { CNT_LIST_CLOCK(CNT_NAME_) };
const char *const cnt_probe_names[CNT_PROBE_COUNT] = { CNT_LIST_PROBE(CNT_NAME_) };
const char *const cnt_builder_core_names[CNT_BUILDER_CORE_COUNT] = {
	CNT_LIST_BUILDER_CORE(CNT_NAME_)
};
const char *const cnt_builder_names[CNT_BUILDER_COUNT] = { CNT_LIST_BUILDER(CNT_NAME_) };
const char *const cnt_builder_link_names[CNT_BUILDER_LINK_COUNT] = {
	CNT_LIST_BUILDER_LINK(CNT_NAME_)
};

const char *const cnt_reader_link_names[CNT_READER_LINK_COUNT] = {
	CNT_LIST_READER_LINK(CNT_NAME_)
};
const char *const cnt_builder_role_names[CNT_BUILDER_ROLE_COUNT] = {
	CNT_LIST_BUILDER_ROLE(CNT_NAME_)
};
const char *const cnt_builder_stats_names[CNT_BUILDER_STATS_COUNT] = {
	CNT_LIST_BUILDER_STATS(CNT_NAME_)
};
const char *const cnt_manager_names[CNT_MANAGER_COUNT] = { CNT_LIST_MANAGER(CNT_NAME_) };
const char *const cnt_control_http_names[CNT_CONTROL_HTTP_COUNT] = {
	CNT_LIST_CONTROL_HTTP(CNT_NAME_)
};
const char *const cnt_latency_names[CNT_LATENCY_COUNT] = { CNT_LIST_LATENCY(CNT_NAME_) };
const char *const cnt_reader_rail_names[CNT_READER_RAIL_COUNT] = {
	CNT_LIST_READER_RAIL(CNT_NAME_)
};
const char *const cnt_builder_rail_names[CNT_BUILDER_RAIL_COUNT] = {
	CNT_LIST_BUILDER_RAIL(CNT_NAME_)
};

const char *cnt_group_peer(char buf[CNT_GROUP_BYTES], enum ctl_role role, uint32_t id)
{
	snprintf(buf, CNT_GROUP_BYTES, "%s.%u", ctl_role_name(role), id);
	return buf;
}

const char *cnt_group_builder_link(char buf[CNT_GROUP_BYTES], uint32_t id)
{
	snprintf(buf, CNT_GROUP_BYTES, "%s.from_reader.%u", ctl_role_name(CTL_ROLE_BUILDER), id);
	return buf;
}

const char *cnt_group_rail(char buf[CNT_GROUP_BYTES], const char *link, uint32_t rail)
{
	snprintf(buf, CNT_GROUP_BYTES, "%s.rail.%u", link, rail);
	return buf;
}

static bool cnt_in(const char *const *names, size_t count, const char *name)
{
	for (size_t i = 0; i < count; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

bool cnt_known(const char *name)
{
	static const struct {
		const char *const *names;
		size_t count;
	} lists[] = {
		{ cnt_source_names, CNT_SOURCE_COUNT },
		{ cnt_source_stats_names, CNT_SOURCE_STATS_COUNT },
		{ cnt_reader_source_names, CNT_READER_SOURCE_COUNT },
		{ cnt_reader_names, CNT_READER_COUNT },
		{ cnt_process_names, CNT_PROCESS_COUNT },
		{ cnt_clock_names, CNT_CLOCK_COUNT },
		{ cnt_probe_names, CNT_PROBE_COUNT },
		{ cnt_builder_core_names, CNT_BUILDER_CORE_COUNT },
		{ cnt_builder_names, CNT_BUILDER_COUNT },
		{ cnt_builder_link_names, CNT_BUILDER_LINK_COUNT },
		{ cnt_reader_link_names, CNT_READER_LINK_COUNT },
		{ cnt_builder_role_names, CNT_BUILDER_ROLE_COUNT },
		{ cnt_builder_stats_names, CNT_BUILDER_STATS_COUNT },
		{ cnt_manager_names, CNT_MANAGER_COUNT },
		{ cnt_latency_names, CNT_LATENCY_COUNT },
		{ cnt_reader_rail_names, CNT_READER_RAIL_COUNT },
		{ cnt_builder_rail_names, CNT_BUILDER_RAIL_COUNT },
		{ cnt_control_http_names, CNT_CONTROL_HTTP_COUNT },
	};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
		if (cnt_in(lists[i].names, lists[i].count, name))
			return true;
	return false;
}
