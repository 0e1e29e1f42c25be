#include "peer.h"

#include <errno.h>
#include <stdlib.h>

int peer_table_init(struct peer_table *t, uint16_t sources, uint32_t readers)
{
	return peer_table_init_builders(t, sources, readers, 0);
}

int peer_table_init_builders(struct peer_table *t, uint16_t sources, uint32_t readers,
			     uint32_t builders)
{
	t->sources = sources;
	t->readers = readers;
	t->builders = builders;
	t->peers = calloc((size_t)sources + readers + builders + 1, sizeof *t->peers);
	if (t->peers == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < peer_count(t); i++) {
		enum ctl_role role = i < sources		   ? CTL_ROLE_SOURCE
				     : i < (uint32_t)sources + readers ? CTL_ROLE_READER
								       : CTL_ROLE_BUILDER;
		uint32_t first = role == CTL_ROLE_SOURCE   ? 0
				 : role == CTL_ROLE_READER ? sources
							   : (uint32_t)sources + readers;
		t->peers[i] = (struct peer){ .role = role, .id = i - first };
	}
	return 0;
}

void peer_table_free(struct peer_table *t)
{
	for (uint32_t i = 0; t->peers != NULL && i < peer_count(t); i++)
		free(t->peers[i].report);
	free(t->peers);
	t->peers = NULL;
}

uint32_t peer_count(const struct peer_table *t)
{
	return (uint32_t)t->sources + t->readers + t->builders;
}

struct peer *peer_at(const struct peer_table *t, uint32_t i)
{
	return &t->peers[i];
}

struct peer *peer_find(const struct peer_table *t, enum ctl_role role, uint32_t id)
{
	if (role == CTL_ROLE_SOURCE && id < t->sources)
		return &t->peers[id];
	if (role == CTL_ROLE_READER && id < t->readers)
		return &t->peers[t->sources + id];
	if (role == CTL_ROLE_BUILDER && id < t->builders)
		return peer_builder(t, id);
	return NULL;
}

struct peer *peer_source(const struct peer_table *t, uint32_t source)
{
	return &t->peers[source];
}

struct peer *peer_reader(const struct peer_table *t, uint32_t reader)
{
	return &t->peers[t->sources + reader];
}

struct peer *peer_builder(const struct peer_table *t, uint32_t builder)
{
	return &t->peers[(uint32_t)t->sources + t->readers + builder];
}

uint32_t peer_index(const struct peer_table *t, const struct peer *p)
{
	return (uint32_t)(p - t->peers);
}

const char *peer_how_gone(const struct peer *p)
{
	return p->stalled ? "stalled" : p->stuck ? "stuck" : p->refused ? "refused" : "died";
}
